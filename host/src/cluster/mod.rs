//! A cluster description: one TOML file naming every server, the floating IP, the
//! provider that moves it and the files holding the secrets, read and checked once;
//! [`render`] turns it into one server's configuration files.
//!
//! Every value the specification fixes (ports 6379, 26379 and 16379, the quorum, the
//! Sentinel and HAProxy timers, `maxconn`) is the default; `[ports]`, `[timers]` and
//! `[paths]` exist so that tests can run a whole cluster on one machine.

pub mod check;
pub mod render;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub use render::{RenderedFile, render};

/// Why a description was refused.
#[derive(Debug, thiserror::Error)]
pub enum DescriptionError {
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A syntax error, an unknown key or a wrong type; the message names the key and
    /// its line.
    #[error("{path}: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("{path}: {problem}")]
    Invalid { path: PathBuf, problem: String },
    #[error("the {what} file {path}")]
    Secret {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: SecretError,
    },
}

/// What is wrong with a secret's file.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot be read")]
    Read(#[source] std::io::Error),
    #[error("is empty")]
    Empty,
    #[error("holds {0} characters; at least 16 are needed (make one with `openssl rand -hex 32`)")]
    TooShort(usize),
    #[error(
        "holds a character other than letters, digits and `._~+/=-` (it is written into \
         redis.conf and haproxy.cfg unquoted; make one with `openssl rand -hex 32`)"
    )]
    Character,
}

/// The cluster, as its operator describes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Description {
    /// The stable public address clients use; it follows the store's master.
    pub floating_ip: IpAddr,
    /// A file holding the store's password (`requirepass`), one line.
    pub redis_password_file: PathBuf,
    pub provider: Provider,
    /// The servers; the first is the store's initial master.
    #[serde(rename = "server")]
    pub servers: Vec<Server>,
    /// `botgate serve` options for every server, under the configuration file's keys.
    #[serde(default)]
    pub gateway: toml::Table,
    #[serde(default)]
    pub ports: Ports,
    #[serde(default)]
    pub timers: Timers,
    #[serde(default)]
    pub paths: Paths,
    /// HAProxy's `maxconn` (global and defaults).
    #[serde(default = "default_maxconn")]
    pub haproxy_maxconn: u32,
}

/// One server of the cluster.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Server {
    pub name: String,
    pub public_ip: IpAddr,
    /// The private (VPC) address the store, Sentinel and HAProxy's checks use.
    pub private_ip: IpAddr,
    /// The provider's identifier of the server, to which the floating IP is assigned.
    pub instance_id: String,
}

/// The infrastructure provider that assigns the floating IP.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "kebab-case",
    deny_unknown_fields
)]
pub enum Provider {
    /// Hetzner Cloud: `POST /v1/floating_ips/{id}/actions/assign`, `{"server": id}`.
    Hetzner {
        token_file: PathBuf,
        /// The floating IP's id at Hetzner.
        floating_ip_id: String,
        #[serde(default = "hetzner_api")]
        api: String,
    },
    /// DigitalOcean: `POST /v2/reserved_ips/{ip}/actions`, `{"type": "assign",
    /// "droplet_id": id}`.
    Digitalocean {
        token_file: PathBuf,
        #[serde(default = "digitalocean_api")]
        api: String,
    },
    /// Vultr: `POST /v2/reserved-ips/{id}/attach`, `{"instance_id": id}`.
    Vultr {
        token_file: PathBuf,
        /// The reserved IP's id at Vultr.
        reserved_ip_id: String,
        #[serde(default = "vultr_api")]
        api: String,
    },
    /// Any other API: `url` and `body` with `{floating_ip}` and `{instance_id}` filled in.
    Generic {
        token_file: PathBuf,
        url: String,
        body: String,
        #[serde(default = "post")]
        method: String,
        /// Where `botgate cluster check` reads the assignment (`GET`, `{floating_ip}`
        /// filled in)...
        #[serde(default)]
        assignment_url: Option<String>,
        /// ...and the JSON pointer to the instance id in the answer
        /// (`/floating_ip/server`).
        #[serde(default)]
        assignment_field: Option<String>,
    },
}

