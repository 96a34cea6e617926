//! botgate's store: partners, users and websites behind one interface, with two
//! backends (an embedded single-file database, and Redis for a cluster) that pass the
//! same conformance suite, and a change feed a gateway keeps its snapshot fresh with.
//!
//! Every write bumps one monotonically increasing version and publishes a [`Change`]
//! carrying it. A reader applies changes in order and, when it sees a gap or on a
//! timer, reloads a [`Snapshot`]: missed messages heal by themselves.

pub mod any;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod embedded;
pub mod follower;
mod outbox;
pub mod redis_store;
pub mod rulesets;
pub mod traffic;

pub use any::{AnyStore, StoreConfig};
pub use embedded::EmbeddedStore;
pub use follower::{Follower, Freshness, WebsiteIndex};
pub use outbox::ClaimShares;
pub use redis_store::{RedisConfig, RedisStore, SentinelConfig};
pub use rulesets::RulesetStore;
pub use traffic::{Counts, Resolution, TrafficEvent, TrafficStore};

use botgate_model::{Domain, FrameOrigin, PartnerName, User, UserId, Website};
use serde::{Deserialize, Serialize};
use std::future::Future;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The thing to create exists already (a user id of the partner, a domain).
    #[error("{0} already exists")]
    Conflict(String),
    /// The thing to change or to hang something under does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The record changed since it was read: read it again and retry.
    #[error("{0} was changed concurrently; read it again")]
    Stale(String),
    /// The backend failed (I/O, connection, a refused command): what the store was
    /// doing, and the backend's own error when there is one.
    #[error("store backend: {context}")]
    Backend {
        context: String,
        #[source]
        cause: Option<BackendCause>,
    },
    /// A bounded collection is full: a partner's webhooks waiting for delivery.
    #[error("{0} is full")]
    Full(String),
    /// A partner holds as many users or websites as the operator allows: what and how
    /// many, as [`at_limit_message`] says it.
    #[error("{0}")]
    AtLimit(String),
    /// A stored record could not be read back.
    #[error("stored record {key} is unreadable: {reason}")]
    Corrupt { key: String, reason: String },
    /// A host name the website would answer for belongs to another website, or its
    /// domain lies under or above another partner's website. It never says whose.
    #[error("{field}: {host} {clash}")]
    HostTaken {
        /// The website field that names the host: `domain` or `subdomain`.
        field: HostField,
        host: String,
        clash: HostClash,
    },
}

/// The backend's own error under a [`StoreError::Backend`], shared: one failed commit
/// of the embedded store answers every write it carried.
pub type BackendCause = std::sync::Arc<dyn std::error::Error + Send + Sync>;

impl StoreError {
    /// A backend failure while doing `context`, caused by `cause`.
    pub fn backend(
        context: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Backend {
            context: context.into(),
            cause: Some(std::sync::Arc::new(cause)),
        }
    }

    /// A backend failure that no library error describes.
    pub fn backend_says(context: impl Into<String>) -> StoreError {
        StoreError::Backend {
            context: context.into(),
            cause: None,
        }
    }
}

/// The website field a host name comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostField {
    Domain,
    Subdomain,
}

impl HostField {
    pub fn as_str(self) -> &'static str {
        match self {
            HostField::Domain => "domain",
            HostField::Subdomain => "subdomain",
        }
    }

    fn parse(word: &str) -> Option<HostField> {
        [HostField::Domain, HostField::Subdomain]
            .into_iter()
            .find(|field| field.as_str() == word)
    }
}

impl std::fmt::Display for HostField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a host name clashes with the websites already stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostClash {
    /// Another website answers for this very name.
    Taken,
    /// The domain lies under another partner's website's domain.
    Under,
    /// Another partner's website's domain lies under this domain.
    Above,
}

