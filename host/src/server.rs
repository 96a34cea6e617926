//! The whole gateway in one call: the store and its follower, the data plane's HTTP and
//! HTTPS listeners (one thread per core), HTTP/3, the management API, the admin
//! listener, the provisioner, the webhook outbox and the rule components' watcher, from
//! one [`ServerConfig`]; `botgate serve` parses its options into one and calls
//! [`serve`], and tests start gateways in process with [`Server::start`].

use crate::api_host::{ApiHostError, ApiHosts, ApiHostsParts};
use crate::fleet::FleetSource;
use crate::fleet::signing::TrustedKeys;
use crate::gateway::access_log::AccessLog;
use crate::gateway::challenge::ChallengeConfig;
use crate::gateway::challenge::{SECRET_NAME, StoreLedger};
use crate::gateway::connection::Shutdown;
use crate::gateway::connection::{ConnectionLimits, Live};
use crate::gateway::crawlers::reverse_dns::ResolverError;
use crate::gateway::crawlers::{CrawlerConfig, CrawlerListError, Crawlers};
use crate::gateway::geoip::GeoDatabases;
use crate::gateway::http3::{self, Http3};
use crate::gateway::limits::DdosConfig;
use crate::gateway::listener::{self, AlpnChallenges, Listening};
use crate::gateway::service::{self, MountError, MountedService, Mounts, Services};
use crate::gateway::{AcmeAnswers, Gateway, GatewayConfig, StartError, admin, connection, tls};
use crate::provisioning::acme::{AcmeConfig, StoreAnswers};
use crate::provisioning::{Provisioner, ProvisioningConfig};
use crate::report::Report;
use crate::rules::{DirectorySource, Registry, RulesetSource, Watcher};
use botgate_api::{Api, ApiConfig, RuleComponents};
use botgate_model::addresses::OriginPolicy;
use botgate_store::{AnyStore, Follower, RulesetStore, Store, StoreConfig, StoreError};
use botgate_webhooks::{Outbox, WebhookConfig};
use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// Everything one gateway is started with.
pub struct ServerConfig {
    pub store: StoreConfig,
    /// Visitors' plain HTTP (port 0: any free port, see [`Server::addresses`]).
    pub http_listen: SocketAddr,
    /// Visitors' HTTPS, and HTTP/3 on the same port over UDP.
    pub https_listen: SocketAddr,
    /// The management API over plain HTTP (loopback, for local administration); off
    /// when `None`.
    pub api_listen: Option<SocketAddr>,
    /// Host names the management API answers on the HTTPS listener (plain HTTP sends
    /// them to HTTPS).
    pub api_hosts: Vec<String>,
    /// Their certificate: PEM files (chain, key), read again when they change; from
    /// ACME when `None`.
    pub api_certificate_files: Option<(PathBuf, PathBuf)>,
    /// Metrics, `/health` and, with the operator's token, the operator's commands.
    pub admin_listen: SocketAddr,
    /// More listeners for `/metrics` and `/health` only (a cluster's private network:
    /// Prometheus, `botgate cluster check`).
    pub metrics_listen: Vec<SocketAddr>,
    /// `/health` answers 503 once the store has not answered for this long.
    pub health_store_unreachable_after: Duration,
    /// How often each website's statistics go to the store (the dashboard's).
    pub statistics_flush: Duration,
    /// Where the operator's token is written at start (readable by this user only):
    /// with it, `botgate partner` and `botgate status` work through the admin listener
    /// while this gateway holds the store. No operator commands when `None`.
    pub operator_token_file: Option<PathBuf>,
    /// Data-plane threads; one per core when `None`.
    pub threads: Option<NonZeroUsize>,
    /// Whether HTTP/3 is served. `gateway.http3_port`, when `None`, then becomes the
    /// HTTPS port bound.
    pub http3: bool,
    /// The directory of rule components, watched and hot-reloaded into the registry.
    pub rulesets_dir: Option<PathBuf>,
    /// The keys a pushed component must be signed with to be activated and loaded.
    pub ruleset_trusted_keys: TrustedKeys,
    /// The data plane. Its origin policy is completed here with the public addresses
    /// and every listener bound, which origins may never be.
    pub gateway: GatewayConfig,
    /// The management API. Its origin policy, DNS check and ACME switch are set here
    /// from the rest of this configuration.
    pub api: ApiConfig,
    pub webhooks: WebhookConfig,
    pub provisioning: ProvisioningConfig,
    /// Certificates for `certs_issuer: acme` from this directory; off when `None`.
    pub acme: Option<AcmeConfig>,
    /// Services on the HTTPS listener by host name (the management API, the
    /// dashboard); every other name is the data plane's.
    pub mounted: Vec<(String, Arc<dyn MountedService>)>,
}