fn hetzner_api() -> String {
    "https://api.hetzner.cloud".into()
}
fn digitalocean_api() -> String {
    "https://api.digitalocean.com".into()
}
fn vultr_api() -> String {
    "https://api.vultr.com".into()
}
fn post() -> String {
    "POST".into()
}
fn default_maxconn() -> u32 {
    200
}

impl Provider {
    /// The file holding the provider's API token.
    pub fn token_file(&self) -> &Path {
        match self {
            Provider::Hetzner { token_file, .. }
            | Provider::Digitalocean { token_file, .. }
            | Provider::Vultr { token_file, .. }
            | Provider::Generic { token_file, .. } => token_file,
        }
    }

    fn token_file_mut(&mut self) -> &mut PathBuf {
        match self {
            Provider::Hetzner { token_file, .. }
            | Provider::Digitalocean { token_file, .. }
            | Provider::Vultr { token_file, .. }
            | Provider::Generic { token_file, .. } => token_file,
        }
    }
}

/// The ports, as the specification has them.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct Ports {
    pub redis: u16,
    pub sentinel: u16,
    /// HAProxy's listener for the store (the master among the nodes).
    pub store_proxy: u16,
    /// HAProxy's public HTTP and HTTPS listeners.
    pub http: u16,
    pub https: u16,
    /// The gateway's loopback listeners behind HAProxy.
    pub gateway_http: u16,
    pub gateway_https: u16,
    /// The gateway's admin listener (metrics, health, operator's commands) on
    /// loopback, and its metrics listener (metrics, health) on the private IP.
    pub gateway_admin: u16,
}

impl Default for Ports {
    fn default() -> Ports {
        Ports {
            redis: 6379,
            sentinel: 26379,
            store_proxy: 16379,
            http: 80,
            https: 443,
            gateway_http: 8180,
            gateway_https: 8443,
            gateway_admin: 9180,
        }
    }
}

/// The failover timers, as the specification has them.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct Timers {
    /// Sentinel's `down-after-milliseconds`.
    pub down_after_ms: u64,
    /// Sentinel's `failover-timeout`.
    pub failover_timeout_ms: u64,
    /// How often HAProxy checks each store node.
    pub store_check_ms: u64,
}

impl Default for Timers {
    fn default() -> Timers {
        Timers {
            down_after_ms: 5000,
            failover_timeout_ms: 10000,
            store_check_ms: 3000,
        }
    }
}

/// Where the services keep their files on a server (Debian's places).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct Paths {
    pub redis_data: PathBuf,
    pub redis_logs: PathBuf,
    pub redis_run: PathBuf,
    pub sentinel_run: PathBuf,
    /// Where redis.conf and sentinel.conf live (Sentinel rewrites its file there).
    pub redis_config: PathBuf,
    pub haproxy_config: PathBuf,
    /// botgate's configuration, the failover script's settings and the provider token.
    pub botgate_config: PathBuf,
    pub botgate_data: PathBuf,
    pub botgate_logs: PathBuf,
    pub botgate_cache: PathBuf,
    pub botgate_binary: PathBuf,
    pub failover_script: PathBuf,
    pub systemd: PathBuf,
    pub sysctl: PathBuf,
}

impl Default for Paths {
    fn default() -> Paths {
        Paths {
            redis_data: "/var/lib/redis".into(),
            redis_logs: "/var/log/redis".into(),
            redis_run: "/run/redis".into(),
            sentinel_run: "/run/sentinel".into(),
            redis_config: "/etc/redis".into(),
            haproxy_config: "/etc/haproxy".into(),
            botgate_config: "/etc/botgate".into(),
            botgate_data: "/var/lib/botgate".into(),
            botgate_logs: "/var/log/botgate".into(),
            botgate_cache: "/var/cache/botgate".into(),
            botgate_binary: "/usr/local/bin/botgate".into(),
            failover_script: "/usr/local/bin/fip-switch.sh".into(),
            systemd: "/etc/systemd/system".into(),
            sysctl: "/etc/sysctl.d".into(),
        }
    }
}

