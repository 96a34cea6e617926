//! The asynchronous half of website changes: websites in `setup` wait here until their
//! work is done (today: DNS readiness), then go `online` — or `error`, with
//! `status_reason`, when the wait runs out — and the webhooks of the changes that
//! waited are queued.
//!
//! Every gateway runs a provisioner over its own snapshot of the websites. Each write
//! names the revision it read, so when two gateways finish the same website only one
//! write lands; the other sees a stale revision and leaves it (and its webhooks) to
//! the winner.

pub mod dns;

use crate::gateway::crawlers::reverse_dns::{ResolverError, resolver};
use botgate_model::{Status, Website};
use botgate_store::{Follower, Store, StoreError, WebsiteRecord};
use hickory_resolver::TokioResolver;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
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
}

impl Default for ProvisioningConfig {
    fn default() -> Self {
        ProvisioningConfig {
            public_addresses: Vec::new(),
            dns_servers: Vec::new(),
            check_every: Duration::from_secs(5),
            dns_wait: Duration::from_secs(24 * 3600),
        }
    }
}

/// Moves websites out of `setup`.
pub struct Provisioner<S> {
    store: Arc<S>,
    websites: Arc<Follower>,
    resolver: TokioResolver,
    config: ProvisioningConfig,
}

impl<S: Store> Provisioner<S> {
    pub fn new(
        store: Arc<S>,
        websites: Arc<Follower>,
        config: ProvisioningConfig,
    ) -> Result<Provisioner<S>, ResolverError> {
        Ok(Provisioner {
            resolver: resolver(&config.dns_servers, Duration::from_secs(3))?,
            store,
            websites,
            config,
        })
    }

    /// Checks the websites in `setup` every `check_every` until `stop` resolves.
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            self.check_all().await;
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(self.config.check_every) => {}
            }
        }
    }

    /// One round over the websites waiting in `setup`.
    pub async fn check_all(&self) {
        let index = self.websites.index();
        let waiting: Vec<Arc<WebsiteRecord>> = index
            .websites()
            .filter(|record| {
                record.website.status == Status::Setup && record.website.pending.is_some()
            })
            .cloned()
            .collect();
        for record in waiting {
            if let Err(err) = self.check(&record).await {
                tracing::warn!(domain = %record.website.domain, %err, "provisioning: store write failed; retrying next round");
            }
        }
    }

    async fn check(&self, record: &WebsiteRecord) -> Result<(), StoreError> {
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
                    botgate_webhooks::queue(self.store.as_ref(), &stored.partner, &url, &view)
                        .await
                        .map(drop)
                        .map_err(|err| err.to_string())
                }
                Err(err) => Err(err.to_string()),
            };
            if let Err(err) = queued {
                tracing::error!(domain = %stored.website.domain, %callback, %err, "webhook could not be queued");
            }
        }
    }
}
