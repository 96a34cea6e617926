//! The embedded backend: one redb file under the data directory, crash-safe (every
//! write is a durable transaction), with the change feed in-process.

use crate::rulesets::{
    Listed, Pushed, PushedRuleset, RulesetState, RulesetStore, SHADOW_SAMPLES_KEPT, ShadowResults,
    StoredState, runs, sort_pushed, unreadable, version_key,
};
use crate::traffic::{Counts, Resolution, TrafficEvent, TrafficStore};
use crate::{
    AccountStore, Change, Changed, ClaimShares, Delivery, HostClash, HostField, OutboxStore, Owner,
    Page, PartnerRecord, Position, SharedState, Snapshot, StoreError, Unreadable, WebsiteLimits,
    WebsiteOwner, WebsiteRecord, WebsiteStore, host_claims, key_digest,
};
use botgate_model::{Domain, PartnerName, User, UserId, Website};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, TableHandle};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Partner name → [`PartnerRecord`] (JSON).
const PARTNERS: TableDefinition<&str, &[u8]> = TableDefinition::new("partners");
/// Partner key SHA-256 (hex) → partner name.
const PARTNER_KEYS: TableDefinition<&str, &str> = TableDefinition::new("partner_keys");
/// `partner\n user id` → [`User`] (JSON).
const USERS: TableDefinition<&str, &[u8]> = TableDefinition::new("users");
/// The SHA-256 of a user key → the user's key in `USERS`: keys are looked up by digest,
/// so no lookup compares a presented key byte by byte.
const USER_KEYS: TableDefinition<&str, &str> = TableDefinition::new("user_keys");
/// Domain → [`WebsiteRecord`] (JSON).
const WEBSITES: TableDefinition<&str, &[u8]> = TableDefinition::new("websites");
/// `partner\n user id\n domain` → (): a user's websites, in domain order.
const WEBSITES_BY_USER: TableDefinition<&str, ()> = TableDefinition::new("websites_by_user");
/// `partner\n domain` → (): a partner's websites, in domain order.
const WEBSITES_BY_PARTNER: TableDefinition<&str, ()> = TableDefinition::new("websites_by_partner");
/// Host name → the domain of the one website that answers for it.
const HOSTS: TableDefinition<&str, &str> = TableDefinition::new("hosts");
/// Reversed domain (`example.shop`, see [`Domain::reversed`]) → the partner owning the
/// website: the websites under a domain are one range.
const DOMAIN_TREE: TableDefinition<&str, &str> = TableDefinition::new("domain_tree");
/// `{reversed domain}\n{partner}` → how many of the partner's websites are under that
/// domain (each website counts under every domain above it): whether a domain has
/// another partner's websites under it is one short range, however many there are.
/// Counted afresh at every open.
const DOMAIN_TREE_BELOW: TableDefinition<&str, u64> = TableDefinition::new("domain_tree_below");
/// `"version"` → the store's version; `"website_revision"` → the last website revision
/// given; `"host_index"` → 1 once `HOSTS` and `DOMAIN_TREE` cover every website (stores
/// written before they existed get them at open).
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `partner\nusers` and `partner\nwebsites` → how many the partner holds (its quotas);
/// counted afresh at every open.
const HOLDINGS: TableDefinition<&str, u64> = TableDefinition::new("holdings");
/// Cluster-wide secrets by name (see [`SharedState::shared_secret`](crate::SharedState::shared_secret)).
const SECRETS: TableDefinition<&str, &str> = TableDefinition::new("secrets");
/// Outbox: delivery id → [`Delivery`] JSON.
const DELIVERIES: TableDefinition<&str, &[u8]> = TableDefinition::new("deliveries");
/// Outbox index: `{partner}\n{next_attempt_ms:020}:{id}` → (): a partner's waiting
/// webhooks (their bound), in the order they are due.
const DELIVERIES_OF_PARTNER_DUE: TableDefinition<&str, ()> =
    TableDefinition::new("deliveries_of_partner_due");
/// Outbox index: `{next_attempt_ms:020}\n{partner}` → (), each partner with waiting
/// webhooks under when its first is due: a claim reads the partners, not every delivery.
const PARTNERS_DUE: TableDefinition<&str, ()> = TableDefinition::new("partners_due");
/// The outbox indexes of releases before [`DELIVERIES_OF_PARTNER_DUE`], removed at open.
const FORMER_OUTBOX_INDEXES: [TableDefinition<&str, ()>; 2] = [
    TableDefinition::new("deliveries_due"),
    TableDefinition::new("deliveries_of_partner"),
];
/// Short-lived values and leases: key → `{until_ms:020}` and the value.
const EPHEMERAL: TableDefinition<&str, &str> = TableDefinition::new("ephemeral");
/// When each ephemeral entry expires: `{until_ms:020}:{key}` → (). Every ephemeral
/// write removes a few expired entries, so the table holds the live ones and a little.
const EPHEMERAL_DUE: TableDefinition<&str, ()> = TableDefinition::new("ephemeral_due");
/// Traffic buckets: `domain \n m|h \n number` → the bucket's [`Counts`] (JSON).
const TRAFFIC: TableDefinition<&str, &[u8]> = TableDefinition::new("traffic");
/// The latest events: `domain \n sequence` → a [`TrafficEvent`] (JSON).
const EVENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("events");
/// Pushed rule components' bytes: SHA-256 (hex) → bytes.
const RULESET_BLOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("ruleset_blobs");
/// Pushed rule components: `name@version` → [`PushedRuleset`] (JSON).
const RULESET_VERSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("ruleset_versions");
/// Shadow results: `name@version` → [`ShadowResults`] (JSON).
const SHADOW_RESULTS: TableDefinition<&str, &[u8]> = TableDefinition::new("shadow_results");
/// What runs of each name: name → `{revision:020}` and the [`RulesetState`] (JSON).
const RULESET_STATES: TableDefinition<&str, &[u8]> = TableDefinition::new("ruleset_states");
/// Expired ephemeral entries removed by one ephemeral write, at most.
const SWEEP_PER_WRITE: usize = 16;

/// How many changes a slow subscriber may fall behind before it sees a gap (and
/// reloads a snapshot).
const FEED_CAPACITY: usize = 4096;

/// The embedded store. Cheap to clone; all clones share the database, the writer and
/// the feed.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    feed: broadcast::Sender<Change>,
    writer: Arc<Writer>,
}

/// The most writes one transaction commits together.
const MAX_GROUP: usize = 256;

/// A write's work: checks, then changes, in the transaction it is given. It returns its
/// value and what it changed. **Invariant:** a write that refuses (`Conflict`,
/// `NotFound`, `Stale`) does so before it changes anything, because it shares its
/// transaction with the other writes of its group; a backend error aborts the group.
type WriteWork = Box<
    dyn FnOnce(
            &redb::WriteTransaction,
        ) -> Result<(Box<dyn std::any::Any + Send>, Vec<Changed>), StoreError>
        + Send,
>;

struct WriteJob {
    work: WriteWork,
    reply: tokio::sync::oneshot::Sender<Result<Box<dyn std::any::Any + Send>, StoreError>>,
}

/// The one writer thread: group commit. It takes every write queued while the last
/// transaction was committing, runs them in one transaction, commits once (one disk
/// sync for the group), and publishes their changes in order.
struct Writer {
    queue: Option<std::sync::mpsc::Sender<WriteJob>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the queue ends the thread; joining it releases the database file
        // before a reopen in the same process.
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run_writer(
    db: Arc<Database>,
    queue: std::sync::mpsc::Receiver<WriteJob>,
    feed: broadcast::Sender<Change>,
) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let mut replies = Vec::with_capacity(group.len());
        let committed = (|| -> Result<Vec<Change>, StoreError> {
            let txn = db.begin_write().map_err(backend)?;
            let mut changed = Vec::new();
            for job in group {
                match (job.work)(&txn) {
                    Ok((value, what)) => {
                        changed.extend(what);
                        replies.push((job.reply, Ok(value)));
                    }
                    Err(
                        refused @ (StoreError::Conflict(_)
                        | StoreError::NotFound(_)
                        | StoreError::Stale(_)
                        | StoreError::Full(_)
                        | StoreError::AtLimit(_)
                        | StoreError::HostTaken { .. }),
                    ) => {
                        replies.push((job.reply, Err(refused)));
                    }
                    Err(failed) => {
                        replies.push((job.reply, Err(failed)));
                        return Err(StoreError::backend_says(
                            "another write of the same commit failed; nothing was written",
                        ));
                    }
                }
            }
            let mut changes = Vec::with_capacity(changed.len());
            {
                let mut meta = txn.open_table(META).map_err(backend)?;
                let mut version = version_in(&meta)?;
                for what in changed {
                    version += 1;
                    changes.push(Change { version, what });
                }
                meta.insert("version", version).map_err(backend)?;
            }
            txn.commit().map_err(backend)?;
            Ok(changes)
        })();
        match committed {
            Ok(changes) => {
                for change in changes {
                    // No subscriber is not an error.
                    let _ = feed.send(change);
                }
                for (reply, result) in replies {
                    let _ = reply.send(result);
                }
            }
            Err(err) => {
                let cause: crate::BackendCause = std::sync::Arc::new(err);
                for (reply, result) in replies {
                    let _ = reply.send(match result {
                        Err(own @ (StoreError::Backend { .. } | StoreError::Corrupt { .. })) => {
                            Err(own)
                        }
                        _ => Err(StoreError::Backend {
                            context: "the commit of this write failed".into(),
                            cause: Some(cause.clone()),
                        }),
                    });
                }
            }
        }
    }
}

fn backend(err: impl Into<redb::Error>) -> StoreError {
    StoreError::backend("the embedded store", err.into())
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("model types always serialise")
}

fn decode<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|err| StoreError::Corrupt {
        key: key.to_owned(),
        reason: err.to_string(),
    })
}

fn user_key(partner: &PartnerName, id: &UserId) -> String {
    format!("{}\n{}", partner.as_str(), id.as_str())
}

/// The exclusive upper bound of keys starting with `prefix` (`\n` + 1 is `\x0b`).
fn prefix_end(prefix: &str) -> String {
    let mut end = prefix.to_owned();
    end.pop();
    end.push('\u{b}');
    end
}