impl HostClash {
    /// The word the Redis scripts answer with.
    fn word(self) -> &'static str {
        match self {
            HostClash::Taken => "taken",
            HostClash::Under => "under",
            HostClash::Above => "above",
        }
    }

    fn parse(word: &str) -> Option<HostClash> {
        [HostClash::Taken, HostClash::Under, HostClash::Above]
            .into_iter()
            .find(|clash| clash.word() == word)
    }
}

impl std::fmt::Display for HostClash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HostClash::Taken => "already exists as a host name of another website",
            HostClash::Under => {
                "lies under the domain of a website that already exists in another account"
            }
            HostClash::Above => {
                "lies above the domain of a website that already exists in another account"
            }
        })
    }
}

/// Every host name `website` answers for, with the field that names it: the domain
/// first, then each subdomain. A host name belongs to one website of all partners.
pub fn host_claims(website: &Website) -> impl Iterator<Item = (String, HostField)> {
    // `host_names` lists the domain first.
    website
        .host_names()
        .into_iter()
        .enumerate()
        .map(|(i, host)| {
            let field = if i == 0 {
                HostField::Domain
            } else {
                HostField::Subdomain
            };
            (host, field)
        })
}

/// Milliseconds since the Unix epoch: the clock of the outbox, expiries and leases.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// The lower-case hex SHA-256 of an API key. Both kinds of key are looked up by their
/// digest, never by the key itself, so no index compares a presented key byte by byte
/// (and a partner key itself is never stored).
pub fn key_digest(key: &str) -> String {
    sha256_hex(key.as_bytes())
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 15), 16).unwrap_or('0'));
    }
    hex
}

/// A partner: its name, the SHA-256 of its key (the key itself is shown once and never
/// stored), and its webhook signing secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartnerRecord {
    pub name: PartnerName,
    /// Lower-case hex SHA-256 of the partner's key.
    pub key_sha256: String,
    /// The secret webhooks to this partner are signed with (`whsec_…`).
    pub webhook_secret: String,
    /// The origins of the partner's control panel, which may frame the dashboard.
    #[serde(default, deserialize_with = "list_or_empty_table")]
    pub frame_origins: Vec<FrameOrigin>,
}

/// A list, or the empty object Redis's Lua `cjson` writes for an empty list.
fn list_or_empty_table<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored<T> {
        List(Vec<T>),
        Empty {},
    }
    Ok(match Stored::deserialize(deserializer)? {
        Stored::List(items) => items,
        Stored::Empty {} => Vec::new(),
    })
}

/// One field of a partner's record, changed alone ([`AccountStore::update_partner`]): a write
/// that read the record earlier never brings another field back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartnerChange {
    /// A new key (its SHA-256): the old key stops working at once.
    Key { key_sha256: String },
    /// A new webhook signing secret.
    WebhookSecret(String),
    /// The panel origins that may frame the dashboard, all at once.
    FrameOrigins(Vec<FrameOrigin>),
}

impl PartnerChange {
    fn apply(self, partner: &mut PartnerRecord) {
        match self {
            PartnerChange::Key { key_sha256 } => partner.key_sha256 = key_sha256,
            PartnerChange::WebhookSecret(secret) => partner.webhook_secret = secret,
            PartnerChange::FrameOrigins(origins) => partner.frame_origins = origins,
        }
    }
}

/// A website's user id, read from its record without the rest.
#[derive(Deserialize)]
pub(crate) struct StoredUserId {
    pub user_id: UserId,
}

/// A website record's owner, read without the rest of it: the embedded store's record
/// as a whole, the website's JSON beside Redis's `partner` field.
#[derive(Deserialize)]
pub(crate) struct StoredOwner {
    pub partner: PartnerName,
    pub website: StoredUserId,
}

impl From<StoredOwner> for WebsiteOwner {
    fn from(stored: StoredOwner) -> WebsiteOwner {
        WebsiteOwner {
            partner: stored.partner,
            user: stored.website.user_id,
        }
    }
}

