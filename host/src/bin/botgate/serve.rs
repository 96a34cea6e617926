//! `botgate serve`: the data plane (HTTP and HTTPS listeners), the management API and
//! the admin listener on the configured store, with the rule engine on a hot-reloaded
//! directory of components; drains gracefully on SIGINT or SIGTERM.

use crate::store::StoreArgs;
use anyhow::{Context, Result};
use botgate_api::{ApiConfig, IssuanceLimits, PartnerQuotas};
use botgate_host::fleet::signing::TrustedKeys;
use botgate_host::gateway::GatewayConfig;
use botgate_host::gateway::access_log::AccessLog;
use botgate_host::gateway::cache::CacheConfig;
use botgate_host::gateway::challenge::ChallengeConfig;
use botgate_host::gateway::connection::ConnectionLimits;
use botgate_host::gateway::crawlers::CrawlerConfig;
use botgate_host::gateway::crawlers::reverse_dns::ReverseDnsConfig;
use botgate_host::gateway::crawlers::sources::Source;
use botgate_host::gateway::limits::DdosConfig;
use botgate_host::gateway::upstream::OriginConfig;
use botgate_host::log_writer::{BatchedWriter, FlushOnDrop};
use botgate_host::provisioning::ProvisioningConfig;
use botgate_host::provisioning::acme::{self, AcmeChallenge, AcmeConfig};
use botgate_host::rules::Registry;
use botgate_host::server::{self, ServerConfig};
use botgate_model::addresses::OriginPolicy;
use botgate_webhooks::{AddressPolicy, WebhookConfig};
use clap::Args;
use futures_util::StreamExt;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// A configuration file of these options under their names (`http-listen =
    /// "0.0.0.0:8180"`); environment variables and flags override it. Without it,
    /// /etc/botgate/botgate.toml when present.
    #[arg(long, env = "BOTGATE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    /// Where visitors' plain HTTP arrives (the cluster's HAProxy forwards :80 here).
    #[arg(long, env = "BOTGATE_HTTP_LISTEN", default_value = "127.0.0.1:8180")]
    http_listen: SocketAddr,
    /// Where visitors' HTTPS arrives (the cluster's HAProxy forwards :443 here).
    #[arg(long, env = "BOTGATE_HTTPS_LISTEN", default_value = "127.0.0.1:8443")]
    https_listen: SocketAddr,
    /// Where the management API listens over plain HTTP, for local administration.
    #[arg(long, env = "BOTGATE_API_LISTEN", default_value = "127.0.0.1:8280")]
    api_listen: SocketAddr,
    /// No plain-HTTP API listener (the API is then reached on its --api-host names).
    #[arg(long, env = "BOTGATE_NO_API_LISTENER")]
    no_api_listener: bool,
    /// A host name the management API answers on the HTTPS listener (repeatable, or
    /// comma-separated); on plain HTTP it answers 301 to HTTPS. No website may take it.
    #[arg(
        long = "api-host",
        value_name = "NAME",
        env = "BOTGATE_API_HOSTS",
        value_delimiter = ','
    )]
    api_hosts: Vec<String>,
    /// The --api-host names' certificate chain (PEM, leaf first), read again when it
    /// changes; without it, and with ACME on, the certificate comes from ACME.
    #[arg(long, env = "BOTGATE_API_CERT", value_name = "FILE")]
    api_cert: Option<PathBuf>,
    /// The private key (PEM) of --api-cert.
    #[arg(long, env = "BOTGATE_API_KEY", value_name = "FILE")]
    api_key: Option<PathBuf>,
    /// The dashboard's address as partners frame it (`GET /v1.0/dashboard`); by
    /// default `https://` and the first --api-host.
    #[arg(long, env = "BOTGATE_DASHBOARD_URL", value_name = "URL")]
    dashboard_url: Option<String>,
    /// Where Prometheus metrics (/metrics) and the health check (/health) are served.
    #[arg(long, env = "BOTGATE_ADMIN_LISTEN", default_value = "127.0.0.1:9180")]
    admin_listen: SocketAddr,
    /// Another address serving /metrics and /health only, never the operator's
    /// commands (repeatable, or comma-separated): a cluster's private network, for
    /// Prometheus and `botgate cluster check`.
    #[arg(
        long = "metrics-listen",
        value_name = "ADDRESS",
        env = "BOTGATE_METRICS_LISTEN",
        value_delimiter = ','
    )]
    metrics_listen: Vec<SocketAddr>,
    /// What the diagnostic log shows: a level (`error`, `warn`, `info`, `debug`,
    /// `trace`) or a filter of them by module (`info,botgate_host::gateway=debug`);
    /// RUST_LOG's filter when not given, else `info`. Unless the filter names them,
    /// `wasmtime` and `cranelift` log from `warn` and `rustls` (a visitor's protocol
    /// oddities) from `error`.
    #[arg(long, env = "BOTGATE_LOG_LEVEL", value_name = "FILTER")]
    log_level: Option<String>,
    /// Seconds the store may go unanswered before /health answers 503 (the gateway
    /// serves on from its last snapshot meanwhile).
    #[arg(
        long,
        env = "BOTGATE_HEALTH_STORE_UNREACHABLE_SECONDS",
        default_value = "30"
    )]
    health_store_unreachable_seconds: u64,
    /// Milliseconds between writes of each website's statistics and latest requests to
    /// the store, for the dashboard.
    #[arg(
        long,
        env = "BOTGATE_STATISTICS_FLUSH_MS",
        default_value = "10000",
        value_parser = clap::value_parser!(u64).range(100..)
    )]
    statistics_flush_ms: u64,
    /// Networks whose connections start with a PROXY protocol v2 header (the cluster's
    /// HAProxy); repeat or separate with commas. A trusted peer without the header is
    /// disconnected.
    #[arg(
        long = "trusted-proxy",
        env = "BOTGATE_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    trusted_proxies: Vec<ipnet::IpNet>,
    /// The directory of rule components, hot-reloaded.
    #[arg(long, env = "BOTGATE_RULESETS_DIR", default_value = "data/rulesets")]
    rulesets_dir: PathBuf,
    /// An ed25519 public key (PEM, as `openssl pkey -pubout` writes it) whose detached
    /// signature a pushed component needs to be activated and loaded (repeatable, or
    /// comma-separated). Without it, pushed components need no signature.
    #[arg(
        long = "ruleset-trusted-key",
        value_name = "FILE",
        env = "BOTGATE_RULESET_TRUSTED_KEYS",
        value_delimiter = ','
    )]
    ruleset_trusted_keys: Vec<PathBuf>,
    /// API requests a second per key, sustained (the user keys of one partner get ten
    /// times it together).
    #[arg(long, env = "BOTGATE_API_RATE", default_value = "50")]
    api_rate: NonZeroU32,
    /// API requests per key at once.
    #[arg(long, env = "BOTGATE_API_BURST", default_value = "100")]
    api_burst: NonZeroU32,
    /// Unknown API keys a minute one client address may present (an IPv6 /64 counts
    /// as one); past the burst its requests answer 429 before any key is looked up.
    #[arg(long, env = "BOTGATE_API_FAILED_KEYS_PER_MINUTE", default_value = "30")]
    api_failed_keys_per_minute: NonZeroU32,
    /// Unknown API keys one client address may present at once.
    #[arg(long, env = "BOTGATE_API_FAILED_KEYS_BURST", default_value = "30")]
    api_failed_keys_burst: NonZeroU32,
    /// The most users one partner may hold; creating another answers 403.
    #[arg(long, env = "BOTGATE_MAX_USERS_PER_PARTNER", default_value = "100000")]
    max_users_per_partner: NonZeroU32,
    /// The most websites one partner may hold; creating another answers 403.
    #[arg(
        long,
        env = "BOTGATE_MAX_WEBSITES_PER_PARTNER",
        default_value = "100000"
    )]
    max_websites_per_partner: NonZeroU32,
    #[command(flatten)]
    data_plane: DataPlaneArgs,
    #[command(flatten)]
    webhooks: WebhookArgs,
    #[command(flatten)]
    provisioning: ProvisioningArgs,
}