impl EmbeddedStore {
    /// Adds a partner, or replaces one unless `only_new`.
    async fn write_partner(
        &self,
        partner: &PartnerRecord,
        only_new: bool,
    ) -> Result<(), StoreError> {
        let partner = partner.clone();
        self.write(move |txn| {
            let name = partner.name.as_str();
            let mut partners = txn.open_table(PARTNERS).map_err(backend)?;
            let mut keys = txn.open_table(PARTNER_KEYS).map_err(backend)?;
            if let Some(old) = get_json::<PartnerRecord>(&partners, name)? {
                if only_new {
                    return Err(StoreError::Conflict(format!("partner {name}")));
                }
                keys.remove(old.key_sha256.as_str()).map_err(backend)?;
            }
            partners
                .insert(name, encode(&partner).as_slice())
                .map_err(backend)?;
            keys.insert(partner.key_sha256.as_str(), name)
                .map_err(backend)?;
            Ok((
                (),
                vec![Changed::Partner {
                    name: partner.name.clone(),
                }],
            ))
        })
        .await
    }

    /// Opens (or creates) the store file `botgate.redb` in `data_dir`.
    pub fn open(data_dir: &Path) -> Result<EmbeddedStore, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|err| {
            StoreError::backend(format!("cannot create {}", data_dir.display()), err)
        })?;
        let path = data_dir.join("botgate.redb");
        let db = Database::create(&path).map_err(|err| match err {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::backend_says(format!(
                "{} is in use by another botgate process (a running `botgate serve`?); the \
                 embedded store has one process at a time",
                path.display()
            )),
            err => backend(err),
        })?;
        // Create every table once, so readers never meet a missing one.
        let txn = db.begin_write().map_err(backend)?;
        {
            txn.open_table(PARTNERS).map_err(backend)?;
            txn.open_table(PARTNER_KEYS).map_err(backend)?;
            txn.open_table(USERS).map_err(backend)?;
            txn.open_table(USER_KEYS).map_err(backend)?;
            txn.open_table(WEBSITES).map_err(backend)?;
            txn.open_table(WEBSITES_BY_USER).map_err(backend)?;
            txn.open_table(WEBSITES_BY_PARTNER).map_err(backend)?;
            txn.open_table(META).map_err(backend)?;
            txn.open_table(SECRETS).map_err(backend)?;
            txn.open_table(DELIVERIES).map_err(backend)?;
            txn.open_table(TRAFFIC).map_err(backend)?;
            txn.open_table(EVENTS).map_err(backend)?;
            txn.open_table(DELIVERIES_OF_PARTNER_DUE).map_err(backend)?;
            txn.open_table(PARTNERS_DUE).map_err(backend)?;
            txn.open_table(EPHEMERAL).map_err(backend)?;
            txn.open_table(EPHEMERAL_DUE).map_err(backend)?;
            txn.open_table(HOSTS).map_err(backend)?;
            txn.open_table(DOMAIN_TREE).map_err(backend)?;
            txn.open_table(RULESET_BLOBS).map_err(backend)?;
            txn.open_table(RULESET_VERSIONS).map_err(backend)?;
            txn.open_table(RULESET_STATES).map_err(backend)?;
            txn.open_table(SHADOW_RESULTS).map_err(backend)?;
            txn.open_table(HOLDINGS).map_err(backend)?;
            index_hosts_once(&txn)?;
            reindex_former_outbox(&txn)?;
            count_holdings(&txn)?;
            count_below(&txn)?;
        }
        txn.commit().map_err(backend)?;
        let (feed, _) = broadcast::channel(FEED_CAPACITY);
        let db = Arc::new(db);
        let (queue, jobs) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("botgate-store-writer".into())
            .spawn({
                let (db, feed) = (db.clone(), feed.clone());
                move || run_writer(db, jobs, feed)
            })
            .map_err(|err| StoreError::backend("cannot start the writer", err))?;
        Ok(EmbeddedStore {
            db,
            feed,
            writer: Arc::new(Writer {
                queue: Some(queue),
                thread: Some(thread),
            }),
        })
    }

    /// Runs `work` on a blocking thread (redb waits on the disk).
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || work(&db))
            .await
            .map_err(|err| StoreError::backend("a store task failed", err))?
    }

    /// Queues `work` for the writer thread, which runs it in a group transaction that
    /// also bumps the version, commits, and publishes the changes it returns, each with
    /// its own version. `work` must refuse before it changes anything (see
    /// [`WriteWork`]).
    async fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&redb::WriteTransaction) -> Result<(T, Vec<Changed>), StoreError>
        + Send
        + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = WriteJob {
            work: Box::new(move |txn| {
                work(txn).map(|(value, changed)| {
                    (Box::new(value) as Box<dyn std::any::Any + Send>, changed)
                })
            }),
            reply,
        };
        let gone = || StoreError::backend_says("the store's writer has stopped");
        self.writer
            .queue
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())?;
        let value = answer.await.map_err(|_| gone())??;
        value
            .downcast::<T>()
            .map(|value| *value)
            .map_err(|_| StoreError::backend_says("a write answered the wrong type"))
    }

    async fn read<T: Send + 'static>(
        &self,
        work: impl FnOnce(&redb::ReadTransaction) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.blocking(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            work(&txn)
        })
        .await
    }
}

/// The store's version as the `META` table holds it (0 before the first write).
fn version_in(meta: &impl ReadableTable<&'static str, u64>) -> Result<u64, StoreError> {
    Ok(meta
        .get("version")
        .map_err(backend)?
        .map(|v| v.value())
        .unwrap_or(0))
}

/// The record of `table` that the `index` entry for `key` names.
fn get_via_index<T: DeserializeOwned>(
    txn: &redb::ReadTransaction,
    index: TableDefinition<&'static str, &'static str>,
    table: TableDefinition<&'static str, &'static [u8]>,
    key: &str,
) -> Result<Option<T>, StoreError> {
    let index = txn.open_table(index).map_err(backend)?;
    let Some(target) = index.get(key).map_err(backend)? else {
        return Ok(None);
    };
    get_json(&txn.open_table(table).map_err(backend)?, target.value())
}

fn get_json<T: DeserializeOwned>(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> Result<Option<T>, StoreError> {
    match table.get(key).map_err(backend)? {
        Some(bytes) => decode(key, bytes.value()).map(Some),
        None => Ok(None),
    }
}

/// Keys of `table` that start with `prefix` and sort after `prefix + after`, at most
/// `limit + 1` of them (one more than a page, to know whether another follows).
fn keys_with_prefix(
    table: &impl ReadableTable<&'static str, ()>,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    let end = prefix_end(prefix);
    let mut out = Vec::new();
    let start = after.map(|a| format!("{prefix}{a}"));
    let range = match &start {
        Some(start) => table.range::<&str>(start.as_str()..end.as_str()),
        None => table.range::<&str>(prefix..end.as_str()),
    }
    .map_err(backend)?;
    for entry in range {
        let (key, ()) = entry.map_err(backend).map(|(k, v)| (k, v.value()))?;
        let key = key.value();
        if Some(key) == start.as_deref() {
            continue;
        }
        out.push(key[prefix.len()..].to_owned());
        if out.len() > limit {
            break;
        }
    }
    Ok(out)
}

fn page<T>(mut items: Vec<T>, limit: usize, key: impl Fn(&T) -> String) -> Page<T> {
    let next = if items.len() > limit {
        items.truncate(limit);
        items.last().map(key)
    } else {
        None
    };
    Page { items, next }
}

/// Fills `HOSTS` and `DOMAIN_TREE` from the websites of a store written before they
/// existed; once. Where two old websites claim one host, the first in domain order keeps
/// it (and the clash is logged).
fn index_hosts_once(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    let mut meta = txn.open_table(META).map_err(backend)?;
    if meta.get("host_index").map_err(backend)?.is_some() {
        return Ok(());
    }
    let websites = txn.open_table(WEBSITES).map_err(backend)?;
    let mut hosts = txn.open_table(HOSTS).map_err(backend)?;
    let mut tree = txn.open_table(DOMAIN_TREE).map_err(backend)?;
    for entry in websites.iter().map_err(backend)? {
        let (key, value) = entry.map_err(backend)?;
        let record: WebsiteRecord = decode(key.value(), value.value())?;
        tree.insert(
            record.website.domain.reversed().as_str(),
            record.partner.as_str(),
        )
        .map_err(backend)?;
        for (host, _) in host_claims(&record.website) {
            if let Some(owner) = hosts.get(host.as_str()).map_err(backend)? {
                tracing::warn!(
                    host,
                    kept_by = owner.value(),
                    also_claimed_by = record.website.domain.as_str(),
                    "two websites claim one host name; the first keeps it"
                );
                continue;
            }
            hosts
                .insert(host.as_str(), record.website.domain.as_str())
                .map_err(backend)?;
        }
    }
    meta.insert("host_index", 1).map_err(backend)?;
    Ok(())
}

/// Indexes the outbox by partner afresh when a former release's indexes are there (a
/// store written before this index, or by such a release after a downgrade): every
/// delivery is indexed again and the former indexes are removed.
fn reindex_former_outbox(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    let former_there = txn.list_tables().map_err(backend)?.any(|table| {
        FORMER_OUTBOX_INDEXES
            .iter()
            .any(|f| f.name() == table.name())
    });
    if !former_there {
        return Ok(());
    }
    for index in [DELIVERIES_OF_PARTNER_DUE, PARTNERS_DUE] {
        txn.delete_table(index).map_err(backend)?;
        txn.open_table(index).map_err(backend)?;
    }
    let stored: Vec<Delivery> = {
        let deliveries = txn.open_table(DELIVERIES).map_err(backend)?;
        let mut stored = Vec::new();
        for entry in deliveries.iter().map_err(backend)? {
            let (key, value) = entry.map_err(backend)?;
            match decode(key.value(), value.value()) {
                Ok(delivery) => stored.push(delivery),
                Err(err) => tracing::warn!(
                    id = key.value(),
                    error = %botgate_model::report::Report(&err),
                    "a webhook in the outbox cannot be read; it is left out"
                ),
            }
        }
        stored
    };
    for delivery in &stored {
        index_delivery(txn, delivery)?;
    }
    for index in FORMER_OUTBOX_INDEXES {
        txn.delete_table(index).map_err(backend)?;
    }
    Ok(())
}

/// The owner of the website of `domain` as its record names it, read without the rest
/// of the record; `None` when there is none or the owner cannot be read.
fn stored_owner(
    websites: &impl ReadableTable<&'static str, &'static [u8]>,
    domain: &str,
) -> Result<Option<WebsiteOwner>, StoreError> {
    Ok(websites.get(domain).map_err(backend)?.and_then(|stored| {
        serde_json::from_slice::<crate::StoredOwner>(stored.value())
            .ok()
            .map(WebsiteOwner::from)
    }))
}

/// What a partner holds that a limit counts.
#[derive(Clone, Copy)]
enum Holding {
    Users,
    Websites,
    /// `callbackUrl`s its websites in `setup` hold.
    HeldCallbacks,
}

impl Holding {
    fn name(self) -> &'static str {
        match self {
            Holding::Users => "users",
            Holding::Websites => "websites",
            Holding::HeldCallbacks => "held callbacks",
        }
    }

    fn key(self, partner: &str) -> String {
        format!("{partner}\n{}", self.name())
    }

    fn refusal(self, partner: &PartnerName, held: u64) -> StoreError {
        match self {
            Holding::HeldCallbacks => crate::held_callbacks_full(partner, held),
            _ => StoreError::AtLimit(crate::at_limit_message(partner, self.name(), held)),
        }
    }
}

