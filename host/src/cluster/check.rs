//! `botgate cluster check`: the specification's post-configuration checks 1–6, run from
//! one server against every server of a described cluster, each reported with what it
//! saw.
//!
//! It reaches each server on its private IP (the gateway's metrics listener, Redis,
//! Sentinel and HAProxy's store port) and on its public IP (HAProxy's HTTP and HTTPS),
//! and the provider's API with the description's token.

use super::{Description, Provider, Secrets, Server};
use crate::gateway::admin::domains_digest;
use botgate_model::policy::{Action, Category};
use botgate_model::website::Status;
use botgate_store::{Snapshot, WebsiteRecord};
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// How the checks are run.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The website whose traffic check 3 sends; the first online one when `None`.
    pub domain: Option<String>,
    /// Roots trusted for the websites' certificates besides the public ones.
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// How long one connection or answer may take.
    pub timeout: Duration,
    /// How long check 1 waits for gateways that are behind the store to catch up.
    pub settle: Duration,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions {
            domain: None,
            extra_roots: Vec::new(),
            timeout: Duration::from_secs(5),
            settle: Duration::from_secs(5),
        }
    }
}

/// One observation of a check: on a server (or the cluster), passed or not, and what
/// was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub server: Option<String>,
    pub passed: bool,
    pub detail: String,
}

/// One of the specification's checks and what it found.
#[derive(Debug, Clone)]
pub struct CheckResult {
    pub number: u8,
    pub title: &'static str,
    pub findings: Vec<Finding>,
}

impl CheckResult {
    /// Passed when something was checked and every finding passed.
    pub fn passed(&self) -> bool {
        !self.findings.is_empty() && self.findings.iter().all(|finding| finding.passed)
    }
}

impl std::fmt::Display for CheckResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let word = if self.passed() { "PASS" } else { "FAIL" };
        writeln!(f, "{word} {}. {}", self.number, self.title)?;
        for finding in &self.findings {
            let mark = if finding.passed { "ok  " } else { "FAIL" };
            match &finding.server {
                Some(server) => writeln!(f, "     {mark} {server}: {}", finding.detail)?,
                None => writeln!(f, "     {mark} {}", finding.detail)?,
            }
        }
        Ok(())
    }
}

struct Recorder {
    findings: Vec<Finding>,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder {
            findings: Vec::new(),
        }
    }

    fn on(&mut self, server: Option<&Server>, passed: bool, detail: impl Into<String>) {
        self.findings.push(Finding {
            server: server.map(|s| s.name.clone()),
            passed,
            detail: detail.into(),
        });
    }

    fn done(self, number: u8, title: &'static str) -> CheckResult {
        CheckResult {
            number,
            title,
            findings: self.findings,
        }
    }
}

/// Reads the store's snapshot through the floating IP, as the gateways read it (or
/// says why it cannot).
pub type StoreReader<'a> = &'a dyn Fn() -> Result<Snapshot, String>;

/// Runs checks 1–6, reading the store with `read_store`.
pub fn run(
    description: &Description,
    secrets: &Secrets,
    options: &CheckOptions,
    read_store: StoreReader<'_>,
) -> Vec<CheckResult> {
    let nodes = Nodes::read(description, secrets, options.timeout);
    let store = &read_store();
    vec![
        same_websites(description, options, store, read_store),
        store_configuration(description, options, store),
        protected_traffic(description, options, store),
        failover_ready(description, &nodes),
        replication_roles(description, &nodes),
        floating_ip(description, secrets, options, &nodes),
    ]
}

