//! [`AnyStore`]: the backend the operator configured, chosen at start-up, behind the one
//! [`Store`] interface (the trait's `async` methods make it unusable as `dyn Store`).

use crate::rulesets::{
    Listed, Pushed, PushedRuleset, RulesetState, RulesetStore, ShadowResults, StoredState,
};
use crate::traffic::{Counts, Resolution, TrafficEvent, TrafficStore};
use crate::{
    AccountStore, Change, Delivery, EmbeddedStore, OutboxStore, Owner, Page, PartnerRecord,
    Position, RedisStore, SharedState, Snapshot, StoreError, WebsiteOwner, WebsiteRecord,
    WebsiteStore,
};
use crate::{ClaimShares, RedisConfig, WebsiteLimits};
use botgate_model::{Domain, PartnerName, User, UserId, Website};
use std::path::PathBuf;

/// Either backend.
pub enum AnyStore {
    Embedded(EmbeddedStore),
    Redis(RedisStore),
}

/// Where the store is: the embedded file in a data directory, or Redis.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// `botgate.redb` in this directory (created if missing).
    Embedded(PathBuf),
    Redis(RedisConfig),
}

impl StoreConfig {
    /// The backend's name: `embedded` or `redis`.
    pub fn backend(&self) -> &'static str {
        match self {
            StoreConfig::Embedded(_) => "embedded",
            StoreConfig::Redis(_) => "redis",
        }
    }

    /// Where the store is: the embedded file, or Redis's address and database (never
    /// its password).
    pub fn address(&self) -> String {
        match self {
            StoreConfig::Embedded(dir) => dir.join("botgate.redb").display().to_string(),
            StoreConfig::Redis(config) => config.location(),
        }
    }
}

impl std::fmt::Display for StoreConfig {
    /// Which store, for logs; never the Redis password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.backend(), self.address())
    }
}

impl AnyStore {
    /// Opens the store `config` names: the embedded file on a blocking thread, or a
    /// connection to Redis.
    pub async fn open(config: &StoreConfig) -> Result<AnyStore, StoreError> {
        match config {
            StoreConfig::Embedded(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || EmbeddedStore::open(&dir))
                    .await
                    .map_err(|err| StoreError::backend("opening the embedded store", err))?
                    .map(AnyStore::Embedded)
            }
            StoreConfig::Redis(redis) => RedisStore::connect(redis.clone())
                .await
                .map(AnyStore::Redis),
        }
    }
}

/// Calls the same method on whichever backend this is.
macro_rules! delegate {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        match $self {
            AnyStore::Embedded(store) => store.$method($($arg),*).await,
            AnyStore::Redis(store) => store.$method($($arg),*).await,
        }
    };
}

impl AccountStore for AnyStore {
    async fn put_partner(&self, partner: &PartnerRecord) -> Result<(), StoreError> {
        delegate!(self.put_partner(partner))
    }

    async fn create_partner(&self, partner: &PartnerRecord) -> Result<(), StoreError> {
        delegate!(self.create_partner(partner))
    }

    async fn update_partner(
        &self,
        name: &PartnerName,
        change: crate::PartnerChange,
    ) -> Result<PartnerRecord, StoreError> {
        delegate!(self.update_partner(name, change))
    }

    async fn partner_by_key(&self, key_sha256: &str) -> Result<Option<PartnerRecord>, StoreError> {
        delegate!(self.partner_by_key(key_sha256))
    }

    async fn partner(&self, name: &PartnerName) -> Result<Option<PartnerRecord>, StoreError> {
        delegate!(self.partner(name))
    }

    async fn partners(&self) -> Result<Vec<PartnerRecord>, StoreError> {
        delegate!(self.partners())
    }

    async fn create_user_within(&self, user: &User, at_most: usize) -> Result<(), StoreError> {
        delegate!(self.create_user_within(user, at_most))
    }

    async fn user(&self, partner: &PartnerName, id: &UserId) -> Result<Option<User>, StoreError> {
        delegate!(self.user(partner, id))
    }

    async fn user_by_key(&self, api_key: &str) -> Result<Option<User>, StoreError> {
        delegate!(self.user_by_key(api_key))
    }

    async fn users(
        &self,
        partner: &PartnerName,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Page<User>, StoreError> {
        delegate!(self.users(partner, after, limit))
    }

    async fn replace_user_key(
        &self,
        partner: &PartnerName,
        id: &UserId,
        api_key: &str,
    ) -> Result<User, StoreError> {
        delegate!(self.replace_user_key(partner, id, api_key))
    }

    async fn delete_user(
        &self,
        partner: &PartnerName,
        id: &UserId,
    ) -> Result<Vec<Domain>, StoreError> {
        delegate!(self.delete_user(partner, id))
    }
}

impl WebsiteStore for AnyStore {
    async fn create_website_within(
        &self,
        partner: &PartnerName,
        website: &Website,
        limits: WebsiteLimits,
    ) -> Result<WebsiteRecord, StoreError> {
        delegate!(self.create_website_within(partner, website, limits))
    }

    async fn website(&self, domain: &Domain) -> Result<Option<WebsiteRecord>, StoreError> {
        delegate!(self.website(domain))
    }

    async fn website_owner(&self, domain: &Domain) -> Result<Option<WebsiteOwner>, StoreError> {
        delegate!(self.website_owner(domain))
    }

    async fn update_website_within(
        &self,
        website: &Website,
        expected_revision: u64,
        held_callbacks_at_most: usize,
    ) -> Result<WebsiteRecord, StoreError> {
        delegate!(self.update_website_within(website, expected_revision, held_callbacks_at_most))
    }