impl Paths {
    /// Each path absolute, of letters, digits and `/._-` only: they go unquoted into
    /// `install.sh`, systemd units (where `%` and spaces mean something) and the
    /// services' files.
    fn check(&self) -> Result<(), String> {
        let all = [
            ("redis-data", &self.redis_data),
            ("redis-logs", &self.redis_logs),
            ("redis-run", &self.redis_run),
            ("sentinel-run", &self.sentinel_run),
            ("redis-config", &self.redis_config),
            ("haproxy-config", &self.haproxy_config),
            ("botgate-config", &self.botgate_config),
            ("botgate-data", &self.botgate_data),
            ("botgate-logs", &self.botgate_logs),
            ("botgate-cache", &self.botgate_cache),
            ("botgate-binary", &self.botgate_binary),
            ("failover-script", &self.failover_script),
            ("systemd", &self.systemd),
            ("sysctl", &self.sysctl),
        ];
        for (key, path) in all {
            let text = path.to_string_lossy();
            let safe = text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b));
            if !path.is_absolute() || !safe {
                return Err(format!(
                    "[paths] {key} `{text}` must be an absolute path of letters, digits, \
                     `/`, `.`, `_` and `-`"
                ));
            }
        }
        Ok(())
    }
}

/// The secrets a description's files hold, read and checked.
#[derive(Clone)]
pub struct Secrets {
    pub redis_password: String,
    pub provider_token: String,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(<redacted>)")
    }
}

/// The `serve` options a rendered configuration sets itself: a description's
/// `[gateway]` table may not set them.
pub const CLUSTER_OPTIONS: [&str; 12] = [
    "config",
    "redis-url",
    "redis-password",
    "redis-wait-replicas",
    "rulesets-dir",
    "http-listen",
    "https-listen",
    "admin-listen",
    "metrics-listen",
    "cache-dir",
    "trusted-proxy",
    "data-dir",
];

impl Description {
    /// Reads and checks the description at `path` (relative file names in it are
    /// relative to its folder) and the secrets its files hold.
    pub fn load(path: &Path) -> Result<(Description, Secrets), DescriptionError> {
        let text = std::fs::read_to_string(path).map_err(|source| DescriptionError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut description = Description::parse(&text, path)?;
        let folder = path.parent().unwrap_or(Path::new("."));
        description.redis_password_file = folder.join(&description.redis_password_file);
        let token = folder.join(description.provider.token_file());
        *description.provider.token_file_mut() = token;
        let secrets = Secrets {
            redis_password: read_secret("store password", &description.redis_password_file)?,
            provider_token: read_secret("provider token", description.provider.token_file())?,
        };
        Ok((description, secrets))
    }

    /// Parses and checks a description's text (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Description, DescriptionError> {
        let description: Description =
            toml::from_str(text).map_err(|error| DescriptionError::Toml {
                path: path.to_owned(),
                message: toml_message(text, &error),
            })?;
        description
            .check()
            .map_err(|problem| DescriptionError::Invalid {
                path: path.to_owned(),
                problem,
            })?;
        Ok(description)
    }