/// When a new or changed website is ready.
#[derive(Args, Debug)]
struct ProvisioningArgs {
    /// An address visitors reach this gateway (or cluster) at (repeatable). When given,
    /// a new website, or one with new subdomains, waits in `setup` until its names
    /// resolve to these addresses only; without any, websites are online at once.
    #[arg(
        long = "public-address",
        value_name = "IP",
        env = "BOTGATE_PUBLIC_ADDRESSES",
        value_delimiter = ','
    )]
    public_addresses: Vec<std::net::IpAddr>,
    /// How long a website may wait for its DNS before it ends in `error`.
    #[arg(long, env = "BOTGATE_DNS_WAIT_SECONDS", default_value = "86400")]
    dns_wait_seconds: u64,
    /// How often websites in `setup` are checked, in milliseconds.
    #[arg(long, env = "BOTGATE_SETUP_CHECK_MS", default_value = "5000")]
    setup_check_ms: u64,
    /// The ACME directory certificates for `certs_issuer: acme` come from. ACME is on
    /// when this is given, or when --public-address is (then Let's Encrypt's, by
    /// default); off otherwise (such websites are served with the fallback certificate).
    #[arg(long, env = "BOTGATE_ACME_DIRECTORY", value_name = "URL")]
    acme_directory: Option<String>,
    /// A contact for the ACME account (`mailto:ops@example.com`; repeatable).
    #[arg(long, env = "BOTGATE_ACME_CONTACT", value_delimiter = ',')]
    acme_contact: Vec<String>,
    /// A root certificate (PEM file) to trust for the ACME directory itself (a test CA).
    #[arg(long, env = "BOTGATE_ACME_DIRECTORY_ROOT")]
    acme_directory_root: Option<PathBuf>,
    /// How the CA checks control of a name: `http-01` (port 80) or `tls-alpn-01`
    /// (port 443).
    #[arg(long, env = "BOTGATE_ACME_CHALLENGE", default_value = "http-01", value_parser = ["http-01", "tls-alpn-01"])]
    acme_challenge: String,
    /// No certificates from ACME, whatever else is configured.
    #[arg(long, env = "BOTGATE_NO_ACME")]
    no_acme: bool,
    /// The most certificate issuances for one website in a day (UTC), renewals and
    /// retries included; the API answers 429 past it, a renewal waits.
    #[arg(
        long,
        env = "BOTGATE_ACME_ORDERS_PER_WEBSITE_PER_DAY",
        default_value = "5"
    )]
    acme_orders_per_website_per_day: u64,
    /// The most certificate issuances for one partner's websites in an hour, renewals
    /// and retries included; the API answers 429 past it, a renewal waits.
    #[arg(
        long,
        env = "BOTGATE_ACME_ORDERS_PER_PARTNER_PER_HOUR",
        default_value = "50"
    )]
    acme_orders_per_partner_per_hour: u64,
    /// The most certificate issuances one user's own key (or its dashboard) may start
    /// in an hour, within its partner's; the API answers 429 past it.
    #[arg(
        long,
        env = "BOTGATE_ACME_ORDERS_PER_USER_KEY_PER_HOUR",
        default_value = "10"
    )]
    acme_orders_per_user_key_per_hour: u64,
}