/// Check 1: every gateway lists the store's domains with the store's statuses.
fn same_websites(
    d: &Description,
    options: &CheckOptions,
    first_read: &Result<Snapshot, String>,
    read_store: StoreReader<'_>,
) -> CheckResult {
    let mut check = Recorder::new();
    let wanted = |read: &Result<Snapshot, String>| {
        read.as_ref()
            .map(|snapshot| Listing {
                digest: domains_digest(snapshot.websites.iter()),
                websites: snapshot.websites.len(),
                version: snapshot.version,
                unreadable: snapshot
                    .unreadable
                    .iter()
                    .map(|u| format!("{}: {}", u.domain, u.reason))
                    .collect(),
            })
            .map_err(Clone::clone)
    };
    let mut store = wanted(first_read);
    let mut healths = health_of_all(d, options.timeout);
    let agree = |store: &Result<Listing, String>, healths: &[Result<serde_json::Value, String>]| {
        store.as_ref().is_ok_and(|store| {
            healths.iter().all(|health| {
                health
                    .as_ref()
                    .ok()
                    .and_then(|h| h["snapshot"]["domains_digest"].as_str())
                    == Some(store.digest.as_str())
            })
        })
    };
    // A write may land between two reads: the store is read again, and gateways behind
    // get a moment to catch up.
    let deadline = std::time::Instant::now() + options.settle;
    while !agree(&store, &healths) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        store = wanted(&read_store());
        healths = health_of_all(d, options.timeout);
    }
    let reference = match &store {
        Ok(listing) => {
            check.on(
                None,
                true,
                format!(
                    "the store lists {} websites (version {})",
                    listing.websites, listing.version
                ),
            );
            if !listing.unreadable.is_empty() {
                // Gateways leave such a website out, or keep its last readable settings.
                check.on(
                    None,
                    false,
                    format!(
                        "the store holds {} website records no gateway can read (written by a later release, or damaged): {}",
                        listing.unreadable.len(),
                        listing.unreadable.join("; ")
                    ),
                );
            }
            Some(listing.digest.clone())
        }
        Err(problem) => {
            check.on(None, false, format!("the store cannot be read: {problem}"));
            // The gateways can still be compared with each other.
            healths.first().and_then(|health| {
                health.as_ref().ok()?["snapshot"]["domains_digest"]
                    .as_str()
                    .map(str::to_owned)
            })
        }
    };
    for (server, health) in d.servers.iter().zip(&healths) {
        match health {
            Err(problem) => check.on(Some(server), false, problem.clone()),
            Ok(health) => {
                let snapshot = &health["snapshot"];
                let count = snapshot["websites"].as_u64().unwrap_or(0);
                let digest = snapshot["domains_digest"].as_str();
                let version = &snapshot["version"];
                if digest.is_some() && digest == reference.as_deref() {
                    check.on(
                        Some(server),
                        true,
                        format!(
                            "{count} websites, the same domains and statuses (version {version})"
                        ),
                    );
                } else {
                    let store = match &store {
                        Ok(listing) => format!(" where the store lists {}", listing.websites),
                        Err(_) => String::new(),
                    };
                    check.on(
                        Some(server),
                        false,
                        format!(
                            "lists {count} websites{store}, with other domains or statuses \
                             (version {version}; its log says why it is behind)"
                        ),
                    );
                }
                let unreadable: Vec<&str> = snapshot["unreadable_websites"]
                    .as_array()
                    .map(|list| list.iter().filter_map(|d| d.as_str()).collect())
                    .unwrap_or_default();
                if !unreadable.is_empty() {
                    check.on(
                        Some(server),
                        false,
                        format!(
                            "cannot read the stored records of {} websites ({}): it serves them \
                             on the last settings it read, or not at all; it needs the release \
                             that wrote them",
                            unreadable.len(),
                            unreadable.join(", ")
                        ),
                    );
                }
            }
        }
    }
    check.done(
        1,
        "every server lists the same domains with the same statuses",
    )
}

/// What the store lists, as check 1 compares it.
struct Listing {
    digest: String,
    websites: usize,
    version: u64,
    /// The records the store holds but could not read ("domain: reason").
    unreadable: Vec<String>,
}

/// Check 2: every gateway uses the shared store through the floating IP, and reaches it.
fn store_configuration(
    d: &Description,
    options: &CheckOptions,
    store: &Result<Snapshot, String>,
) -> CheckResult {
    let mut check = Recorder::new();
    let proxy = SocketAddr::new(d.floating_ip, d.ports.store_proxy);
    match store {
        Ok(_) => check.on(None, true, format!("the store answers at {proxy}")),
        Err(problem) => check.on(None, false, format!("the store at {proxy}: {problem}")),
    }
    let wanted = [
        proxy.to_string(),
        format!("{}:{}", proxy.ip(), proxy.port()),
    ];
    for (server, health) in d.servers.iter().zip(health_of_all(d, options.timeout)) {
        let health = match health {
            Ok(health) => health,
            Err(problem) => {
                check.on(Some(server), false, problem);
                continue;
            }
        };
        let backend = health["store"]["backend"].as_str().unwrap_or("?");
        let address = health["store"]["address"].as_str().unwrap_or("?");
        let reachable = health["store"]["reachable"].as_bool() == Some(true);
        let status = health["status"].as_str().unwrap_or("?");
        let shared = backend == "redis"
            && wanted.iter().any(|w| {
                address
                    .strip_prefix(w.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(','))
            });
        let passed = shared && reachable && status == "ok";
        let mut detail = format!("store {backend} at {address}");
        if !shared {
            detail += &format!(", not Redis at {proxy}");
        }
        if !reachable {
            detail += ", unreachable";
        }
        if status != "ok" {
            detail += &format!(", health `{status}`");
        }
        check.on(Some(server), passed, detail);
    }
    check.done(2, "every server uses the central store")
}