    fn check(&self) -> Result<(), String> {
        if self.servers.len() < 2 {
            return Err(format!(
                "a cluster has at least 2 servers (3 or more recommended); {} listed",
                self.servers.len()
            ));
        }
        let mut names = BTreeMap::new();
        let mut private = BTreeMap::new();
        let mut instances = BTreeMap::new();
        for server in &self.servers {
            let name = &server.name;
            let valid_name = !name.is_empty()
                && name.len() <= 63
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !valid_name {
                return Err(format!(
                    "server name `{name}`: use 1 to 63 letters, digits, `-` or `_`"
                ));
            }
            if names.insert(name.clone(), ()).is_some() {
                return Err(format!("two servers are named `{name}`"));
            }
            if let Some(other) = private.insert(server.private_ip, name.clone()) {
                return Err(format!(
                    "servers `{other}` and `{name}` have the same private IP {}",
                    server.private_ip
                ));
            }
            let valid_instance = !server.instance_id.is_empty()
                && server
                    .instance_id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
            if !valid_instance {
                return Err(format!(
                    "server `{name}`: instance-id `{}` must be letters, digits, `-`, `_`, `.` or `:`",
                    server.instance_id
                ));
            }
            if let Some(other) = instances.insert(server.instance_id.clone(), name.clone()) {
                return Err(format!(
                    "servers `{other}` and `{name}` have the same instance-id `{}`",
                    server.instance_id
                ));
            }
            if server.public_ip == self.floating_ip || server.private_ip == self.floating_ip {
                return Err(format!(
                    "the floating IP {} is server `{name}`'s own address; it must be one of its own",
                    self.floating_ip
                ));
            }
        }
        for key in self.gateway.keys() {
            if CLUSTER_OPTIONS.contains(&key.as_str()) {
                return Err(format!(
                    "[gateway] `{key}` is set by the cluster itself and cannot be given here"
                ));
            }
        }
        let timers = &self.timers;
        if timers.down_after_ms == 0
            || timers.failover_timeout_ms == 0
            || timers.store_check_ms == 0
        {
            return Err("[timers] every timer must be above 0".into());
        }
        if self.haproxy_maxconn == 0 {
            return Err("haproxy-maxconn must be above 0".into());
        }
        self.check_provider_values()?;
        self.paths.check()?;
        if let Provider::Generic {
            url,
            body,
            method,
            assignment_url,
            assignment_field,
            ..
        } = &self.provider
        {
            if let Some(read) = assignment_url
                && !(read.starts_with("https://") || read.starts_with("http://"))
            {
                return Err(format!(
                    "[provider] assignment-url `{read}` must be an http(s) address"
                ));
            }
            if assignment_url.is_some() != assignment_field.is_some() {
                return Err("[provider] assignment-url and assignment-field go together".into());
            }
            if let Some(field) = assignment_field
                && !field.starts_with('/')
            {
                return Err(format!(
                    "[provider] assignment-field `{field}` must be a JSON pointer such as \
                     `/floating_ip/server`"
                ));
            }
            if url.contains(['\n', '\r']) || body.contains(['\n', '\r']) {
                return Err("[provider] url and body must be one line each".into());
            }
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(format!("[provider] url `{url}` must be an http(s) address"));
            }
            if !matches!(method.as_str(), "POST" | "PUT" | "PATCH") {
                return Err(format!(
                    "[provider] method `{method}` must be POST, PUT or PATCH"
                ));
            }
        }
        Ok(())
    }

    /// The provider's values go into the failover script's settings, one a line: none
    /// may hold a control character (a line break would add a setting), and its API is
    /// reached over HTTPS (the token goes with every call), or HTTP on this machine.
    fn check_provider_values(&self) -> Result<(), String> {
        let (api, mut values): (Option<&String>, Vec<(&str, &String)>) = match &self.provider {
            Provider::Hetzner {
                floating_ip_id,
                api,
                ..
            } => (
                Some(api),
                vec![("floating-ip-id", floating_ip_id), ("api", api)],
            ),
            Provider::Digitalocean { api, .. } => (Some(api), vec![("api", api)]),
            Provider::Vultr {
                reserved_ip_id,
                api,
                ..
            } => (
                Some(api),
                vec![("reserved-ip-id", reserved_ip_id), ("api", api)],
            ),
            Provider::Generic {
                url, body, method, ..
            } => (None, vec![("url", url), ("body", body), ("method", method)]),
        };
        if let Provider::Generic {
            assignment_url,
            assignment_field,
            ..
        } = &self.provider
        {
            values.extend(assignment_url.iter().map(|value| ("assignment-url", value)));
            values.extend(
                assignment_field
                    .iter()
                    .map(|value| ("assignment-field", value)),
            );
        }
        for (key, value) in values {
            if value.chars().any(char::is_control) {
                return Err(format!(
                    "[provider] {key} must be one line without control characters"
                ));
            }
        }
        let addresses = match &self.provider {
            Provider::Generic {
                url,
                assignment_url,
                ..
            } => std::iter::once(("url", url))
                .chain(assignment_url.iter().map(|read| ("assignment-url", read)))
                .collect(),
            _ => api.map(|api| vec![("api", api)]).unwrap_or_default(),
        };
        for (key, address) in addresses {
            if !sent_safely(address) {
                return Err(format!(
                    "[provider] {key} `{address}` must be an https address (the token goes \
                     with every call); http only on this machine"
                ));
            }
        }
        Ok(())
    }

    /// The server named `name`, and its position (the first is the initial master).
    pub fn server(&self, name: &str) -> Option<(usize, &Server)> {
        self.servers
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
    }

    /// The store's initial master.
    pub fn initial_master(&self) -> &Server {
        &self.servers[0]
    }
}