impl ProvisioningArgs {
    /// The ACME configuration, when ACME is on.
    fn acme(&self) -> Option<AcmeConfig> {
        if self.no_acme || (self.acme_directory.is_none() && self.public_addresses.is_empty()) {
            return None;
        }
        Some(AcmeConfig {
            directory: self
                .acme_directory
                .clone()
                .unwrap_or_else(|| acme::LETS_ENCRYPT.to_owned()),
            contact: self.acme_contact.clone(),
            directory_root: self.acme_directory_root.clone(),
            challenge: if self.acme_challenge == "tls-alpn-01" {
                AcmeChallenge::TlsAlpn01
            } else {
                AcmeChallenge::Http01
            },
            ..AcmeConfig::default()
        })
    }
}

/// How website-change webhooks are delivered.
#[derive(Args, Debug)]
struct WebhookArgs {
    /// A private network webhooks may be sent to (repeatable; CIDR, `10.0.0.0/8`).
    /// Without it only public addresses are called: the address checked is the address
    /// connected to.
    #[arg(
        long = "webhook-allow-network",
        value_name = "CIDR",
        env = "BOTGATE_WEBHOOK_ALLOW_NETWORKS",
        value_delimiter = ','
    )]
    allow_networks: Vec<ipnet::IpNet>,
    /// The wait after a webhook's first failed attempt, in milliseconds; each later
    /// wait doubles (jittered), up to an hour, for 25 hours.
    #[arg(
        long = "webhook-retry-base-ms",
        env = "BOTGATE_WEBHOOK_RETRY_BASE_MS",
        default_value = "5000"
    )]
    retry_base_ms: u64,
}

impl WebhookArgs {
    fn config(&self) -> WebhookConfig {
        WebhookConfig {
            policy: AddressPolicy {
                allowed: self.allow_networks.clone(),
            },
            retry_base: Duration::from_millis(self.retry_base_ms.max(1)),
            ..WebhookConfig::default()
        }
    }
}