/// Check 3: through each server's public HTTP and HTTPS ports (HAProxy, then the
/// gateway): a browser's request is answered, and a scanner's gets what the website's
/// policy says (403 for `deny` or `captcha`).
fn protected_traffic(
    d: &Description,
    options: &CheckOptions,
    store: &Result<Snapshot, String>,
) -> CheckResult {
    let mut check = Recorder::new();
    let website = match (store, &options.domain) {
        (Err(problem), _) => {
            check.on(
                None,
                false,
                format!("no website to send traffic to: {problem}"),
            );
            return check.done(3, "protected traffic reaches every server");
        }
        (Ok(snapshot), domain) => choose_website(snapshot, domain.as_deref()),
    };
    let record = match website {
        Ok(record) => record,
        Err(problem) => {
            check.on(None, false, problem);
            return check.done(3, "protected traffic reaches every server");
        }
    };
    let site = &record.website;
    let domain = site.domain.as_str();
    let tls = tls_client(&options.extra_roots);
    let paths: Vec<(&Server, bool)> = d
        .servers
        .iter()
        .flat_map(|server| [(server, false), (server, true)])
        .collect();
    let judged = in_parallel(&paths, |&(server, https)| {
        let port = if https { d.ports.https } else { d.ports.http };
        let address = SocketAddr::new(server.public_ip, port);
        let probe = |headers: &str| {
            let tls = https.then_some(&tls);
            fetch(address, tls, domain, headers, options.timeout)
        };
        let (monitor, scanner) = (probe(MONITOR), probe(SCANNER));
        let scheme = if https { "https" } else { "http" };
        let (passed, detail) = judge(site, https, monitor, scanner);
        (
            passed,
            format!("{scheme}://{domain} via {address}: {detail}"),
        )
    });
    for ((server, _), (passed, detail)) in paths.iter().zip(judged) {
        check.on(Some(server), passed, detail);
    }
    check.done(3, "protected traffic reaches every server")
}

/// An uptime monitor's request, as Nagios's `check_http` sends it: a service the
/// classifier knows (`services_and_payments`), so the website's rule for it applies.
/// (A browser's user agent would be given away by the check's own TLS handshake, and
/// its challenges, unsolved, would make the check's address suspect.)
const MONITOR: &str = "User-Agent: check_http/v2.4.0 (botgate cluster check)\r\nAccept: */*\r\n";
/// A well-known SQL injection scanner.
const SCANNER: &str = "User-Agent: sqlmap/1.8.11#stable (https://sqlmap.org)\r\nAccept: */*\r\n";

/// The website check 3 visits: `domain`, or the first online one by name.
fn choose_website<'a>(
    snapshot: &'a Snapshot,
    domain: Option<&str>,
) -> Result<&'a WebsiteRecord, String> {
    match domain {
        Some(domain) => snapshot
            .websites
            .iter()
            .find(|record| record.website.domain.as_str() == domain)
            .ok_or_else(|| format!("the store has no website `{domain}`")),
        None => snapshot
            .websites
            .iter()
            .filter(|record| record.website.status == Status::Online)
            .min_by(|a, b| a.website.domain.as_str().cmp(b.website.domain.as_str()))
            .ok_or_else(|| {
                "the store has no online website to send traffic to (create one, or name \
                 one with --domain)"
                    .to_owned()
            }),
    }
}

/// What one request got: the status, and whether the answer came from the origin
/// (the gateway names itself in `Via` on what it forwards).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Probe {
    status: u16,
    forwarded: bool,
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let from = if self.forwarded {
            "the origin"
        } else {
            "the gateway"
        };
        write!(f, "{} from {from}", self.status)
    }
}

/// Whether the two answers are what the website's settings call for.
fn judge(
    site: &botgate_model::website::Website,
    https: bool,
    monitor: Result<Probe, String>,
    scanner: Result<Probe, String>,
) -> (bool, String) {
    let lb = &site.settings.loadbalancer;
    let monitor = match monitor {
        Ok(probe) => probe,
        Err(problem) => return (false, format!("a monitor's request failed: {problem}")),
    };
    let scanner = match scanner {
        Ok(probe) => probe,
        Err(problem) => return (false, format!("a scanner's request failed: {problem}")),
    };
    if site.status != Status::Online {
        return (
            monitor.status < 500,
            format!(
                "the website is `{}`; a monitor's request got {monitor}",
                site.status.as_str()
            ),
        );
    }
    if lb.force_https && !https {
        let passed = monitor.status == 301 && scanner.status == 301;
        return (
            passed,
            format!(
                "sent to HTTPS (force_https): monitor {monitor}, scanner {scanner}; 301 wanted"
            ),
        );
    }
    let (monitor_ok, monitor_wanted) = wanted(site, Category::ServicesAndPayments, monitor);
    let (scanner_ok, scanner_wanted) = wanted(site, Category::SecurityIssues, scanner);
    (
        monitor_ok && scanner_ok,
        format!("monitor {monitor} ({monitor_wanted}), scanner {scanner} ({scanner_wanted})"),
    )
}

