//! The management API's own host names (`--api-host`) on the HTTPS listener: mounted,
//! reserved from websites and changed by a reload ([`ApiHosts`]), and their certificate
//! ([`ApiCertificates`]): the operator's PEM files, read again when they change, or one
//! from ACME, issued by one gateway of a cluster under a lease, shared through the
//! store and renewed when a third of its lifetime is left. A certificate that cannot
//! serve the names is refused with the reason logged; the one in use stays.

use crate::gateway::connection::Shutdown;
use crate::gateway::service::{MountError, MountedService, Mounts, host_name};
use crate::gateway::tls::{HostCertificates, certified_key, provider};
use crate::provisioning::acme::{Acme, AcmeConfig};
use crate::provisioning::issuance_backoff;
use crate::report::Report;
use botgate_api::ReservedHosts;
use botgate_model::Certificate;
use botgate_model::certificate::{check, leaf_summary, renewal_due};
use botgate_store::Store;
use rustls::sign::CertifiedKey;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Where the certificate of the API's host names comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiCertificateSource {
    /// A PEM certificate chain (leaf first) and its private key.
    Files { certificate: PathBuf, key: PathBuf },
    /// The gateway's ACME directory.
    Acme,
}

/// Why the API's host names cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ApiHostError {
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the certificate in {path} cannot serve {names}: {reason}")]
    Unusable {
        path: PathBuf,
        names: String,
        reason: String,
    },
    #[error("--api-host needs a certificate: --api-cert and --api-key, or ACME")]
    NoCertificate,
    #[error(transparent)]
    Mount(#[from] MountError),
}

/// The management API's host names on the HTTPS listener: mounted, reserved from
/// websites, and their certificate kept; a reload changes the names or the
/// certificate's source without a restart.
pub struct ApiHosts<S> {
    service: Arc<dyn MountedService>,
    mounts: Mounts,
    reserved: ReservedHosts,
    /// Other mounted names, reserved whatever the API's are.
    fixed: Vec<String>,
    certificates: Arc<HostCertificates>,
    store: Arc<S>,
    acme: Option<AcmeConfig>,
    check_every: Duration,
    shutdown: Shutdown,
    running: tokio::sync::Mutex<Running>,
}

/// The names served now, their certificate's source and its keeper.
#[derive(Default)]
struct Running {
    names: Vec<String>,
    files: Option<(PathBuf, PathBuf)>,
    /// The keeper's task (it stops on shutdown too).
    keeper: Option<tokio::task::JoinHandle<()>>,
}

/// What [`ApiHosts`] is made of.
pub struct ApiHostsParts<S> {
    pub service: Arc<dyn MountedService>,
    pub mounts: Mounts,
    pub reserved: ReservedHosts,
    pub fixed: Vec<String>,
    pub certificates: Arc<HostCertificates>,
    pub store: Arc<S>,
    pub acme: Option<AcmeConfig>,
    pub check_every: Duration,
    pub shutdown: Shutdown,
}

impl<S: Store> ApiHosts<S> {
    /// No API names yet: [`ApiHosts::set`] gives them.
    pub fn new(parts: ApiHostsParts<S>) -> ApiHosts<S> {
        parts.reserved.set(parts.fixed.clone());
        ApiHosts {
            service: parts.service,
            mounts: parts.mounts,
            reserved: parts.reserved,
            fixed: parts.fixed,
            certificates: parts.certificates,
            store: parts.store,
            acme: parts.acme,
            check_every: parts.check_every,
            shutdown: parts.shutdown,
            running: tokio::sync::Mutex::default(),
        }
    }

    /// Serves the API on `hosts` (host names, in any order and case) with a certificate
    /// from `files`, or from ACME without them. Nothing changes when that is what runs,
    /// or when the names cannot be served (the error says why). Whether anything
    /// changed.
    pub async fn set(
        &self,
        hosts: &[String],
        files: Option<(PathBuf, PathBuf)>,
    ) -> Result<bool, ApiHostError> {
        let mut names = Vec::new();
        for host in hosts {
            names.push(host_name(host)?);
        }
        names.sort();
        names.dedup();
        let mut running = self.running.lock().await;
        if running.names == names && (names.is_empty() || running.files == files) {
            return Ok(false);
        }
        if let Some(taken) = names.iter().find(|name| self.fixed.contains(name)) {
            return Err(ApiHostError::Mount(MountError::Taken(taken.clone())));
        }
        // Started (files read and checked, or ACME's stored certificate installed)
        // before anything else changes: a refused start leaves the running names.
        let mut keeper = match names.is_empty() {
            true => None,
            false => {
                let source = match files.clone() {
                    Some((certificate, key)) => ApiCertificateSource::Files { certificate, key },
                    None => ApiCertificateSource::Acme,
                };
                let acme = self
                    .acme
                    .clone()
                    .map(|acme| Acme::new(self.store.clone(), acme));
                Some(
                    ApiCertificates::start(
                        names.clone(),
                        source,
                        self.certificates.clone(),
                        self.store.clone(),
                        acme,
                        self.check_every,
                    )
                    .await?,
                )
            }
        };
        // The old keeper ends before the new one serves: one stopped mid-issuance
        // installs nothing after this.
        if let Some(old) = running.keeper.take() {
            old.abort();
            let _ = old.await;
        }
        if let Some(keeper) = &mut keeper {
            keeper.reinstall();
        }
        let gone: Vec<String> = running
            .names
            .iter()
            .filter(|name| !names.contains(name))
            .cloned()
            .collect();
        // Reserved from websites before they are mounted; released after unmounting.
        self.reserved
            .set(self.fixed.iter().chain(&names).cloned().collect());
        for name in names.iter().filter(|name| !running.names.contains(name)) {
            // Not mounted yet: fixed names were refused above, the API's are unmounted
            // when dropped.
            if let Err(err) = self.mounts.mount(name, self.service.clone()) {
                tracing::warn!(error = %err, "mounting an API host name");
            }
        }
        for name in &gone {
            self.mounts.unmount(name);
        }
        self.certificates.release(&gone);
        if let Some(keeper) = keeper {
            let shutdown = self.shutdown.clone();
            running.keeper = Some(tokio::spawn(keeper.run(shutdown.stopped())));
        }
        running.names = names;
        running.files = files;
        Ok(true)
    }