/// How much of `holding` `partner` holds.
fn held(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
    holding: Holding,
) -> Result<u64, StoreError> {
    let holdings = txn.open_table(HOLDINGS).map_err(backend)?;
    let key = holding.key(partner.as_str());
    Ok(holdings
        .get(key.as_str())
        .map_err(backend)?
        .map_or(0, |count| count.value()))
}

/// Refuses ([`Holding::refusal`]) adding `delta` to what `partner` holds past
/// `at_most`; writes nothing, so a write refused by it leaves its group's transaction
/// as it was.
fn room_for(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
    holding: Holding,
    delta: i64,
    at_most: usize,
) -> Result<(), StoreError> {
    if delta <= 0 || at_most == usize::MAX {
        return Ok(());
    }
    let held = held(txn, partner, holding)?;
    if held.saturating_add(delta.unsigned_abs()) > at_most as u64 {
        return Err(holding.refusal(partner, held));
    }
    Ok(())
}

/// Adds `delta` to what `partner` holds (after [`room_for`], when it is bounded).
fn count_holding(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
    holding: Holding,
    delta: i64,
) -> Result<(), StoreError> {
    if delta == 0 {
        return Ok(());
    }
    let held = held(txn, partner, holding)?;
    let mut holdings = txn.open_table(HOLDINGS).map_err(backend)?;
    holdings
        .insert(
            holding.key(partner.as_str()).as_str(),
            held.saturating_add_signed(delta),
        )
        .map_err(backend)?;
    Ok(())
}

/// Counts every partner's users, websites and held callbacks in `HOLDINGS` afresh, at
/// every open: a store written before it existed, or by a release without it (after a
/// rollback), is counted right from the first write.
fn count_holdings(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    txn.delete_table(HOLDINGS).map_err(backend)?;
    let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
    let users = txn.open_table(USERS).map_err(backend)?;
    for entry in users.iter().map_err(backend)? {
        let (key, _) = entry.map_err(backend)?;
        if let Some((partner, _)) = key.value().split_once('\n') {
            *counts.entry(Holding::Users.key(partner)).or_default() += 1;
        }
    }
    let by_partner = txn.open_table(WEBSITES_BY_PARTNER).map_err(backend)?;
    for entry in by_partner.iter().map_err(backend)? {
        let (key, _) = entry.map_err(backend)?;
        if let Some((partner, _)) = key.value().split_once('\n') {
            *counts.entry(Holding::Websites.key(partner)).or_default() += 1;
        }
    }
    let websites = txn.open_table(WEBSITES).map_err(backend)?;
    for entry in websites.iter().map_err(backend)? {
        let (_, stored) = entry.map_err(backend)?;
        // Only the partner and the callbacks are read; an unreadable record holds none.
        if let Ok(record) = serde_json::from_slice::<HeldCallbacksOf>(stored.value())
            && let Some(pending) = record.website.pending
            && !pending.callbacks.is_empty()
        {
            *counts
                .entry(Holding::HeldCallbacks.key(&record.partner))
                .or_default() += pending.callbacks.len() as u64;
        }
    }
    write_counts(txn, HOLDINGS, counts)
}

/// Fills `table`, emptied before the counting, with `counts`.
fn write_counts(
    txn: &redb::WriteTransaction,
    table: TableDefinition<&str, u64>,
    counts: std::collections::BTreeMap<String, u64>,
) -> Result<(), StoreError> {
    let mut table = txn.open_table(table).map_err(backend)?;
    for (key, count) in counts {
        table.insert(key.as_str(), count).map_err(backend)?;
    }
    Ok(())
}

/// Counts every partner's websites under each domain in `DOMAIN_TREE_BELOW` afresh, at
/// every open (a store written before it existed, or by a release without it).
fn count_below(txn: &redb::WriteTransaction) -> Result<(), StoreError> {
    txn.delete_table(DOMAIN_TREE_BELOW).map_err(backend)?;
    let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
    let tree = txn.open_table(DOMAIN_TREE).map_err(backend)?;
    for entry in tree.iter().map_err(backend)? {
        let (reversed, partner) = entry.map_err(backend)?;
        for above in domains_above(reversed.value()) {
            *counts
                .entry(format!("{above}\n{}", partner.value()))
                .or_default() += 1;
        }
    }
    write_counts(txn, DOMAIN_TREE_BELOW, counts)
}

/// The reversed domains above a reversed domain: `shop` and `shop.example` of
/// `shop.example.a`.
fn domains_above(reversed: &str) -> impl Iterator<Item = &str> {
    reversed.match_indices('.').map(|(at, _)| &reversed[..at])
}

/// Counts `partner`'s website `reversed` in, or out of, `DOMAIN_TREE_BELOW`.
fn count_under(
    txn: &redb::WriteTransaction,
    reversed: &str,
    partner: &str,
    added: bool,
) -> Result<(), StoreError> {
    let mut below = txn.open_table(DOMAIN_TREE_BELOW).map_err(backend)?;
    for above in domains_above(reversed) {
        let key = format!("{above}\n{partner}");
        let count = below
            .get(key.as_str())
            .map_err(backend)?
            .map_or(0, |c| c.value());
        let count = if added {
            count + 1
        } else {
            count.saturating_sub(1)
        };
        if count == 0 {
            below.remove(key.as_str()).map_err(backend)?;
        } else {
            below.insert(key.as_str(), count).map_err(backend)?;
        }
    }
    Ok(())
}

/// The part of a stored website record [`count_holdings`] reads.
#[derive(serde::Deserialize)]
struct HeldCallbacksOf {
    partner: String,
    website: HeldCallbacksWebsite,
}

#[derive(serde::Deserialize)]
struct HeldCallbacksWebsite {
    #[serde(default)]
    pending: Option<HeldCallbacksPending>,
}

#[derive(serde::Deserialize)]
struct HeldCallbacksPending {
    #[serde(default)]
    callbacks: Vec<serde::de::IgnoredAny>,
}

/// Refuses `website` (of `partner`) when another website answers for one of its host
/// names, or, with `tree` (a new domain), when its domain lies under or above
/// another partner's website's domain.
fn check_hosts(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
    website: &Website,
    tree: bool,
) -> Result<(), StoreError> {
    let domain = website.domain.as_str();
    let hosts = txn.open_table(HOSTS).map_err(backend)?;
    for (host, field) in host_claims(website) {
        if hosts
            .get(host.as_str())
            .map_err(backend)?
            .is_some_and(|owner| owner.value() != domain)
        {
            return Err(StoreError::HostTaken {
                field,
                host,
                clash: HostClash::Taken,
            });
        }
    }
    if !tree {
        return Ok(());
    }
    let clash = |clash| StoreError::HostTaken {
        field: HostField::Domain,
        host: domain.to_owned(),
        clash,
    };
    let domains = txn.open_table(DOMAIN_TREE).map_err(backend)?;
    let foreign = |owner: &str| owner != partner.as_str();
    let reversed = website.domain.reversed();
    for above in domains_above(&reversed) {
        if domains
            .get(above)
            .map_err(backend)?
            .is_some_and(|owner| foreign(owner.value()))
        {
            return Err(clash(HostClash::Under));
        }
    }
    // The partners with websites under the domain: one entry each.
    let below = txn.open_table(DOMAIN_TREE_BELOW).map_err(backend)?;
    let prefix = format!("{reversed}\n");
    for entry in below
        .range::<&str>(prefix.as_str()..prefix_end(&prefix).as_str())
        .map_err(backend)?
    {
        let (key, _) = entry.map_err(backend)?;
        if foreign(&key.value()[prefix.len()..]) {
            return Err(clash(HostClash::Above));
        }
    }
    Ok(())
}

/// Makes `website`'s host names and domain its own (after [`check_hosts`]).
fn claim_hosts(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
    website: &Website,
) -> Result<(), StoreError> {
    let domain = website.domain.as_str();
    let mut hosts = txn.open_table(HOSTS).map_err(backend)?;
    for (host, _) in host_claims(website) {
        hosts.insert(host.as_str(), domain).map_err(backend)?;
    }
    let reversed = website.domain.reversed();
    let before = txn
        .open_table(DOMAIN_TREE)
        .map_err(backend)?
        .insert(reversed.as_str(), partner.as_str())
        .map_err(backend)?
        .map(|owner| owner.value().to_owned());
    if before.as_deref() != Some(partner.as_str()) {
        if let Some(before) = before {
            count_under(txn, &reversed, &before, false)?;
        }
        count_under(txn, &reversed, partner.as_str(), true)?;
    }
    Ok(())
}

/// Gives up `website`'s host names (only those it holds) and its place in the tree.
fn release_hosts(txn: &redb::WriteTransaction, website: &Website) -> Result<(), StoreError> {
    let domain = website.domain.as_str();
    let mut hosts = txn.open_table(HOSTS).map_err(backend)?;
    for (host, _) in host_claims(website) {
        let own = hosts
            .get(host.as_str())
            .map_err(backend)?
            .is_some_and(|owner| owner.value() == domain);
        if own {
            hosts.remove(host.as_str()).map_err(backend)?;
        }
    }
    let reversed = website.domain.reversed();
    let owner = txn
        .open_table(DOMAIN_TREE)
        .map_err(backend)?
        .remove(reversed.as_str())
        .map_err(backend)?
        .map(|owner| owner.value().to_owned());
    if let Some(owner) = owner {
        count_under(txn, &reversed, &owner, false)?;
    }
    Ok(())
}