/// Whether a request of `category` got what the website's rules call for: the
/// origin's answer (not a proxy error) when they grant it or protection is off, the
/// gateway's 403 (a denial or a challenge) when they do not.
fn wanted(
    site: &botgate_model::website::Website,
    category: Category,
    got: Probe,
) -> (bool, String) {
    let action = site.settings.rules.0.action(category);
    match (site.settings.loadbalancer.bot_protection, action) {
        (false, _) => (
            got.forwarded && got.status < 500,
            "the origin's answer wanted: bot_protection is off".to_owned(),
        ),
        (true, Action::Grant) => (
            got.forwarded && got.status < 500,
            format!("the origin's answer wanted: {category} is grant"),
        ),
        (true, action) => (
            !got.forwarded && got.status == 403,
            format!(
                "the gateway's 403 wanted: {category} is {}",
                action.as_str()
            ),
        ),
    }
}

/// A TLS client trusting the public roots and `extra`.
fn tls_client(extra: &[CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for root in extra {
        let _ = roots.add(root.clone());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// `GET /` for `host` with `headers` (lines), sent to `address` (over TLS with `tls`,
/// verifying the certificate for `host`).
fn fetch(
    address: SocketAddr,
    tls: Option<&Arc<rustls::ClientConfig>>,
    host: &str,
    headers: &str,
    timeout: Duration,
) -> Result<Probe, String> {
    let tcp = TcpStream::connect_timeout(&address, timeout)
        .map_err(|e| format!("cannot connect to {address}: {e}"))?;
    let _ = tcp.set_read_timeout(Some(timeout));
    let _ = tcp.set_write_timeout(Some(timeout));
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\n{headers}Connection: close\r\n\r\n");
    match tls {
        None => exchange(tcp, &request),
        Some(config) => {
            let name = ServerName::try_from(host.to_owned())
                .map_err(|_| format!("`{host}` is not a TLS server name"))?;
            let connection = rustls::ClientConnection::new(config.clone(), name)
                .map_err(|e| format!("TLS: {e}"))?;
            exchange(rustls::StreamOwned::new(connection, tcp), &request)
        }
    }
}

/// Sends `request` and reads the answer's status line and headers.
fn exchange(mut stream: impl Read + Write, request: &str) -> Result<Probe, String> {
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("sending: {e}"))?;
    let mut head = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = stream
            .read(&mut buffer)
            .map_err(|e| format!("reading the answer: {e}"))?;
        if read == 0 {
            return Err("the connection closed before an answer".into());
        }
        head.extend_from_slice(&buffer[..read]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {
                let status = response.code.ok_or_else(|| "no status".to_owned())?;
                let forwarded = response
                    .headers
                    .iter()
                    .filter(|header| header.name.eq_ignore_ascii_case("via"))
                    .any(|header| names_the_gateway(header.value));
                return Ok(Probe { status, forwarded });
            }
            Ok(httparse::Status::Partial) if head.len() < 64 * 1024 => {}
            Ok(httparse::Status::Partial) => return Err("an answer head over 64 KiB".into()),
            Err(e) => return Err(format!("not an HTTP answer: {e}")),
        }
    }
}

/// Whether a `Via` value has a gateway's entry (`1.1 botgate-…`).
fn names_the_gateway(via: &[u8]) -> bool {
    via.split(|&b| b == b',').any(|entry| {
        entry
            .split(|b| b.is_ascii_whitespace())
            .filter(|word| !word.is_empty())
            .nth(1)
            .is_some_and(|by| by.len() > 8 && by[..8].eq_ignore_ascii_case(b"botgate-"))
    })
}

/// `f` of every item, each on a thread of its own, in order.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    std::thread::scope(|scope| {
        let running: Vec<_> = items.iter().map(|item| scope.spawn(|| f(item))).collect();
        running
            .into_iter()
            .map(|thread| thread.join().expect("a check thread panicked"))
            .collect()
    })
}

/// `/health` of every server's gateway, on its metrics listener, in order.
fn health_of_all(d: &Description, timeout: Duration) -> Vec<Result<serde_json::Value, String>> {
    in_parallel(&d.servers, |server| {
        health_of(
            SocketAddr::new(server.private_ip, d.ports.gateway_admin),
            timeout,
        )
    })
}

fn health_of(address: SocketAddr, timeout: Duration) -> Result<serde_json::Value, String> {
    let url = format!("http://{address}/health");
    // 503 (unhealthy) has the body that says why.
    get_json(&url, None, timeout)
        .map(|(_, body)| body)
        .map_err(|problem| match problem {
            Fetch::Unreachable(e) => format!("no gateway answers at {url}: {e}"),
            Fetch::NotJson(status, e) => {
                format!("{url} answered {status}, not health JSON: {e}")
            }
        })
}

/// Why [`get_json`] has no JSON.
enum Fetch {
    Unreachable(String),
    NotJson(u16, String),
}

/// `GET url` (with a Bearer token): the status and the JSON body (at most 1 MiB).
fn get_json(
    url: &str,
    bearer: Option<&str>,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), Fetch> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let mut request = agent.get(url);
    if let Some(token) = bearer {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let mut answer = request
        .call()
        .map_err(|e| Fetch::Unreachable(e.to_string()))?;
    let status = answer.status().as_u16();
    let text = answer
        .body_mut()
        .with_config()
        .limit(1024 * 1024)
        .read_to_string()
        .map_err(|e| Fetch::Unreachable(e.to_string()))?;
    serde_json::from_str(&text)
        .map(|body| (status, body))
        .map_err(|e| Fetch::NotJson(status, e.to_string()))
}

