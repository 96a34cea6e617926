//! The data plane: what real visitors of a protected website go through.
//!
//! Phases of one request (see ARCHITECTURE.md, "The path of one request"):
//! 1. [`listener`]: accept; from a trusted proxy read one PROXY v2 header
//!    ([`proxy_protocol`]); on HTTPS read the ClientHello for JA4 ([`ja4`]) and
//!    terminate TLS with the website's certificate ([`tls`]); serve HTTP/1.1 or HTTP/2
//!    within the connection limits.
//! 2. [`phases`]: find the website by host in the store follower's snapshot; answer the
//!    challenge form; apply `force_https`, `force_subdomains_redirect` and the
//!    `ddos_protection` limits ([`limits`]); when `bot_protection` is on, build the
//!    request facts (TLS, [`crawlers`] verification, [`challenge`] pass, [`behaviour`]
//!    counters), let the rule engine decide, and act (in `monitoring_mode`, record the
//!    would-be action and pass the request on).
//! 3. [`cache`]: answer from the response cache when the website caches and a fresh
//!    copy is held; otherwise [`upstream`]: forward to an origin with the forwarding
//!    headers ([`forwarding`]), streaming both ways, WebSocket included.
//! 4. Record: the [`access_log`] line and [`metrics`].

pub mod access_log;
pub mod admin;
pub mod behaviour;
pub mod cache;
pub mod challenge;
pub mod connection;
pub mod crawlers;
pub mod custom_rules;
pub mod forwarding;
pub mod geoip;
pub mod host_name;
pub mod http3;
pub mod http3_frames;
pub mod io;
pub mod ja4;
pub mod limits;
pub mod listener;
pub mod metrics;
pub mod outcome;
pub mod pages;
pub mod phases;
pub mod proxy_protocol;
pub mod quic_hello;
pub mod service;
pub mod shadow;
pub mod tls;
pub mod traffic;
pub mod upstream;

use crate::rules::Registry;
use botgate_store::Follower;
use connection::ConnectionLimits;
use service::BoxFuture;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where an ACME CA asks for HTTP-01 answers (RFC 8555 §8.3).
pub const ACME_HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";

/// Everything the data plane is configured with.
#[derive(Debug, Clone, Default)]
pub struct GatewayConfig {
    /// Peers whose connections start with a PROXY v2 header (the cluster's HAProxy).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    pub limits: ConnectionLimits,
    pub origins: upstream::OriginConfig,
    pub challenge: challenge::ChallengeConfig,
    pub ddos: limits::DdosConfig,
    pub crawlers: crawlers::CrawlerConfig,
    pub cache: cache::CacheConfig,
    /// The UDP port HTTP/3 is advertised on (`Alt-Svc`) for websites that set
    /// `enable_http3`; `None` when the gateway serves no HTTP/3.
    pub http3_port: Option<u16>,
    /// The certificate and key (PEM files) for names no website covers; a self-signed
    /// one when not given.
    pub fallback_certificate: Option<(PathBuf, PathBuf)>,
    /// Where the access log goes (off by default).
    pub access_log: access_log::AccessLog,
    /// MaxMind DB files giving clients' countries and ASNs to custom rules (none: both
    /// unknown).
    pub geoip_databases: Vec<PathBuf>,
}

/// The shared state of every connection and request.
pub struct Gateway {
    pub config: GatewayConfig,
    pub websites: Arc<Follower>,
    pub rulesets: Arc<Registry>,
    pub challenges: challenge::Challenges,
    pub ddos: limits::DdosLimits,
    pub behaviour: behaviour::Behaviour,
    pub crawlers: crawlers::Crawlers,
    pub origins: Arc<upstream::Origins>,
    pub cache: Arc<cache::ResponseCache>,
    /// JA4 of QUIC clients, from their Initial packets, until their connection starts.
    pub quic_hellos: Arc<quic_hello::ClientHellos>,
    /// The `Alt-Svc` value advertising HTTP/3, made once from `config.http3_port`.
    pub alt_svc: Option<http::HeaderValue>,
    pub metrics: metrics::Metrics,
    /// ACME challenge answers (from the store), for whichever gateway the CA reaches.
    pub acme_answers: Option<Arc<dyn AcmeAnswers>>,
    /// The challenge tokens answered already, and the waits each client had.
    pub ledger: Arc<dyn ChallengeLedger>,
    /// The `Via` entry forwarded requests carry, and by which a request that comes
    /// back (an origin that leads to the gateway) is known.
    pub via: forwarding::Via,
    /// The certificates of the host names mounted services answer (the API's).
    pub host_certificates: Arc<tls::HostCertificates>,
    /// Each website's traffic since the last flush to the store (the dashboard's).
    pub traffic: traffic::TrafficRecorder,
    /// Clients' countries and ASNs, for custom rules.
    pub geoip: geoip::GeoIp,
    /// Pushed versions evaluated beside the active ones, never acted on.
    pub shadows: Arc<shadow::Shadows>,
}

/// Where the data plane finds the answers to ACME challenges while an issuance (by
/// this or another gateway) waits for the CA to check them.
pub trait AcmeAnswers: Send + Sync + 'static {
    /// The key authorization for an HTTP-01 `token`.
    fn http01<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Option<String>>;
    /// The TLS-ALPN-01 challenge certificate for `domain`.
    fn tls_alpn01<'a>(
        &'a self,
        domain: &'a str,
    ) -> BoxFuture<'a, Option<Arc<rustls::sign::CertifiedKey>>>;
}