/// The revision of a website write: above every revision any website ever had (the
/// store's version bounds those written before the counter existed), so a domain's
/// revisions never repeat across its deletion and creation again.
fn next_revision(txn: &redb::WriteTransaction) -> Result<u64, StoreError> {
    let mut meta = txn.open_table(META).map_err(backend)?;
    let last = meta
        .get("website_revision")
        .map_err(backend)?
        .map_or(0, |stored| stored.value());
    let revision = last.max(version_in(&meta)?) + 1;
    meta.insert("website_revision", revision).map_err(backend)?;
    Ok(revision)
}

/// How many `callbackUrl`s `website` holds, as a count's change.
fn held_count(website: &Website) -> i64 {
    website.held_callbacks().len() as i64
}

fn remove_website(txn: &redb::WriteTransaction, record: &WebsiteRecord) -> Result<(), StoreError> {
    release_hosts(txn, &record.website)?;
    forget_traffic(txn, &record.website.domain)?;
    count_holding(txn, &record.partner, Holding::Websites, -1)?;
    count_holding(
        txn,
        &record.partner,
        Holding::HeldCallbacks,
        -held_count(&record.website),
    )?;
    let domain = record.website.domain.as_str();
    let partner = record.partner.as_str();
    txn.open_table(WEBSITES)
        .map_err(backend)?
        .remove(domain)
        .map_err(backend)?;
    txn.open_table(WEBSITES_BY_USER)
        .map_err(backend)?
        .remove(format!("{partner}\n{}\n{domain}", record.website.user_id.as_str()).as_str())
        .map_err(backend)?;
    txn.open_table(WEBSITES_BY_PARTNER)
        .map_err(backend)?
        .remove(format!("{partner}\n{domain}").as_str())
        .map_err(backend)?;
    Ok(())
}

impl AccountStore for EmbeddedStore {
    async fn put_partner(&self, partner: &PartnerRecord) -> Result<(), StoreError> {
        self.write_partner(partner, false).await
    }

    async fn create_partner(&self, partner: &PartnerRecord) -> Result<(), StoreError> {
        self.write_partner(partner, true).await
    }

    async fn update_partner(
        &self,
        name: &PartnerName,
        change: crate::PartnerChange,
    ) -> Result<PartnerRecord, StoreError> {
        let name = name.clone();
        self.write(move |txn| {
            let mut partners = txn.open_table(PARTNERS).map_err(backend)?;
            let mut partner: PartnerRecord = get_json(&partners, name.as_str())?
                .ok_or_else(|| StoreError::NotFound(format!("partner {}", name.as_str())))?;
            let old_key = partner.key_sha256.clone();
            change.apply(&mut partner);
            if partner.key_sha256 != old_key {
                let mut keys = txn.open_table(PARTNER_KEYS).map_err(backend)?;
                keys.remove(old_key.as_str()).map_err(backend)?;
                keys.insert(partner.key_sha256.as_str(), name.as_str())
                    .map_err(backend)?;
            }
            partners
                .insert(name.as_str(), encode(&partner).as_slice())
                .map_err(backend)?;
            Ok((partner, vec![Changed::Partner { name }]))
        })
        .await
    }

    async fn partner_by_key(&self, key_sha256: &str) -> Result<Option<PartnerRecord>, StoreError> {
        let hash = key_sha256.to_owned();
        self.read(move |txn| get_via_index(txn, PARTNER_KEYS, PARTNERS, &hash))
            .await
    }

    async fn partner(&self, name: &PartnerName) -> Result<Option<PartnerRecord>, StoreError> {
        let name = name.as_str().to_owned();
        self.read(move |txn| {
            let partners = txn.open_table(PARTNERS).map_err(backend)?;
            get_json(&partners, &name)
        })
        .await
    }

    async fn partners(&self) -> Result<Vec<PartnerRecord>, StoreError> {
        self.read(move |txn| {
            let partners = txn.open_table(PARTNERS).map_err(backend)?;
            let mut all = Vec::new();
            for entry in partners.iter().map_err(backend)? {
                let (name, value) = entry.map_err(backend)?;
                all.push(decode::<PartnerRecord>(name.value(), value.value())?);
            }
            Ok(all)
        })
        .await
    }

    async fn create_user_within(&self, user: &User, at_most: usize) -> Result<(), StoreError> {
        let user = user.clone();
        self.write(move |txn| {
            let partners = txn.open_table(PARTNERS).map_err(backend)?;
            if partners
                .get(user.partner.as_str())
                .map_err(backend)?
                .is_none()
            {
                return Err(StoreError::NotFound(format!(
                    "partner {}",
                    user.partner.as_str()
                )));
            }
            let key = user_key(&user.partner, &user.id);
            let mut users = txn.open_table(USERS).map_err(backend)?;
            if users.get(key.as_str()).map_err(backend)?.is_some() {
                return Err(StoreError::Conflict(format!("user {}", user.id)));
            }
            let mut keys = txn.open_table(USER_KEYS).map_err(backend)?;
            let digest = key_digest(&user.api_key);
            if keys.get(digest.as_str()).map_err(backend)?.is_some() {
                return Err(StoreError::Conflict("a user with this key".into()));
            }
            room_for(txn, &user.partner, Holding::Users, 1, at_most)?;
            count_holding(txn, &user.partner, Holding::Users, 1)?;
            users
                .insert(key.as_str(), encode(&user).as_slice())
                .map_err(backend)?;
            keys.insert(digest.as_str(), key.as_str())
                .map_err(backend)?;
            Ok((
                (),
                vec![Changed::User {
                    partner: user.partner.clone(),
                    id: user.id.clone(),
                }],
            ))
        })
        .await
    }

    async fn user(&self, partner: &PartnerName, id: &UserId) -> Result<Option<User>, StoreError> {
        let key = user_key(partner, id);
        self.read(move |txn| {
            let users = txn.open_table(USERS).map_err(backend)?;
            get_json(&users, &key)
        })
        .await
    }

    async fn user_by_key(&self, api_key: &str) -> Result<Option<User>, StoreError> {
        let digest = key_digest(api_key);
        self.read(move |txn| get_via_index(txn, USER_KEYS, USERS, &digest))
            .await
    }

    async fn users(
        &self,
        partner: &PartnerName,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Page<User>, StoreError> {
        let prefix = format!("{}\n", partner.as_str());
        let after = after.map(str::to_owned);
        self.read(move |txn| {
            let users = txn.open_table(USERS).map_err(backend)?;
            let end = prefix_end(&prefix);
            let start = match &after {
                Some(a) => format!("{prefix}{a}"),
                None => prefix.clone(),
            };
            let mut items = Vec::new();
            for entry in users
                .range::<&str>(start.as_str()..end.as_str())
                .map_err(backend)?
            {
                let (key, value) = entry.map_err(backend)?;
                if after.is_some() && key.value() == start {
                    continue;
                }
                items.push(decode::<User>(key.value(), value.value())?);
                if items.len() > limit {
                    break;
                }
            }
            Ok(page(items, limit, |u: &User| u.id.as_str().to_owned()))
        })
        .await
    }

    async fn replace_user_key(
        &self,
        partner: &PartnerName,
        id: &UserId,
        api_key: &str,
    ) -> Result<User, StoreError> {
        let (partner, id, api_key) = (partner.clone(), id.clone(), api_key.to_owned());
        self.write(move |txn| {
            let key = user_key(&partner, &id);
            let mut users = txn.open_table(USERS).map_err(backend)?;
            let mut user: User = get_json(&users, &key)?
                .ok_or_else(|| StoreError::NotFound(format!("user {id}")))?;
            let mut keys = txn.open_table(USER_KEYS).map_err(backend)?;
            let digest = key_digest(&api_key);
            if keys.get(digest.as_str()).map_err(backend)?.is_some() {
                return Err(StoreError::Conflict("a user with this key".into()));
            }
            keys.remove(key_digest(&user.api_key).as_str())
                .map_err(backend)?;
            keys.insert(digest.as_str(), key.as_str())
                .map_err(backend)?;
            user.api_key = api_key;
            users
                .insert(key.as_str(), encode(&user).as_slice())
                .map_err(backend)?;
            let changed = Changed::User {
                partner: user.partner.clone(),
                id: user.id.clone(),
            };
            Ok((user, vec![changed]))
        })
        .await
    }

    async fn delete_user(
        &self,
        partner: &PartnerName,
        id: &UserId,
    ) -> Result<Vec<Domain>, StoreError> {
        let mut deleted = Vec::new();
        // A write at a time deletes a batch of websites, so that other writes are not
        // held up behind a user of a hundred thousand; the last deletes the user.
        loop {
            let (partner, id) = (partner.clone(), id.clone());
            let written = self
                .write(move |txn| delete_user_batch(txn, &partner, &id))
                .await;
            let (batch, done) = match written {
                Ok(batch) => batch,
                // Deleted meanwhile after batches of this deletion.
                Err(StoreError::NotFound(_)) if !deleted.is_empty() => return Ok(deleted),
                Err(err) => return Err(err),
            };
            deleted.extend(batch);
            if done {
                return Ok(deleted);
            }
        }
    }
}

/// The domains one write deleted, and whether the user went with them.
type DeletedBatch = (Vec<Domain>, bool);

/// Deletes up to [`crate::DELETED_PER_WRITE`] of the user's websites, and the user with
/// the last of them; the domains deleted, and whether the user is gone.
fn delete_user_batch(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
    id: &UserId,
) -> Result<(DeletedBatch, Vec<Changed>), StoreError> {
    let key = user_key(partner, id);
    let user: User = {
        let users = txn.open_table(USERS).map_err(backend)?;
        get_json(&users, &key)?.ok_or_else(|| StoreError::NotFound(format!("user {id}")))?
    };
    let prefix = format!("{key}\n");
    let domains = {
        let by_user = txn.open_table(WEBSITES_BY_USER).map_err(backend)?;
        keys_with_prefix(&by_user, &prefix, None, crate::DELETED_PER_WRITE + 1)?
    };
    let done = domains.len() <= crate::DELETED_PER_WRITE;
    let mut changes = Vec::new();
    let mut deleted = Vec::new();
    for domain in domains.into_iter().take(crate::DELETED_PER_WRITE) {
        let record: Option<WebsiteRecord> = {
            let websites = txn.open_table(WEBSITES).map_err(backend)?;
            get_json(&websites, &domain)?
        };
        match record {
            Some(record) => {
                remove_website(txn, &record)?;
                changes.push(Changed::Website {
                    domain: record.website.domain.clone(),
                });
                deleted.push(record.website.domain);
            }
            // An index entry without its website: dropped, or it would come back.
            None => {
                txn.open_table(WEBSITES_BY_USER)
                    .map_err(backend)?
                    .remove(format!("{prefix}{domain}").as_str())
                    .map_err(backend)?;
            }
        }
    }
    if done {
        txn.open_table(USERS)
            .map_err(backend)?
            .remove(key.as_str())
            .map_err(backend)?;
        count_holding(txn, partner, Holding::Users, -1)?;
        txn.open_table(USER_KEYS)
            .map_err(backend)?
            .remove(key_digest(&user.api_key).as_str())
            .map_err(backend)?;
        changes.push(Changed::User {
            partner: partner.clone(),
            id: id.clone(),
        });
    }
    Ok(((deleted, done), changes))
}

impl WebsiteStore for EmbeddedStore {
    async fn create_website_within(
        &self,
        partner: &PartnerName,
        website: &Website,
        limits: WebsiteLimits,
    ) -> Result<WebsiteRecord, StoreError> {
        let mut record = WebsiteRecord {
            partner: partner.clone(),
            revision: 0,
            website: website.clone(),
        };
        self.write(move |txn| {
            let domain = record.website.domain.as_str();
            let user = user_key(&record.partner, &record.website.user_id);
            if txn
                .open_table(USERS)
                .map_err(backend)?
                .get(user.as_str())
                .map_err(backend)?
                .is_none()
            {
                return Err(StoreError::NotFound(format!(
                    "user {}",
                    record.website.user_id
                )));
            }
            let mut websites = txn.open_table(WEBSITES).map_err(backend)?;
            if websites.get(domain).map_err(backend)?.is_some() {
                return Err(StoreError::Conflict(format!("website {domain}")));
            }
            check_hosts(txn, &record.partner, &record.website, true)?;
            let held_callbacks = held_count(&record.website);
            room_for(txn, &record.partner, Holding::Websites, 1, limits.websites)?;
            room_for(
                txn,
                &record.partner,
                Holding::HeldCallbacks,
                held_callbacks,
                limits.held_callbacks,
            )?;
            // Checked; from here on everything writes.
            count_holding(txn, &record.partner, Holding::Websites, 1)?;
            count_holding(txn, &record.partner, Holding::HeldCallbacks, held_callbacks)?;
            claim_hosts(txn, &record.partner, &record.website)?;
            forget_traffic(txn, &record.website.domain)?;
            record.revision = next_revision(txn)?;
            websites
                .insert(domain, encode(&record).as_slice())
                .map_err(backend)?;
            txn.open_table(WEBSITES_BY_USER)
                .map_err(backend)?
                .insert(format!("{user}\n{domain}").as_str(), ())
                .map_err(backend)?;
            txn.open_table(WEBSITES_BY_PARTNER)
                .map_err(backend)?
                .insert(
                    format!("{}\n{domain}", record.partner.as_str()).as_str(),
                    (),
                )
                .map_err(backend)?;
            let changed = Changed::Website {
                domain: record.website.domain.clone(),
            };
            Ok((record, vec![changed]))
        })
        .await
    }

