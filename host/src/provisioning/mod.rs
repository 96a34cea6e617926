//! The asynchronous half of website changes: websites in `setup` wait here until their
//! work is done — their names resolve to the gateway, then (with `certs_issuer: acme`)
//! a certificate is issued — then go `online`, or `error` with `status_reason`, and the
//! webhooks of the changes that waited are queued. ACME certificates are renewed here
//! too, when a third of their lifetime remains; at most one gateway issues for a
//! domain at a time (a lease in the store).
//!
//! Every gateway runs a provisioner over its own snapshot of the websites. Each write
//! names the revision it read, so when two gateways finish the same website only one
//! write lands; the other sees a stale revision and leaves it (and its webhooks) to
//! the winner.

pub mod acme;
pub mod dns;

use crate::gateway::crawlers::reverse_dns::{ResolverError, resolver};
use acme::{Acme, AcmeError};
use botgate_model::report::Report;
use botgate_model::{CertsIssuer, Domain, PartnerName, Status, Website};
use botgate_store::{Follower, Store, StoreError, WebsiteRecord};
use hickory_resolver::TokioResolver;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// When websites are ready.
#[derive(Debug, Clone)]
pub struct ProvisioningConfig {
    /// The addresses visitors reach the gateway at; a website is ready when its names
    /// resolve to these. Empty: no DNS check (websites are online at once, and the API
    /// never puts them in `setup` for DNS).
    pub public_addresses: Vec<IpAddr>,
    /// DNS servers to ask; the system's when empty.
    pub dns_servers: Vec<SocketAddr>,
    /// How often websites in `setup` are checked.
    pub check_every: Duration,
    /// How long a website may wait for its DNS before it ends in `error`.
    pub dns_wait: Duration,
    /// The most orders per partner and website; renewals and retries count in them (the
    /// first issuance of a change is counted by the API that accepted it).
    pub issuance: botgate_api::IssuanceLimits,
}

impl Default for ProvisioningConfig {
    fn default() -> Self {
        ProvisioningConfig {
            public_addresses: Vec::new(),
            dns_servers: Vec::new(),
            check_every: Duration::from_secs(5),
            dns_wait: Duration::from_secs(24 * 3600),
            issuance: botgate_api::IssuanceLimits::default(),
        }
    }
}

/// Why an issuance ended without a stored certificate (it is tried again later).
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("the store")]
    Store(#[from] StoreError),
    #[error("another gateway is issuing for this domain")]
    Busy,
    /// A renewal or retry waits for a window of the issuance limits to end (ms).
    #[error("the partner's limit of {limit} issuances per {per} is reached")]
    Limited {
        until_ms: u64,
        limit: u64,
        per: &'static str,
    },
    #[error("the certificate was not issued")]
    Acme(#[source] AcmeError),
    #[error("the website kept changing; the certificate was not stored")]
    KeptChanging,
}

/// Moves websites out of `setup`.
pub struct Provisioner<S> {
    store: Arc<S>,
    websites: Arc<Follower>,
    resolver: TokioResolver,
    config: ProvisioningConfig,
    acme: Option<Arc<Acme<S>>>,
    /// This gateway's name in issuance leases.
    holder: String,
    /// Domains this gateway is issuing for, or must not retry before a time (ms).
    issuing: Mutex<HashMap<String, Issuing>>,
    /// Rounds begun: moves each partner's window of websites checked.
    rounds: std::sync::atomic::AtomicU64,
}

/// Where this gateway stands with one domain's certificate.
#[derive(Debug, Clone, Copy)]
enum Issuing {
    /// Issuing now, after `failures` failed attempts.
    Now { failures: u32 },
    /// The last attempts failed; not again before `at` (ms).
    RetryAfter { at: u64, failures: u32 },
}

/// Why a certificate is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// For a website in `setup` (its first order counted by the API).
    Setup,
    /// For a certificate due for renewal.
    Renewal,
}

/// Websites in `setup` one gateway checks at once.
const CHECKS_AT_ONCE: usize = 16;

/// Websites of one partner checked in one round at most: a partner with many websites
/// whose names answer slowly (or never) lengthens a round by at most these, and the
/// others come in later rounds.
const CHECKS_PER_PARTNER: usize = 64;