/// What [`StoreError::AtLimit`] says: `partner holds 100 websites, the most allowed`.
pub fn at_limit_message(partner: &PartnerName, what: &str, held: u64) -> String {
    format!(
        "partner {} holds {held} {what}, the most allowed",
        partner.as_str()
    )
}

/// Logs a website record a listing leaves out because it cannot be read (damaged, or
/// written by a later release during an upgrade): the rest of the listing is answered.
pub(crate) fn unreadable_left_out(error: &StoreError) {
    // At most once a minute: during an upgrade every listing may meet such records.
    static LAST_LOGGED_S: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now_s = now_ms() / 1000;
    let last = LAST_LOGGED_S.load(std::sync::atomic::Ordering::Relaxed);
    if now_s >= last + 60
        && LAST_LOGGED_S
            .compare_exchange(
                last,
                now_s,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            )
            .is_ok()
    {
        tracing::error!(%error, "a website listing leaves out a record it cannot read (logged at most once a minute)");
    }
}

/// A website as stored: the partner that owns it, and the revision the next
/// conditional write must name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebsiteRecord {
    pub partner: PartnerName,
    /// Changes on every write of this website, from a counter of the store's that
    /// never gives a number twice: not even to a domain deleted and created again.
    pub revision: u64,
    pub website: Website,
}

impl WebsiteRecord {
    pub fn owner(&self) -> Owner<'_> {
        Owner {
            partner: &self.partner,
            user: &self.website.user_id,
        }
    }
}

/// Whose a website is: its partner and user. What a gateway keeps for a website
/// (cached answers, counted traffic) is kept for its owner, so a domain deleted and
/// created again for someone else starts with none of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner<'a> {
    pub partner: &'a PartnerName,
    pub user: &'a UserId,
}

/// An [`Owner`] held: what a buffer of a website's traffic, or a record read only for
/// its owner, keeps.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WebsiteOwner {
    pub partner: PartnerName,
    pub user: UserId,
}

impl WebsiteOwner {
    pub fn as_owner(&self) -> Owner<'_> {
        Owner {
            partner: &self.partner,
            user: &self.user,
        }
    }
}

impl From<Owner<'_>> for WebsiteOwner {
    fn from(owner: Owner<'_>) -> WebsiteOwner {
        WebsiteOwner {
            partner: owner.partner.clone(),
            user: owner.user.clone(),
        }
    }
}

/// One change, as the feed publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The store's version after the change.
    pub version: u64,
    pub what: Changed,
}

/// What a change touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Changed {
    Partner { name: PartnerName },
    User { partner: PartnerName, id: UserId },
    Website { domain: Domain },
}

/// Every website, and the position they are current at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub version: u64,
    /// The history `version` counts in ([`Position::history`]).
    pub history: String,
    pub websites: Vec<WebsiteRecord>,
    /// The website records the store holds but could not read, left out of `websites`:
    /// one such record (written by a later release, or damaged) must not keep every
    /// gateway from reading all the others.
    pub unreadable: Vec<Unreadable>,
}

/// A stored website record that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub domain: String,
    pub reason: String,
}

/// Where the store stands: its version, and the history the version counts in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Position {
    pub version: u64,
    /// Which history the versions count in. On Redis, the master's replication id:
    /// a promoted replica starts a new one, and may give numbers a follower already
    /// applied to other changes (the old master's last writes that never reached it).
    /// Empty for the embedded store, which has one history.
    pub history: String,
}

/// A page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `after` to get the next page; `None` on the last page.
    pub next: Option<String>,
}

/// A webhook in the outbox: what to send where, and how its delivery stands. The same
/// `id` (the `webhook-id` header) is sent on every attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// `msg_…`, unique; the receiver deduplicates on it.
    pub id: String,
    /// The partner whose secret signs it.
    pub partner: PartnerName,
    /// The `callbackUrl` the change was sent with.
    pub url: String,
    /// The JSON body, fixed when the change finished (the website as it was then).
    pub body: String,
    /// When it was queued, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Attempts made so far.
    pub attempts: u32,
    /// When it is next due, in milliseconds since the Unix epoch; while a gateway is
    /// delivering it, the end of that gateway's lease.
    pub next_attempt_ms: u64,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
}