/// Whether a provider's `address` keeps its token from others: https, or http to this
/// machine (`localhost`, a loopback address). Placeholders (`{floating_ip}`) are
/// allowed in the path.
fn sent_safely(address: &str) -> bool {
    // No user information, and no backslash, which curl and URL parsers read apart.
    if address.contains(['@', '\\']) {
        return false;
    }
    let Ok(url) = url::Url::parse(&address.replace(['{', '}'], "")) else {
        return false;
    };
    match (url.scheme(), url.host()) {
        ("https", Some(_)) => true,
        ("http", Some(url::Host::Domain(name))) => name.eq_ignore_ascii_case("localhost"),
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        _ => false,
    }
}

/// A serde error from `toml` as one line: the message and the line it points at.
fn toml_message(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end_matches('.');
    match error.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {message}")
        }
        None => message.to_owned(),
    }
}

/// Reads a one-line secret and checks it can be written into the services' files.
fn read_secret(what: &'static str, path: &Path) -> Result<String, DescriptionError> {
    let wrap = |source| DescriptionError::Secret {
        what,
        path: path.to_owned(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| wrap(SecretError::Read(e)))?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.is_empty() {
        return Err(wrap(SecretError::Empty));
    }
    if !secret
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._~+/=-".contains(&b))
    {
        return Err(wrap(SecretError::Character));
    }
    if secret.len() < 16 {
        return Err(wrap(SecretError::TooShort(secret.len())));
    }
    Ok(secret.to_owned())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A three-server description (its secrets' files are not there).
    pub const THREE: &str = r#"
floating-ip = "203.0.113.100"
redis-password-file = "redis-password"

[provider]
kind = "hetzner"
token-file = "provider-token"
floating-ip-id = "4711"

[[server]]
name = "gw1"
public-ip = "203.0.113.11"
private-ip = "10.0.0.11"
instance-id = "1001"

[[server]]
name = "gw2"
public-ip = "203.0.113.12"
private-ip = "10.0.0.12"
instance-id = "1002"

[[server]]
name = "gw3"
public-ip = "203.0.113.13"
private-ip = "10.0.0.13"
instance-id = "1003"

[gateway]
api-host = ["api.example.net"]
"#;

    fn parse(text: &str) -> Result<Description, String> {
        Description::parse(text, Path::new("cluster.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_three_server_description_reads_with_the_specification_defaults() {
        let description = parse(THREE).unwrap();
        assert_eq!(description.servers.len(), 3);
        assert_eq!(description.initial_master().name, "gw1");
        assert_eq!(description.ports.redis, 6379);
        assert_eq!(description.ports.sentinel, 26379);
        assert_eq!(description.ports.store_proxy, 16379);
        assert_eq!(description.timers.down_after_ms, 5000);
        assert_eq!(description.timers.failover_timeout_ms, 10000);
        assert_eq!(description.haproxy_maxconn, 200);
        assert!(
            matches!(description.provider, Provider::Hetzner { ref floating_ip_id, .. } if floating_ip_id == "4711")
        );
    }

    #[test]
    fn unknown_keys_wrong_types_and_bad_clusters_are_named() {
        let unknown = parse(&THREE.replace(
            "instance-id = \"1002\"",
            "instance-id = \"1002\"\nzone = \"x\"",
        ))
        .unwrap_err();
        assert!(
            unknown.contains("zone") && unknown.contains("line 21"),
            "{unknown}"
        );
        let wrong = parse(&THREE.replace("\"10.0.0.13\"", "13")).unwrap_err();
        assert!(wrong.contains("line 25"), "{wrong}");
        let one = THREE
            .split("[[server]]")
            .take(2)
            .collect::<Vec<_>>()
            .join("[[server]]");
        assert!(parse(&one).unwrap_err().contains("at least 2 servers"));
        let twice = parse(&THREE.replace("10.0.0.13", "10.0.0.12")).unwrap_err();
        assert!(twice.contains("same private IP 10.0.0.12"), "{twice}");
        let owned = parse(&THREE.replace("203.0.113.13", "203.0.113.100")).unwrap_err();
        assert!(owned.contains("floating IP"), "{owned}");
        for (key, value) in [
            ("redis-url", "\"redis://x\""),
            ("redis-wait-replicas", "0"),
            ("rulesets-dir", "\"/tmp/mine\""),
        ] {
            let store = parse(&format!("{THREE}{key} = {value}\n")).unwrap_err();
            assert!(
                store.contains(&format!("`{key}` is set by the cluster")),
                "{store}"
            );
        }
        let provider =
            parse(&THREE.replace("kind = \"hetzner\"", "kind = \"acme-cloud\"")).unwrap_err();
        assert!(provider.contains("acme-cloud"), "{provider}");
        let generic = THREE.replace(
            "kind = \"hetzner\"\ntoken-file = \"provider-token\"\nfloating-ip-id = \"4711\"",
            "kind = \"generic\"\ntoken-file = \"t\"\nurl = \"https://x/{instance_id}\"\nbody = \"a\\nb\"",
        );
        assert!(parse(&generic).unwrap_err().contains("one line"));
    }

    /// Values that go into the failover script's settings, `install.sh` and the units
    /// unquoted cannot add a line or a word there, and the provider's token never goes
    /// out over plain HTTP.
    #[test]
    fn provider_values_and_paths_cannot_add_settings_or_send_the_token_in_clear() {
        let smuggled = parse(&THREE.replace(
            "floating-ip-id = \"4711\"",
            "floating-ip-id = \"4711\\ntoken_file=/tmp/mine\"",
        ))
        .unwrap_err();
        assert!(
            smuggled.contains("floating-ip-id must be one line"),
            "{smuggled}"
        );
        let clear = parse(&THREE.replace(
            "floating-ip-id = \"4711\"",
            "floating-ip-id = \"4711\"\napi = \"http://api.hetzner.cloud\"",
        ))
        .unwrap_err();
        assert!(clear.contains("must be an https address"), "{clear}");
        for looks_local in [
            "http://localhost@evil.example/",
            "http://localhost.evil.example",
            "http://127.evil.example",
            "http://localhost\\\\@evil.example/",
        ] {
            let refused = parse(&THREE.replace(
                "floating-ip-id = \"4711\"",
                &format!("floating-ip-id = \"4711\"\napi = \"{looks_local}\""),
            ))
            .unwrap_err();
            assert!(
                refused.contains("https address"),
                "{looks_local}: {refused}"
            );
        }
        for local in [
            "http://127.0.0.1:9",
            "http://localhost:8080",
            "http://[::1]:9",
        ] {
            let local = THREE.replace(
                "floating-ip-id = \"4711\"",
                &format!("floating-ip-id = \"4711\"\napi = \"{local}\""),
            );
            assert!(parse(&local).is_ok(), "{local}");
        }
        let generic = THREE.replace(
            "kind = \"hetzner\"\ntoken-file = \"provider-token\"\nfloating-ip-id = \"4711\"",
            "kind = \"generic\"\ntoken-file = \"t\"\n\
             url = \"http://api.example/ips/{floating_ip}/{instance_id}\"\nbody = \"{}\"",
        );
        assert!(parse(&generic).unwrap_err().contains("[provider] url"));
        assert!(parse(&generic.replace("http://", "https://")).is_ok());
        for path in [
            "/var/lib/my redis",
            "var/lib/redis",
            "/var/lib/redis%i",
            "/x;rm",
        ] {
            let refused =
                parse(&format!("{THREE}\n[paths]\nredis-data = \"{path}\"\n")).unwrap_err();
            assert!(refused.contains("[paths] redis-data"), "{path}: {refused}");
        }
    }

    #[test]
    fn secrets_must_be_long_enough_and_safe_to_write_unquoted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        for (content, wanted) in [
            ("", "is empty"),
            ("short\n", "at least 16"),
            ("has space in it 1234567890\n", "other than letters"),
            ("hash#in#it#1234567890", "other than letters"),
        ] {
            std::fs::write(&file, content).unwrap();
            let error = read_secret("store password", &file).unwrap_err();
            let reported = botgate_model::report::Report(&error).to_string();
            assert!(reported.contains(wanted), "{content:?}: {reported}");
        }
        std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
        assert_eq!(
            read_secret("store password", &file).unwrap(),
            "0123456789abcdef0123"
        );
    }
}