/// The data plane's tuning; the defaults suit a production server.
#[derive(Args, Debug)]
pub struct DataPlaneArgs {
    /// The origins' port for plain HTTP.
    #[arg(long, env = "BOTGATE_ORIGIN_HTTP_PORT", default_value = "80")]
    origin_http_port: u16,
    /// A network websites' origins may be in although refused by default (repeatable;
    /// CIDR): `127.0.0.0/8` for an origin on this machine. Loopback, link-local and
    /// cloud metadata addresses, the unspecified address, multicast, broadcast and the
    /// gateway's own addresses are refused otherwise.
    #[arg(
        long = "origin-allow-network",
        value_name = "CIDR",
        env = "BOTGATE_ORIGIN_ALLOW_NETWORKS",
        value_delimiter = ','
    )]
    origin_allow_networks: Vec<ipnet::IpNet>,
    /// A network websites' origins may never be in (repeatable; CIDR); wins over
    /// --origin-allow-network. Checked when the API writes `ip` and before every
    /// connection to an origin.
    #[arg(
        long = "origin-deny-network",
        value_name = "CIDR",
        env = "BOTGATE_ORIGIN_DENY_NETWORKS",
        value_delimiter = ','
    )]
    origin_deny_networks: Vec<ipnet::IpNet>,
    /// The origins' port when a website sets `upstreams_use_https`.
    #[arg(long, env = "BOTGATE_ORIGIN_HTTPS_PORT", default_value = "443")]
    origin_https_port: u16,
    /// Seconds an origin connection (TCP and TLS) may take.
    #[arg(long, env = "BOTGATE_ORIGIN_CONNECT_TIMEOUT", default_value = "5")]
    origin_connect_timeout: u64,
    /// Idle kept-alive connections each data-plane thread keeps per origin: at least
    /// the requests a thread has in flight to one origin at its busiest, or those
    /// beyond are closed when they finish and a new connection is opened for each.
    /// The origin's own keep-alive timeout still closes idle ones.
    #[arg(long, env = "BOTGATE_ORIGIN_IDLE_CONNECTIONS", default_value = "256")]
    origin_idle_connections: usize,
    /// Seconds an origin may take to start answering. On HTTP/1.1 the client
    /// connection's idle timeout bounds this too: keep it below the idle timeout.
    #[arg(long, env = "BOTGATE_ORIGIN_RESPONSE_TIMEOUT", default_value = "60")]
    origin_response_timeout: u64,
    /// Seconds a client may take to send a request head (and the TLS handshake).
    #[arg(long, env = "BOTGATE_HEADER_READ_TIMEOUT", default_value = "10")]
    header_read_timeout: u64,
    /// Seconds a quiet client connection is kept open: between requests, and (plus a
    /// quarter) while no byte of a request or its response moves either way.
    #[arg(long, env = "BOTGATE_IDLE_TIMEOUT", default_value = "60")]
    idle_timeout: u64,
    /// Seconds a shutdown waits for open connections to finish.
    #[arg(long, env = "BOTGATE_DRAIN_TIMEOUT", default_value = "30")]
    drain_timeout: u64,
    /// The largest request head, in bytes.
    #[arg(long, env = "BOTGATE_MAX_HEADER_BYTES", default_value = "65536")]
    max_header_bytes: usize,
    /// The most header fields in one request.
    #[arg(long, env = "BOTGATE_MAX_HEADERS", default_value = "100")]
    max_headers: usize,
    /// Leading zero bits of the challenge's proof of work (16 ≈ 65 000 hashes).
    #[arg(long, env = "BOTGATE_CHALLENGE_DIFFICULTY", default_value = "16",
          value_parser = clap::value_parser!(u8).range(1..=32))]
    challenge_difficulty: u8,
    /// Seconds a pass earned by the proof of work lets a client pass.
    #[arg(long, env = "BOTGATE_CHALLENGE_PASS_SECONDS", default_value = "3600")]
    challenge_pass_seconds: u64,
    /// Bits added to the challenge's difficulty while a website is under attack or
    /// over its rate, and for a minute after (each doubles the work, and the wait
    /// without JavaScript).
    #[arg(long, env = "BOTGATE_CHALLENGE_ATTACK_EXTRA_BITS", default_value = "3",
          value_parser = clap::value_parser!(u8).range(0..=8))]
    challenge_attack_extra_bits: u8,
    /// Seconds a client without JavaScript waits for a pass at the base difficulty (at
    /// least as long as the proof of work takes a typical browser; at most 150, half a
    /// challenge's life, however high the difficulty).
    #[arg(long, env = "BOTGATE_CHALLENGE_WAIT_SECONDS", default_value = "5",
          value_parser = clap::value_parser!(u64).range(1..=150))]
    challenge_wait_seconds: u64,
    /// Seconds a pass earned by waiting (without JavaScript) lets a client pass.
    #[arg(
        long,
        env = "BOTGATE_CHALLENGE_WAITED_PASS_SECONDS",
        default_value = "600"
    )]
    challenge_waited_pass_seconds: u64,
    /// Passes earned by waiting that one client (IPv4 address or IPv6 /64) gets per hour
    /// on one website; 0 offers no wait (JavaScript is then required).
    #[arg(long, env = "BOTGATE_CHALLENGE_WAITS_PER_HOUR", default_value = "12")]
    challenge_waits_per_hour: u32,
    /// `ddos_protection`: requests a second one client may make to one website.
    #[arg(long, env = "BOTGATE_DDOS_CLIENT_RATE", default_value = "20")]
    ddos_client_rate: NonZeroU32,
    /// `ddos_protection`: requests one client may make to one website at once.
    #[arg(long, env = "BOTGATE_DDOS_CLIENT_BURST", default_value = "100")]
    ddos_client_burst: NonZeroU32,
    /// `ddos_protection`: requests a second one website may receive.
    #[arg(long, env = "BOTGATE_DDOS_WEBSITE_RATE", default_value = "2000")]
    ddos_website_rate: NonZeroU32,
    /// `ddos_protection`: requests one website may receive at once.
    #[arg(long, env = "BOTGATE_DDOS_WEBSITE_BURST", default_value = "4000")]
    ddos_website_burst: NonZeroU32,
    /// How many times stricter `ddos_protection_advanced` is.
    #[arg(long, env = "BOTGATE_DDOS_STRICT_DIVISOR", default_value = "5")]
    ddos_strict_divisor: NonZeroU32,
    /// The share of a website's rate (percent) kept for visitors with a pass while the
    /// website is over its rate; visitors without one are challenged meanwhile.
    #[arg(long, env = "BOTGATE_DDOS_RESERVED_PERCENT", default_value = "50",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    ddos_reserved_percent: u32,
    /// Extra crawler lists for verified bots (JSON, the shape of the bundled one): a
    /// file or an http(s) URL. A listed crawler replaces the bundled one of its name.
    #[arg(
        long = "crawler-list",
        env = "BOTGATE_CRAWLER_LISTS",
        value_delimiter = ','
    )]
    crawler_lists: Vec<Source>,
    /// `NAME=SOURCE`: the networks a crawler's operator publishes (a file or URL with
    /// Google's and Bing's `{"prefixes": [...]}` JSON, or one CIDR per line), replacing
    /// that crawler's listed networks. For example
    /// `googlebot=https://developers.google.com/static/search/apis/ipranges/googlebot.json`.
    #[arg(
        long = "crawler-networks",
        env = "BOTGATE_CRAWLER_NETWORKS",
        value_delimiter = ',',
        value_parser = crawler_networks
    )]
    crawler_networks: Vec<(String, Source)>,
    /// Seconds between reading the crawler lists and networks again (0: never).
    #[arg(long, env = "BOTGATE_CRAWLER_REFRESH_SECONDS", default_value = "21600")]
    crawler_refresh_seconds: u64,
    /// DNS servers (`IP:PORT`) for the reverse-DNS check of crawlers; the system's
    /// resolver (`/etc/resolv.conf`) when not given.
    #[arg(
        long = "dns-server",
        env = "BOTGATE_DNS_SERVERS",
        value_delimiter = ','
    )]
    dns_servers: Vec<SocketAddr>,
    /// Bytes the response cache (`cache_static_files`, `cache_dynamic_pages`) may hold.
    #[arg(long, env = "BOTGATE_CACHE_MEMORY_BYTES", default_value = "268435456")]
    cache_memory_bytes: u64,
    /// The largest response the cache stores, in bytes.
    #[arg(
        long,
        env = "BOTGATE_CACHE_MAX_OBJECT_BYTES",
        default_value = "8388608"
    )]
    cache_max_object_bytes: u64,
    /// Threads that accept and serve HTTP and HTTPS connections, each with its own
    /// listener socket (`SO_REUSEPORT`) and event loop, so a connection and its origin
    /// connection stay on one core; one per core when not given.
    #[arg(long, env = "BOTGATE_DATA_PLANE_THREADS")]
    threads: Option<std::num::NonZeroUsize>,
    /// Serve no HTTP/3 (QUIC on the HTTPS listener's address over UDP).
    #[arg(long, env = "BOTGATE_NO_HTTP3")]
    no_http3: bool,
    /// The UDP port `Alt-Svc` advertises for HTTP/3, when clients reach the gateway on
    /// another port than it listens on (port 443 forwarded to 8443, say); the HTTPS
    /// listener's port when not given.
    #[arg(long, env = "BOTGATE_HTTP3_ADVERTISED_PORT")]
    http3_advertised_port: Option<u16>,
    /// The certificate (PEM) for names no website covers; self-signed when not given.
    #[arg(long, env = "BOTGATE_FALLBACK_CERT")]
    fallback_cert: Option<PathBuf>,
    /// The fallback certificate's private key (PEM).
    #[arg(long, env = "BOTGATE_FALLBACK_KEY")]
    fallback_key: Option<PathBuf>,
    /// Where the access log (one line per request) goes: `stderr` (with the diagnostic
    /// log), `off`, or a file, appended to.
    #[arg(
        long,
        env = "BOTGATE_ACCESS_LOG",
        default_value = "stderr",
        value_name = "stderr|off|FILE"
    )]
    access_log: String,
    /// A MaxMind DB file (GeoLite2 or GeoIP2 Country or City, ASN) giving custom rules
    /// the clients' countries and autonomous systems (repeatable, or comma-separated;
    /// the first that knows a field answers it). Read again on a reload.
    #[arg(
        long = "geoip-db",
        value_name = "FILE",
        env = "BOTGATE_GEOIP_DBS",
        value_delimiter = ','
    )]
    geoip_databases: Vec<PathBuf>,
}