    /// Stops the certificate keeper (at shutdown).
    pub async fn stop(&self) {
        if let Some(keeper) = self.running.lock().await.keeper.take() {
            keeper.abort();
            let _ = keeper.await;
        }
    }
}

/// Keeps the certificate of the API's host names current in [`HostCertificates`].
pub struct ApiCertificates<S> {
    names: Vec<String>,
    source: ApiCertificateSource,
    certificates: Arc<HostCertificates>,
    store: Arc<S>,
    acme: Option<Acme<S>>,
    check_every: Duration,
    /// The lease holder this gateway is when it issues.
    holder: String,
    /// The PEM served now, and the last PEM read (a file read again unchanged is not
    /// checked again, nor its refusal logged again).
    current: Option<Certificate>,
    last_read: Option<Certificate>,
    failures: u32,
    retry_at_ms: u64,
}

/// How long one gateway holds the API names' issuance.
const ISSUE_LEASE_MS: u64 = 15 * 60_000;

fn now_ms() -> u64 {
    botgate_webhooks::now_ms()
}

/// `certificate` as a key for `names`, after the checks a partner's certificate gets
/// (the key matches, the chain is in order, the names are covered, it is valid now).
fn usable(certificate: &Certificate, names: &[String]) -> Result<Arc<CertifiedKey>, String> {
    check(certificate, names, SystemTime::now()).map_err(|invalid| invalid.message)?;
    certified_key(&certificate.public, &certificate.private, &provider())
        .map(Arc::new)
        .map_err(|err| err.to_string())
}

impl<S: Store> ApiCertificates<S> {
    /// The certificate keeper for `names`. From files, the certificate is read and
    /// installed now, and its failure is the error; from ACME, a certificate the store
    /// holds already is installed now.
    pub async fn start(
        names: Vec<String>,
        source: ApiCertificateSource,
        certificates: Arc<HostCertificates>,
        store: Arc<S>,
        acme: Option<Acme<S>>,
        check_every: Duration,
    ) -> Result<ApiCertificates<S>, ApiHostError> {
        if source == ApiCertificateSource::Acme && acme.is_none() {
            return Err(ApiHostError::NoCertificate);
        }
        let mut random = [0u8; 8];
        let _ = getrandom::fill(&mut random);
        let mut keeper = ApiCertificates {
            names,
            source,
            certificates,
            store,
            acme,
            check_every,
            holder: format!("gateway-{}", u64::from_le_bytes(random)),
            current: None,
            last_read: None,
            failures: 0,
            retry_at_ms: 0,
        };
        match keeper.source.clone() {
            ApiCertificateSource::Files { certificate, key } => {
                let read = read_files(&certificate, &key)?;
                let key =
                    usable(&read, &keeper.names).map_err(|reason| ApiHostError::Unusable {
                        path: certificate.clone(),
                        names: keeper.names.join(", "),
                        reason,
                    })?;
                // Reserved only once usable: a refused start changes nothing.
                keeper.certificates.reserve(&keeper.names);
                keeper.install(read, key);
            }
            ApiCertificateSource::Acme => {
                keeper.certificates.reserve(&keeper.names);
                keeper.load_stored().await
            }
        }
        Ok(keeper)
    }