/// What challenges remember for every gateway of a cluster
/// ([`challenge::StoreLedger`]): the tokens spent, so that one token gives at most one
/// pass, and the waited passes each client had.
pub trait ChallengeLedger: Send + Sync + 'static {
    /// Marks `token` spent until `until_ms` (ms since the Unix epoch); whether this call
    /// spent it (false: it was spent already).
    fn spend<'a>(&'a self, token: &'a str, until_ms: u64) -> BoxFuture<'a, bool>;
    /// Counts one waited pass for `client` (its IPv4 address or IPv6 /64) on the website
    /// `domain` in a window that ends at `until_ms` (set by the window's first count);
    /// the count with this one.
    fn count_wait<'a>(
        &'a self,
        domain: &'a str,
        client: std::net::IpAddr,
        until_ms: u64,
    ) -> BoxFuture<'a, u64>;
}

/// The CA's TLS-ALPN-01 handshakes are answered for websites' names and mounted names
/// awaiting a certificate only (as the snapshot says: any other name costs no store
/// read), and only with ACME on.
impl listener::AlpnChallenges for Gateway {
    fn may_wait(&self, name: &str) -> bool {
        // A mounted name is never a website's, whatever the store says.
        self.acme_answers.is_some()
            && match self.host_certificates.is_reserved(name) {
                true => self.host_certificates.awaits(name),
                false => self.awaits_acme_certificate(name),
            }
    }

    fn certificate<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Option<Arc<rustls::sign::CertifiedKey>>> {
        match &self.acme_answers {
            Some(answers) => answers.tls_alpn01(name),
            None => Box::pin(async { None }),
        }
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error(transparent)]
    Certificate(#[from] tls::CertificateError),
    #[error(transparent)]
    Crawlers(#[from] crawlers::CrawlerListError),
    #[error(transparent)]
    Quic(#[from] http3::QuicError),
    #[error(transparent)]
    GeoIp(#[from] geoip::GeoIpError),
}

impl Gateway {
    /// A gateway over the websites `websites` follows, deciding with `rulesets`, its
    /// challenge passes signed with `challenge_secret` (the store's shared secret).
    pub fn new(
        config: GatewayConfig,
        websites: Arc<Follower>,
        rulesets: Arc<Registry>,
        challenge_secret: Vec<u8>,
        acme_answers: Option<Arc<dyn AcmeAnswers>>,
        ledger: Arc<dyn ChallengeLedger>,
    ) -> Result<Arc<Gateway>, StartError> {
        let provider = tls::provider();
        let cache = Arc::new(cache::ResponseCache::new(&config.cache));
        let challenges = challenge::Challenges::new(challenge_secret, config.challenge.clone());
        let geoip = geoip::GeoIp::open(&config.geoip_databases)?;
        let gateway = Gateway {
            via: forwarding::Via::new(challenges.pseudonym()),
            challenges,
            ddos: limits::DdosLimits::new(config.ddos.clone()),
            behaviour: behaviour::Behaviour::new(100_000, Duration::from_secs(60)),
            crawlers: crawlers::Crawlers::new(config.crawlers.clone())?,
            origins: upstream::Origins::new(config.origins.clone(), provider)?,
            metrics: metrics::Metrics::new(rulesets.clone(), cache.clone()),
            cache,
            quic_hellos: Arc::default(),
            alt_svc: config.http3_port.and_then(|port| {
                http::HeaderValue::from_str(&format!("h3=\":{port}\"; ma=86400")).ok()
            }),
            config,
            websites,
            rulesets,
            acme_answers,
            ledger,
            host_certificates: Arc::default(),
            traffic: traffic::TrafficRecorder::default(),
            geoip,
            shadows: Arc::default(),
        };
        Ok(Arc::new(gateway))
    }

    /// The TLS configuration of the HTTPS listener, and the QUIC one of HTTP/3 over
    /// the same certificates.
    pub fn tls_configs(
        &self,
    ) -> Result<(Arc<rustls::ServerConfig>, quinn::ServerConfig), StartError> {
        let provider = tls::provider();
        let files = self
            .config
            .fallback_certificate
            .as_ref()
            .map(|(c, k)| (c.as_path(), k.as_path()));
        let fallback = tls::fallback_key(files, &provider)?;
        let resolver = Arc::new(tls::SniResolver::new(
            self.host_certificates.clone(),
            self.websites.clone(),
            provider.clone(),
            fallback,
        ));
        let tls = tls::server_config(resolver, provider)?;
        let quic = http3::server_config(&tls, &self.config.limits)?;
        Ok((Arc::new(tls), quic))
    }

    /// Periodic upkeep: forget idle rate-limit state, read the crawler lists again (at
    /// the period in force, which a reload may change). Runs until the gateway is
    /// dropped.
    pub fn spawn_housekeeping(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let reconfigurations = self.crawlers.reconfigurations();
        tokio::spawn(async move {
            loop {
                let refresh = match weak.upgrade() {
                    Some(gateway) => gateway.crawlers.refresh_every(),
                    None => break,
                };
                // Zero: never refreshed (looked at again daily). A reload, which reads
                // the lists itself, starts the wait anew at its period.
                let refreshing = !refresh.is_zero();
                let wait = match refreshing {
                    true => refresh,
                    false => Duration::from_secs(86_400),
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = reconfigurations.notified() => continue,
                }
                let Some(gateway) = weak.upgrade() else { break };
                if !refreshing {
                    continue;
                }
                let refreshed =
                    tokio::task::spawn_blocking(move || gateway.crawlers.refresh()).await;
                if let Err(err) = refreshed {
                    tracing::warn!(%err, "refreshing the crawler lists failed");
                }
            }
        });
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            loop {
                tick.tick().await;
                let Some(gateway) = weak.upgrade() else { break };
                gateway.ddos.housekeeping();
            }
        });
    }
}