/// Parses `NAME=SOURCE` of `--crawler-networks`.
fn crawler_networks(text: &str) -> Result<(String, Source), String> {
    let (name, source) = text
        .split_once('=')
        .filter(|(name, source)| !name.is_empty() && !source.is_empty())
        .ok_or_else(|| format!("{text:?} is not NAME=FILE-OR-URL"))?;
    let Ok(source) = source.parse();
    Ok((name.to_owned(), source))
}

impl DataPlaneArgs {
    /// The access log `--access-log` names; a file's flush guard must live until exit.
    fn access_log(&self, stderr: &BatchedWriter) -> Result<(AccessLog, Option<FlushOnDrop>)> {
        Ok(match self.access_log.as_str() {
            "stderr" | "-" => (AccessLog::to(stderr.clone()), None),
            "off" => (AccessLog::off(), None),
            path => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("opening the access log {path}"))?;
                let (writer, flush) = BatchedWriter::start(Box::new(file));
                (AccessLog::to(writer), Some(flush))
            }
        })
    }

    /// The data plane's configuration; without --http3-advertised-port, `Alt-Svc`
    /// names the HTTPS port bound (the server fills it in).
    fn config(&self, trusted_proxies: Vec<ipnet::IpNet>, access_log: AccessLog) -> GatewayConfig {
        GatewayConfig {
            access_log,
            http3_port: self.http3_advertised_port,
            trusted_proxies,
            limits: ConnectionLimits {
                header_read_timeout: Duration::from_secs(self.header_read_timeout.max(1)),
                idle_timeout: Duration::from_secs(self.idle_timeout.max(1)),
                max_header_bytes: self.max_header_bytes,
                max_headers: self.max_headers,
                drain_timeout: Duration::from_secs(self.drain_timeout),
            },
            origins: OriginConfig {
                http_port: self.origin_http_port,
                https_port: self.origin_https_port,
                connect_timeout: Duration::from_secs(self.origin_connect_timeout.max(1)),
                response_timeout: Duration::from_secs(self.origin_response_timeout.max(1)),
                idle_per_origin: self.origin_idle_connections,
                ..OriginConfig::default()
            },
            challenge: ChallengeConfig {
                difficulty: self.challenge_difficulty,
                attack_extra_bits: self.challenge_attack_extra_bits,
                pass_lifetime: Duration::from_secs(self.challenge_pass_seconds.max(1)),
                wait: Duration::from_secs(self.challenge_wait_seconds),
                waited_pass_lifetime: Duration::from_secs(
                    self.challenge_waited_pass_seconds.max(1),
                ),
                waits_per_client_per_hour: self.challenge_waits_per_hour,
                ..ChallengeConfig::default()
            },
            ddos: DdosConfig {
                client_rate: self.ddos_client_rate,
                client_burst: self.ddos_client_burst,
                website_rate: self.ddos_website_rate,
                website_burst: self.ddos_website_burst,
                strict_divisor: self.ddos_strict_divisor,
                reserved_percent: self.ddos_reserved_percent,
                ..DdosConfig::default()
            },
            crawlers: CrawlerConfig {
                lists: self.crawler_lists.clone(),
                networks: self.crawler_networks.clone(),
                refresh: Duration::from_secs(self.crawler_refresh_seconds),
                reverse_dns: ReverseDnsConfig {
                    servers: self.dns_servers.clone(),
                    ..ReverseDnsConfig::default()
                },
            },
            cache: CacheConfig {
                memory_bytes: self.cache_memory_bytes,
                max_object_bytes: self.cache_max_object_bytes,
            },
            fallback_certificate: self.fallback_cert.clone().zip(self.fallback_key.clone()),
            geoip_databases: self.geoip_databases.clone(),
        }
    }
}