/// The waiting websites checked in round `round`: of each partner at most
/// [`CHECKS_PER_PARTNER`], a window that moves on each round over its websites in domain
/// order, and the partners taking turns (each one's first, then each one's second…).
fn this_rounds_turns(records: Vec<Arc<WebsiteRecord>>, round: u64) -> Vec<Arc<WebsiteRecord>> {
    // Partners in name order, so that the turns do not depend on a map's order.
    let mut by_partner: std::collections::BTreeMap<PartnerName, Vec<Arc<WebsiteRecord>>> =
        Default::default();
    for record in records {
        by_partner
            .entry(record.partner.clone())
            .or_default()
            .push(record);
    }
    let mut queues: Vec<std::collections::VecDeque<Arc<WebsiteRecord>>> = by_partner
        .into_values()
        .map(|mut waiting| {
            waiting.sort_by(|a, b| a.website.domain.as_str().cmp(b.website.domain.as_str()));
            let start = (round as usize).wrapping_mul(CHECKS_PER_PARTNER) % waiting.len();
            waiting.rotate_left(start);
            waiting.truncate(CHECKS_PER_PARTNER);
            waiting.into()
        })
        .collect();
    let mut turns = Vec::new();
    while !queues.is_empty() {
        queues.retain_mut(|queue| {
            turns.extend(queue.pop_front());
            !queue.is_empty()
        });
    }
    turns
}

/// The wait after `failures` failed issuances in a row: a minute, doubling, at most
/// six hours (a CA's rate limits are counted in hours).
pub(crate) fn issuance_backoff(failures: u32) -> Duration {
    Duration::from_secs(60)
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(Duration::from_secs(6 * 3600))
}

impl<S: Store> Provisioner<S> {
    /// A provisioner; with `acme`, websites with `certs_issuer: acme` get certificates.
    pub fn new(
        store: Arc<S>,
        websites: Arc<Follower>,
        config: ProvisioningConfig,
        acme: Option<acme::AcmeConfig>,
    ) -> Result<Provisioner<S>, ResolverError> {
        let mut random = [0u8; 8];
        let _ = getrandom::fill(&mut random);
        Ok(Provisioner {
            resolver: resolver(&config.dns_servers, Duration::from_secs(3))?,
            acme: acme.map(|config| Arc::new(Acme::new(store.clone(), config))),
            holder: format!("gateway-{}", u64::from_le_bytes(random)),
            issuing: Mutex::new(HashMap::new()),
            rounds: std::sync::atomic::AtomicU64::new(0),
            store,
            websites,
            config,
        })
    }