    /// Checks every `check_every` until `stop` resolves.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(self.check_every) => {}
            }
            match self.source.clone() {
                ApiCertificateSource::Files { certificate, key } => {
                    self.reload_files(&certificate, &key)
                }
                ApiCertificateSource::Acme => {
                    self.load_stored().await;
                    self.renew().await;
                }
            }
        }
    }

    /// Serves the certificate this keeper holds again, and marks whether its names
    /// await one (after another keeper of some of the names stopped).
    fn reinstall(&mut self) {
        if let Some(current) = self.current.clone()
            && let Ok(key) = usable(&current, &self.names)
        {
            self.certificates.install(&self.names, key);
        }
        if self.source == ApiCertificateSource::Acme {
            self.certificates.set_awaiting(&self.names, self.due());
        }
    }

    fn install(&mut self, certificate: Certificate, key: Arc<CertifiedKey>) {
        self.certificates.install(&self.names, key);
        self.last_read = Some(certificate.clone());
        self.current = Some(certificate);
    }

    /// Reads the files again; installs what they hold when it changed and is usable.
    fn reload_files(&mut self, certificate: &PathBuf, key: &PathBuf) {
        let read = match read_files(certificate, key) {
            Ok(read) => read,
            Err(err) => {
                tracing::warn!(error = %Report(&err), "the API certificate could not be read again; the one in use stays");
                return;
            }
        };
        self.offer(read, "files");
    }

    /// Serves `certificate` (from `source`, for the log) when it is new and usable; a
    /// refused one is not checked or logged again.
    fn offer(&mut self, certificate: Certificate, source: &'static str) {
        if self.last_read.as_ref() == Some(&certificate) {
            return;
        }
        match usable(&certificate, &self.names) {
            Ok(key) => {
                tracing::info!(names = ?self.names, source, "serving a new API certificate");
                self.install(certificate, key);
            }
            Err(reason) => {
                tracing::warn!(names = ?self.names, source, %reason, "the API certificate is refused; the one in use stays");
                self.last_read = Some(certificate);
            }
        }
    }

    /// The store's key of the names' ACME certificate.
    fn store_key(&self) -> String {
        format!("api-certificate:{}", self.names.join(","))
    }

    /// Installs the certificate the store holds (issued by any gateway), when it is
    /// new here and usable.
    async fn load_stored(&mut self) {
        let stored = match self.store.ephemeral(&self.store_key(), now_ms()).await {
            Ok(stored) => stored,
            Err(err) => {
                tracing::warn!(error = %Report(&err), "reading the API certificate from the store");
                return;
            }
        };
        let Some(certificate) = stored.and_then(|json| serde_json::from_str(&json).ok()) else {
            return;
        };
        self.offer(certificate, "store");
    }

    /// Counts a failed issuance and waits longer before the next.
    fn back_off(&mut self, reason: &str) {
        self.failures += 1;
        let wait = issuance_backoff(self.failures);
        self.retry_at_ms = now_ms() + wait.as_millis() as u64;
        tracing::warn!(%reason, failures = self.failures, retry_in_s = wait.as_secs(), "the API certificate was not issued");
    }

    /// Whether the names need a certificate: none is served, or a third or less of its
    /// lifetime remains.
    fn due(&self) -> bool {
        self.current.as_ref().is_none_or(|certificate| {
            renewal_due(&certificate.public, &self.names, (now_ms() / 1000) as i64)
        })
    }

    /// Issues a certificate when the one in use is missing or due, unless another
    /// gateway is at it or the last attempt failed a moment ago.
    async fn renew(&mut self) {
        let now = now_ms();
        let due = self.due();
        // Every gateway answers the CA's challenges while the names wait.
        self.certificates.set_awaiting(&self.names, due);
        let Some(acme) = &self.acme else { return };
        if !due || now < self.retry_at_ms {
            return;
        }
        let lease = format!("acme-issue:api:{}", self.names[0]);
        match self
            .store
            .lease(&lease, &self.holder, now, now + ISSUE_LEASE_MS)
            .await
        {
            Ok(true) => {}
            Ok(false) => return,
            Err(err) => {
                tracing::warn!(error = %Report(&err), "taking the API certificate's issuance lease");
                return;
            }
        }
        tracing::info!(names = ?self.names, "issuing a certificate for the API host names");
        let certificate = match acme.issue(&self.names).await {
            Ok(certificate) => certificate,
            Err(err) => {
                let _ = self.store.remove_ephemeral(&lease).await;
                self.back_off(&Report(&err).to_string());
                return;
            }
        };
        let until_ms = leaf_summary(&certificate.public).map_or(now + ISSUE_LEASE_MS, |leaf| {
            (leaf.not_after.max(0) as u64) * 1000
        });
        if let Ok(json) = serde_json::to_string(&certificate)
            && let Err(err) = self
                .store
                .put_ephemeral(&self.store_key(), &json, until_ms)
                .await
        {
            tracing::warn!(error = %Report(&err), "storing the API certificate; other gateways issue their own");
        }
        // Released once the certificate is stored: a gateway that takes the lease
        // next finds it there.
        let _ = self.store.remove_ephemeral(&lease).await;
        self.offer(certificate, "ACME");
        match self.due() {
            // Refused (or still due): not issued again before the back-off.
            true => self.back_off("the issued certificate cannot serve the names"),
            false => self.failures = 0,
        }
        self.certificates.set_awaiting(&self.names, self.due());
    }
}

fn read_files(certificate: &PathBuf, key: &PathBuf) -> Result<Certificate, ApiHostError> {
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).map_err(|source| ApiHostError::Read {
            path: path.clone(),
            source,
        })
    };
    Ok(Certificate {
        public: read(certificate)?,
        private: read(key)?,
    })
}