pub fn run(args: ServeArgs, registry: Arc<Registry>, stderr: BatchedWriter) -> Result<()> {
    let file = args
        .config
        .clone()
        .or_else(|| Some(PathBuf::from(crate::config::DEFAULT_PATH)).filter(|path| path.exists()));
    if let Some(path) = file {
        tracing::info!(file = %path.display(), "options from the configuration file");
    }
    args.check()?;
    crate::log_level::set(args.log_level.as_deref()).map_err(anyhow::Error::msg)?;
    let (access_log, flush_access_log) = args.data_plane.access_log(&stderr)?;
    let mut config = args.config(access_log);
    config.ruleset_trusted_keys = TrustedKeys::read(&args.ruleset_trusted_keys)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            // Taken before anything listens: a SIGHUP from then on is a reload, never
            // the default end of the process.
            let mut hangups = Box::pin(hangups());
            // The options as they are before anything listens (a file changed after
            // that is a reload's to apply), to tell a reload what changed.
            let mut running = Running {
                values: crate::serve_options_now()
                    .map(|(_, values)| values)
                    .unwrap_or_default(),
                flush_access_log,
                stderr,
            };
            let server = server::Server::start(config, registry).await?;
            let reloads = server.reload_requests();
            let shutdown = shutdown_signal();
            tokio::pin!(shutdown);
            loop {
                tokio::select! {
                    _ = &mut shutdown => break,
                    Some(()) = hangups.next() => reload(&server, &mut running).await,
                    _ = reloads.notified() => reload(&server, &mut running).await,
                }
            }
            server.stop().await;
            anyhow::Ok(())
        })?;
    Ok(())
}

