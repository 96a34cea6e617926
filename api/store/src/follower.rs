//! A reader's in-memory copy of every website, kept fresh from the store's change feed
//! and healed by a periodic resync: what a gateway's hot path reads, never waiting on
//! the store.
//!
//! The follower subscribes before it loads the first snapshot, so no change falls
//! between the two. Each change names what it touched; the follower re-reads that
//! website and publishes a new index. A version gap (a missed message), a lagging
//! receiver, or a timer that finds the index still short of the version the store had
//! at its last tick all lead to a full reload (a change published but not yet applied
//! is usual under steady writes, and no reason to read everything). A failed reload
//! keeps the last index and is retried at the next tick.
//!
//! A website record the store holds but cannot read (written by a later release, or
//! damaged) is left out and reported, never the reason the rest goes unread: a website
//! the index already had keeps its last readable settings until its record reads again.

use crate::{Changed, Snapshot, Store, StoreError, Unreadable, WebsiteRecord};
use arc_swap::ArcSwap;
use botgate_model::report::Report;
use foldhash::fast::RandomState;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

/// Every website, by domain and by host name, at one store version.
#[derive(Debug, Default, Clone)]
pub struct WebsiteIndex {
    /// The store version the index is current at.
    pub version: u64,
    /// The history that version counts in, as of the last full read
    /// ([`crate::Position::history`]).
    pub history: Arc<str>,
    /// Every website by its domain.
    by_domain: Sharded,
    /// Every host name (the domain and each subdomain) → its website: one lookup per
    /// request.
    by_host: Sharded,
    /// The domains whose stored records could not be read at their last read, sorted.
    unreadable: Arc<Vec<String>>,
}

impl WebsiteIndex {
    /// The index of `snapshot`; a website whose record it could not read keeps the
    /// entry `previous` has for it.
    fn from_snapshot(snapshot: Snapshot, previous: Option<&WebsiteIndex>) -> WebsiteIndex {
        let mut unreadable: Vec<String> = snapshot
            .unreadable
            .iter()
            .map(|u| u.domain.clone())
            .collect();
        unreadable.sort_unstable();
        for Unreadable { domain, reason } in &snapshot.unreadable {
            tracing::warn!(
                domain,
                reason,
                kept = previous.is_some_and(|p| p.website(domain).is_some()),
                "a stored website could not be read; left out of the index (kept as it was, if it was there)"
            );
        }
        let mut index = WebsiteIndex {
            unreadable: Arc::new(unreadable),
            version: snapshot.version,
            history: snapshot.history.into(),
            by_domain: Sharded::default(),
            by_host: Sharded::default(),
        };
        for record in snapshot.websites {
            index.put(record);
        }
        if let Some(previous) = previous {
            for domain in index.unreadable.clone().iter() {
                if let Some(kept) = previous.website(domain) {
                    index.put(WebsiteRecord::clone(kept));
                }
            }
        }
        index
    }

    /// The domains whose stored records could not be read when last read (sorted): the
    /// index has none of them, or the last settings it could read.
    pub fn unreadable(&self) -> &[String] {
        &self.unreadable
    }

    /// Adds or replaces the website of `record`'s domain. A host name another website
    /// of the index answers for stays that website's: the stores give each host name to
    /// one website, so this only happens between two changes of one burst, and the
    /// index never hands one website's visitors to another.
    fn put(&mut self, record: WebsiteRecord) {
        let domain = record.website.domain.as_str().to_owned();
        self.remove(&domain);
        let record = Arc::new(record);
        for host in record.website.host_names() {
            if let Some(held) = self.by_host.get(&host) {
                tracing::warn!(
                    host,
                    held_by = held.website.domain.as_str(),
                    claimed_by = domain,
                    "a host name already answered for by another website is not moved"
                );
                continue;
            }
            self.by_host.insert(host, record.clone());
        }
        self.by_domain.insert(domain, record);
    }