/// Where a started gateway listens.
#[derive(Debug, Clone)]
pub struct Addresses {
    pub http: SocketAddr,
    pub https: SocketAddr,
    /// HTTP/3's UDP address, when served.
    pub http3: Option<SocketAddr>,
    /// The management API's plain-HTTP listener, when it is on.
    pub api: Option<SocketAddr>,
    pub admin: SocketAddr,
}

/// Why a gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("opening the store {store}")]
    Store {
        store: String,
        #[source]
        source: StoreError,
    },
    #[error("loading the websites from the store")]
    Websites(#[source] StoreError),
    #[error("reading the challenge secret from the store")]
    Secret(#[source] StoreError),
    #[error("no randomness for the challenge secret")]
    Randomness(#[source] getrandom::Error),
    #[error("binding the {what} listener to {address}")]
    Bind {
        what: &'static str,
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "binding the HTTP/3 (QUIC, UDP) listener to {address}; serve without HTTP/3 to do without it"
    )]
    BindQuic {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("watching the rule components in {dir}")]
    Watch {
        dir: PathBuf,
        #[source]
        source: notify::Error,
    },
    #[error("the first load of the rule components failed")]
    FirstLoad(#[source] tokio::task::JoinError),
    #[error("mounting a service")]
    Mount(#[from] MountError),
    #[error("the management API's host names")]
    ApiHost(#[source] ApiHostError),
    #[error("writing the operator token to {path}")]
    OperatorToken {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the data plane")]
    Gateway(#[from] StartError),
    #[error("the DNS resolver of the provisioner")]
    Resolver(#[from] ResolverError),
    #[error("starting a data-plane thread")]
    Thread(#[source] std::io::Error),
}

/// A running gateway. [`Server::stop`] drains it; dropping it instead stops accepting
/// and cuts open connections at once, without a drain.
pub struct Server {
    addresses: Addresses,
    gateway: Arc<Gateway>,
    store: Arc<AnyStore>,
    stop: watch::Sender<bool>,
    tracker: TaskTracker,
    /// Ends when every data-plane thread stopped accepting.
    listeners: Vec<JoinHandle<()>>,
    /// Tells the data-plane threads to give up on connections still open.
    abandon: Vec<oneshot::Sender<()>>,
    /// Closed after the drain, which ends the HTTP/3 connections still open.
    quic: Option<quinn::Endpoint>,
    threads: Vec<std::thread::JoinHandle<()>>,
    services: Vec<JoinHandle<()>>,
    watcher: Option<Watcher>,
    /// Removed at stop: a stale token sends no command to another process.
    operator_token_file: Option<PathBuf>,
    /// What a reload changes while connections run.
    limits: Live<ConnectionLimits>,
    trusted_proxies: Live<Vec<ipnet::IpNet>>,
    api_hosts: ApiHosts<AnyStore>,
    /// The API's origin policy, the gateway's own.
    api_origins: botgate_api::LiveOriginPolicy,
    mounts: Mounts,
    /// Reloads asked for through the admin listener.
    reload_requests: Arc<tokio::sync::Notify>,
}

/// The settings a running gateway takes without a restart.
#[derive(Debug, Clone)]
pub struct LiveSettings {
    /// Connection limits, for connections that start from now on.
    pub limits: ConnectionLimits,
    /// The peers that send PROXY headers, for connections that start from now on.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The operator's origin networks (`allow`, `deny`); the gateway's own addresses
    /// stay refused.
    pub origin_allow: Vec<ipnet::IpNet>,
    pub origin_deny: Vec<ipnet::IpNet>,
    /// For challenges issued and passes earned from now on.
    pub challenge: ChallengeConfig,
    /// The `ddos_protection` limits; when they change, the counts start afresh.
    pub ddos: DdosConfig,
    /// Read again when changed; the reverse-DNS servers need a restart.
    pub crawlers: CrawlerConfig,
    /// Where the next access lines go.
    pub access_log: AccessLog,
    /// The management API's host names on the HTTPS listener, and their certificate
    /// files (from ACME when `None`).
    pub api_hosts: Vec<String>,
    pub api_certificate_files: Option<(PathBuf, PathBuf)>,
    /// Read again at every reload (`geoipupdate` replaces the files in place).
    pub geoip_databases: Vec<PathBuf>,
}

/// Why a reload was refused; nothing of it was applied.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Crawlers(#[from] CrawlerListError),
    #[error("reading the crawler lists stopped")]
    CrawlersRead(#[source] tokio::task::JoinError),
    #[error("api-host")]
    ApiHost(#[from] ApiHostError),
    #[error(
        "without api-host the management API is unreachable: this gateway runs with no API listener"
    )]
    ApiUnreachable,
    #[error(transparent)]
    GeoIp(#[from] crate::gateway::geoip::GeoIpError),
    #[error("reading the GeoIP databases stopped")]
    GeoIpRead(#[source] tokio::task::JoinError),
}

/// Warns of a website that claims a mounted name (the mounted service answers it).
fn warn_of_claimed_mounts(mounts: &Mounts, gateway: &Gateway) {
    let index = gateway.websites.current();
    for host in mounts.hosts() {
        if index.by_host(&host).is_some() {
            tracing::warn!(%host, "a website claims a mounted host name; the mounted service answers it");
        }
    }
}

/// Starts a gateway with `config`, deciding with `rulesets`, and serves until
/// `shutdown` resolves; then drains connections (for at most the configured drain
/// timeout) and stops everything it started. Call it on a multi-thread tokio runtime.
pub async fn serve(
    config: ServerConfig,
    rulesets: Arc<Registry>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let server = Server::start(config, rulesets).await?;
    shutdown.await;
    server.stop().await;
    Ok(())
}

impl Server {
    /// Opens the store, binds every listener and starts serving; returns once all of
    /// it listens. Call it on a multi-thread tokio runtime.
    pub async fn start(
        mut config: ServerConfig,
        rulesets: Arc<Registry>,
    ) -> Result<Server, ServeError> {
        let store = AnyStore::open(&config.store)
            .await
            .map_err(|source| ServeError::Store {
                store: config.store.to_string(),
                source,
            })?;
        let store = Arc::new(store);
        // The rule components: the store's active versions, then the directory's files.
        let fleet = Arc::new(FleetSource::new(
            config.rulesets_dir.as_ref().map(DirectorySource::new),
            config.ruleset_trusted_keys.clone(),
        ));
        let seen = match store.rulesets_revision().await {
            Ok(revision) => match fleet.refresh(store.as_ref()).await {
                Ok(_) => {
                    rulesets.set_fail_closed(fleet.fail_closed());
                    rulesets.set_held_back(fleet.held_back());
                    Some(revision)
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot read the pushed rule sets; starting with the directory's");
                    None
                }
            },
            Err(error) => {
                tracing::warn!(error = %Report(&error), "cannot read the pushed rule sets; starting with the directory's");
                None
            }
        };
        let threads = config
            .threads
            .or_else(|| std::thread::available_parallelism().ok())
            .map_or(1, NonZeroUsize::get);
        // Each data-plane thread's first call finds a warm instance of every component.
        rulesets.sandbox().set_warm_instances(threads);
        tracing::info!(source = %fleet.describe(), "loading rule components");
        // The first sync compiles the components: off the async threads.
        let registry = rulesets.clone();
        let watcher = match &config.rulesets_dir {
            Some(dir) => {
                let (dir, source) = (dir.clone(), fleet.clone());
                let started = tokio::task::spawn_blocking(move || {
                    Watcher::start_with(registry, &dir, source)
                })
                .await
                .map_err(ServeError::FirstLoad)?;
                let watcher = started.map_err(|source| ServeError::Watch {
                    dir: config.rulesets_dir.clone().unwrap_or_default(),
                    source,
                })?;
                Some(watcher)
            }
            None => {
                let source = fleet.clone();
                tokio::task::spawn_blocking(move || registry.sync(source.as_ref()))
                    .await
                    .map_err(ServeError::FirstLoad)?;
                None
            }
        };
        let websites = Arc::new(
            Follower::start(store.clone(), Duration::from_secs(5))
                .await
                .map_err(ServeError::Websites)?,
        );
        let secret = challenge_secret(store.as_ref()).await?;

        let http = bind_shared(config.http_listen, "HTTP", threads)?;
        let https = bind_shared(config.https_listen, "HTTPS", threads)?;
        let admin_listener = bind(config.admin_listen, "admin").await?;
        let mut metrics_listeners = Vec::new();
        for address in &config.metrics_listen {
            metrics_listeners.push(bind(*address, "metrics").await?);
        }
        let api_listener = match config.api_listen {
            Some(address) => Some(bind(address, "management API").await?),
            None => None,
        };
        let addresses = Addresses {
            http: bound_address(&http, config.http_listen, "HTTP")?,
            https: bound_address(&https, config.https_listen, "HTTPS")?,
            http3: None,
            api: api_listener
                .as_ref()
                .and_then(|listener| listener.local_addr().ok())
                .or(config.api_listen),
            admin: admin_listener.local_addr().unwrap_or(config.admin_listen),
        };

        // What the rest of the configuration implies.
        let policy = &mut config.gateway.origins.policy;
        policy
            .gateway
            .extend(config.provisioning.public_addresses.iter().copied());
        policy.listeners.extend([
            config.http_listen,
            config.https_listen,
            config.admin_listen,
            addresses.http,
            addresses.https,
            addresses.admin,
        ]);
        policy
            .listeners
            .extend(config.metrics_listen.iter().copied());
        policy.listeners.extend(
            metrics_listeners
                .iter()
                .filter_map(|listener| listener.local_addr().ok()),
        );
        policy
            .listeners
            .extend(config.api_listen.into_iter().chain(addresses.api));
        config.api.origins.set(policy.clone());
        let api_origins = config.api.origins.clone();
        config.api.dns_check = !config.provisioning.public_addresses.is_empty();
        config.api.acme = config.acme.is_some();
        config.gateway.http3_port = match config.http3 {
            true => config.gateway.http3_port.or(Some(addresses.https.port())),
            false => None,
        };

        let answers: Option<Arc<dyn AcmeAnswers>> = config.acme.as_ref().map(|_| {
            Arc::new(StoreAnswers::new(store.clone(), tls::provider())) as Arc<dyn AcmeAnswers>
        });
        let ledger = Arc::new(StoreLedger::new(store.clone()));
        let gateway_config = config.gateway.clone();
        let gateway = Gateway::new(
            gateway_config,
            websites.clone(),
            rulesets.clone(),
            secret,
            answers,
            ledger,
        )?;
        gateway.spawn_housekeeping();
        let (tls, quic) = gateway.tls_configs()?;
        let quic_endpoint = match config.http3 {
            false => None,
            true => {
                let endpoint = http3::endpoint(gateway.quic_hellos.clone(), quic, addresses.https)
                    .map_err(|source| ServeError::BindQuic {
                        address: addresses.https,
                        source,
                    })?;
                let address = endpoint.local_addr().unwrap_or(addresses.https);
                tracing::info!(%address, "HTTP/3 listening");
                Some(endpoint)
            }
        };
        let addresses = Addresses {
            http3: quic_endpoint
                .as_ref()
                .map(|endpoint| endpoint.local_addr().unwrap_or(addresses.https)),
            ..addresses
        };
        tracing::info!(store = %config.store, "serving");

        let (stop, shutdown) = Shutdown::new();
        let tracker = TaskTracker::new();
        let limits = config.gateway.limits.clone();
        let alpn: Option<Arc<dyn AlpnChallenges>> = config
            .acme
            .as_ref()
            .map(|_| gateway.clone() as Arc<dyn AlpnChallenges>);
        // Mounted services answer their names over HTTPS and HTTP/3; plain HTTP sends
        // those names to HTTPS.
        let mounts = Mounts::default();
        let services = Services::new(gateway.clone(), mounts.clone());
        let redirecting = Services::redirecting(gateway.clone(), mounts.clone());
        let mut fixed = Vec::new();
        for (host, service) in config.mounted {
            fixed.push(service::host_name(&host)?);
            mounts.mount(&host, service)?;
        }
        let reserved = config.api.reserved_hosts.clone();
        let components = rulesets.clone();
        let mut api_config = config.api;
        api_config.rule_components =
            RuleComponents::new(move |name| components.current().get(name).is_some());
        let api = Api::new(store.clone(), api_config);
        // The dashboard's pages beside the API, on the same names and listeners.
        let api_router = botgate_api::router(api).merge(botgate_dashboard::router(store.clone()));
        let api_service: Arc<dyn MountedService> = Arc::new(api_router.clone());
        let services = Arc::new(services);
        let live_limits = connection::live(limits.clone());
        let trusted_proxies = connection::live(config.gateway.trusted_proxies.clone());
        let plain = Arc::new(Listening {
            handler: redirecting,
            limits: live_limits.clone(),
            trusted_proxies: trusted_proxies.clone(),
            alpn_challenges: None,
        });
        let secure = Arc::new(Listening {
            handler: services.clone(),
            limits: live_limits.clone(),
            trusted_proxies: trusted_proxies.clone(),
            alpn_challenges: alpn,
        });
        // Built before anything is spawned: their failure leaves nothing running.
        // On the embedded store the token is how partners are managed while this
        // gateway runs; on Redis only `botgate reload` needs it, and SIGHUP does as well.
        let operator_token = match &config.operator_token_file {
            None => None,
            Some(path) => match write_operator_token(path, addresses.admin) {
                Ok(token) => Some(token),
                Err(source) if matches!(config.store, StoreConfig::Redis(_)) => {
                    tracing::warn!(path = %path.display(), error = %source, "no operator token: `botgate reload` cannot reach this gateway (SIGHUP can)");
                    None
                }
                Err(source) => {
                    return Err(ServeError::OperatorToken {
                        path: path.clone(),
                        source,
                    });
                }
            },
        };
        // Removed at stop only when this gateway wrote it.
        let operator_token_file = config
            .operator_token_file
            .clone()
            .filter(|_| operator_token.is_some());
        let api_host_names = ApiHosts::new(ApiHostsParts {
            service: api_service,
            mounts: mounts.clone(),
            reserved,
            fixed,
            certificates: gateway.host_certificates.clone(),
            store: store.clone(),
            acme: config.acme.clone(),
            check_every: config.provisioning.check_every,
            shutdown: shutdown.clone(),
        });
        if !config.api_hosts.is_empty() {
            api_host_names
                .set(&config.api_hosts, config.api_certificate_files.clone())
                .await
                .map_err(ServeError::ApiHost)?;
            tracing::info!(names = ?config.api_hosts, "the management API answers on the HTTPS listener");
        }
        warn_of_claimed_mounts(&mounts, &gateway);
        let provisioner = Provisioner::new(
            store.clone(),
            websites,
            config.provisioning.clone(),
            config.acme.clone(),
        )?;

        let mut listeners = Vec::new();
        let mut abandon = Vec::new();
        let mut thread_handles = Vec::new();
        for (index, (http, https)) in http.into_iter().zip(https).enumerate() {
            let (plain, secure, tls, shutdown, tracker) = (
                plain.clone(),
                secure.clone(),
                tls.clone(),
                shutdown.clone(),
                tracker.clone(),
            );
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(ServeError::Thread)?;
            let (http, https) = {
                let _entered = runtime.enter();
                let from_std = |listener: std::net::TcpListener, what| {
                    let address = listener.local_addr().unwrap_or(addresses.https);
                    TcpListener::from_std(listener).map_err(|source| ServeError::Bind {
                        what,
                        address,
                        source,
                    })
                };
                (from_std(http, "HTTP")?, from_std(https, "HTTPS")?)
            };
            let (stopped, listening) = oneshot::channel::<()>();
            listeners.push(tokio::spawn(async move {
                let _ = listening.await;
            }));
            let (give_up, given_up) = oneshot::channel::<()>();
            abandon.push(give_up);
            let thread = std::thread::Builder::new()
                .name(format!("data-plane-{index}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        tokio::join!(
                            listener::serve(plain, http, None, shutdown.clone(), tracker.clone()),
                            listener::serve(secure, https, Some(tls), shutdown, tracker.clone()),
                        );
                        drop(stopped);
                        // The connections this thread accepted run on its event loop:
                        // it turns until every connection has drained, or until the
                        // drain is given up on (the runtime's end then closes them).
                        tokio::select! {
                            _ = tracker.wait() => {}
                            _ = given_up => {}
                        }
                    })
                })
                .map_err(ServeError::Thread)?;
            thread_handles.push(thread);
        }
        let quic = quic_endpoint.clone();
        if let Some(endpoint) = quic_endpoint {
            let http3 = Arc::new(Http3 {
                handler: services,
                limits: live_limits.clone(),
                hellos: gateway.quic_hellos.clone(),
            });
            listeners.push(tokio::spawn(http3::serve(
                http3,
                endpoint,
                shutdown.clone(),
                tracker.clone(),
            )));
        }

        let mut tasks = Vec::new();
        let reload_requests = Arc::new(tokio::sync::Notify::new());
        let health = admin::HealthConfig {
            backend: config.store.backend(),
            address: config.store.address(),
            unreachable_after: config.health_store_unreachable_after,
        };
        let admin_router = admin::router(
            gateway.clone(),
            health.clone(),
            admin::OperatorAccess {
                store: store.clone(),
                token: operator_token,
                trusted_keys: config.ruleset_trusted_keys.clone(),
                reload: reload_requests.clone(),
            },
        );
        tasks.push(serve_admin(admin_listener, admin_router, &shutdown));
        for listener in metrics_listeners {
            let router = admin::monitoring_router(gateway.clone(), health.clone());
            tasks.push(serve_admin(listener, router, &shutdown));
        }
        match &config.acme {
            Some(acme) => {
                tracing::info!(directory = %acme.directory, challenge = ?acme.challenge, "certificates from ACME")
            }
            None => tracing::info!(
                "ACME is off: websites with certs_issuer acme get the fallback certificate"
            ),
        }
        if config.provisioning.public_addresses.is_empty() {
            tracing::info!("no public address: websites go online without a DNS check");
        }
        tasks.push(tokio::spawn(
            Arc::new(provisioner).run(shutdown.clone().stopped()),
        ));
        tasks.push(tokio::spawn(crate::gateway::traffic::flush_every(
            gateway.clone(),
            store.clone(),
            config.statistics_flush,
            shutdown.clone().stopped(),
        )));
        tasks.push(tokio::spawn(crate::fleet::follow(
            store.clone(),
            rulesets.clone(),
            fleet,
            gateway.shadows.clone(),
            seen,
            shutdown.clone().stopped(),
        )));
        tasks.push(tokio::spawn(crate::gateway::shadow::flush_every(
            gateway.shadows.clone(),
            store.clone(),
            shutdown.clone().stopped(),
        )));
        let outbox = Arc::new(Outbox::new(store.clone(), config.webhooks));
        tasks.push(tokio::spawn(outbox.run(shutdown.clone().stopped())));
        if let Some(api_listener) = api_listener {
            let api_shutdown = shutdown.clone();
            tasks.push(tokio::spawn(async move {
                let served = axum::serve(
                    api_listener,
                    api_router.into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(api_shutdown.stopped())
                .await;
                if let Err(err) = served {
                    tracing::warn!(reason = %Report(&err), "the management API listener failed");
                }
            }));
        }

        Ok(Server {
            addresses,
            gateway,
            store,
            stop,
            tracker,
            listeners,
            abandon,
            quic,
            threads: thread_handles,
            services: tasks,
            watcher,
            operator_token_file,
            limits: live_limits,
            trusted_proxies,
            api_hosts: api_host_names,
            api_origins,
            mounts,
            reload_requests,
        })
    }

    /// Where this gateway listens.
    pub fn addresses(&self) -> &Addresses {
        &self.addresses
    }

    /// The data plane's shared state.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// The store this gateway serves from.
    pub fn store(&self) -> &Arc<AnyStore> {
        &self.store
    }

    /// Applies `settings`: new connections take the new limits and proxies, new origin
    /// connections the new policy, new challenges and requests the rest. What can fail
    /// (reading crawler lists, the API names' certificate) is done first: a refused
    /// reload changes nothing.
    pub async fn reload(&self, settings: LiveSettings) -> Result<(), ReloadError> {
        let gateway = &self.gateway;
        if settings.api_hosts.is_empty() && self.addresses.api.is_none() {
            return Err(ReloadError::ApiUnreachable);
        }
        // Changed sources are read now and must be readable; unchanged ones are read
        // again in the background, as at each refresh (the list in use stays when one
        // cannot be read).
        let crawlers = match gateway.crawlers.configured_with(&settings.crawlers) {
            true => None,
            false => {
                let config = settings.crawlers.clone();
                let read = tokio::task::spawn_blocking(move || Crawlers::read(config))
                    .await
                    .map_err(ReloadError::CrawlersRead)??;
                Some(read)
            }
        };
        let paths = settings.geoip_databases.clone();
        let geoip = tokio::task::spawn_blocking(move || GeoDatabases::read(&paths))
            .await
            .map_err(ReloadError::GeoIpRead)??;
        let api_changed = self
            .api_hosts
            .set(&settings.api_hosts, settings.api_certificate_files)
            .await?;
        // From here nothing fails.
        if api_changed {
            tracing::info!(names = ?settings.api_hosts, "the management API's host names changed");
            warn_of_claimed_mounts(&self.mounts, gateway);
        }
        match crawlers {
            Some(read) => gateway.crawlers.install(read),
            None => {
                let gateway = gateway.clone();
                tokio::task::spawn_blocking(move || gateway.crawlers.refresh());
            }
        }
        self.limits.store(Arc::new(settings.limits));
        self.trusted_proxies
            .store(Arc::new(settings.trusted_proxies));
        let mut policy = OriginPolicy::clone(&gateway.origins.policy());
        policy.allow = settings.origin_allow;
        policy.deny = settings.origin_deny;
        gateway.origins.set_policy(policy.clone());
        self.api_origins.set(policy);
        gateway.challenges.set_config(settings.challenge);
        gateway.ddos.set_config(settings.ddos);
        gateway.config.access_log.replace(&settings.access_log);
        gateway.geoip.install(geoip);
        Ok(())
    }

    /// Notified when a reload is asked for through the admin listener.
    pub fn reload_requests(&self) -> Arc<tokio::sync::Notify> {
        self.reload_requests.clone()
    }

    /// Stops accepting, lets open connections finish for at most the drain timeout,
    /// then closes the rest and stops every task and thread the gateway started.
    pub async fn stop(self) {
        if let Some(path) = &self.operator_token_file {
            let _ = std::fs::remove_file(path);
        }
        self.api_hosts.stop().await;
        let drain = self.limits.load().drain_timeout;
        tracing::info!(
            drain_seconds = drain.as_secs(),
            "shutting down: draining connections"
        );
        let _ = self.stop.send(true);
        let tracker = self.tracker.clone();
        let drained = tokio::time::timeout(drain, async {
            for listener in self.listeners {
                let _ = listener.await;
            }
            tracker.close();
            tracker.wait().await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                open = self.tracker.len(),
                "drain timed out; closing the rest"
            );
        }
        for give_up in self.abandon {
            let _ = give_up.send(());
        }
        if let Some(quic) = &self.quic {
            quic.close(0u32.into(), b"shutting down");
        }
        // A data-plane thread ends once its runtime is dropped; one that does not
        // within the drain timeout is left to the process's end. The watcher's thread
        // is joined off the async threads too.
        let threads = self.threads;
        let watcher = self.watcher;
        let joined = tokio::task::spawn_blocking(move || {
            drop(watcher);
            for thread in threads {
                let _ = thread.join();
            }
        });
        if tokio::time::timeout(drain, joined).await.is_err() {
            tracing::warn!("a data-plane thread did not stop within the drain timeout");
        }
        let mut services = self.services;
        let finished = tokio::time::timeout(drain, async {
            for service in services.iter_mut() {
                let _ = service.await;
            }
        })
        .await;
        if finished.is_err() {
            for service in &services {
                service.abort();
            }
        }
        tracing::info!("stopped");
    }
}

/// The address the first of `listeners` is bound to.
fn bound_address(
    listeners: &[std::net::TcpListener],
    address: SocketAddr,
    what: &'static str,
) -> Result<SocketAddr, ServeError> {
    let first = listeners.first().ok_or_else(|| ServeError::Bind {
        what,
        address,
        source: std::io::Error::other("no listener was bound"),
    })?;
    first.local_addr().map_err(|source| ServeError::Bind {
        what,
        address,
        source,
    })
}

/// Binds `count` listeners to one address with `SO_REUSEPORT`, so each data-plane
/// thread accepts its own share of the connections (the kernel spreads them).
fn bind_shared(
    address: SocketAddr,
    what: &'static str,
    count: usize,
) -> Result<Vec<std::net::TcpListener>, ServeError> {
    let mut listeners = Vec::with_capacity(count.max(1));
    let mut address = address;
    for _ in 0..count.max(1) {
        let bound = bind_one(address).map_err(|source| ServeError::Bind {
            what,
            address,
            source,
        })?;
        // Port 0 picks a free port once; the others share it.
        address = bound.local_addr().unwrap_or(address);
        listeners.push(bound);
    }
    tracing::info!(%address, threads = count, "{what} listening");
    Ok(listeners)
}

fn bind_one(address: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(address),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    #[cfg(unix)]
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// Serves an admin or metrics router until shutdown.
fn serve_admin(listener: TcpListener, router: axum::Router, shutdown: &Shutdown) -> JoinHandle<()> {
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let served = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown.stopped())
        .await;
        if let Err(err) = served {
            tracing::warn!(reason = %Report(&err), "the admin listener failed");
        }
    })
}

async fn bind(address: SocketAddr, what: &'static str) -> Result<TcpListener, ServeError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind {
            what,
            address,
            source,
        })?;
    let bound = listener.local_addr().unwrap_or(address);
    tracing::info!(address = %bound, "{what} listening");
    Ok(listener)
}

/// The challenge secret shared by every gateway on the store: created by the first.
async fn challenge_secret(store: &impl Store) -> Result<Vec<u8>, ServeError> {
    let mut candidate = [0u8; 32];
    getrandom::fill(&mut candidate).map_err(ServeError::Randomness)?;
    let candidate: String = candidate.iter().map(|b| format!("{b:02x}")).collect();
    let stored = store
        .shared_secret(SECRET_NAME, &candidate)
        .await
        .map_err(ServeError::Secret)?;
    Ok(stored.into_bytes())
}

/// A new operator token, written to `path` for this user only, with the address of the
/// admin listener that takes it on the next line (the commands go there, not to an
/// address they were told).
fn write_operator_token(
    path: &std::path::Path,
    admin: std::net::SocketAddr,
) -> std::io::Result<String> {
    use std::io::Write;
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).map_err(std::io::Error::other)?;
    let token: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut admin = admin;
    if admin.ip().is_unspecified() {
        admin.set_ip(match admin {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    options
        .open(path)?
        .write_all(format!("{token}\nhttp://{admin}\n").as_bytes())?;
    Ok(token)
}