    async fn website(&self, domain: &Domain) -> Result<Option<WebsiteRecord>, StoreError> {
        let domain = domain.as_str().to_owned();
        self.read(move |txn| {
            let websites = txn.open_table(WEBSITES).map_err(backend)?;
            get_json(&websites, &domain)
        })
        .await
    }

    async fn website_owner(&self, domain: &Domain) -> Result<Option<WebsiteOwner>, StoreError> {
        let domain = domain.as_str().to_owned();
        self.read(move |txn| stored_owner(&txn.open_table(WEBSITES).map_err(backend)?, &domain))
            .await
    }

    async fn update_website_within(
        &self,
        website: &Website,
        expected_revision: u64,
        held_callbacks_at_most: usize,
    ) -> Result<WebsiteRecord, StoreError> {
        let website = website.clone();
        self.write(move |txn| {
            let domain = website.domain.as_str().to_owned();
            let mut websites = txn.open_table(WEBSITES).map_err(backend)?;
            let current: WebsiteRecord = get_json(&websites, &domain)?
                .ok_or_else(|| StoreError::NotFound(format!("website {domain}")))?;
            if current.revision != expected_revision {
                return Err(StoreError::Stale(format!("website {domain}")));
            }
            if current.website.user_id != website.user_id {
                return Err(StoreError::Conflict(format!(
                    "website {domain} belongs to another user"
                )));
            }
            let more_held = held_count(&website) - held_count(&current.website);
            room_for(
                txn,
                &current.partner,
                Holding::HeldCallbacks,
                more_held,
                held_callbacks_at_most,
            )?;
            let names_changed = current.website.host_names() != website.host_names();
            if names_changed {
                check_hosts(txn, &current.partner, &website, false)?;
            }
            // Checked; from here on everything writes.
            count_holding(txn, &current.partner, Holding::HeldCallbacks, more_held)?;
            if names_changed {
                release_hosts(txn, &current.website)?;
                claim_hosts(txn, &current.partner, &website)?;
            }
            let record = WebsiteRecord {
                partner: current.partner,
                revision: next_revision(txn)?,
                website,
            };
            websites
                .insert(domain.as_str(), encode(&record).as_slice())
                .map_err(backend)?;
            let changed = Changed::Website {
                domain: record.website.domain.clone(),
            };
            Ok((record, vec![changed]))
        })
        .await
    }

    async fn delete_website(
        &self,
        domain: &Domain,
        expected_revision: Option<u64>,
    ) -> Result<(), StoreError> {
        let domain = domain.clone();
        self.write(move |txn| {
            let record: WebsiteRecord = {
                let websites = txn.open_table(WEBSITES).map_err(backend)?;
                get_json(&websites, domain.as_str())?
                    .ok_or_else(|| StoreError::NotFound(format!("website {domain}")))?
            };
            if expected_revision.is_some_and(|expected| expected != record.revision) {
                return Err(StoreError::Stale(format!("website {domain}")));
            }
            remove_website(txn, &record)?;
            Ok(((), vec![Changed::Website { domain }]))
        })
        .await
    }

    async fn websites(
        &self,
        partner: &PartnerName,
        user: Option<&UserId>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Page<WebsiteRecord>, StoreError> {
        let prefix = match user {
            Some(user) => format!("{}\n", user_key(partner, user)),
            None => format!("{}\n", partner.as_str()),
        };
        let by_user = user.is_some();
        let after = after.map(str::to_owned);
        self.read(move |txn| {
            let domains = if by_user {
                let index = txn.open_table(WEBSITES_BY_USER).map_err(backend)?;
                keys_with_prefix(&index, &prefix, after.as_deref(), limit)?
            } else {
                let index = txn.open_table(WEBSITES_BY_PARTNER).map_err(backend)?;
                keys_with_prefix(&index, &prefix, after.as_deref(), limit)?
            };
            let Page {
                items: domains,
                next,
            } = page(domains, limit, String::clone);
            let websites = txn.open_table(WEBSITES).map_err(backend)?;
            let mut items = Vec::with_capacity(domains.len());
            for domain in domains {
                match get_json::<WebsiteRecord>(&websites, &domain) {
                    Ok(Some(record)) => items.push(record),
                    Ok(None) => {}
                    Err(error @ StoreError::Corrupt { .. }) => crate::unreadable_left_out(&error),
                    Err(error) => return Err(error),
                }
            }
            Ok(Page { items, next })
        })
        .await
    }

    async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        self.read(|txn| {
            let version = version_in(&txn.open_table(META).map_err(backend)?)?;
            let websites = txn.open_table(WEBSITES).map_err(backend)?;
            let mut out = Vec::new();
            let mut unreadable = Vec::new();
            for entry in websites.iter().map_err(backend)? {
                let (key, value) = entry.map_err(backend)?;
                match decode(key.value(), value.value()) {
                    Ok(record) => out.push(record),
                    Err(err) => unreadable.push(Unreadable {
                        domain: key.value().to_owned(),
                        reason: err.to_string(),
                    }),
                }
            }
            Ok(Snapshot {
                version,
                history: String::new(),
                websites: out,
                unreadable,
            })
        })
        .await
    }

    async fn version(&self) -> Result<u64, StoreError> {
        self.read(|txn| version_in(&txn.open_table(META).map_err(backend)?))
            .await
    }