    fn remove(&mut self, domain: &str) {
        if self.by_domain.get(domain).is_none() {
            return;
        }
        if let Some(old) = self.by_domain.remove(domain) {
            for host in old.website.host_names() {
                if self
                    .by_host
                    .get(&host)
                    .is_some_and(|r| Arc::ptr_eq(r, &old))
                {
                    self.by_host.remove(&host);
                }
            }
        }
    }

    /// The website of `domain` (ASCII, lower case).
    pub fn website(&self, domain: &str) -> Option<&Arc<WebsiteRecord>> {
        self.by_domain.get(domain)
    }

    /// The website answering for `host`: its domain or one of its subdomains.
    pub fn by_host(&self, host: &str) -> Option<&Arc<WebsiteRecord>> {
        self.by_host.get(host)
    }

    /// Every website, in no particular order.
    pub fn websites(&self) -> impl Iterator<Item = &Arc<WebsiteRecord>> {
        self.by_domain.values()
    }

    pub fn len(&self) -> usize {
        self.by_domain.len
    }

    pub fn is_empty(&self) -> bool {
        self.by_domain.len == 0
    }
}

/// Parts a [`Sharded`] map is split in.
const SHARDS: usize = 256;

type Shard = HashMap<String, Arc<WebsiteRecord>, RandomState>;

/// A map by name split in [`SHARDS`] parts, each shared between indexes until one of its
/// entries changes: a change copies one part, about 1/256 of the map, however many
/// websites there are (a change that touches no website copies nothing). (foldhash:
/// the keys are the partners' names, not a client's, and SipHash cost the data plane
/// more than any other hashing it did per request.)
#[derive(Debug, Clone)]
struct Sharded {
    /// Picks a key's part; seeded apart from the parts' own hashing, whose bits it
    /// would otherwise make alike within a part.
    pick: RandomState,
    shards: Arc<Vec<Arc<Shard>>>,
    len: usize,
}

impl Default for Sharded {
    fn default() -> Self {
        // One empty part shared by all until each is first written.
        let empty = Arc::new(HashMap::with_hasher(RandomState::default()));
        Sharded {
            pick: RandomState::default(),
            shards: Arc::new(vec![empty; SHARDS]),
            len: 0,
        }
    }
}

impl Sharded {
    fn shard_of(&self, key: &str) -> usize {
        use std::hash::BuildHasher;
        (self.pick.hash_one(key) % SHARDS as u64) as usize
    }

    fn get(&self, key: &str) -> Option<&Arc<WebsiteRecord>> {
        self.shards[self.shard_of(key)].get(key)
    }

    /// The part of `key`, copied first if another index shares it.
    fn shard_mut(&mut self, key: &str) -> &mut Shard {
        let at = self.shard_of(key);
        Arc::make_mut(&mut Arc::make_mut(&mut self.shards)[at])
    }

    /// Holds `record` under `key`, in place of any record held.
    fn insert(&mut self, key: String, record: Arc<WebsiteRecord>) {
        let before = self.shard_mut(&key).insert(key, record);
        self.len += usize::from(before.is_none());
    }

    fn remove(&mut self, key: &str) -> Option<Arc<WebsiteRecord>> {
        let removed = self.shard_mut(key).remove(key);
        self.len -= usize::from(removed.is_some());
        removed
    }

    fn values(&self) -> impl Iterator<Item = &Arc<WebsiteRecord>> {
        self.shards.iter().flat_map(|shard| shard.values())
    }
}

/// The follower: the current index, swapped atomically; stops when dropped.
pub struct Follower {
    current: Arc<ArcSwap<WebsiteIndex>>,
    contact: Arc<Contact>,
    task: tokio::task::JoinHandle<()>,
}

/// When the store last answered the follower, and since when it has not.
#[derive(Default)]
struct Contact {
    /// The last time (ms since the Unix epoch) the store confirmed the index current.
    confirmed_ms: AtomicU64,
    /// Since when (ms) every read has failed; 0 while the store answers.
    failing_since_ms: AtomicU64,
    /// Full reloads since the start.
    reloads: AtomicU64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

impl Contact {
    fn answered(&self) {
        self.confirmed_ms.store(now_ms(), Ordering::Relaxed);
        self.failing_since_ms.store(0, Ordering::Relaxed);
    }