impl ServeArgs {
    /// The settings a running gateway takes on a reload, with the access log to write.
    pub fn live_settings(&self, access_log: AccessLog) -> server::LiveSettings {
        let gateway = self
            .data_plane
            .config(self.trusted_proxies.clone(), access_log);
        server::LiveSettings {
            limits: gateway.limits,
            trusted_proxies: gateway.trusted_proxies,
            origin_allow: self.data_plane.origin_allow_networks.clone(),
            origin_deny: self.data_plane.origin_deny_networks.clone(),
            challenge: gateway.challenge,
            ddos: gateway.ddos,
            crawlers: gateway.crawlers,
            access_log: gateway.access_log,
            api_hosts: self.api_hosts.clone(),
            api_certificate_files: self.api_cert.clone().zip(self.api_key.clone()),
            geoip_databases: gateway.geoip_databases,
        }
    }

    /// What the options require of each other beyond what the command line checks (a
    /// configuration file's values are not checked by it).
    pub fn check(&self) -> Result<()> {
        let pairs = [
            (
                "api-cert",
                "api-key",
                self.api_cert.is_some(),
                self.api_key.is_some(),
            ),
            (
                "fallback-cert",
                "fallback-key",
                self.data_plane.fallback_cert.is_some(),
                self.data_plane.fallback_key.is_some(),
            ),
        ];
        for (first, second, has_first, has_second) in pairs {
            if has_first != has_second {
                anyhow::bail!("--{first} and --{second} go together: give both or neither");
            }
        }
        crate::log_level::filter(self.log_level.as_deref()).map_err(anyhow::Error::msg)?;
        self.store.check()?;
        if self.no_api_listener && self.api_hosts.is_empty() {
            anyhow::bail!("--no-api-listener without --api-host leaves the API unreachable");
        }
        self.dashboard_url()?;
        Ok(())
    }

    /// --dashboard-url checked (an absolute http or https address, no query), or the
    /// first --api-host's.
    fn dashboard_url(&self) -> Result<Option<String>> {
        let Some(text) = &self.dashboard_url else {
            return Ok(self.api_hosts.first().map(|host| format!("https://{host}")));
        };
        let url = url::Url::parse(text)
            .map_err(|e| anyhow::anyhow!("--dashboard-url `{text}` is not an address: {e}"))?;
        if !matches!(url.scheme(), "https" | "http")
            || url.host().is_none()
            || url.query().is_some()
            || url.fragment().is_some()
        {
            anyhow::bail!(
                "--dashboard-url `{text}` must be an http or https address without a query, \
                 as in https://dashboard.example"
            );
        }
        Ok(Some(url.as_str().trim_end_matches('/').to_owned()))
    }

    /// The server's configuration; what follows from the rest (the origin policy's
    /// own addresses, the API's DNS and ACME switches) the server adds itself.
    fn config(&self, access_log: AccessLog) -> ServerConfig {
        let mut gateway = self
            .data_plane
            .config(self.trusted_proxies.clone(), access_log);
        gateway.origins.policy = OriginPolicy {
            allow: self.data_plane.origin_allow_networks.clone(),
            deny: self.data_plane.origin_deny_networks.clone(),
            ..OriginPolicy::default()
        };
        ServerConfig {
            store: self.store.config(),
            http_listen: self.http_listen,
            https_listen: self.https_listen,
            api_listen: (!self.no_api_listener).then_some(self.api_listen),
            api_hosts: self.api_hosts.clone(),
            api_certificate_files: self.api_cert.clone().zip(self.api_key.clone()),
            admin_listen: self.admin_listen,
            metrics_listen: self.metrics_listen.clone(),
            statistics_flush: Duration::from_millis(self.statistics_flush_ms),
            health_store_unreachable_after: Duration::from_secs(
                self.health_store_unreachable_seconds,
            ),
            // Operator commands go through the admin listener while this gateway runs:
            // all of them on the embedded store (one process at a time), `reload` on
            // either.
            operator_token_file: Some(self.store.data_dir.join(crate::store::OPERATOR_TOKEN_FILE)),
            threads: self.data_plane.threads,
            http3: !self.data_plane.no_http3,
            rulesets_dir: Some(self.rulesets_dir.clone()),
            ruleset_trusted_keys: TrustedKeys::default(),
            gateway,
            api: ApiConfig {
                rate_per_second: self.api_rate,
                rate_burst: self.api_burst,
                failed_keys_per_minute: self.api_failed_keys_per_minute,
                failed_keys_burst: self.api_failed_keys_burst,
                quotas: PartnerQuotas {
                    users: self.max_users_per_partner.get() as usize,
                    websites: self.max_websites_per_partner.get() as usize,
                },
                issuance: IssuanceLimits {
                    per_website_per_day: self.provisioning.acme_orders_per_website_per_day,
                    per_partner_per_hour: self.provisioning.acme_orders_per_partner_per_hour,
                    per_user_key_per_hour: self.provisioning.acme_orders_per_user_key_per_hour,
                },
                dashboard_url: self.dashboard_url().unwrap_or_default(),
                ..ApiConfig::default()
            },
            webhooks: self.webhooks.config(),
            provisioning: ProvisioningConfig {
                public_addresses: self.provisioning.public_addresses.clone(),
                dns_servers: self.data_plane.dns_servers.clone(),
                check_every: Duration::from_millis(self.provisioning.setup_check_ms.max(10)),
                dns_wait: Duration::from_secs(self.provisioning.dns_wait_seconds),
                issuance: IssuanceLimits {
                    per_website_per_day: self.provisioning.acme_orders_per_website_per_day,
                    per_partner_per_hour: self.provisioning.acme_orders_per_partner_per_hour,
                    per_user_key_per_hour: self.provisioning.acme_orders_per_user_key_per_hour,
                },
            },
            acme: self.provisioning.acme(),
            mounted: Vec::new(),
        }
    }
}