    async fn position(&self) -> Result<Position, StoreError> {
        Ok(Position {
            version: self.version().await?,
            history: String::new(),
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.feed.subscribe()
    }

    /// The feed is in this process: it never restarts (the sender is gone at once).
    fn feed_restarts(&self) -> tokio::sync::watch::Receiver<u64> {
        tokio::sync::watch::channel(0).1
    }
}

impl OutboxStore for EmbeddedStore {
    async fn enqueue_delivery(
        &self,
        delivery: &Delivery,
        waiting_at_most: usize,
    ) -> Result<(), StoreError> {
        let delivery = delivery.clone();
        self.write(move |txn| {
            if waiting_at_most != usize::MAX && stored_delivery(txn, &delivery.id)?.is_none() {
                let partner = delivery.partner.as_str();
                let of_partner = txn.open_table(DELIVERIES_OF_PARTNER_DUE).map_err(backend)?;
                let waiting =
                    keys_with_prefix(&of_partner, &format!("{partner}\n"), None, waiting_at_most)?;
                if waiting.len() >= waiting_at_most {
                    return Err(StoreError::Full(format!(
                        "the outbox of partner {partner}'s webhooks"
                    )));
                }
            }
            put_delivery(txn, &delivery)?;
            Ok(((), Vec::new()))
        })
        .await
    }

    async fn claim_deliveries(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
        shares: &ClaimShares,
    ) -> Result<Vec<Delivery>, StoreError> {
        let shares = shares.clone();
        self.write(move |txn| {
            // The partners with something due, oldest due first, and how much each has
            // due (no more than its room); then each one's share, oldest due first.
            let candidates = due_partners(txn, now_ms, limit, &shares)?;
            let taken = shares.allocate(&candidates, limit);
            let mut claimed = Vec::new();
            for ((partner, _), take) in candidates.iter().zip(taken) {
                for key in due_of_partner(txn, partner, now_ms, take)? {
                    let id = key.rsplit_once(':').map_or("", |(_, id)| id);
                    // One that cannot be read (damaged, or a later release's) is left
                    // as it is and named, not allowed to stop every other delivery.
                    let stored = match stored_delivery(txn, id) {
                        Err(StoreError::Corrupt { .. }) => {
                            tracing::warn!(
                                id,
                                "a webhook in the outbox cannot be read; it is skipped"
                            );
                            continue;
                        }
                        other => other?,
                    };
                    let Some(mut delivery) = stored else {
                        // An index entry left behind: dropped, so it takes no share.
                        reindexing_partner(txn, partner, || {
                            txn.open_table(DELIVERIES_OF_PARTNER_DUE)
                                .map_err(backend)?
                                .remove(key.as_str())
                                .map_err(backend)?;
                            Ok(())
                        })?;
                        continue;
                    };
                    let due = delivery.next_attempt_ms;
                    delivery.next_attempt_ms = lease_until_ms;
                    put_delivery(txn, &delivery)?;
                    claimed.push((due, delivery));
                }
            }
            claimed.sort_by(|(a, x), (b, y)| a.cmp(b).then(x.id.cmp(&y.id)));
            Ok((claimed.into_iter().map(|(_, d)| d).collect(), Vec::new()))
        })
        .await
    }

    async fn retry_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        let delivery = delivery.clone();
        self.write(move |txn| {
            if stored_delivery(txn, &delivery.id)?.is_some() {
                put_delivery(txn, &delivery)?;
            }
            Ok(((), Vec::new()))
        })
        .await
    }

    async fn finish_delivery(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |txn| {
            remove_delivery(txn, &id)?;
            Ok(((), Vec::new()))
        })
        .await
    }

    async fn deliveries(&self) -> Result<Vec<Delivery>, StoreError> {
        self.read(|txn| {
            let table = txn.open_table(DELIVERIES).map_err(backend)?;
            let mut all = Vec::new();
            for entry in table.iter().map_err(backend)? {
                let (key, value) = entry.map_err(backend)?;
                all.push(decode(key.value(), value.value())?);
            }
            Ok(all)
        })
        .await
    }

    async fn waiting_deliveries(
        &self,
        partner: &PartnerName,
        at_most: usize,
    ) -> Result<usize, StoreError> {
        let prefix = format!("{partner}\n");
        self.read(move |txn| {
            let of_partner = txn.open_table(DELIVERIES_OF_PARTNER_DUE).map_err(backend)?;
            let waiting = keys_with_prefix(&of_partner, &prefix, None, at_most)?;
            Ok(waiting.len().min(at_most))
        })
        .await
    }
}

impl SharedState for EmbeddedStore {
    async fn shared_secret(&self, name: &str, candidate: &str) -> Result<String, StoreError> {
        let (name, candidate) = (name.to_owned(), candidate.to_owned());
        self.write(move |txn| {
            let mut secrets = txn.open_table(SECRETS).map_err(backend)?;
            let stored = secrets
                .get(name.as_str())
                .map_err(backend)?
                .map(|value| value.value().to_owned());
            match stored {
                Some(stored) => Ok((stored, Vec::new())),
                None => {
                    secrets
                        .insert(name.as_str(), candidate.as_str())
                        .map_err(backend)?;
                    Ok((candidate, Vec::new()))
                }
            }
        })
        .await
    }

    async fn put_ephemeral(&self, key: &str, value: &str, until_ms: u64) -> Result<(), StoreError> {
        let (key, value) = (key.to_owned(), value.to_owned());
        self.write(move |txn| {
            set_ephemeral(txn, &key, Some((&value, until_ms)))?;
            Ok(((), Vec::new()))
        })
        .await
    }

    async fn ephemeral(&self, key: &str, now_ms: u64) -> Result<Option<String>, StoreError> {
        let key = key.to_owned();
        self.read(move |txn| {
            let table = txn.open_table(EPHEMERAL).map_err(backend)?;
            let stored = table.get(key.as_str()).map_err(backend)?;
            Ok(stored.and_then(|stored| live(stored.value(), now_ms).map(str::to_owned)))
        })
        .await
    }

    async fn count(&self, key: &str, until_ms: u64) -> Result<u64, StoreError> {
        let key = key.to_owned();
        self.write(move |txn| {
            let now = crate::now_ms();
            let (count, until) = txn
                .open_table(EPHEMERAL)
                .map_err(backend)?
                .get(key.as_str())
                .map_err(backend)?
                .and_then(|stored| {
                    let stored = stored.value();
                    let until = stored.get(..20)?.parse::<u64>().ok()?;
                    let count = live(stored, now)?.parse::<u64>().ok()?;
                    Some((count, until))
                })
                .unwrap_or((0, until_ms));
            let count = count + 1;
            set_ephemeral(txn, &key, Some((&count.to_string(), until)))?;
            Ok((count, Vec::new()))
        })
        .await
    }

    async fn remove_ephemeral(&self, key: &str) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.write(move |txn| {
            set_ephemeral(txn, &key, None)?;
            Ok(((), Vec::new()))
        })
        .await
    }

    async fn lease(
        &self,
        key: &str,
        holder: &str,
        now_ms: u64,
        until_ms: u64,
    ) -> Result<bool, StoreError> {
        let (key, holder) = (key.to_owned(), holder.to_owned());
        self.write(move |txn| {
            let current = txn
                .open_table(EPHEMERAL)
                .map_err(backend)?
                .get(key.as_str())
                .map_err(backend)?
                .and_then(|stored| live(stored.value(), now_ms).map(str::to_owned));
            let free = current.as_deref().is_none_or(|current| current == holder);
            if free {
                set_ephemeral(txn, &key, Some((&holder, until_ms)))?;
            }
            Ok((free, Vec::new()))
        })
        .await
    }
}

/// Stores (`Some((value, until_ms))`) or removes the ephemeral entry `key`, keeping
/// `EPHEMERAL_DUE` in step, and removes a few entries that have expired.
fn set_ephemeral(
    txn: &redb::WriteTransaction,
    key: &str,
    value: Option<(&str, u64)>,
) -> Result<(), StoreError> {
    let mut table = txn.open_table(EPHEMERAL).map_err(backend)?;
    let mut due = txn.open_table(EPHEMERAL_DUE).map_err(backend)?;
    let old_until = table
        .get(key)
        .map_err(backend)?
        .map(|stored| stored.value().get(..20).unwrap_or_default().to_owned());
    if let Some(until) = old_until {
        due.remove(format!("{until}:{key}").as_str())
            .map_err(backend)?;
    }
    match value {
        Some((value, until_ms)) => {
            table
                .insert(key, format!("{until_ms:020}{value}").as_str())
                .map_err(backend)?;
            due.insert(format!("{until_ms:020}:{key}").as_str(), ())
                .map_err(backend)?;
        }
        None => {
            table.remove(key).map_err(backend)?;
        }
    }
    let now = format!("{:020}", crate::now_ms());
    let expired: Vec<String> = due
        .range::<&str>(..now.as_str())
        .map_err(backend)?
        .take(SWEEP_PER_WRITE)
        .map(|entry| entry.map(|(k, _)| k.value().to_owned()).map_err(backend))
        .collect::<Result<_, _>>()?;
    for entry in expired {
        due.remove(entry.as_str()).map_err(backend)?;
        if let Some(gone) = entry.get(21..) {
            table.remove(gone).map_err(backend)?;
        }
    }
    Ok(())
}

/// The value of a stored ephemeral entry, unless it expired before `now_ms`.
fn live(stored: &str, now_ms: u64) -> Option<&str> {
    let (until, value) = stored.split_at_checked(20)?;
    (until.parse::<u64>().ok()? > now_ms).then_some(value)
}

fn stored_delivery(txn: &redb::WriteTransaction, id: &str) -> Result<Option<Delivery>, StoreError> {
    get_json(&txn.open_table(DELIVERIES).map_err(backend)?, id)
}

/// A delivery's entry in [`DELIVERIES_OF_PARTNER_DUE`].
fn partner_due_key(delivery: &Delivery) -> String {
    format!(
        "{}\n{:020}:{}",
        delivery.partner.as_str(),
        delivery.next_attempt_ms,
        delivery.id
    )
}

/// The partners with a webhook due at `now_ms`, in order of their first due, each with
/// how many it has due (counted up to its room in `shares`); as many as a claim of
/// `limit` may need.
fn due_partners(
    txn: &redb::WriteTransaction,
    now_ms: u64,
    limit: usize,
    shares: &ClaimShares,
) -> Result<Vec<(PartnerName, usize)>, StoreError> {
    let partners = txn.open_table(PARTNERS_DUE).map_err(backend)?;
    let end = format!("{now_ms:020}\n\u{10ffff}");
    let mut candidates = Vec::new();
    for entry in partners.range::<&str>(..end.as_str()).map_err(backend)? {
        if candidates.len() >= shares.candidates(limit) {
            break;
        }
        let (key, _) = entry.map_err(backend)?;
        let Some(partner) = key
            .value()
            .split_once('\n')
            .and_then(|(_, name)| PartnerName::parse(name).ok())
        else {
            continue;
        };
        let room = shares.room(&partner, limit);
        let due = due_of_partner(txn, &partner, now_ms, room)?.len();
        candidates.push((partner, due));
    }
    Ok(candidates)
}

/// The keys in [`DELIVERIES_OF_PARTNER_DUE`] of the partner's first `at_most` webhooks
/// due at `now_ms`.
fn due_of_partner(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
    now_ms: u64,
    at_most: usize,
) -> Result<Vec<String>, StoreError> {
    let of_partner = txn.open_table(DELIVERIES_OF_PARTNER_DUE).map_err(backend)?;
    let prefix = format!("{}\n", partner.as_str());
    let end = format!("{prefix}{now_ms:020}:\u{10ffff}");
    let mut keys = Vec::new();
    for entry in of_partner
        .range::<&str>(prefix.as_str()..end.as_str())
        .map_err(backend)?
        .take(at_most)
    {
        keys.push(entry.map_err(backend)?.0.value().to_owned());
    }
    Ok(keys)
}