    /// Checks the websites in `setup` every `check_every` until `stop` resolves.
    pub async fn run(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            self.check_all().await;
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(self.config.check_every) => {}
            }
        }
    }

    /// One round over the websites waiting in `setup`, and the ACME certificates due
    /// for renewal.
    pub async fn check_all(self: &Arc<Self>) {
        let index = self.websites.index();
        let now_s = (botgate_webhooks::now_ms() / 1000) as i64;
        let mut waiting = Vec::new();
        let mut renewals = Vec::new();
        for record in index.websites() {
            let website = &record.website;
            if website.awaits_work() {
                waiting.push(record.clone());
            } else if self.acme.is_some()
                && matches!(website.status, Status::Online | Status::Paused)
                && website.settings.loadbalancer.certs_issuer == CertsIssuer::Acme
                && website.certificate.is_some()
                // A paused website's new names wait for their DNS check (when it is
                // asked to be online again): no renewal orders them before.
                && website.pending.is_none()
                && website.certificate_due(now_s)
            {
                renewals.push(record.clone());
            }
        }
        // Renewals first: each goes on in the background, behind no DNS check.
        for record in renewals {
            self.start_issuing(&record, Attempt::Renewal);
        }
        // One partner's websites hold up no other's for long: at most
        // `CHECKS_PER_PARTNER` of each a round, taken a partner at a time in turn, a few
        // at once, each check's lookups bounded in time (`dns::CHECK_TIME`). (Dropping
        // the set, when the provisioner stops, stops the checks.)
        let round = self
            .rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut checks = tokio::task::JoinSet::new();
        for record in this_rounds_turns(waiting, round) {
            if checks.len() >= CHECKS_AT_ONCE {
                checks.join_next().await;
            }
            let this = Arc::clone(self);
            checks.spawn(async move {
                if let Err(err) = this.check(&record).await {
                    tracing::warn!(domain = %record.website.domain, error = %Report(&err), "provisioning: store write failed; retrying next round");
                }
            });
        }
        while checks.join_next().await.is_some() {}
    }

    /// Starts issuing a certificate for `record`'s website in the background, unless
    /// this gateway is at it already or failed a moment ago; whether it is under way.
    /// A renewal or a retry counts in the issuance limits, and waits while one is
    /// reached.
    fn start_issuing(self: &Arc<Self>, record: &WebsiteRecord, attempt: Attempt) -> bool {
        let Some(acme) = self.acme.clone() else {
            return false;
        };
        let website = &record.website;
        let domain = website.domain.as_str().to_owned();
        let failures = {
            let mut issuing = self.issuing();
            let failures = match issuing.get(&domain) {
                Some(Issuing::Now { .. }) => return true,
                Some(Issuing::RetryAfter { at, .. }) if *at > botgate_webhooks::now_ms() => {
                    return false;
                }
                Some(Issuing::RetryAfter { failures, .. }) => *failures,
                None => 0,
            };
            issuing.insert(domain.clone(), Issuing::Now { failures });
            failures
        };
        let provisioner = self.clone();
        let names = website.host_names();
        let setup_since = website.pending.as_ref().map(|pending| pending.since_ms);
        let (partner, parsed) = (record.partner.clone(), website.domain.clone());
        tokio::spawn(async move {
            let counted = attempt == Attempt::Renewal || failures > 0;
            let outcome = provisioner
                .issue(&acme, &partner, &parsed, &names, setup_since, counted)
                .await;
            let mut issuing = provisioner.issuing();
            match outcome {
                Ok(()) => {
                    issuing.remove(&domain);
                }
                // Not a failure: another gateway issues, or a limit's window ends first.
                Err(IssueError::Busy) => {
                    let at = botgate_webhooks::now_ms() + issuance_backoff(1).as_millis() as u64;
                    issuing.insert(domain, Issuing::RetryAfter { at, failures });
                }
                Err(IssueError::Limited {
                    until_ms,
                    limit,
                    per,
                }) => {
                    tracing::warn!(%domain, %partner, limit, per, "certificate issuance waits: the partner's limit is reached");
                    issuing.insert(
                        domain,
                        Issuing::RetryAfter {
                            at: until_ms,
                            failures,
                        },
                    );
                }
                Err(err) => {
                    let failures = match issuing.get(&domain) {
                        Some(Issuing::Now { failures }) => failures + 1,
                        _ => 1,
                    };
                    let wait = issuance_backoff(failures);
                    let error = Report(&err);
                    tracing::warn!(%domain, %error, failures, retry_in_s = wait.as_secs(), "certificate not issued; retrying later");
                    issuing.insert(
                        domain,
                        Issuing::RetryAfter {
                            at: botgate_webhooks::now_ms() + wait.as_millis() as u64,
                            failures,
                        },
                    );
                }
            }
        });
        true
    }

    fn issuing(&self) -> std::sync::MutexGuard<'_, HashMap<String, Issuing>> {
        self.issuing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Issues (under the domain's lease) and stores the certificate: a website in
    /// `setup` goes online (or to `error` if the CA refused), an online one just gets
    /// the new certificate; a website changed meanwhile ([`changed_since`]) gets
    /// nothing. With `counted` (a renewal or a retry), the order counts in
    /// its partner's and website's issuance limits once the lease is held, so gateways
    /// that find it held count nothing.
    async fn issue(
        &self,
        acme: &Acme<S>,
        partner: &PartnerName,
        domain: &Domain,
        names: &[String],
        setup_since: Option<u64>,
        counted: bool,
    ) -> Result<(), IssueError> {
        let lease = format!("acme-issue:{domain}");
        let now = botgate_webhooks::now_ms();
        let held = self
            .store
            .lease(&lease, &self.holder, now, now + 15 * 60_000)
            .await?;
        if !held {
            return Err(IssueError::Busy);
        }
        if counted {
            let limits = &self.config.issuance;
            let refused = match limits
                .take(self.store.as_ref(), partner, domain, None, now)
                .await
            {
                Ok(None) => None,
                Ok(Some(window)) => Some(IssueError::Limited {
                    until_ms: window.ends_ms,
                    limit: window.limit,
                    per: window.per,
                }),
                Err(err) => Some(err.into()),
            };
            if let Some(refused) = refused {
                let _ = self.store.remove_ephemeral(&lease).await;
                return Err(refused);
            }
        }
        tracing::info!(%domain, ?names, "issuing a certificate");
        let issued = acme.issue(names).await;
        let _ = self.store.remove_ephemeral(&lease).await;
        for _ in 0..8 {
            let Some(record) = self.store.website(domain).await? else {
                return Ok(());
            };
            if let Some(change) = changed_since(&record, partner, names, setup_since) {
                // Its next round issues for the website as it is now, if it still asks.
                tracing::info!(%domain, change, issued = issued.is_ok(), "the issuance's result is not used: the website changed while it ran");
                return Ok(());
            }
            let mut next = record.website.clone();
            let mut callbacks = Vec::new();
            match &issued {
                Ok(certificate) => {
                    next.certificate = Some(certificate.clone());
                    if next.status == Status::Setup {
                        callbacks = next.finish_setup(Ok(()));
                    }
                }
                Err(reason) if next.status == Status::Setup => {
                    let reason = Report(reason);
                    callbacks = next.finish_setup(Err(format!("certificate not issued: {reason}")));
                }
                Err(_) => return Err(IssueError::Acme(issued.unwrap_err())),
            }
            match self.write(&next, record.revision).await {
                Ok(Some(stored)) => {
                    tracing::info!(%domain, status = stored.website.status.as_str(), issued = issued.is_ok(), "certificate issuance finished");
                    self.queue_webhooks(&stored, &callbacks).await;
                    return issued.map(drop).map_err(IssueError::Acme);
                }
                Ok(None) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(IssueError::KeptChanging)
    }

    async fn check(self: &Arc<Self>, record: &WebsiteRecord) -> Result<(), StoreError> {
        let website = &record.website;
        let outcome = if self.config.public_addresses.is_empty() {
            Ok(())
        } else {
            dns::ready(
                &self.resolver,
                &website.host_names(),
                &self.config.public_addresses,
            )
            .await
        };
        let since = website.pending.as_ref().map_or(0, |p| p.since_ms);
        let waited = Duration::from_millis(botgate_webhooks::now_ms().saturating_sub(since));
        let mut next = website.clone();
        let callbacks = match outcome {
            Ok(())
                if self.acme.is_some()
                    && website
                        .awaits_acme_certificate((botgate_webhooks::now_ms() / 1000) as i64) =>
            {
                // The names are ready; the certificate comes next (and ends the setup).
                let reason = "issuing a certificate".to_owned();
                if self.start_issuing(record, Attempt::Setup)
                    && website.status_reason.as_deref() != Some(&reason)
                {
                    next.status_reason = Some(reason);
                    self.write(&next, record.revision).await?;
                }
                return Ok(());
            }
            Ok(()) => next.finish_setup(Ok(())),
            Err(reason) if waited >= self.config.dns_wait => next.finish_setup(Err(format!(
                "{reason} (checked for {} s)",
                waited.as_secs()
            ))),
            Err(reason) => {
                // Still waiting: say why, once it changes.
                if website.status_reason.as_deref() != Some(reason.as_str()) {
                    next.status_reason = Some(reason);
                    self.write(&next, record.revision).await?;
                }
                return Ok(());
            }
        };
        let Some(stored) = self.write(&next, record.revision).await? else {
            return Ok(());
        };
        tracing::info!(domain = %stored.website.domain, status = stored.website.status.as_str(), reason = ?stored.website.status_reason, "provisioning finished");
        self.queue_webhooks(&stored, &callbacks).await;
        Ok(())
    }

    /// Writes `website` if it is still at `revision`; `None` when another writer
    /// (a partner's change, another gateway) got there first.
    async fn write(
        &self,
        website: &Website,
        revision: u64,
    ) -> Result<Option<WebsiteRecord>, StoreError> {
        match self.store.update_website(website, revision).await {
            Ok(stored) => Ok(Some(stored)),
            Err(StoreError::Stale(_) | StoreError::NotFound(_)) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn queue_webhooks(&self, stored: &WebsiteRecord, callbacks: &[String]) {
        let view = stored.website.view();
        for callback in callbacks {
            let queued = match url::Url::parse(callback) {
                Ok(url) => {
                    // Accepted with the partner's request while the outbox had room:
                    // refused only past the partner's whole bound.
                    botgate_webhooks::queue(
                        self.store.as_ref(),
                        &stored.partner,
                        &url,
                        &view,
                        botgate_webhooks::OUTBOX_PER_PARTNER,
                    )
                    .await
                    .map(drop)
                    .map_err(|err| err.to_string())
                }
                Err(err) => Err(err.to_string()),
            };
            if let Err(err) = queued {
                tracing::error!(domain = %stored.website.domain, callback = %botgate_webhooks::logged(callback), %err, "webhook could not be queued");
            }
        }
    }
}

/// How the website `record` now differs from the one an issuance for `names` of
/// `partner`'s was begun for (`None`: not at all), which was in a setup begun at
/// `setup_since` or in none: the issuance's result then belongs to no website.
fn changed_since(
    record: &WebsiteRecord,
    partner: &PartnerName,
    names: &[String],
    setup_since: Option<u64>,
) -> Option<&'static str> {
    let website = &record.website;
    let (mut now_named, mut ordered) = (website.host_names(), names.to_vec());
    now_named.sort_unstable();
    ordered.sort_unstable();
    if record.partner != *partner {
        Some("another partner's website holds the domain now")
    } else if website.settings.loadbalancer.certs_issuer != CertsIssuer::Acme {
        Some("it takes the partner's certificate now")
    } else if now_named != ordered {
        Some("its host names changed")
    } else if website
        .pending
        .as_ref()
        .is_some_and(|pending| Some(pending.since_ms) != setup_since)
    {
        Some("its setup began again")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use botgate_model::{Certificate, WebsiteInput};

    /// A certificate for `names` valid from day `from` to day `to` (Unix days).
    fn certificate(names: &[&str], from: i64, to: i64) -> Certificate {
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let day = |d: i64| time::OffsetDateTime::from_unix_timestamp(d * 86_400).unwrap();
        params.not_before = day(from);
        params.not_after = day(to);
        let key = rcgen::KeyPair::generate().unwrap();
        Certificate {
            public: params.self_signed(&key).unwrap().pem(),
            private: key.serialize_pem(),
        }
    }

    /// A partner with many websites waiting does not go before everyone else's, nor
    /// take more than its share of a round; its other websites come in later rounds.
    #[test]
    fn waiting_websites_are_checked_a_partner_at_a_time_in_turn() {
        let record = |partner: &str, domain: &str| {
            Arc::new(WebsiteRecord {
                partner: PartnerName::parse(partner).unwrap(),
                revision: 1,
                website: Website::create(WebsiteInput {
                    domain: Some(domain.into()),
                    user_id: Some("ann".into()),
                    ip: Some(vec!["192.0.2.10".into()]),
                    ..WebsiteInput::default()
                })
                .unwrap(),
            })
        };
        let mut records: Vec<_> = (0..200)
            .map(|n| record("flood", &format!("f{n:03}.example")))
            .collect();
        records.push(record("quiet", "q1.example"));
        records.push(record("other", "o1.example"));
        records.push(record("quiet", "q2.example"));
        let domains = |turns: Vec<Arc<WebsiteRecord>>| -> Vec<String> {
            turns
                .iter()
                .map(|record| record.website.domain.as_str().to_owned())
                .collect()
        };
        let first = domains(this_rounds_turns(records.clone(), 0));
        assert_eq!(first.len(), CHECKS_PER_PARTNER + 3);
        assert_eq!(
            first[..6],
            [
                "f000.example",
                "o1.example",
                "q1.example",
                "f001.example",
                "q2.example",
                "f002.example"
            ]
        );
        assert_eq!(first.last().map(String::as_str), Some("f063.example"));
        // The next rounds check the flood's next websites, and come round again.
        let second = domains(this_rounds_turns(records.clone(), 1));
        assert_eq!(second[0], "f064.example");
        let fourth = domains(this_rounds_turns(records, 3));
        assert_eq!(fourth[0], "f192.example");
        assert!(fourth.contains(&"f000.example".to_owned()), "{fourth:?}");
    }

    #[test]
    fn failed_issuances_back_off_from_a_minute_to_six_hours() {
        assert_eq!(issuance_backoff(1), Duration::from_secs(60));
        assert_eq!(issuance_backoff(2), Duration::from_secs(120));
        assert_eq!(issuance_backoff(5), Duration::from_secs(960));
        assert_eq!(issuance_backoff(40), Duration::from_secs(6 * 3600));
    }

    #[test]
    fn certificates_are_wanted_when_missing_uncovering_or_two_thirds_through() {
        let mut website = Website::create(WebsiteInput {
            domain: Some("secure.example".into()),
            subdomain: Some(vec!["www".into()]),
            user_id: Some("ann".into()),
            ip: Some(vec!["192.0.2.10".into()]),
            ..WebsiteInput::default()
        })
        .unwrap();
        let day = |d: i64| d * 86_400;
        assert!(website.certificate_due(day(20_000)), "none yet");
        // 90 days from day 20 000: renewal from day 20 060 (30 days left).
        website.certificate = Some(certificate(
            &["secure.example", "www.secure.example"],
            20_000,
            20_090,
        ));
        assert!(!website.certificate_due(day(20_001)));
        assert!(!website.certificate_due(day(20_059)));
        assert!(website.certificate_due(day(20_060)), "a third left");
        assert!(website.certificate_due(day(20_100)), "expired");
        // A certificate that misses a name is replaced at once.
        website.certificate = Some(certificate(&["secure.example"], 20_000, 20_090));
        assert!(website.certificate_due(day(20_001)));
        website.certificate = Some(certificate(
            &["*.secure.example", "secure.example"],
            20_000,
            20_090,
        ));
        assert!(
            !website.certificate_due(day(20_001)),
            "a wildcard covers www"
        );
    }
}