/// The options a reload applies to a running gateway; any other changed option is
/// named in the log as needing a restart.
const LIVE_OPTIONS: [&str; 29] = [
    "header-read-timeout",
    "idle-timeout",
    "max-header-bytes",
    "max-headers",
    "drain-timeout",
    "trusted-proxy",
    "origin-allow-network",
    "origin-deny-network",
    "challenge-difficulty",
    "challenge-pass-seconds",
    "challenge-attack-extra-bits",
    "challenge-wait-seconds",
    "challenge-waited-pass-seconds",
    "challenge-waits-per-hour",
    "ddos-client-rate",
    "ddos-client-burst",
    "ddos-website-rate",
    "ddos-website-burst",
    "ddos-strict-divisor",
    "ddos-reserved-percent",
    "crawler-list",
    "crawler-networks",
    "crawler-refresh-seconds",
    "log-level",
    "access-log",
    "api-host",
    "api-cert",
    "api-key",
    "geoip-db",
];

/// What `serve` keeps between reloads.
struct Running {
    /// The options' values in force, by name.
    values: std::collections::BTreeMap<String, Vec<String>>,
    /// The access log file's writer, flushed when replaced.
    flush_access_log: Option<FlushOnDrop>,
    /// The diagnostic log's writer (the access log's too, with `stderr`).
    stderr: BatchedWriter,
}

/// Reads the configuration again (the file, and this process's flags and environment)
/// and applies what may change while running; a refused configuration changes nothing.
/// An access log file is opened again (after `logrotate` moved it, say).
async fn reload(server: &server::Server, running: &mut Running) {
    let refused = |error: anyhow::Error| {
        tracing::warn!(reason = %format!("{error:#}"), "the configuration is refused; the running configuration stays");
    };
    let (args, values) = match crate::serve_options_now() {
        Ok(now) => now,
        Err(error) => return refused(error),
    };
    let (access_log, flush_access_log) = match args.data_plane.access_log(&running.stderr) {
        Ok(opened) => opened,
        Err(error) => return refused(error),
    };
    let changed: Vec<String> = values
        .keys()
        .chain(running.values.keys())
        .filter(|key| values.get(*key) != running.values.get(*key))
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let (live, restart): (Vec<String>, Vec<String>) = changed
        .into_iter()
        .partition(|key| LIVE_OPTIONS.contains(&key.as_str()));
    if let Err(error) = server.reload(args.live_settings(access_log)).await {
        return refused(error.into());
    }
    // Checked with the rest of the options: it cannot fail here.
    if let Err(reason) = crate::log_level::set(args.log_level.as_deref()) {
        tracing::warn!(%reason, "the log filter stays");
    }
    // The old file's last lines are written out as its writer goes.
    running.flush_access_log = flush_access_log;
    if !restart.is_empty() {
        tracing::warn!(options = ?restart, "changed, but not applied until a restart");
    }
    tracing::info!(changed = ?live, "configuration reloaded");
    tracing::debug!(options = ?crate::config::redacted(&values), "the options in force");
    // What needs a restart keeps its running value, so the next reload names it again.
    for (key, value) in values {
        if !restart.contains(&key) {
            running.values.insert(key, value);
        }
    }
}

/// SIGHUP, each time it comes (never, where there is no such signal).
fn hangups() -> impl futures_util::Stream<Item = ()> {
    #[cfg(unix)]
    {
        let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        futures_util::stream::unfold(signal, |signal| async move {
            let mut signal = signal?;
            signal.recv().await?;
            Some(((), Some(signal)))
        })
    }
    #[cfg(not(unix))]
    futures_util::stream::pending()
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => return interrupt.await.unwrap_or(()),
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await.unwrap_or(());
}