/// The store interface, by concern. Both backends implement every part and pass the
/// conformance suite (`conformance::run`, behind the `conformance` feature).
pub trait Store:
    AccountStore + WebsiteStore + OutboxStore + SharedState + TrafficStore + RulesetStore
{
}

impl<S: AccountStore + WebsiteStore + OutboxStore + SharedState + TrafficStore + RulesetStore> Store
    for S
{
}

/// Partners and their users.
pub trait AccountStore: Send + Sync + 'static {
    /// Adds or replaces a partner.
    fn put_partner(
        &self,
        partner: &PartnerRecord,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Adds a partner; [`StoreError::Conflict`] when one of that name exists (two
    /// creations at once: one wins, the other's key is never shown as working).
    fn create_partner(
        &self,
        partner: &PartnerRecord,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Changes one field of the partner `name` as it is stored now; the record after
    /// the change, or [`StoreError::NotFound`].
    fn update_partner(
        &self,
        name: &PartnerName,
        change: PartnerChange,
    ) -> impl Future<Output = Result<PartnerRecord, StoreError>> + Send;

    /// The partner whose key hashes to `key_sha256` (see [`key_digest`]).
    fn partner_by_key(
        &self,
        key_sha256: &str,
    ) -> impl Future<Output = Result<Option<PartnerRecord>, StoreError>> + Send;

    /// The partner called `name`.
    fn partner(
        &self,
        name: &PartnerName,
    ) -> impl Future<Output = Result<Option<PartnerRecord>, StoreError>> + Send;

    /// Every partner, in name order (an operator's list: partners are few).
    fn partners(&self) -> impl Future<Output = Result<Vec<PartnerRecord>, StoreError>> + Send;

    /// Creates a user; [`StoreError::Conflict`] when the partner has a user with that
    /// id, [`StoreError::NotFound`] when the partner does not exist,
    /// [`StoreError::AtLimit`] when it holds `at_most` users already.
    fn create_user_within(
        &self,
        user: &User,
        at_most: usize,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Creates a user, however many the partner holds.
    fn create_user(&self, user: &User) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.create_user_within(user, usize::MAX)
    }

    /// The partner's user `id`.
    fn user(
        &self,
        partner: &PartnerName,
        id: &UserId,
    ) -> impl Future<Output = Result<Option<User>, StoreError>> + Send;

    /// The user whose key is `api_key`.
    fn user_by_key(
        &self,
        api_key: &str,
    ) -> impl Future<Output = Result<Option<User>, StoreError>> + Send;

    /// The partner's users in id order, after `after`, at most `limit`.
    fn users(
        &self,
        partner: &PartnerName,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Page<User>, StoreError>> + Send;

    /// Gives the partner's user `id` the key `api_key` in place of its own, which stops
    /// working at once; the user as stored, [`StoreError::NotFound`] when there is no
    /// such user, [`StoreError::Conflict`] when another user has that key.
    fn replace_user_key(
        &self,
        partner: &PartnerName,
        id: &UserId,
        api_key: &str,
    ) -> impl Future<Output = Result<User, StoreError>> + Send;

    /// Deletes the partner's user `id` and every website of that user, a batch
    /// ([`DELETED_PER_WRITE`]) a write, the user with the last; the domains deleted, or
    /// [`StoreError::NotFound`]. Cut short, it leaves the user with the websites not yet
    /// deleted, and runs again.
    fn delete_user(
        &self,
        partner: &PartnerName,
        id: &UserId,
    ) -> impl Future<Output = Result<Vec<Domain>, StoreError>> + Send;
}

/// The most websites one store write deletes with their user: a user's deletion is a
/// write per batch (each its own transaction or script), so one of a hundred thousand
/// websites never holds the store for everyone else.
pub const DELETED_PER_WRITE: usize = 50;

/// What one partner's websites may hold, each checked in the write that would add to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebsiteLimits {
    /// Websites ([`StoreError::AtLimit`] past it).
    pub websites: usize,
    /// `callbackUrl`s held by the partner's websites in `setup` for the end of their
    /// work ([`StoreError::Full`] past it): they go into the outbox unrefused when the
    /// work ends, so they are bounded when they are accepted.
    pub held_callbacks: usize,
}

impl WebsiteLimits {
    /// No limit on either.
    pub const NONE: WebsiteLimits = WebsiteLimits {
        websites: usize::MAX,
        held_callbacks: usize::MAX,
    };
}

/// The refusal of `partner`'s `callbackUrl`s past the most its websites may hold.
pub fn held_callbacks_full(partner: &PartnerName, held: u64) -> StoreError {
    StoreError::Full(format!(
        "partner {} has {held} `callbackUrl`s waiting for its websites in `setup`, the \
         most allowed",
        partner.as_str()
    ))
}

/// Websites, and the feed of their changes that every gateway follows.
pub trait WebsiteStore: Send + Sync + 'static {
    /// Creates a website of `partner`'s user `website.user_id` at a revision no earlier
    /// website of the domain had (a write read from a deleted one is stale);
    /// [`StoreError::Conflict`] when the domain is taken (by anyone),
    /// [`StoreError::NotFound`] when the partner has no such user,
    /// [`StoreError::AtLimit`] when the partner holds `limits.websites` websites already,
    /// [`StoreError::Full`] when its held callbacks would pass `limits.held_callbacks`.
    fn create_website_within(
        &self,
        partner: &PartnerName,
        website: &Website,
        limits: WebsiteLimits,
    ) -> impl Future<Output = Result<WebsiteRecord, StoreError>> + Send;

    /// Creates a website, however many the partner holds.
    fn create_website(
        &self,
        partner: &PartnerName,
        website: &Website,
    ) -> impl Future<Output = Result<WebsiteRecord, StoreError>> + Send {
        self.create_website_within(partner, website, WebsiteLimits::NONE)
    }

    /// The website of `domain`, whoever owns it.
    fn website(
        &self,
        domain: &Domain,
    ) -> impl Future<Output = Result<Option<WebsiteRecord>, StoreError>> + Send;

    /// The owner of the website of `domain`, read from its record even when the rest
    /// of it cannot be read (so that only its owner is told that it exists); `None`
    /// when there is none, or when even that cannot be read.
    fn website_owner(
        &self,
        domain: &Domain,
    ) -> impl Future<Output = Result<Option<WebsiteOwner>, StoreError>> + Send;

    /// Replaces a website if it is still at `expected_revision`
    /// ([`StoreError::Stale`] otherwise); the new record, at a higher revision.
    /// [`StoreError::Full`] when the write adds held callbacks and its partner's would
    /// pass `held_callbacks_at_most`.
    fn update_website_within(
        &self,
        website: &Website,
        expected_revision: u64,
        held_callbacks_at_most: usize,
    ) -> impl Future<Output = Result<WebsiteRecord, StoreError>> + Send;

    /// Replaces a website, however many callbacks its partner's websites hold.
    fn update_website(
        &self,
        website: &Website,
        expected_revision: u64,
    ) -> impl Future<Output = Result<WebsiteRecord, StoreError>> + Send {
        self.update_website_within(website, expected_revision, usize::MAX)
    }

    /// Deletes a website (only if it is still at `expected_revision`, when given:
    /// [`StoreError::Stale`] otherwise); [`StoreError::NotFound`] when there is none.
    fn delete_website(
        &self,
        domain: &Domain,
        expected_revision: Option<u64>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The partner's websites in domain order (only `user`'s when given), after
    /// `after`, at most `limit`.
    fn websites(
        &self,
        partner: &PartnerName,
        user: Option<&UserId>,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Page<WebsiteRecord>, StoreError>> + Send;

    /// Every website and the version it is current at.
    fn snapshot(&self) -> impl Future<Output = Result<Snapshot, StoreError>> + Send;

    /// The current version.
    fn version(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The current version and the history it counts in.
    fn position(&self) -> impl Future<Output = Result<Position, StoreError>> + Send;

    /// A receiver of every change from now on, in version order.
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change>;

    /// Counts the change feed's restarts: each time it is back after a lost
    /// connection, when changes may have gone by unheard (a follower reloads then).
    fn feed_restarts(&self) -> tokio::sync::watch::Receiver<u64>;
}

/// The outbox of webhooks waiting to be sent.
pub trait OutboxStore: Send + Sync + 'static {
    /// Puts a webhook in the outbox (durably: on Redis, confirmed by `WAIT`); a
    /// delivery with the same id is replaced. A new one is refused with
    /// [`StoreError::Full`] while `waiting_at_most` of its partner's wait already
    /// (`usize::MAX`: never refused, and nothing counted).
    fn enqueue_delivery(
        &self,
        delivery: &Delivery,
        waiting_at_most: usize,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Takes up to `limit` deliveries due at `now_ms`, shared among their partners by
    /// `shares` (each partner's oldest due first), and leases them until
    /// `lease_until_ms`: their `next_attempt_ms` becomes that, so no other gateway
    /// takes them meanwhile, and a gateway that dies mid-delivery leaves them to be
    /// taken again when the lease ends. The answer carries the lease, oldest due first.
    /// The work is bounded by `limit` and the partners `shares` holds, not by how many
    /// deliveries wait.
    fn claim_deliveries(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
        shares: &ClaimShares,
    ) -> impl Future<Output = Result<Vec<Delivery>, StoreError>> + Send;

    /// Stores a delivery's new state after a failed attempt (`attempts`,
    /// `next_attempt_ms`, `last_error`); nothing when it is gone.
    fn retry_delivery(
        &self,
        delivery: &Delivery,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Removes a delivery (delivered, or given up); nothing when it is gone.
    fn finish_delivery(&self, id: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every delivery in the outbox, in id order (for operators and tests).
    fn deliveries(&self) -> impl Future<Output = Result<Vec<Delivery>, StoreError>> + Send;

    /// How many of `partner`'s deliveries wait, counted up to `at_most` (a bounded
    /// read, for a refusal before a write).
    fn waiting_deliveries(
        &self,
        partner: &PartnerName,
        at_most: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;
}

/// What the gateways of a cluster share besides records: secrets, short-lived values,
/// counters and leases.
pub trait SharedState: Send + Sync + 'static {
    /// The cluster-wide secret called `name` (for example the key that signs challenge
    /// passes): the one already stored, or else `candidate`, stored now. Every gateway
    /// sharing the store gets the same answer, whoever asked first.
    fn shared_secret(
        &self,
        name: &str,
        candidate: &str,
    ) -> impl Future<Output = Result<String, StoreError>> + Send;

    /// Keeps `value` under `key` until `until_ms` (ms since the Unix epoch), for every
    /// gateway to read: an ACME challenge's answer, say.
    fn put_ephemeral(
        &self,
        key: &str,
        value: &str,
        until_ms: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The value under `key`, unless it has expired at `now_ms`.
    fn ephemeral(
        &self,
        key: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<Option<String>, StoreError>> + Send;

    /// Adds one to the counter `key`, which starts at 0 and is forgotten at `until_ms`
    /// (the end of the window it counts in; set by the first count); the count after
    /// this one. For every gateway of a cluster at once.
    fn count(
        &self,
        key: &str,
        until_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Forgets `key`.
    fn remove_ephemeral(&self, key: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// A lease: `key` becomes `holder`'s until `until_ms` if it is free, expired at
    /// `now_ms`, or `holder`'s already (which extends it). Whether `holder` has it.
    fn lease(
        &self,
        key: &str,
        holder: &str,
        now_ms: u64,
        until_ms: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}