/// When the partner's first waiting webhook is due, if it has one.
fn first_due(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
) -> Result<Option<u64>, StoreError> {
    let of_partner = txn.open_table(DELIVERIES_OF_PARTNER_DUE).map_err(backend)?;
    let prefix = format!("{}\n", partner.as_str());
    let end = prefix_end(&prefix);
    let mut range = of_partner
        .range::<&str>(prefix.as_str()..end.as_str())
        .map_err(backend)?;
    let Some(first) = range.next() else {
        return Ok(None);
    };
    let (key, _) = first.map_err(backend)?;
    Ok(key.value()[prefix.len()..]
        .get(..20)
        .and_then(|due| due.parse().ok()))
}

/// Runs `change` on the partner's waiting webhooks and moves its entry in
/// [`PARTNERS_DUE`] to when its first is due after it.
fn reindexing_partner(
    txn: &redb::WriteTransaction,
    partner: &PartnerName,
    change: impl FnOnce() -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let was = first_due(txn, partner)?;
    change()?;
    let now = first_due(txn, partner)?;
    if was == now {
        return Ok(());
    }
    let mut partners = txn.open_table(PARTNERS_DUE).map_err(backend)?;
    let entry = |due: u64| format!("{due:020}\n{}", partner.as_str());
    if let Some(was) = was {
        partners.remove(entry(was).as_str()).map_err(backend)?;
    }
    if let Some(now) = now {
        partners.insert(entry(now).as_str(), ()).map_err(backend)?;
    }
    Ok(())
}

/// Adds a stored delivery's index entries.
fn index_delivery(txn: &redb::WriteTransaction, delivery: &Delivery) -> Result<(), StoreError> {
    reindexing_partner(txn, &delivery.partner, || {
        txn.open_table(DELIVERIES_OF_PARTNER_DUE)
            .map_err(backend)?
            .insert(partner_due_key(delivery).as_str(), ())
            .map_err(backend)?;
        Ok(())
    })
}

/// Removes a delivery and its index entries, if it is there.
fn remove_delivery(txn: &redb::WriteTransaction, id: &str) -> Result<(), StoreError> {
    let Some(stored) = stored_delivery(txn, id)? else {
        return Ok(());
    };
    reindexing_partner(txn, &stored.partner, || {
        txn.open_table(DELIVERIES_OF_PARTNER_DUE)
            .map_err(backend)?
            .remove(partner_due_key(&stored).as_str())
            .map_err(backend)?;
        Ok(())
    })?;
    txn.open_table(DELIVERIES)
        .map_err(backend)?
        .remove(id)
        .map_err(backend)?;
    Ok(())
}

/// Stores a delivery (replacing one with its id) and indexes it by partner and when it
/// is due.
fn put_delivery(txn: &redb::WriteTransaction, delivery: &Delivery) -> Result<(), StoreError> {
    remove_delivery(txn, &delivery.id)?;
    txn.open_table(DELIVERIES)
        .map_err(backend)?
        .insert(delivery.id.as_str(), encode(delivery).as_slice())
        .map_err(backend)?;
    index_delivery(txn, delivery)
}

/// Forgets a website's statistics and latest requests, so that a later website of the
/// same name (another owner's, perhaps) starts with none.
fn forget_traffic(txn: &redb::WriteTransaction, domain: &Domain) -> Result<(), StoreError> {
    let prefix = format!("{domain}\n");
    let end = prefix_end(&prefix);
    for definition in [TRAFFIC, EVENTS] {
        let mut table = txn.open_table(definition).map_err(backend)?;
        let keys = keys_between(&table, &prefix, &end)?;
        remove_keys(&mut table, &keys)?;
    }
    Ok(())
}

/// The keys of `table` from `start` up to `end` (excluded), in order.
fn keys_between(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    start: &str,
    end: &str,
) -> Result<Vec<String>, StoreError> {
    table
        .range::<&str>(start..end)
        .map_err(backend)?
        .map(|entry| entry.map(|(key, _)| key.value().to_owned()))
        .collect::<Result<_, _>>()
        .map_err(backend)
}

fn remove_keys(table: &mut redb::Table<&str, &[u8]>, keys: &[String]) -> Result<(), StoreError> {
    for key in keys {
        table.remove(key.as_str()).map_err(backend)?;
    }
    Ok(())
}

fn bucket_key(domain: &Domain, resolution: Resolution, number: u64) -> String {
    format!("{domain}\n{}\n{number:012}", resolution.letter())
}

/// Adds `counts` to one bucket (bounded), and forgets the website's buckets of that
/// resolution older than `kept` before it.
fn add_to_bucket(
    traffic: &mut redb::Table<&str, &[u8]>,
    domain: &Domain,
    resolution: Resolution,
    number: u64,
    counts: &Counts,
    kept: u64,
) -> Result<(), StoreError> {
    let key = bucket_key(domain, resolution, number);
    let mut bucket: Counts = match traffic.get(key.as_str()).map_err(backend)? {
        Some(stored) => decode(&key, stored.value())?,
        None => Counts::default(),
    };
    bucket.merge_bounded(counts);
    traffic
        .insert(key.as_str(), encode(&bucket).as_slice())
        .map_err(backend)?;
    let first = bucket_key(domain, resolution, 0);
    let oldest_kept = bucket_key(domain, resolution, number.saturating_sub(kept - 1));
    let expired = keys_between(traffic, &first, &oldest_kept)?;
    remove_keys(traffic, &expired)
}

impl TrafficStore for EmbeddedStore {
    async fn add_traffic(
        &self,
        domain: &Domain,
        owner: Owner<'_>,
        minute: u64,
        counts: &Counts,
        events: &[TrafficEvent],
    ) -> Result<(), StoreError> {
        let (domain, counts, events) = (domain.clone(), counts.clone(), events.to_vec());
        let owner = WebsiteOwner::from(owner);
        self.write(move |txn| {
            // Counts flushed after the website's deletion are not kept for whoever
            // creates the name next.
            let current =
                stored_owner(&txn.open_table(WEBSITES).map_err(backend)?, domain.as_str())?;
            if current.as_ref() != Some(&owner) {
                return Ok(((), Vec::new()));
            }
            let mut traffic = txn.open_table(TRAFFIC).map_err(backend)?;
            let counters = Counts(
                counts
                    .0
                    .iter()
                    .filter(|(field, _)| Counts::is_counter(field))
                    .map(|(field, count)| (field.clone(), *count))
                    .collect(),
            );
            if !counters.0.is_empty() {
                add_to_bucket(
                    &mut traffic,
                    &domain,
                    Resolution::Minute,
                    minute,
                    &counters,
                    crate::traffic::MINUTE_BUCKETS_KEPT,
                )?;
            }
            add_to_bucket(
                &mut traffic,
                &domain,
                Resolution::Hour,
                minute / 60,
                &counts,
                crate::traffic::HOUR_BUCKETS_KEPT,
            )?;
            if !events.is_empty() {
                let mut meta = txn.open_table(META).map_err(backend)?;
                let mut sequence = meta
                    .get("event_sequence")
                    .map_err(backend)?
                    .map_or(0, |v| v.value());
                let mut table = txn.open_table(EVENTS).map_err(backend)?;
                for event in &events {
                    sequence += 1;
                    let key = format!("{domain}\n{sequence:020}");
                    table
                        .insert(key.as_str(), encode(event).as_slice())
                        .map_err(backend)?;
                }
                meta.insert("event_sequence", sequence).map_err(backend)?;
                let prefix = format!("{domain}\n");
                let end = prefix_end(&prefix);
                let keys = keys_between(&table, &prefix, &end)?;
                let surplus = keys.len().saturating_sub(crate::traffic::EVENTS_KEPT);
                remove_keys(&mut table, &keys[..surplus])?;
            }
            Ok(((), Vec::new()))
        })
        .await
    }

    async fn traffic(
        &self,
        domain: &Domain,
        resolution: Resolution,
        from: u64,
        to: u64,
    ) -> Result<Vec<Counts>, StoreError> {
        let domain = domain.clone();
        let from = from.max(to.saturating_sub(crate::traffic::MAX_BUCKETS_READ - 1));
        self.read(move |txn| {
            let traffic = txn.open_table(TRAFFIC).map_err(backend)?;
            (from..=to)
                .map(|number| {
                    let key = bucket_key(&domain, resolution, number);
                    match traffic.get(key.as_str()).map_err(backend)? {
                        Some(stored) => decode(&key, stored.value()),
                        None => Ok(Counts::default()),
                    }
                })
                .collect()
        })
        .await
    }

    async fn events(&self, domain: &Domain, limit: usize) -> Result<Vec<TrafficEvent>, StoreError> {
        let prefix = format!("{domain}\n");
        self.read(move |txn| {
            let table = txn.open_table(EVENTS).map_err(backend)?;
            let end = prefix_end(&prefix);
            let mut events = Vec::new();
            for entry in table
                .range::<&str>(prefix.as_str()..end.as_str())
                .map_err(backend)?
                .rev()
                .take(limit)
            {
                let (key, value) = entry.map_err(backend)?;
                events.push(decode(key.value(), value.value())?);
            }
            Ok(events)
        })
        .await
    }
}

/// `"ruleset_revision"` in [`META`]: the revision of every rule-set state.
const RULESET_REVISION: &str = "ruleset_revision";

/// A stored state: its revision, then its JSON.
fn stored_state(name: &str, bytes: &[u8]) -> Result<StoredState, StoreError> {
    let key = format!("ruleset state {name}");
    let corrupt = |reason: &str| StoreError::Corrupt {
        key: key.clone(),
        reason: reason.to_owned(),
    };
    let (revision, json) = bytes
        .split_at_checked(20)
        .ok_or_else(|| corrupt("too short"))?;
    let revision = std::str::from_utf8(revision)
        .ok()
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| corrupt("no revision"))?;
    Ok(StoredState {
        state: decode(&key, json)?,
        revision,
    })
}