/// What each server's store node and sentinel say.
struct Nodes {
    nodes: Vec<Node>,
}

struct Node {
    /// `INFO replication` (or why it could not be read).
    replication: Result<String, String>,
    /// `INFO server`'s `run_id`.
    run_id: Option<String>,
    /// The run id of the node this server's HAProxy store port reaches.
    proxied_run_id: Result<String, String>,
    /// `SENTINEL ckquorum` (or why it failed).
    quorum: Result<String, String>,
    /// `SENTINEL get-master-addr-by-name`.
    master_address: Result<(String, u16), String>,
}

impl Nodes {
    fn read(d: &Description, secrets: &Secrets, timeout: Duration) -> Nodes {
        let password = Some(secrets.redis_password.as_str());
        let nodes = in_parallel(&d.servers, |server| {
            let redis = SocketAddr::new(server.private_ip, d.ports.redis);
            let proxy = SocketAddr::new(server.private_ip, d.ports.store_proxy);
            let sentinel = SocketAddr::new(server.private_ip, d.ports.sentinel);
            let info = |address, section| -> Result<String, String> {
                command(address, password, timeout, redis::cmd("INFO").arg(section))
            };
            Node {
                replication: info(redis, "replication"),
                run_id: info(redis, "server")
                    .ok()
                    .and_then(|text| info_field(&text, "run_id")),
                proxied_run_id: info(proxy, "server").and_then(|text| {
                    info_field(&text, "run_id").ok_or_else(|| "no run_id".to_owned())
                }),
                quorum: command(
                    sentinel,
                    password,
                    timeout,
                    redis::cmd("SENTINEL").arg("ckquorum").arg("mymaster"),
                ),
                master_address: command::<Vec<String>>(
                    sentinel,
                    password,
                    timeout,
                    redis::cmd("SENTINEL")
                        .arg("get-master-addr-by-name")
                        .arg("mymaster"),
                )
                .and_then(|reply| match reply.as_slice() {
                    [host, port] => port
                        .parse()
                        .map(|port| (host.clone(), port))
                        .map_err(|_| format!("a port `{port}`")),
                    _ => Err("Sentinel knows no master `mymaster`".to_owned()),
                }),
            }
        });
        Nodes { nodes }
    }