    fn failed(&self) {
        let _ = self.failing_since_ms.compare_exchange(
            0,
            now_ms(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

/// How fresh the follower's index is, for health checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// The store version the index is at.
    pub version: u64,
    /// How long ago the store last confirmed the index current.
    pub age: Duration,
    /// Since the store last answered, while every read of it fails; `None` while it
    /// answers.
    pub unreachable_for: Option<Duration>,
    /// Full reloads of the index since the start (each reads every website).
    pub reloads: u64,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Follower {
    /// Loads the first snapshot (failing if the store cannot give one) and follows the
    /// store from then on, checking its version every `resync_every`.
    pub async fn start<S: Store>(
        store: Arc<S>,
        resync_every: Duration,
    ) -> Result<Follower, StoreError> {
        let feed = store.subscribe();
        let restarts = store.feed_restarts();
        let first = WebsiteIndex::from_snapshot(store.snapshot().await?, None);
        let current = Arc::new(ArcSwap::from_pointee(first));
        let contact = Arc::new(Contact::default());
        contact.answered();
        let task = tokio::spawn(follow(
            store,
            feed,
            restarts,
            Arc::clone(&current),
            Arc::clone(&contact),
            resync_every,
        ));
        Ok(Follower {
            current,
            contact,
            task,
        })
    }

    /// The index's version, how long ago the store confirmed it, and how long the
    /// store has not answered.
    pub fn freshness(&self) -> Freshness {
        let now = now_ms();
        let since = |ms: u64| Duration::from_millis(now.saturating_sub(ms));
        let failing = self.contact.failing_since_ms.load(Ordering::Relaxed) != 0;
        let age = since(self.contact.confirmed_ms.load(Ordering::Relaxed));
        Freshness {
            version: self.current.load().version,
            age,
            // Lost since it last answered, not since the failure was noticed.
            unreachable_for: failing.then_some(age),
            reloads: self.contact.reloads.load(Ordering::Relaxed),
        }
    }

    /// The index as of now; cheap, lock-free, never waits on the store.
    pub fn index(&self) -> Arc<WebsiteIndex> {
        self.current.load_full()
    }

    /// The index as of now, for a short look that does not await: unlike
    /// [`Follower::index`] it does not write the index's reference count, a line every
    /// data-plane core would otherwise write on every request.
    pub fn current(&self) -> arc_swap::Guard<Arc<WebsiteIndex>> {
        self.current.load()
    }
}

async fn reload<S: Store>(
    store: &S,
    current: &ArcSwap<WebsiteIndex>,
    contact: &Contact,
    why: &str,
) {
    contact.reloads.fetch_add(1, Ordering::Relaxed);
    match store.snapshot().await {
        Ok(snapshot) => {
            contact.answered();
            tracing::info!(
                why,
                version = snapshot.version,
                websites = snapshot.websites.len(),
                unreadable = snapshot.unreadable.len(),
                "website index reloaded"
            );
            let index = WebsiteIndex::from_snapshot(snapshot, Some(&current.load()));
            current.store(Arc::new(index));
        }
        Err(err) => {
            contact.failed();
            tracing::warn!(error = %Report(&err), why, "website index reload failed; keeping the last one")
        }
    }
}

/// What the changes drained so far ask for.
enum Next {
    /// Re-read these domains and move to `version`.
    Apply { version: u64, domains: Vec<String> },
    /// A message was missed: reload everything.
    Reload(&'static str),
    /// The store is gone.
    Stop,
}

async fn follow<S: Store>(
    store: Arc<S>,
    mut feed: tokio::sync::broadcast::Receiver<crate::Change>,
    mut restarts: tokio::sync::watch::Receiver<u64>,
    current: Arc<ArcSwap<WebsiteIndex>>,
    contact: Arc<Contact>,
    resync_every: Duration,
) {
    let mut timer = tokio::time::interval(resync_every);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    timer.tick().await;
    let mut restarts_open = true;
    // The store's version at the last tick, which the feed has had a tick to bring.
    let mut version_at_last_tick = None;
    loop {
        let first = tokio::select! {
            received = feed.recv() => received,
            restarted = restarts.changed(), if restarts_open => {
                match restarted {
                    Ok(()) => reload(store.as_ref(), &current, &contact, "the change feed is back after a lost connection").await,
                    Err(_) => restarts_open = false,
                }
                continue;
            }
            _ = timer.tick() => {
                // A store that does not answer within a tick is as lost as one that
                // refuses (a dead peer can leave a call waiting).
                let answer = tokio::time::timeout(resync_every, store.position())
                    .await
                    .unwrap_or_else(|_| {
                        Err(StoreError::backend_says(
                            "no answer to the version read within the resync interval",
                        ))
                    });
                let index = current.load();
                let behind_last_tick = version_at_last_tick.take();
                match answer {
                    Ok(position) if *position.history != *index.history => {
                        // A promoted replica: its numbers may repeat ones applied here
                        // for other changes, so nothing applied since the last full
                        // read is trusted.
                        reload(store.as_ref(), &current, &contact, "the store's history changed (a failover)").await;
                    }
                    Ok(position) if position.version < index.version => {
                        reload(store.as_ref(), &current, &contact, "periodic resync found the store behind the index").await;
                    }
                    Ok(_) if behind_last_tick.is_some_and(|then| index.version < then) => {
                        reload(store.as_ref(), &current, &contact, "periodic resync found the index a tick behind the store").await;
                    }
                    Ok(position) => {
                        contact.answered();
                        version_at_last_tick = Some(position.version);
                    }
                    Err(err) => {
                        contact.failed();
                        tracing::warn!(error = %Report(&err), "website index: cannot read the store version");
                    }
                }
                continue;
            }
        };
        // Drain what else is queued, so a burst of changes makes one new index.
        let mut version = current.load().version;
        let mut domains = Vec::new();
        let mut next = None;
        let mut received = first;
        loop {
            match received {
                Ok(change) if change.version <= version => {}
                Ok(change) if change.version == version + 1 => {
                    version = change.version;
                    if let Changed::Website { domain } = change.what {
                        domains.push(domain.as_str().to_owned());
                    }
                }
                Ok(_) => {
                    next = Some(Next::Reload("a change message was missed"));
                    break;
                }
                Err(RecvError::Lagged(_)) => {
                    next = Some(Next::Reload("the change feed lagged"));
                    break;
                }
                Err(RecvError::Closed) => {
                    next = Some(Next::Stop);
                    break;
                }
            }
            received = match feed.try_recv() {
                Ok(change) => Ok(change),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
                Err(TryRecvError::Closed) => Err(RecvError::Closed),
            };
        }
        match next.unwrap_or(Next::Apply { version, domains }) {
            Next::Stop => return,
            Next::Reload(why) => reload(store.as_ref(), &current, &contact, why).await,
            Next::Apply { version, domains } => {
                match apply(store.as_ref(), &current, version, domains).await {
                    Ok(()) => contact.answered(),
                    Err(err) => {
                        tracing::warn!(error = %Report(&err), "website index: cannot read a changed website; reloading");
                        reload(
                            store.as_ref(),
                            &current,
                            &contact,
                            "a changed website could not be read",
                        )
                        .await;
                    }
                }
            }
        }
    }
}

async fn apply<S: Store>(
    store: &S,
    current: &ArcSwap<WebsiteIndex>,
    version: u64,
    mut domains: Vec<String>,
) -> Result<(), StoreError> {
    domains.sort();
    domains.dedup();
    let mut fresh = Vec::with_capacity(domains.len());
    let mut unreadable = Vec::new();
    for domain in domains {
        let parsed = botgate_model::Domain::parse(&domain).map_err(|e| StoreError::Corrupt {
            key: domain.clone(),
            reason: e.to_string(),
        })?;
        match store.website(&parsed).await {
            Ok(record) => fresh.push((domain, record)),
            // The website keeps what the index has for it (its last readable settings,
            // or nothing); the rest of the burst is applied.
            Err(StoreError::Corrupt { reason, .. }) => {
                tracing::warn!(
                    domain,
                    reason,
                    "a changed website could not be read; kept as it was"
                );
                unreadable.push(domain);
            }
            Err(err) => return Err(err),
        }
    }
    let mut index = WebsiteIndex::clone(&current.load());
    if !fresh.is_empty() || !unreadable.is_empty() {
        let listed = Arc::make_mut(&mut index.unreadable);
        listed.retain(|domain| !fresh.iter().any(|(read, _)| read == domain));
        for domain in unreadable {
            if let Err(at) = listed.binary_search(&domain) {
                listed.insert(at, domain);
            }
        }
    }
    // Every changed website leaves first, so a host name one of them gave up is free
    // for another of the same burst.
    for (domain, _) in &fresh {
        index.remove(domain);
    }
    for record in fresh.into_iter().filter_map(|(_, record)| record) {
        index.put(record);
    }
    index.version = index.version.max(version);
    current.store(Arc::new(index));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::{partner, user, website};
    use botgate_model::Subdomain;

    fn record(domain: &str, subdomains: &[&str]) -> WebsiteRecord {
        let acme = partner("acme");
        let mut site = website(domain, &user(&acme, "alice"));
        site.subdomain = subdomains
            .iter()
            .map(|s| Subdomain::parse(s).unwrap())
            .collect();
        WebsiteRecord {
            partner: acme.name,
            revision: 1,
            website: site,
        }
    }

    fn owner<'a>(index: &'a WebsiteIndex, host: &str) -> Option<&'a str> {
        index.by_host(host).map(|r| r.website.domain.as_str())
    }

    /// A change copies the part of each map it touches, not the map: the new index
    /// shares every other part with the one it was made from, which stays as it was.
    #[test]
    fn a_change_copies_one_part_of_each_map() {
        let mut before = WebsiteIndex::default();
        for n in 0..2000 {
            before.put(record(&format!("site{n}.example"), &["www"]));
        }
        let mut after = before.clone();
        after.put(record("new.example", &["www", "shop"]));
        after.remove("site7.example");
        let copied = |a: &Sharded, b: &Sharded| {
            a.shards
                .iter()
                .zip(b.shards.iter())
                .filter(|(x, y)| !Arc::ptr_eq(x, y))
                .count()
        };
        assert!(copied(&before.by_domain, &after.by_domain) <= 2);
        assert!(copied(&before.by_host, &after.by_host) <= 5);
        assert_eq!((before.len(), after.len()), (2000, 2000));
        assert!(before.website("new.example").is_none());
        assert_eq!(owner(&before, "www.site7.example"), Some("site7.example"));
        assert_eq!(owner(&after, "www.site7.example"), None);
        assert_eq!(owner(&after, "shop.new.example"), Some("new.example"));
        assert_eq!(after.websites().count(), 2000);
    }

    #[test]
    fn a_host_name_stays_with_the_website_that_holds_it() {
        let mut index = WebsiteIndex::default();
        index.put(record("victim.example", &["www"]));
        index.put(record("www.victim.example", &[]));
        assert_eq!(owner(&index, "www.victim.example"), Some("victim.example"));
        assert_eq!(
            index.website("www.victim.example").map(|r| r.revision),
            Some(1),
            "the website itself is indexed by its domain"
        );
        // Deleting the claimant removes only its own names.
        index.remove("www.victim.example");
        assert_eq!(owner(&index, "www.victim.example"), Some("victim.example"));
        // Once the holder gives the name up, it is free.
        index.put(record("victim.example", &[]));
        index.put(record("www.victim.example", &[]));
        assert_eq!(
            owner(&index, "www.victim.example"),
            Some("www.victim.example")
        );
        assert_eq!(owner(&index, "victim.example"), Some("victim.example"));
    }
}