    async fn delete_website(
        &self,
        domain: &Domain,
        expected_revision: Option<u64>,
    ) -> Result<(), StoreError> {
        delegate!(self.delete_website(domain, expected_revision))
    }

    async fn websites(
        &self,
        partner: &PartnerName,
        user: Option<&UserId>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Page<WebsiteRecord>, StoreError> {
        delegate!(self.websites(partner, user, after, limit))
    }

    async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        delegate!(self.snapshot())
    }

    async fn version(&self) -> Result<u64, StoreError> {
        delegate!(self.version())
    }

    async fn position(&self) -> Result<Position, StoreError> {
        delegate!(self.position())
    }

    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change> {
        match self {
            AnyStore::Embedded(store) => store.subscribe(),
            AnyStore::Redis(store) => store.subscribe(),
        }
    }

    fn feed_restarts(&self) -> tokio::sync::watch::Receiver<u64> {
        match self {
            AnyStore::Embedded(store) => store.feed_restarts(),
            AnyStore::Redis(store) => store.feed_restarts(),
        }
    }
}

impl OutboxStore for AnyStore {
    async fn enqueue_delivery(
        &self,
        delivery: &Delivery,
        waiting_at_most: usize,
    ) -> Result<(), StoreError> {
        delegate!(self.enqueue_delivery(delivery, waiting_at_most))
    }

    async fn claim_deliveries(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
        shares: &ClaimShares,
    ) -> Result<Vec<Delivery>, StoreError> {
        delegate!(self.claim_deliveries(now_ms, lease_until_ms, limit, shares))
    }

    async fn retry_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        delegate!(self.retry_delivery(delivery))
    }

    async fn finish_delivery(&self, id: &str) -> Result<(), StoreError> {
        delegate!(self.finish_delivery(id))
    }

    async fn waiting_deliveries(
        &self,
        partner: &PartnerName,
        at_most: usize,
    ) -> Result<usize, StoreError> {
        delegate!(self.waiting_deliveries(partner, at_most))
    }

    async fn deliveries(&self) -> Result<Vec<Delivery>, StoreError> {
        delegate!(self.deliveries())
    }
}

impl SharedState for AnyStore {
    async fn shared_secret(&self, name: &str, candidate: &str) -> Result<String, StoreError> {
        delegate!(self.shared_secret(name, candidate))
    }

    async fn put_ephemeral(&self, key: &str, value: &str, until_ms: u64) -> Result<(), StoreError> {
        delegate!(self.put_ephemeral(key, value, until_ms))
    }

    async fn ephemeral(&self, key: &str, now_ms: u64) -> Result<Option<String>, StoreError> {
        delegate!(self.ephemeral(key, now_ms))
    }

    async fn count(&self, key: &str, until_ms: u64) -> Result<u64, StoreError> {
        delegate!(self.count(key, until_ms))
    }

    async fn remove_ephemeral(&self, key: &str) -> Result<(), StoreError> {
        delegate!(self.remove_ephemeral(key))
    }

    async fn lease(
        &self,
        key: &str,
        holder: &str,
        now_ms: u64,
        until_ms: u64,
    ) -> Result<bool, StoreError> {
        delegate!(self.lease(key, holder, now_ms, until_ms))
    }
}

impl TrafficStore for AnyStore {
    async fn add_traffic(
        &self,
        domain: &Domain,
        owner: Owner<'_>,
        minute: u64,
        counts: &Counts,
        events: &[TrafficEvent],
    ) -> Result<(), StoreError> {
        delegate!(self.add_traffic(domain, owner, minute, counts, events))
    }

    async fn traffic(
        &self,
        domain: &Domain,
        resolution: Resolution,
        from: u64,
        to: u64,
    ) -> Result<Vec<Counts>, StoreError> {
        delegate!(self.traffic(domain, resolution, from, to))
    }

    async fn events(&self, domain: &Domain, limit: usize) -> Result<Vec<TrafficEvent>, StoreError> {
        delegate!(self.events(domain, limit))
    }
}

impl RulesetStore for AnyStore {
    async fn push_ruleset(
        &self,
        record: &PushedRuleset,
        bytes: &[u8],
    ) -> Result<Pushed, StoreError> {
        delegate!(self.push_ruleset(record, bytes))
    }

    async fn pushed_rulesets(&self) -> Result<Listed<Vec<PushedRuleset>>, StoreError> {
        delegate!(self.pushed_rulesets())
    }

    async fn ruleset_bytes(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        delegate!(self.ruleset_bytes(sha256))
    }

    async fn ruleset_states(
        &self,
    ) -> Result<Listed<std::collections::BTreeMap<String, StoredState>>, StoreError> {
        delegate!(self.ruleset_states())
    }

    async fn put_ruleset_state(
        &self,
        name: &str,
        expected: u64,
        state: &RulesetState,
    ) -> Result<u64, StoreError> {
        delegate!(self.put_ruleset_state(name, expected, state))
    }

    async fn rulesets_revision(&self) -> Result<u64, StoreError> {
        delegate!(self.rulesets_revision())
    }

    async fn add_shadow_results(
        &self,
        name: &str,
        version: &str,
        results: &ShadowResults,
    ) -> Result<(), StoreError> {
        delegate!(self.add_shadow_results(name, version, results))
    }

    async fn shadow_results(&self, name: &str, version: &str) -> Result<ShadowResults, StoreError> {
        delegate!(self.shadow_results(name, version))
    }

    async fn remove_ruleset(&self, name: &str, version: &str) -> Result<bool, StoreError> {
        delegate!(self.remove_ruleset(name, version))
    }
}