    /// The server whose node says `role:master`, when exactly one does.
    fn master<'a>(&self, d: &'a Description) -> Result<&'a Server, String> {
        let masters: Vec<&Server> = d
            .servers
            .iter()
            .zip(&self.nodes)
            .filter(|(_, node)| node.role().as_deref() == Some("master"))
            .map(|(server, _)| server)
            .collect();
        match masters.as_slice() {
            [master] => Ok(master),
            [] => Err("no node reports role:master".into()),
            many => Err(format!(
                "{} nodes report role:master: {}",
                many.len(),
                many.iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

impl Node {
    fn role(&self) -> Option<String> {
        info_field(self.replication.as_ref().ok()?, "role")
    }

    fn field(&self, name: &str) -> Option<String> {
        info_field(self.replication.as_ref().ok()?, name)
    }
}

/// One command to the Redis or Sentinel at `address`.
fn command<T: redis::FromRedisValue>(
    address: SocketAddr,
    password: Option<&str>,
    timeout: Duration,
    command: &redis::Cmd,
) -> Result<T, String> {
    use redis::IntoConnectionInfo;
    let addr = redis::ConnectionAddr::Tcp(address.ip().to_string(), address.port());
    let mut settings = redis::RedisConnectionInfo::default().set_skip_set_lib_name();
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    let info = addr
        .into_connection_info()
        .map_err(|e| format!("{address}: {e}"))?
        .set_redis_settings(settings);
    let client = redis::Client::open(info).map_err(|e| format!("{address}: {e}"))?;
    let mut connection = client
        .get_connection_with_timeout(timeout)
        .map_err(|e| format!("{address}: {e}"))?;
    let _ = connection.set_read_timeout(Some(timeout));
    let _ = connection.set_write_timeout(Some(timeout));
    command
        .query(&mut connection)
        .map_err(|e| format!("{address}: {e}"))
}

/// `name:value` of an `INFO` answer.
fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
}

/// Check 4: a failover can happen: every sentinel reaches the quorum and agrees on the
/// master, the master has every other node as a live replica, and every server's
/// HAProxy sends the store port to it.
fn failover_ready(d: &Description, nodes: &Nodes) -> CheckResult {
    let mut check = Recorder::new();
    let master = nodes.master(d);
    let master_node = master.as_ref().ok().and_then(|m| {
        d.servers
            .iter()
            .position(|s| s.name == m.name)
            .map(|i| &nodes.nodes[i])
    });
    if let (Ok(master), Some(node)) = (&master, master_node) {
        let connected: usize = node
            .field("connected_slaves")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let wanted = d.servers.len() - 1;
        check.on(
            Some(master),
            connected == wanted,
            format!("the master has {connected} connected replicas of {wanted}"),
        );
    }
    for (server, node) in d.servers.iter().zip(&nodes.nodes) {
        let mut problems = Vec::new();
        match &node.quorum {
            Ok(_) => {}
            Err(problem) => problems.push(format!("Sentinel: {problem}")),
        }
        match (&node.master_address, &master) {
            (Ok((host, port)), Ok(master)) => {
                let named = host.parse::<IpAddr>().ok() == Some(master.private_ip)
                    && *port == d.ports.redis;
                if !named {
                    problems.push(format!(
                        "Sentinel names {host}:{port} the master, not {}",
                        master.name
                    ));
                }
            }
            (Err(problem), _) => problems.push(format!("Sentinel: {problem}")),
            (Ok(_), Err(_)) => {}
        }
        match (
            &node.proxied_run_id,
            master_node.and_then(|m| m.run_id.as_ref()),
        ) {
            (Ok(reached), Some(wanted)) if reached == wanted => {}
            (Ok(_), Some(_)) => problems.push(format!(
                "HAProxy's store port {} reaches a node that is not the master",
                d.ports.store_proxy
            )),
            (Ok(_), None) => problems.push(format!(
                "HAProxy's store port {} cannot be compared: the master's run_id is unknown",
                d.ports.store_proxy
            )),
            (Err(problem), _) => problems.push(format!(
                "HAProxy's store port {}: {problem}",
                d.ports.store_proxy
            )),
        }
        let passed = problems.is_empty();
        let detail = if passed {
            "Sentinel reaches the quorum and names the master; HAProxy's store port reaches it"
                .to_owned()
        } else {
            problems.join("; ")
        };
        check.on(Some(server), passed, detail);
    }
    if let Err(problem) = master {
        check.on(None, false, problem);
    }
    check.done(4, "a failover can take over when one server is down")
}

/// Check 5: `role:master` on the master only; every other node a replica of it with its
/// link up.
fn replication_roles(d: &Description, nodes: &Nodes) -> CheckResult {
    let mut check = Recorder::new();
    let master = nodes.master(d);
    if let Err(problem) = &master {
        check.on(None, false, problem.clone());
    }
    for (server, node) in d.servers.iter().zip(&nodes.nodes) {
        let role = match (&node.replication, node.role()) {
            (Err(problem), _) => {
                check.on(Some(server), false, problem.clone());
                continue;
            }
            (Ok(_), None) => {
                check.on(Some(server), false, "INFO replication has no role");
                continue;
            }
            (Ok(_), Some(role)) => role,
        };
        match &master {
            Ok(master) if master.name == server.name => {
                check.on(Some(server), true, "role:master");
            }
            Ok(master) => {
                let host = node.field("master_host").unwrap_or_default();
                let link = node.field("master_link_status").unwrap_or_default();
                let passed = role == "slave"
                    && host.parse::<IpAddr>().ok() == Some(master.private_ip)
                    && link == "up";
                check.on(
                    Some(server),
                    passed,
                    format!(
                        "role:{role}, replica of {} (master_host {host}, link {link})",
                        master.name
                    ),
                );
            }
            Err(_) => check.on(Some(server), role != "master", format!("role:{role}")),
        }
    }
    check.done(5, "replication roles: role:master on the master only")
}

/// Check 6: the provider says the floating IP is assigned to the master's instance.
fn floating_ip(
    d: &Description,
    secrets: &Secrets,
    options: &CheckOptions,
    nodes: &Nodes,
) -> CheckResult {
    let mut check = Recorder::new();
    let assigned = assignment(
        &d.provider,
        d.floating_ip,
        &secrets.provider_token,
        options.timeout,
    );
    match (nodes.master(d), assigned) {
        (_, Err(problem)) => check.on(None, false, problem),
        (Err(problem), Ok(instance)) => check.on(
            None,
            false,
            format!(
                "the floating IP {} is assigned to instance {}, and {problem}",
                d.floating_ip,
                instance.as_deref().unwrap_or("none")
            ),
        ),
        (Ok(master), Ok(instance)) => {
            let holder = instance.as_deref().map(|id| {
                d.servers.iter().find(|s| s.instance_id == id).map_or_else(
                    || format!("instance {id} (not in the description)"),
                    |s| format!("{} (instance {id})", s.name),
                )
            });
            let passed = instance.as_deref() == Some(master.instance_id.as_str());
            check.on(
                Some(master),
                passed,
                format!(
                    "the floating IP {} is assigned to {}; the master is {} (instance {})",
                    d.floating_ip,
                    holder.as_deref().unwrap_or("no instance"),
                    master.name,
                    master.instance_id
                ),
            );
        }
    }
    check.done(6, "the floating IP points to the store master's instance")
}

/// The instance the provider says the floating IP is assigned to (`None`: to none).
fn assignment(
    provider: &Provider,
    floating_ip: IpAddr,
    token: &str,
    timeout: Duration,
) -> Result<Option<String>, String> {
    let (url, pointer) = match provider {
        Provider::Hetzner {
            api,
            floating_ip_id,
            ..
        } => (
            format!(
                "{}/v1/floating_ips/{floating_ip_id}",
                api.trim_end_matches('/')
            ),
            "/floating_ip/server".to_owned(),
        ),
        Provider::Digitalocean { api, .. } => (
            format!(
                "{}/v2/reserved_ips/{floating_ip}",
                api.trim_end_matches('/')
            ),
            "/reserved_ip/droplet/id".to_owned(),
        ),
        Provider::Vultr {
            api,
            reserved_ip_id,
            ..
        } => (
            format!(
                "{}/v2/reserved-ips/{reserved_ip_id}",
                api.trim_end_matches('/')
            ),
            "/reserved_ip/instance_id".to_owned(),
        ),
        Provider::Generic {
            assignment_url,
            assignment_field,
            ..
        } => match (assignment_url, assignment_field) {
            (Some(url), Some(field)) => (
                url.replace("{floating_ip}", &floating_ip.to_string()),
                field.clone(),
            ),
            _ => {
                return Err(
                    "the generic provider has no `assignment-url` and `assignment-field` to \
                     read the floating IP's assignment from"
                        .into(),
                );
            }
        },
    };
    let (status, body) = get_json(&url, Some(token), timeout).map_err(|problem| match problem {
        Fetch::Unreachable(e) => format!("the provider's API at {url}: {e}"),
        Fetch::NotJson(status, e) => {
            format!("the provider's API at {url} answered {status}, not JSON: {e}")
        }
    })?;
    if !(200..300).contains(&status) {
        return Err(format!(
            "the provider's API at {url} answered {status}: {body}"
        ));
    }
    match body.pointer(&pointer) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(id)) if id.is_empty() => Ok(None),
        Some(serde_json::Value::String(id)) => Ok(Some(id.clone())),
        Some(serde_json::Value::Number(id)) => Ok(Some(id.to_string())),
        Some(other) => Err(format!(
            "the provider's API at {url} has {other} at {pointer}, not an instance id"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use botgate_model::{Domain, Settings, UserId, Website};

    fn site(status: Status) -> Website {
        Website {
            domain: Domain::parse("shop.example").unwrap(),
            subdomain: Vec::new(),
            user_id: UserId::parse("owner").unwrap(),
            ip: Vec::new(),
            tag: Vec::new(),
            status,
            status_reason: None,
            certificate: None,
            settings: Settings::default(),
            pending: None,
        }
    }

    /// An answer from the origin (`Via` names the gateway).
    fn origin(status: u16) -> Result<Probe, String> {
        Ok(Probe {
            status,
            forwarded: true,
        })
    }

    /// The gateway's own answer.
    fn gateway(status: u16) -> Result<Probe, String> {
        Ok(Probe {
            status,
            forwarded: false,
        })
    }

    #[test]
    fn traffic_is_judged_by_the_website_settings() {
        let online = site(Status::Online);
        // By default a monitor is granted and a scanner denied.
        assert!(judge(&online, true, origin(200), gateway(403)).0);
        assert!(judge(&online, true, origin(404), gateway(403)).0);
        assert!(!judge(&online, true, origin(200), origin(200)).0);
        assert!(!judge(&online, true, origin(200), origin(403)).0);
        // Never a proxy error or one of the gateway's own pages (an unknown website's
        // 404) for what the rules grant.
        assert!(!judge(&online, true, gateway(404), gateway(403)).0);
        assert!(!judge(&online, true, gateway(403), gateway(403)).0);
        assert!(!judge(&online, true, gateway(503), gateway(403)).0);
        assert!(!judge(&online, true, origin(503), gateway(403)).0);
        assert!(!judge(&online, false, Err("refused".into()), gateway(403)).0);
        // Services denied by the website: the monitor gets the gateway's 403.
        let mut closed = online.clone();
        closed
            .settings
            .rules
            .0
            .set(Category::ServicesAndPayments, Some(Action::Deny));
        assert!(judge(&closed, true, gateway(403), gateway(403)).0);
        assert!(!judge(&closed, true, origin(200), gateway(403)).0);
        // Plain HTTP sent to HTTPS.
        let mut forced = online.clone();
        forced.settings.loadbalancer.force_https = true;
        assert!(judge(&forced, false, gateway(301), gateway(301)).0);
        assert!(!judge(&forced, false, origin(200), gateway(403)).0);
        assert!(judge(&forced, true, origin(200), gateway(403)).0);
        // Without bot protection, the scanner reaches the origin too.
        let mut open = online.clone();
        open.settings.loadbalancer.bot_protection = false;
        assert!(judge(&open, true, origin(200), origin(200)).0);
        assert!(!judge(&open, true, origin(200), gateway(403)).0);
    }

    #[test]
    fn records_the_store_cannot_read_fail_check_one_by_name() {
        let mut description =
            Description::parse(super::super::tests::THREE, std::path::Path::new("c.toml")).unwrap();
        description.servers.clear();
        let snapshot = Snapshot {
            version: 9,
            history: String::new(),
            websites: Vec::new(),
            unreadable: vec![botgate_store::Unreadable {
                domain: "later.example".into(),
                reason: "unknown variant".into(),
            }],
        };
        let read = || Ok(snapshot.clone());
        let result = same_websites(&description, &CheckOptions::default(), &read(), &read);
        let failed: Vec<&str> = result
            .findings
            .iter()
            .filter(|f| !f.passed)
            .map(|f| f.detail.as_str())
            .collect();
        assert_eq!(failed.len(), 1, "{:?}", result.findings);
        assert!(
            failed[0].contains("1 website records no gateway can read")
                && failed[0].contains("later.example: unknown variant"),
            "{failed:?}"
        );
    }

    #[test]
    fn a_gateway_that_cannot_read_a_record_fails_check_one_by_name() {
        // The store (read by this release) has none; a gateway of an older release
        // kept one it cannot read, left out of its digest, and names it.
        let snapshot = Snapshot {
            version: 9,
            history: String::new(),
            websites: Vec::new(),
            unreadable: Vec::new(),
        };
        let health = serde_json::json!({"snapshot": {
            "version": 9,
            "websites": 1,
            "domains_digest": domains_digest(std::iter::empty()),
            "unreadable_websites": ["later.example"],
        }});
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let body = health.to_string();
            for stream in listener.incoming().take(1) {
                let mut stream = stream.unwrap();
                let mut request = [0u8; 2048];
                let _ = stream.read(&mut request).unwrap();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(answer.as_bytes()).unwrap();
            }
        });
        let mut description =
            Description::parse(super::super::tests::THREE, std::path::Path::new("c.toml")).unwrap();
        description.servers.truncate(1);
        description.servers[0].private_ip = [127, 0, 0, 1].into();
        description.ports.gateway_admin = port;
        let read = || Ok(snapshot.clone());
        let result = same_websites(&description, &CheckOptions::default(), &read(), &read);
        server.join().unwrap();
        let gw1: Vec<(bool, &str)> = result
            .findings
            .iter()
            .filter(|f| f.server.as_deref() == Some("gw1"))
            .map(|f| (f.passed, f.detail.as_str()))
            .collect();
        assert_eq!(gw1.len(), 2, "{:?}", result.findings);
        assert!(gw1[0].0, "the digests agree: {gw1:?}");
        assert!(
            !gw1[1].0 && gw1[1].1.contains("1 websites (later.example)"),
            "{gw1:?}"
        );
    }

    #[test]
    fn the_gateway_is_known_by_its_via_entry() {
        assert!(names_the_gateway(b"1.1 botgate-0a1b2c3d4e5f"));
        assert!(names_the_gateway(b"1.0 corp, 1.1 BOTGATE-0a1b2c3d4e5f"));
        assert!(!names_the_gateway(b"1.1 varnish, 1.1 botgate"));
        assert!(!names_the_gateway(b"1.1 x-botgate-0a1b"));
    }

    #[test]
    fn the_first_online_website_is_visited_unless_one_is_named() {
        let record = |domain: &str, status| {
            let mut website = site(status);
            website.domain = Domain::parse(domain).unwrap();
            WebsiteRecord {
                partner: botgate_model::PartnerName::parse("hoster").unwrap(),
                revision: 1,
                website,
            }
        };
        let snapshot = Snapshot {
            version: 3,
            history: String::new(),
            websites: vec![
                record("c.example", Status::Online),
                record("a.example", Status::Setup),
                record("b.example", Status::Online),
            ],
            unreadable: Vec::new(),
        };
        let chosen = |domain| choose_website(&snapshot, domain).map(|r| r.website.domain.as_str());
        assert_eq!(chosen(None), Ok("b.example"));
        assert_eq!(chosen(Some("a.example")), Ok("a.example"));
        assert!(
            chosen(Some("z.example"))
                .unwrap_err()
                .contains("no website `z.example`")
        );
        let empty = Snapshot {
            websites: Vec::new(),
            ..snapshot.clone()
        };
        assert!(
            choose_website(&empty, None)
                .unwrap_err()
                .contains("no online website")
        );
    }

    #[test]
    fn info_fields_are_read_by_name() {
        let info =
            "# Replication\r\nrole:slave\r\nmaster_host:10.0.0.11\r\nmaster_link_status:up\r\n";
        assert_eq!(info_field(info, "role").as_deref(), Some("slave"));
        assert_eq!(
            info_field(info, "master_host").as_deref(),
            Some("10.0.0.11")
        );
        assert_eq!(info_field(info, "master"), None);
    }
}