/// Stores `name`'s state under the next rule-set revision; that revision.
fn put_state(
    txn: &redb::WriteTransaction,
    states: &mut redb::Table<&str, &[u8]>,
    name: &str,
    state: &RulesetState,
) -> Result<u64, StoreError> {
    let mut meta = txn.open_table(META).map_err(backend)?;
    let revision = meta
        .get(RULESET_REVISION)
        .map_err(backend)?
        .map_or(0, |r| r.value())
        + 1;
    meta.insert(RULESET_REVISION, revision).map_err(backend)?;
    let mut stored = format!("{revision:020}").into_bytes();
    stored.extend(encode(state));
    states.insert(name, stored.as_slice()).map_err(backend)?;
    Ok(revision)
}

impl RulesetStore for EmbeddedStore {
    async fn push_ruleset(
        &self,
        record: &PushedRuleset,
        bytes: &[u8],
    ) -> Result<Pushed, StoreError> {
        let (record, bytes) = (record.clone(), bytes.to_vec());
        self.write(move |txn| {
            let key = record.key();
            let mut versions = txn.open_table(RULESET_VERSIONS).map_err(backend)?;
            let stored: Option<PushedRuleset> = get_json(&versions, &key)?;
            if let Some(stored) = stored {
                if stored.sha256 != record.sha256 {
                    return Err(StoreError::Conflict(format!(
                        "rule set {key} with other content"
                    )));
                }
                // A signature coming with the same bytes is kept.
                if stored.signature.is_none() && record.signature.is_some() {
                    versions
                        .insert(key.as_str(), encode(&record).as_slice())
                        .map_err(backend)?;
                }
                return Ok((Pushed::AlreadyStored, Vec::new()));
            }
            versions
                .insert(key.as_str(), encode(&record).as_slice())
                .map_err(backend)?;
            txn.open_table(RULESET_BLOBS)
                .map_err(backend)?
                .insert(record.sha256.as_str(), bytes.as_slice())
                .map_err(backend)?;
            Ok((Pushed::Stored, Vec::new()))
        })
        .await
    }

    async fn pushed_rulesets(&self) -> Result<Listed<Vec<PushedRuleset>>, StoreError> {
        self.read(|txn| {
            let table = txn.open_table(RULESET_VERSIONS).map_err(backend)?;
            let mut listed = Listed::<Vec<PushedRuleset>>::default();
            for entry in table.iter().map_err(backend)? {
                let (key, value) = entry.map_err(backend)?;
                let name = key.value().split('@').next().unwrap_or_default();
                match decode(key.value(), value.value()) {
                    Ok(pushed) => listed.records.push(pushed),
                    Err(error) => listed.unreadable.push(unreadable(name, error)),
                }
            }
            sort_pushed(&mut listed.records);
            Ok(listed)
        })
        .await
    }

    async fn ruleset_bytes(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let sha256 = sha256.to_owned();
        self.read(move |txn| {
            let table = txn.open_table(RULESET_BLOBS).map_err(backend)?;
            let bytes = table.get(sha256.as_str()).map_err(backend)?;
            Ok(bytes.map(|bytes| bytes.value().to_vec()))
        })
        .await
    }

    async fn ruleset_states(&self) -> Result<Listed<BTreeMap<String, StoredState>>, StoreError> {
        self.read(|txn| {
            let table = txn.open_table(RULESET_STATES).map_err(backend)?;
            let mut listed = Listed::<BTreeMap<_, _>>::default();
            for entry in table.iter().map_err(backend)? {
                let (name, value) = entry.map_err(backend)?;
                let name = name.value().to_owned();
                match stored_state(&name, value.value()) {
                    Ok(state) => {
                        listed.records.insert(name, state);
                    }
                    Err(error) => listed.unreadable.push(unreadable(&name, error)),
                }
            }
            Ok(listed)
        })
        .await
    }

    async fn put_ruleset_state(
        &self,
        name: &str,
        expected: u64,
        state: &RulesetState,
    ) -> Result<u64, StoreError> {
        let (name, state) = (name.to_owned(), state.clone());
        self.write(move |txn| {
            let mut states = txn.open_table(RULESET_STATES).map_err(backend)?;
            let current = match states.get(name.as_str()).map_err(backend)? {
                Some(stored) => stored_state(&name, stored.value())?.revision,
                None => 0,
            };
            if current != expected {
                return Err(StoreError::Stale(format!("rule set {name}'s state")));
            }
            Ok((put_state(txn, &mut states, &name, &state)?, Vec::new()))
        })
        .await
    }

    async fn rulesets_revision(&self) -> Result<u64, StoreError> {
        self.read(|txn| {
            let meta = txn.open_table(META).map_err(backend)?;
            let revision = meta.get(RULESET_REVISION).map_err(backend)?;
            Ok(revision.map_or(0, |r| r.value()))
        })
        .await
    }

    async fn add_shadow_results(
        &self,
        name: &str,
        version: &str,
        results: &ShadowResults,
    ) -> Result<(), StoreError> {
        let (key, added) = (version_key(name, version), results.clone());
        self.write(move |txn| {
            let mut table = txn.open_table(SHADOW_RESULTS).map_err(backend)?;
            let mut stored: ShadowResults = get_json(&table, &key)?.unwrap_or_default();
            for (pair, count) in added.counts {
                *stored.counts.entry(pair).or_default() += count;
            }
            let mut samples = added.samples;
            samples.reverse();
            samples.extend(stored.samples);
            samples.truncate(SHADOW_SAMPLES_KEPT);
            stored.samples = samples;
            table
                .insert(key.as_str(), encode(&stored).as_slice())
                .map_err(backend)?;
            Ok(((), Vec::new()))
        })
        .await
    }

    async fn shadow_results(&self, name: &str, version: &str) -> Result<ShadowResults, StoreError> {
        let key = version_key(name, version);
        self.read(move |txn| {
            let table = txn.open_table(SHADOW_RESULTS).map_err(backend)?;
            Ok(get_json(&table, &key)?.unwrap_or_default())
        })
        .await
    }

    async fn remove_ruleset(&self, name: &str, version: &str) -> Result<bool, StoreError> {
        let (name, version) = (name.to_owned(), version.to_owned());
        self.write(move |txn| {
            let mut states = txn.open_table(RULESET_STATES).map_err(backend)?;
            let state = match states.get(name.as_str()).map_err(backend)? {
                Some(stored) => Some(stored_state(&name, stored.value())?.state),
                None => None,
            };
            if state.as_ref().is_some_and(|state| runs(state, &version)) {
                return Err(StoreError::Conflict(format!(
                    "rule set {name} {version} is in service"
                )));
            }
            let key = version_key(&name, &version);
            let mut versions = txn.open_table(RULESET_VERSIONS).map_err(backend)?;
            let Some(removed) = get_json::<PushedRuleset>(&versions, &key)? else {
                return Ok((false, Vec::new()));
            };
            versions.remove(key.as_str()).map_err(backend)?;
            txn.open_table(SHADOW_RESULTS)
                .map_err(backend)?
                .remove(key.as_str())
                .map_err(backend)?;
            // The name's revision moves: a change read before this is refused as stale.
            if let Some(state) = state {
                put_state(txn, &mut states, &name, &state)?;
            }
            let mut shared = false;
            for entry in versions.iter().map_err(backend)? {
                let (other, value) = entry.map_err(backend)?;
                let other: PushedRuleset = decode(other.value(), value.value())?;
                shared |= other.sha256 == removed.sha256;
            }
            if !shared {
                txn.open_table(RULESET_BLOBS)
                    .map_err(backend)?
                    .remove(removed.sha256.as_str())
                    .map_err(backend)?;
            }
            Ok((true, Vec::new()))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::ReadableTableMetadata;

    #[tokio::test]
    async fn expired_ephemeral_entries_are_swept_by_later_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let now = crate::now_ms();
        for i in 0..100 {
            store
                .lease(&format!("spent:{i}"), "x", now, now + 1)
                .await
                .unwrap();
        }
        store
            .put_ephemeral("live", "v", now + 60_000)
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let count = |store: &EmbeddedStore| {
            let txn = store.db.begin_read().unwrap();
            let entries = txn.open_table(EPHEMERAL).unwrap().len().unwrap();
            let due = txn.open_table(EPHEMERAL_DUE).unwrap().len().unwrap();
            (entries, due)
        };
        // Each write removes up to SWEEP_PER_WRITE expired entries, never a live one.
        for _ in 0..7 {
            store
                .put_ephemeral("live", "v", now + 60_000)
                .await
                .unwrap();
        }
        assert_eq!(count(&store), (1, 1));
        assert_eq!(
            store.ephemeral("live", now).await.unwrap().as_deref(),
            Some("v")
        );
        store.remove_ephemeral("live").await.unwrap();
        assert_eq!(count(&store), (0, 0));
    }

    /// Records a later release wrote (or damage) are listed apart, named, and the rest
    /// are read; an operation on their name is refused naming them.
    #[tokio::test]
    async fn unreadable_rule_set_records_are_listed_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let state = RulesetState::default();
        store
            .put_ruleset_state("wordpress", 0, &state)
            .await
            .unwrap();
        let txn = store.db.begin_write().unwrap();
        {
            let mut states = txn.open_table(RULESET_STATES).unwrap();
            let later = format!("{:020}{{\"failure\":\"quarantine\"}}", 7);
            states.insert("drupal", later.as_bytes()).unwrap();
            let mut versions = txn.open_table(RULESET_VERSIONS).unwrap();
            versions.insert("drupal@2.0.0", b"{".as_slice()).unwrap();
        }
        txn.commit().unwrap();

        let states = store.ruleset_states().await.unwrap();
        assert_eq!(states.records.keys().collect::<Vec<_>>(), ["wordpress"]);
        let names: Vec<_> = states.unreadable.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["drupal"]);
        assert!(states.unreadable[0].reason.contains("quarantine"));
        assert!(states.clone().readable_for("wordpress").is_ok());
        let refused = states.readable_for("drupal").unwrap_err().to_string();
        assert!(refused.contains("ruleset state drupal"), "{refused}");

        let pushed = store.pushed_rulesets().await.unwrap();
        assert!(pushed.records.is_empty());
        assert_eq!(pushed.unreadable[0].name, "drupal");
        assert!(
            pushed
                .whole()
                .unwrap_err()
                .to_string()
                .contains("drupal@2.0.0")
        );
    }
}
