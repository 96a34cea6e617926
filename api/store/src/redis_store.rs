//! The Redis backend, for a cluster: every gateway reaches the same Redis master
//! (through HAProxy's `:16379` on the floating IP, or directly), each multi-key write is
//! one Lua script (atomic on the master), changes are published on a channel, and
//! writes that must survive a failover are confirmed with `WAIT`.
//!
//! Keys (all under the configured prefix, `botgate:` by default):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `version` | string | the store's version (`INCR`) |
//! | `partner:{name}` | string | [`PartnerRecord`] JSON |
//! | `partner-key:{sha256}` | string | partner name |
//! | `user:{partner}:{id}` | string | [`User`] JSON |
//! | `user-key:{key}` | string | `{partner}:{id}` |
//! | `users:{partner}` | sorted set | user ids (lexical order) |
//! | `website:{domain}` | hash | `partner`, `user` (its id; a release before it wrote none, and traffic counts add it), `revision`, `website` (JSON) |
//! | `websites` | sorted set | every domain |
//! | `websites-of:{partner}` | sorted set | the partner's domains |
//! | `websites-of:{partner}:{id}` | sorted set | the user's domains |
//! | `host:{name}` | string | the domain of the one website answering for host `name` |
//! | `domain-tree` | sorted set | `{reversed domain} {partner}` of every website (lexical order: the websites under a domain are one range) |
//! | `domain-tree-of:{partner}` | sorted set | `{reversed domain}` of the partner's websites: its part of `domain-tree`, so that two range counts tell whether a domain has another partner's websites under it (walked and mended at the first look at a range in a minute, as a release without it may have written since) |
//! | `domain-tree-walked:{partner}:{reversed domain}` | string with a TTL | that range was walked within the minute |
//! | `host-index` | string | present once `host:` and `domain-tree` cover every website |
//! | `changes` | channel | [`Change`] JSON, one message per change |
//! | `secret:{name}` | string | a cluster-wide secret ([`SharedState::shared_secret`](crate::SharedState::shared_secret)) |
//! | `delivery:{id}` | string | [`Delivery`] JSON (its `next_attempt_ms` is the score's) |
//! | `deliveries-due:{partner}` | sorted set | the partner's waiting delivery ids scored by when each is next due (ms); its bound (ids whose delivery is gone are dropped at the bound) |
//! | `deliveries-pruned:{partner}` | string with a TTL | the partner's waiting ids were checked for deliveries gone within the minute |
//! | `partners-due` | sorted set | each partner with waiting deliveries, scored by when its first is due |
//! | `deliveries`, `deliveries-of:{partner}` | sorted set, set | a former release's outbox indexes, moved into the ones above by the next claim |
//! | `website-revision` | string | the last website revision given (`INCR`) |
//! | `ephemeral:{key}` | string with a TTL | a short-lived value or a lease's holder |

use crate::rulesets::{
    Listed, Pushed, PushedRuleset, RulesetState, RulesetStore, SHADOW_SAMPLES_KEPT, ShadowResults,
    StoredState, sort_pushed, unreadable, version_key,
};
use crate::traffic::{Counts, Resolution, TrafficEvent, TrafficStore};
use crate::{
    AccountStore, Change, Changed, ClaimShares, Delivery, HostClash, HostField, OutboxStore, Owner,
    Page, PartnerChange, PartnerRecord, Position, SharedState, Snapshot, StoreError, Unreadable,
    WebsiteLimits, WebsiteOwner, WebsiteRecord, WebsiteStore, host_claims, key_digest,
};
use botgate_model::{Domain, PartnerName, User, UserId, Website};
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, broadcast};

/// Connections kept for writes confirmed with `WAIT`.
const CONFIRMING_CONNECTIONS: usize = 4;

/// How to reach Redis.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://host:port` (in a cluster: the floating IP and HAProxy's port 16379).
    pub url: String,
    /// The password (`requirepass`), if any.
    pub password: Option<String>,
    /// Prefix of every key and of the channel.
    pub prefix: String,
    /// Replicas that must acknowledge a write before it counts (`WAIT`); 0 on a lone
    /// server.
    pub wait_replicas: u32,
    /// How long `WAIT` may take.
    pub wait_timeout: Duration,
    /// Find the master through these sentinels instead of `url`.
    pub sentinel: Option<SentinelConfig>,
}

/// Where the sentinels are, and the name they know the master by.
#[derive(Clone, PartialEq, Eq)]
pub struct SentinelConfig {
    /// `host:port` of each sentinel.
    pub addresses: Vec<String>,
    /// The monitored master's name (`mymaster` in a rendered cluster).
    pub master: String,
    /// The sentinels' own password (their `requirepass`), if they have one.
    pub password: Option<String>,
}

impl std::fmt::Debug for SentinelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelConfig")
            .field("addresses", &self.addresses)
            .field("master", &self.master)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl RedisConfig {
    /// A lone server at `url` with the default prefix and no replicas to wait for.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            password: None,
            prefix: "botgate:".into(),
            wait_replicas: 0,
            wait_timeout: Duration::from_secs(1),
            sentinel: None,
        }
    }

    /// The master that `sentinels` (`host:port` each) know as `master`.
    pub fn sentinels(addresses: Vec<String>, master: impl Into<String>) -> Self {
        RedisConfig {
            sentinel: Some(SentinelConfig {
                addresses,
                master: master.into(),
                password: None,
            }),
            ..RedisConfig::new(String::new())
        }
    }

    /// Where Redis is, as logs and errors may show it: its address (host and port, or
    /// socket) and database, never the URL's user information or parameters.
    pub fn location(&self) -> String {
        if let Some(sentinel) = &self.sentinel {
            return format!(
                "the master `{}` of the sentinels {}",
                sentinel.master,
                sentinel.addresses.join(", ")
            );
        }
        match redis::IntoConnectionInfo::into_connection_info(self.url.as_str()) {
            Ok(info) => format!("{}, database {}", info.addr(), info.redis_settings().db()),
            Err(_) => "an unreadable Redis URL".to_owned(),
        }
    }
}

/// Shows everything but the password.
impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("location", &self.location())
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("prefix", &self.prefix)
            .field("wait_replicas", &self.wait_replicas)
            .field("wait_timeout", &self.wait_timeout)
            .finish()
    }
}

/// The Redis store. Cheap to clone.
#[derive(Clone)]
pub struct RedisStore {
    master: Arc<Master>,
    /// The shared connection, multiplexed: every read and unconfirmed write is
    /// pipelined on it without a lock; replaced after a failover sign.
    connection: Arc<arc_swap::ArcSwap<ConnectionManager>>,
    /// Connections of their own for writes confirmed with `WAIT`, which blocks the
    /// connection it is sent on and counts only that connection's writes; connected
    /// when first needed.
    confirming: Arc<[Mutex<Option<ConnectionManager>>]>,
    /// Held while the shared connection is replaced: after a failover, one caller
    /// reconnects and the others take its connection.
    reconnecting: Arc<Mutex<()>>,
    config: Arc<RedisConfig>,
    feed: broadcast::Sender<Change>,
    /// Dropped with the last clone; the feed relay stops then.
    alive: Arc<()>,
    counters: Arc<Counters>,
}

/// What a store's clones count together.
struct Counters {
    /// How often the change feed came back after a lost connection.
    feed_restarts: tokio::sync::watch::Sender<u64>,
    /// Where the next confirmed write looks for a free connection first.
    next_confirming: std::sync::atomic::AtomicUsize,
    /// This process's write operations are named `op:{prefix}:{number}`: a random
    /// prefix, and the next number.
    operation_prefix: String,
    next_operation: std::sync::atomic::AtomicU64,
}

/// The connection's timeouts: a reply may take as long as `WAIT` is allowed to, and a
/// little more.
fn manager_config(config: &RedisConfig) -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_response_timeout(Some(config.wait_timeout + Duration::from_secs(1)))
        .set_connection_timeout(Some(Duration::from_secs(2)))
}

/// A command (or several) on a connection, run again on a new connection after a
/// failover sign.
type OperationFuture<'c, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = redis::RedisResult<T>> + Send + 'c>>;

/// Gives a closure the signature of an operation (so that the borrow of the connection
/// it is given may last as long as its future).
fn operation<T, F>(op: F) -> F
where
    F: for<'c> Fn(&'c mut ConnectionManager) -> OperationFuture<'c, T>,
{
    op
}

fn backend(err: redis::RedisError) -> StoreError {
    StoreError::backend("Redis", err)
}

/// Errors after which the connection may point at a demoted master.
fn is_failover(err: &redis::RedisError) -> bool {
    matches!(
        err.code(),
        Some("READONLY" | "NOREPLICAS" | "MASTERDOWN" | "LOADING")
    ) || err.is_io_error()
        || err.is_connection_dropped()
}

/// A website record from its hash's `partner`, `revision` and `website` fields.
fn record_from_fields(key: &str, fields: [Option<String>; 3]) -> Result<WebsiteRecord, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        key: key.to_owned(),
        reason,
    };
    let [Some(partner), Some(revision), Some(website)] = fields else {
        return Err(corrupt("a field is missing".into()));
    };
    Ok(WebsiteRecord {
        partner: PartnerName::parse(&partner).map_err(|e| corrupt(e.to_string()))?,
        revision: revision
            .parse()
            .map_err(|_| corrupt(format!("revision {revision:?}")))?,
        website: decode(key, &website)?,
    })
}

fn decode<T: DeserializeOwned>(key: &str, json: &str) -> Result<T, StoreError> {
    serde_json::from_str(json).map_err(|err| StoreError::Corrupt {
        key: key.to_owned(),
        reason: err.to_string(),
    })
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("model types always serialise")
}

/// Websites read per round trip when a snapshot is loaded.
const SNAPSHOT_CHUNK: usize = 1000;

/// The error text of a write that `WAIT` did not see reach enough replicas.
const NOT_CONFIRMED: &str = "the write reached the master but was not confirmed by enough replicas";

/// A partner's limit as a script takes it: `''` for none.
fn limit_argument(at_most: usize) -> String {
    if at_most == usize::MAX {
        String::new()
    } else {
        at_most.to_string()
    }
}

/// The scripts' answers that are not data: a Lua error reply whose code (its first
/// word, `-NOTFOUND user x`) is one of these becomes the matching [`StoreError`]. Only
/// the code is matched: a word inside a partner's value (a user id `XCONFLICTX`) never
/// passes for one.
fn script_error(err: redis::RedisError) -> StoreError {
    let Some(code) = err.code() else {
        return backend(err);
    };
    let detail = err.detail().unwrap_or_default();
    let rest = detail
        .trim_start_matches(['"', ':', ' '])
        .trim_end_matches(['"', ')', '.'])
        .trim()
        .to_owned();
    match code {
        "HOSTTAKEN" => {
            let mut words = rest.split_whitespace();
            match (
                words.next().and_then(HostField::parse),
                words.next().and_then(HostClash::parse),
                words.next(),
            ) {
                (Some(field), Some(clash), Some(host)) => StoreError::HostTaken {
                    field,
                    host: host.to_owned(),
                    clash,
                },
                _ => backend(err),
            }
        }
        "CONFLICT" => StoreError::Conflict(rest),
        "NOTFOUND" => StoreError::NotFound(rest),
        "STALE" => StoreError::Stale(rest),
        "FULL" => StoreError::Full(rest),
        "ATLIMIT" => StoreError::AtLimit(rest),
        "CORRUPT" => StoreError::Corrupt {
            key: rest,
            reason: "a record this release cannot read".to_owned(),
        },
        _ => backend(err),
    }
}

/// `publish`: bumps the version once per change given as `ARGV[i]` (JSON of
/// [`Changed`]) and publishes each; `KEYS[1]` is the version key, `KEYS[2]` the channel.
/// `at_limit`: the [`StoreError::AtLimit`] reply when a partner's quota is reached.
const PUBLISH_LUA: &str = include_str!("lua/publish.lua");

/// One website per host name (`host:{name}`), and no domain under or above another
/// partner's (`domain-tree`): the checks and the bookkeeping every website write shares.
/// A claim is `{host, field}`; a refusal is the string a script returns as its error.
const HOSTS_LUA: &str = include_str!("lua/hosts.lua");

/// A script with the shared Lua functions ([`PUBLISH_LUA`], [`HOSTS_LUA`]) before `body`.
fn script(body: &str) -> redis::Script {
    redis::Script::new(&format!("{PUBLISH_LUA}\n{HOSTS_LUA}\n{body}"))
}

/// Runs a write once per operation (the last key names it): see `lua/once.lua`.
const ONCE_LUA: &str = include_str!("lua/once.lua");

/// How long an operation's reply is kept for a retry of it.
const OPERATION_KEPT: Duration = Duration::from_secs(600);

/// How long the reply of a frequent operation is kept: a retry comes within seconds of
/// its first run (one reconnect, under the connection and response timeouts).
const FREQUENT_OPERATION_KEPT: Duration = Duration::from_secs(60);

/// What a write's retry after a lost reply does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Gets the first run's reply, kept for [`OPERATION_KEPT`]: the store's records.
    FirstReply,
    /// Gets the first run's reply, kept for [`FREQUENT_OPERATION_KEPT`]: writes made
    /// every few seconds for each website (traffic counts), whose replies kept for
    /// [`OPERATION_KEPT`] would be dozens of keys a website and gateway.
    FrequentFirstReply,
    /// Runs again: short-lived values whose repeat is harmless (a count one higher, a
    /// lease or value set again), written too often to keep a reply for each (a flood
    /// of challenge answers would fill Redis with them).
    RunAgain,
}

/// [`script`] for a write: `body` runs once per operation ([`ONCE_LUA`]), its reply
/// kept for `kept`.
fn write_once_script(body: &str, kept: Duration) -> redis::Script {
    redis::Script::new(&format!(
        "{PUBLISH_LUA}\n{HOSTS_LUA}\n{ONCE_LUA}\nreturn once(function()\n{body}\nend, {})",
        kept.as_millis()
    ))
}

/// `website`'s host claims as the scripts take them: a JSON list of `[host, field]`.
fn claims_json(website: &Website) -> String {
    let claims: Vec<(String, &str)> = host_claims(website)
        .map(|(host, field)| (host, field.as_str()))
        .collect();
    json(&claims)
}

/// A random name for this process's operations: 64 bits from the OS (through std's
/// randomly keyed hasher), with the process id and the time.
fn operation_prefix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    format!("{:016x}", hasher.finish())
}

/// How the master is found: at one address (in a cluster, HAProxy's port, which
/// forwards to whichever node is the master), or by asking the sentinels each time a
/// connection is made.
enum Master {
    Address(redis::Client),
    Sentinels(Mutex<redis::sentinel::SentinelClient>),
}

impl Master {
    fn new(config: &RedisConfig) -> Result<Master, StoreError> {
        let address = |err| StoreError::backend(format!("the address {}", config.location()), err);
        let Some(sentinel) = &config.sentinel else {
            let mut info = redis::IntoConnectionInfo::into_connection_info(config.url.as_str())
                .map_err(address)?;
            if let Some(password) = &config.password {
                let settings = info.redis_settings().clone().set_password(password);
                info = info.set_redis_settings(settings);
            }
            return Ok(Master::Address(redis::Client::open(info).map_err(address)?));
        };
        let mut nodes = Vec::new();
        for text in &sentinel.addresses {
            let info = redis::IntoConnectionInfo::into_connection_info(format!("redis://{text}"))
                .map_err(address)?;
            nodes.push(info.addr().clone());
        }
        let mut builder = redis::sentinel::SentinelClientBuilder::new(
            nodes,
            &sentinel.master,
            redis::sentinel::SentinelServerType::Master,
        )
        .map_err(address)?;
        if let Some(password) = &config.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(password) = &sentinel.password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        Ok(Master::Sentinels(Mutex::new(
            builder.build().map_err(address)?,
        )))
    }

    /// A client of the master as it is now.
    async fn client(&self) -> Result<redis::Client, redis::RedisError> {
        match self {
            Master::Address(client) => Ok(client.clone()),
            Master::Sentinels(sentinels) => sentinels.lock().await.async_get_client().await,
        }
    }
}

impl RedisStore {
    /// Connects to Redis; fails when it cannot be reached.
    pub async fn connect(config: RedisConfig) -> Result<RedisStore, StoreError> {
        let master = Arc::new(Master::new(&config)?);
        let connecting = |err| StoreError::backend("connecting to Redis", err);
        let client = master.client().await.map_err(connecting)?;
        let connection = client
            .get_connection_manager_with_config(manager_config(&config))
            .await
            .map_err(connecting)?;
        let (feed, _) = broadcast::channel(4096);
        let store = RedisStore {
            master,
            connection: Arc::new(arc_swap::ArcSwap::from_pointee(connection)),
            confirming: (0..CONFIRMING_CONNECTIONS)
                .map(|_| Mutex::new(None))
                .collect(),
            reconnecting: Arc::default(),
            config: Arc::new(config),
            feed,
            alive: Arc::new(()),
            counters: Arc::new(Counters {
                feed_restarts: tokio::sync::watch::Sender::new(0),
                next_confirming: Default::default(),
                operation_prefix: operation_prefix(),
                next_operation: Default::default(),
            }),
        };
        let subscribed = store.start_listener();
        // Changes published from now on reach subscribers: wait until the relay listens.
        match tokio::time::timeout(Duration::from_secs(10), subscribed).await {
            Ok(Ok(())) => {}
            _ => {
                return Err(StoreError::backend_says(format!(
                    "{}: cannot subscribe to the change channel",
                    store.config.location()
                )));
            }
        }
        store.index_hosts_once().await?;
        Ok(store)
    }

    /// Fills `host:` and `domain-tree` from the websites of a store written before they
    /// existed; once. Where two old websites claim one host, the first in domain order
    /// keeps it.
    async fn index_hosts_once(&self) -> Result<(), StoreError> {
        const LUA: &str = include_str!("lua/index_hosts_once.lua");
        // Not confirmed with `WAIT`: the index is derived from what is stored, and a
        // replica promoted before it got the index builds it at the next connect.
        let script = Arc::new(script(LUA));
        let (marker, prefix) = (self.key("host-index"), self.config.prefix.clone());
        let _: i64 = self
            .run(move |connection| {
                let (script, marker, prefix) = (script.clone(), marker.clone(), prefix.clone());
                Box::pin(async move {
                    script
                        .key("unused")
                        .key("unused")
                        .key(&marker)
                        .arg(&prefix)
                        .invoke_async(connection)
                        .await
                })
            })
            .await
            .map_err(script_error)?;
        Ok(())
    }

    fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.config.prefix)
    }

    /// Relays the `changes` channel into the in-process feed, resubscribing after a
    /// lost connection (a gap there is healed by the reader's periodic resync).
    fn start_listener(&self) -> tokio::sync::oneshot::Receiver<()> {
        let master = self.master.clone();
        let counters = self.counters.clone();
        let channel = self.key("changes");
        let feed = self.feed.clone();
        let (ready, subscribed) = tokio::sync::oneshot::channel();
        let alive = Arc::downgrade(&self.alive);
        tokio::spawn(async move {
            use futures_util::StreamExt;
            let mut ready = Some(ready);
            loop {
                let pubsub = match master.client().await {
                    Ok(client) => client.get_async_pubsub().await,
                    Err(err) => Err(err),
                };
                match pubsub {
                    Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                        Ok(()) => {
                            match ready.take() {
                                Some(ready) => {
                                    let _ = ready.send(());
                                }
                                // Back after a loss: what was published meanwhile is
                                // lost to this feed.
                                None => counters.feed_restarts.send_modify(|n| *n += 1),
                            }
                            let mut messages = pubsub.on_message();
                            while let Some(message) = messages.next().await {
                                if alive.upgrade().is_none() {
                                    return;
                                }
                                let Ok(text) = message.get_payload::<String>() else {
                                    continue;
                                };
                                match serde_json::from_str::<Change>(&text) {
                                    Ok(change) => {
                                        let _ = feed.send(change);
                                    }
                                    Err(err) => {
                                        tracing::warn!(%err, "unreadable change message")
                                    }
                                }
                            }
                            tracing::warn!("change feed: connection lost; resubscribing");
                        }
                        Err(err) => tracing::warn!(%err, "change feed: cannot subscribe"),
                    },
                    Err(err) => tracing::warn!(%err, "change feed: cannot connect"),
                }
                if alive.upgrade().is_none() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        subscribed
    }

    async fn fresh_connection(&self) -> Result<ConnectionManager, redis::RedisError> {
        self.master
            .client()
            .await?
            .get_connection_manager_with_config(manager_config(&self.config))
            .await
    }

    /// Runs `op` on the shared connection; after an error that means the master moved
    /// (`READONLY`, `NOREPLICAS`, a dropped connection) it reconnects and tries once more.
    async fn run<T>(
        &self,
        op: impl for<'c> Fn(&'c mut ConnectionManager) -> OperationFuture<'c, T>,
    ) -> Result<T, redis::RedisError> {
        let used = self.connection.load_full();
        let mut connection = ConnectionManager::clone(&used);
        match op(&mut connection).await {
            Err(err) if is_failover(&err) => {
                connection = self.reconnect(&used, &err).await;
                op(&mut connection).await
            }
            other => other,
        }
    }

    /// A new shared connection in place of `used`, which failed with `err`: made by
    /// one caller at a time, and taken by the others that come after it.
    async fn reconnect(
        &self,
        used: &Arc<ConnectionManager>,
        err: &redis::RedisError,
    ) -> ConnectionManager {
        let _one_at_a_time = self.reconnecting.lock().await;
        let current = self.connection.load_full();
        if !Arc::ptr_eq(&current, used) {
            return ConnectionManager::clone(&current);
        }
        tracing::warn!(%err, "redis: reconnecting after a failover sign");
        match self.fresh_connection().await {
            Ok(fresh) => {
                self.connection.store(Arc::new(fresh.clone()));
                fresh
            }
            Err(_) => ConnectionManager::clone(&current),
        }
    }

    /// Runs `op` (a write and its `WAIT`) on a connection of its own, as [`Self::run`]
    /// does on the shared one.
    async fn run_confirmed<T>(
        &self,
        op: impl for<'c> Fn(&'c mut ConnectionManager) -> OperationFuture<'c, T>,
    ) -> Result<T, redis::RedisError> {
        let start = self
            .counters
            .next_confirming
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let slots = self.confirming.len();
        let free = (0..slots).find_map(|i| self.confirming[(start + i) % slots].try_lock().ok());
        let mut slot = match free {
            Some(slot) => slot,
            None => self.confirming[start % slots].lock().await,
        };
        let mut connection = match slot.take() {
            Some(connection) => connection,
            None => self.fresh_connection().await?,
        };
        let result = match op(&mut connection).await {
            Err(err) if is_failover(&err) => {
                tracing::warn!(%err, "redis: reconnecting after a failover sign");
                if let Ok(fresh) = self.fresh_connection().await {
                    connection = fresh;
                }
                op(&mut connection).await
            }
            other => other,
        };
        *slot = Some(connection);
        result
    }

    /// Runs a write script and confirms it with `WAIT` when replicas are configured.
    /// The script sees the version key as `KEYS[1]` and the channel as `KEYS[2]`, then
    /// `keys`.
    async fn write_script<T: redis::FromRedisValue + Send>(
        &self,
        body: &'static str,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<T, StoreError> {
        self.write_script_with(Retry::FirstReply, body, keys, args)
            .await
    }

    /// [`Self::write_script`], with `retry` saying what a retry after a lost reply does.
    async fn write_script_with<T: redis::FromRedisValue + Send>(
        &self,
        retry: Retry,
        body: &'static str,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<T, StoreError> {
        let mut keys: Vec<String> = [self.key("version"), self.key("changes")]
            .into_iter()
            .chain(keys)
            .collect();
        let kept = match retry {
            Retry::FirstReply => Some(OPERATION_KEPT),
            Retry::FrequentFirstReply => Some(FREQUENT_OPERATION_KEPT),
            Retry::RunAgain => None,
        };
        let script = match kept {
            Some(kept) => {
                // The operation's name, the same for its retries.
                let counters = &self.counters;
                let number = counters
                    .next_operation
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                keys.push(self.key(&format!("op:{}:{number}", counters.operation_prefix)));
                write_once_script(body, kept)
            }
            None => script(body),
        };
        let script = Arc::new(script);
        let replicas = self.config.wait_replicas;
        let timeout = self.config.wait_timeout.as_millis() as u64;
        let op = operation(move |connection| {
            let (script, keys, args) = (script.clone(), keys.clone(), args.clone());
            Box::pin(async move {
                let mut invocation = script.prepare_invoke();
                for key in &keys {
                    invocation.key(key);
                }
                for arg in &args {
                    invocation.arg(arg);
                }
                let value: T = invocation.invoke_async(connection).await?;
                if replicas > 0 {
                    let acked: u32 = redis::cmd("WAIT")
                        .arg(replicas)
                        .arg(timeout)
                        .query_async(connection)
                        .await?;
                    if acked < replicas {
                        // Not a failover sign, and not retried: the write is on the
                        // master; only its confirmation is missing.
                        return Err(redis::RedisError::from((
                            redis::ErrorKind::Client,
                            NOT_CONFIRMED,
                            format!("{acked} of {replicas} replicas within {timeout} ms"),
                        )));
                    }
                }
                Ok(value)
            })
        });
        if replicas > 0 {
            self.run_confirmed(op).await
        } else {
            self.run(op).await
        }
        .map_err(script_error)
    }

    /// Stores `delivery`: a new one only while fewer than `waiting_at_most` of its
    /// partner's wait, or only over one still there (`None`: a retry's new state).
    async fn put_delivery(
        &self,
        waiting_at_most: Option<usize>,
        delivery: &Delivery,
    ) -> Result<(), StoreError> {
        const LUA: &str = concat!(
            include_str!("lua/outbox.lua"),
            include_str!("lua/put_delivery.lua")
        );
        let partner = delivery.partner.as_str();
        let _: i64 = self
            .write_script(
                LUA,
                vec![
                    self.key(&format!("delivery:{}", delivery.id)),
                    self.key(&format!("deliveries-due:{partner}")),
                ],
                vec![
                    json(delivery),
                    delivery.next_attempt_ms.to_string(),
                    delivery.id.clone(),
                    if waiting_at_most.is_none() { "1" } else { "0" }.to_owned(),
                    waiting_at_most.map_or(String::new(), limit_argument),
                    format!("the outbox of partner {partner}'s webhooks"),
                    self.config.prefix.clone(),
                    partner.to_owned(),
                ],
            )
            .await?;
        Ok(())
    }

    async fn get(&self, key: String) -> Result<Option<String>, StoreError> {
        self.run(move |c| {
            let key = key.clone();
            Box::pin(async move { c.get(key).await })
        })
        .await
        .map_err(backend)
    }

    async fn website_record(&self, domain: &str) -> Result<Option<WebsiteRecord>, StoreError> {
        Ok(self.website_records(vec![domain.to_owned()]).await?.pop())
    }

    /// The records of `domains` that still exist, in order, in one round trip.
    async fn website_records(
        &self,
        domains: Vec<String>,
    ) -> Result<Vec<WebsiteRecord>, StoreError> {
        self.website_records_each(domains)
            .await?
            .into_iter()
            .map(|(_, record)| record)
            .collect()
    }

    /// The websites of `domains` that exist, each read on its own: one unreadable
    /// record is an error beside its domain, not the whole answer's.
    async fn website_records_each(
        &self,
        domains: Vec<String>,
    ) -> Result<Vec<(String, Result<WebsiteRecord, StoreError>)>, StoreError> {
        if domains.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = domains
            .iter()
            .map(|d| self.key(&format!("website:{d}")))
            .collect();
        let replies: Vec<[Option<String>; 3]> = self
            .run({
                let keys = keys.clone();
                move |c| {
                    let mut pipe = redis::pipe();
                    for key in &keys {
                        pipe.cmd("HMGET")
                            .arg(key)
                            .arg("partner")
                            .arg("revision")
                            .arg("website");
                    }
                    Box::pin(async move { pipe.query_async(c).await })
                }
            })
            .await
            .map_err(backend)?;
        let mut records = Vec::with_capacity(replies.len());
        for ((domain, key), fields) in domains.into_iter().zip(&keys).zip(replies) {
            // A domain deleted between the listing and this read has no fields.
            if fields.iter().all(Option::is_none) {
                continue;
            }
            records.push((domain, record_from_fields(key, fields)));
        }
        Ok(records)
    }

    /// The JSON value stored at `key`, decoded.
    async fn get_json<T: DeserializeOwned>(&self, key: String) -> Result<Option<T>, StoreError> {
        match self.get(key.clone()).await? {
            Some(text) => decode(&key, &text).map(Some),
            None => Ok(None),
        }
    }

    async fn lex_page(
        &self,
        key: String,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<String>, Option<String>), StoreError> {
        let start = match after {
            Some(a) => format!("({a}"),
            None => "-".to_owned(),
        };
        let members: Vec<String> = self
            .run(move |c| {
                let (key, start) = (key.clone(), start.clone());
                Box::pin(async move {
                    redis::cmd("ZRANGE")
                        .arg(&key)
                        .arg(&start)
                        .arg("+")
                        .arg("BYLEX")
                        .arg("LIMIT")
                        .arg(0)
                        .arg(limit.saturating_add(1).min(i64::MAX as usize) as i64)
                        .query_async(c)
                        .await
                })
            })
            .await
            .map_err(backend)?;
        let mut members = members;
        let next = if members.len() > limit {
            members.truncate(limit);
            members.last().cloned()
        } else {
            None
        };
        Ok((members, next))
    }
}

fn changed(what: &Changed) -> String {
    json(what)
}

impl AccountStore for RedisStore {
    async fn put_partner(&self, partner: &PartnerRecord) -> Result<(), StoreError> {
        self.write_partner(partner, false).await
    }

    async fn create_partner(&self, partner: &PartnerRecord) -> Result<(), StoreError> {
        self.write_partner(partner, true).await
    }

    async fn update_partner(
        &self,
        name: &PartnerName,
        change: PartnerChange,
    ) -> Result<PartnerRecord, StoreError> {
        // KEYS: version, changes, partner. ARGV: field, value, change, key prefix, name.
        const LUA: &str = include_str!("lua/update_partner.lua");
        let (field, value) = match change {
            PartnerChange::Key { key_sha256 } => ("key_sha256", key_sha256),
            PartnerChange::WebhookSecret(secret) => ("webhook_secret", secret),
            PartnerChange::FrameOrigins(origins) => ("frame_origins", json(&origins)),
        };
        let key = self.key(&format!("partner:{}", name.as_str()));
        let written: String = self
            .write_script(
                LUA,
                vec![key.clone()],
                vec![
                    field.to_owned(),
                    value,
                    changed(&Changed::Partner { name: name.clone() }),
                    self.key("partner-key:"),
                    name.as_str().to_owned(),
                ],
            )
            .await?;
        decode(&key, &written)
    }

    async fn partner_by_key(&self, key_sha256: &str) -> Result<Option<PartnerRecord>, StoreError> {
        let Some(name) = self
            .get(self.key(&format!("partner-key:{key_sha256}")))
            .await?
        else {
            return Ok(None);
        };
        self.get_json(self.key(&format!("partner:{name}"))).await
    }

    async fn partner(&self, name: &PartnerName) -> Result<Option<PartnerRecord>, StoreError> {
        self.get_json(self.key(&format!("partner:{}", name.as_str())))
            .await
    }

    async fn partners(&self) -> Result<Vec<PartnerRecord>, StoreError> {
        let pattern = self.key("partner:*");
        let keys: Vec<String> = self
            .run(move |c| {
                let pattern = pattern.clone();
                Box::pin(async move {
                    let mut keys = Vec::new();
                    let mut cursor: u64 = 0;
                    loop {
                        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                            .arg(cursor)
                            .arg("MATCH")
                            .arg(&pattern)
                            .arg("COUNT")
                            .arg(500)
                            .query_async(c)
                            .await?;
                        keys.extend(batch);
                        if next == 0 {
                            return Ok(keys);
                        }
                        cursor = next;
                    }
                })
            })
            .await
            .map_err(backend)?;
        let mut all = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(partner) = self.get_json::<PartnerRecord>(key).await? {
                all.push(partner);
            }
        }
        all.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        all.dedup_by(|a, b| a.name == b.name);
        Ok(all)
    }

    async fn create_user_within(&self, user: &User, at_most: usize) -> Result<(), StoreError> {
        const LUA: &str = include_str!("lua/create_user.lua");
        let partner = user.partner.as_str();
        let id = user.id.as_str();
        let _: i64 = self
            .write_script(
                LUA,
                vec![
                    self.key(&format!("partner:{partner}")),
                    self.key(&format!("user:{partner}:{id}")),
                    self.key(&format!("user-key:{}", key_digest(&user.api_key))),
                    self.key(&format!("users:{partner}")),
                ],
                vec![
                    json(user),
                    format!("{partner}:{id}"),
                    changed(&Changed::User {
                        partner: user.partner.clone(),
                        id: user.id.clone(),
                    }),
                    id.to_owned(),
                    partner.to_owned(),
                    limit_argument(at_most),
                ],
            )
            .await?;
        Ok(())
    }

    async fn user(&self, partner: &PartnerName, id: &UserId) -> Result<Option<User>, StoreError> {
        self.get_json(self.key(&format!("user:{}:{}", partner.as_str(), id.as_str())))
            .await
    }

    async fn user_by_key(&self, api_key: &str) -> Result<Option<User>, StoreError> {
        let digest = key_digest(api_key);
        let Some(user) = self.get(self.key(&format!("user-key:{digest}"))).await? else {
            return Ok(None);
        };
        self.get_json(self.key(&format!("user:{user}"))).await
    }

    async fn users(
        &self,
        partner: &PartnerName,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Page<User>, StoreError> {
        let (ids, next) = self
            .lex_page(
                self.key(&format!("users:{}", partner.as_str())),
                after,
                limit,
            )
            .await?;
        let mut items = Vec::with_capacity(ids.len());
        for id in ids {
            let key = self.key(&format!("user:{}:{id}", partner.as_str()));
            items.extend(self.get_json::<User>(key).await?);
        }
        Ok(Page { items, next })
    }

    async fn replace_user_key(
        &self,
        partner: &PartnerName,
        id: &UserId,
        api_key: &str,
    ) -> Result<User, StoreError> {
        // KEYS: version, changes, user, the old key's index, the new key's index. ARGV:
        // the key as read, the user with the new key, change, id, the index's value.
        // As for deleting a user, the caller names the indexes (Lua has no SHA-256), and
        // the script checks that the user still has the key read.
        const LUA: &str = include_str!("lua/replace_user_key.lua");
        const ATTEMPTS: usize = 8;
        let (p, i) = (partner.as_str(), id.as_str());
        for _ in 0..ATTEMPTS {
            let mut user = self
                .user(partner, id)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("user {id}")))?;
            let old_key = std::mem::replace(&mut user.api_key, api_key.to_owned());
            let written: Result<i64, StoreError> = self
                .write_script(
                    LUA,
                    vec![
                        self.key(&format!("user:{p}:{i}")),
                        self.key(&format!("user-key:{}", key_digest(&old_key))),
                        self.key(&format!("user-key:{}", key_digest(api_key))),
                    ],
                    vec![
                        old_key,
                        json(&user),
                        changed(&Changed::User {
                            partner: partner.clone(),
                            id: id.clone(),
                        }),
                        i.to_owned(),
                        format!("{p}:{i}"),
                    ],
                )
                .await;
            match written {
                Ok(_) => return Ok(user),
                Err(StoreError::Stale(_)) => continue,
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::Stale(format!("user {id}")))
    }

    async fn delete_user(
        &self,
        partner: &PartnerName,
        id: &UserId,
    ) -> Result<Vec<Domain>, StoreError> {
        // KEYS: version, changes, user, users-of-partner, websites-of-user,
        // websites-of-partner, all websites, the user's key index. ARGV: prefix, id,
        // user change, the user's key, the batch. Lua has no SHA-256, so the key index is
        // named by the caller, from the user as read, and the script checks it is still
        // that user. A script deletes a batch of websites (the user with the last), so
        // that Redis answers everyone else in between.
        const LUA: &str = include_str!("lua/delete_user.lua");
        let (p, i) = (partner.as_str(), id.as_str());
        let mut deleted = Vec::new();
        let mut stale = 0;
        loop {
            // Read again for every batch: a key replaced meanwhile is the one checked.
            let user = match self.user(partner, id).await? {
                Some(user) => user,
                // Deleted meanwhile (by a retry, say) after batches of this deletion.
                None if !deleted.is_empty() => return Ok(deleted),
                None => return Err(StoreError::NotFound(format!("user {id}"))),
            };
            let batch: Result<(i64, Vec<String>), StoreError> = self
                .write_script(
                    LUA,
                    vec![
                        self.key(&format!("user:{p}:{i}")),
                        self.key(&format!("users:{p}")),
                        self.key(&format!("websites-of:{p}:{i}")),
                        self.key(&format!("websites-of:{p}")),
                        self.key("websites"),
                        self.key(&format!("user-key:{}", key_digest(&user.api_key))),
                    ],
                    vec![
                        self.config.prefix.clone(),
                        i.to_owned(),
                        changed(&Changed::User {
                            partner: partner.clone(),
                            id: id.clone(),
                        }),
                        user.api_key.clone(),
                        crate::DELETED_PER_WRITE.to_string(),
                    ],
                )
                .await;
            let (done, domains) = match batch {
                Ok(batch) => batch,
                Err(StoreError::Stale(_)) if stale < 8 => {
                    stale += 1;
                    continue;
                }
                Err(StoreError::NotFound(_)) if !deleted.is_empty() => return Ok(deleted),
                Err(err) => return Err(err),
            };
            for domain in domains {
                deleted.push(Domain::parse(&domain).map_err(|e| StoreError::Corrupt {
                    key: domain.clone(),
                    reason: e.to_string(),
                })?);
            }
            if done == 1 {
                return Ok(deleted);
            }
        }
    }
}

impl WebsiteStore for RedisStore {
    async fn create_website_within(
        &self,
        partner: &PartnerName,
        website: &Website,
        limits: WebsiteLimits,
    ) -> Result<WebsiteRecord, StoreError> {
        // KEYS: version, changes, user, website, all, of-partner, of-user. ARGV: partner,
        // website, change, user id, domain, prefix, host claims, the partner's limit,
        // held callbacks, their limit.
        const LUA: &str = include_str!("lua/create_website.lua");
        let (p, u, d) = (
            partner.as_str(),
            website.user_id.as_str(),
            website.domain.as_str(),
        );
        let revision: u64 = self
            .write_script(
                LUA,
                vec![
                    self.key(&format!("user:{p}:{u}")),
                    self.key(&format!("website:{d}")),
                    self.key("websites"),
                    self.key(&format!("websites-of:{p}")),
                    self.key(&format!("websites-of:{p}:{u}")),
                ],
                vec![
                    p.to_owned(),
                    json(website),
                    changed(&Changed::Website {
                        domain: website.domain.clone(),
                    }),
                    u.to_owned(),
                    d.to_owned(),
                    self.config.prefix.clone(),
                    claims_json(website),
                    limit_argument(limits.websites),
                    json(&website.held_callbacks()),
                    limit_argument(limits.held_callbacks),
                ],
            )
            .await?;
        Ok(WebsiteRecord {
            partner: partner.clone(),
            revision,
            website: website.clone(),
        })
    }

    async fn website(&self, domain: &Domain) -> Result<Option<WebsiteRecord>, StoreError> {
        self.website_record(domain.as_str()).await
    }

    async fn website_owner(&self, domain: &Domain) -> Result<Option<WebsiteOwner>, StoreError> {
        let key = self.key(&format!("website:{domain}"));
        // The owner's fields; a former release's record only has the user in the
        // website's JSON, read then.
        let fields = |fields: &'static [&'static str]| {
            let key = key.clone();
            self.run(move |c| {
                let key = key.clone();
                Box::pin(async move {
                    redis::cmd("HMGET")
                        .arg(&key)
                        .arg(fields)
                        .query_async(c)
                        .await
                })
            })
        };
        let mut owner: Vec<Option<String>> = fields(&["partner", "user"]).await.map_err(backend)?;
        let user = owner.pop().flatten();
        let Some(partner) = owner
            .pop()
            .flatten()
            .and_then(|partner| PartnerName::parse(&partner).ok())
        else {
            return Ok(None);
        };
        let user = match user.and_then(|user| UserId::parse(&user).ok()) {
            Some(user) => Some(user),
            None => {
                let website: Vec<Option<String>> = fields(&["website"]).await.map_err(backend)?;
                website
                    .into_iter()
                    .flatten()
                    .next()
                    .and_then(|website| serde_json::from_str::<crate::StoredUserId>(&website).ok())
                    .map(|stored| stored.user_id)
            }
        };
        Ok(user.map(|user| WebsiteOwner { partner, user }))
    }

    async fn update_website_within(
        &self,
        website: &Website,
        expected_revision: u64,
        held_callbacks_at_most: usize,
    ) -> Result<WebsiteRecord, StoreError> {
        // KEYS: version, changes, website. ARGV: expected revision, website JSON,
        // change, domain, user id, prefix, host claims, held callbacks, their limit.
        const LUA: &str = include_str!("lua/update_website.lua");
        let d = website.domain.as_str();
        let (revision, partner): (u64, String) = self
            .write_script(
                LUA,
                vec![self.key(&format!("website:{d}"))],
                vec![
                    expected_revision.to_string(),
                    json(website),
                    changed(&Changed::Website {
                        domain: website.domain.clone(),
                    }),
                    d.to_owned(),
                    website.user_id.as_str().to_owned(),
                    self.config.prefix.clone(),
                    claims_json(website),
                    json(&website.held_callbacks()),
                    limit_argument(held_callbacks_at_most),
                ],
            )
            .await?;
        Ok(WebsiteRecord {
            partner: PartnerName::parse(&partner).map_err(|e| StoreError::Corrupt {
                key: self.key(&format!("website:{d}")),
                reason: e.to_string(),
            })?,
            revision,
            website: website.clone(),
        })
    }

    async fn delete_website(
        &self,
        domain: &Domain,
        expected_revision: Option<u64>,
    ) -> Result<(), StoreError> {
        // KEYS: version, changes, website, all. ARGV: prefix, domain, change, expected
        // revision ('' for any).
        const LUA: &str = include_str!("lua/delete_website.lua");
        let d = domain.as_str();
        let _: i64 = self
            .write_script(
                LUA,
                vec![self.key(&format!("website:{d}")), self.key("websites")],
                vec![
                    self.config.prefix.clone(),
                    d.to_owned(),
                    changed(&Changed::Website {
                        domain: domain.clone(),
                    }),
                    expected_revision.map_or(String::new(), |r| r.to_string()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn websites(
        &self,
        partner: &PartnerName,
        user: Option<&UserId>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Page<WebsiteRecord>, StoreError> {
        let index = match user {
            Some(u) => format!("websites-of:{}:{}", partner.as_str(), u.as_str()),
            None => format!("websites-of:{}", partner.as_str()),
        };
        let (domains, next) = self.lex_page(self.key(&index), after, limit).await?;
        let mut items = Vec::with_capacity(domains.len());
        for (_, record) in self.website_records_each(domains).await? {
            match record {
                Ok(record) => items.push(record),
                Err(error @ StoreError::Corrupt { .. }) => crate::unreadable_left_out(&error),
                Err(error) => return Err(error),
            }
        }
        Ok(Page { items, next })
    }

    async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        // The version first: a change after it is either in the listing already or
        // arrives on the feed with a later version, so nothing is missed.
        let Position { version, history } = self.position().await?;
        let (domains, _) = self
            .lex_page(self.key("websites"), None, usize::MAX - 1)
            .await?;
        // In chunks, so the replies held at once stay small beside the records built.
        let mut websites = Vec::with_capacity(domains.len());
        let mut unreadable = Vec::new();
        for chunk in domains.chunks(SNAPSHOT_CHUNK) {
            for (domain, record) in self.website_records_each(chunk.to_vec()).await? {
                match record {
                    Ok(record) => websites.push(record),
                    Err(err) => unreadable.push(Unreadable {
                        domain,
                        reason: err.to_string(),
                    }),
                }
            }
        }
        Ok(Snapshot {
            version,
            history,
            websites,
            unreadable,
        })
    }

    async fn version(&self) -> Result<u64, StoreError> {
        Ok(self
            .get(self.key("version"))
            .await?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    async fn position(&self) -> Result<Position, StoreError> {
        let key = self.key("version");
        let (version, info): (Option<String>, String) = self
            .run(move |c| {
                let key = key.clone();
                Box::pin(async move {
                    redis::pipe()
                        .get(key)
                        .cmd("INFO")
                        .arg("replication")
                        .query_async(c)
                        .await
                })
            })
            .await
            .map_err(backend)?;
        let history = info
            .lines()
            .find_map(|line| line.strip_prefix("master_replid:"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        Ok(Position {
            version: version.and_then(|v| v.parse().ok()).unwrap_or(0),
            history,
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.feed.subscribe()
    }

    fn feed_restarts(&self) -> tokio::sync::watch::Receiver<u64> {
        self.counters.feed_restarts.subscribe()
    }
}

impl OutboxStore for RedisStore {
    async fn enqueue_delivery(
        &self,
        delivery: &Delivery,
        waiting_at_most: usize,
    ) -> Result<(), StoreError> {
        self.put_delivery(Some(waiting_at_most), delivery).await
    }

    async fn claim_deliveries(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
        shares: &ClaimShares,
    ) -> Result<Vec<Delivery>, StoreError> {
        const LUA: &str = concat!(
            include_str!("lua/outbox.lua"),
            include_str!("lua/claim_deliveries.lua")
        );
        let mut args = vec![
            now_ms.to_string(),
            lease_until_ms.to_string(),
            limit.to_string(),
            self.config.prefix.clone(),
            limit_argument(shares.per_partner),
        ];
        for (partner, held) in &shares.held {
            args.extend([partner.as_str().to_owned(), held.to_string()]);
        }
        // Pairs of when each was due and its JSON (the score is the truth for
        // `next_attempt_ms`; the JSON is left alone).
        let claimed: Vec<String> = self
            .write_script(LUA, vec![self.key("partners-due")], args)
            .await?;
        // One that cannot be read (damaged, or written by a later release) is left
        // under its lease and named, not allowed to stop every other delivery.
        let mut due_and_claimed: Vec<(u64, Delivery)> = claimed
            .chunks(2)
            .filter_map(|pair| {
                let due: f64 = pair[0].parse().unwrap_or(0.0);
                match decode::<Delivery>("delivery", pair.get(1).map_or("", |s| s)) {
                    Ok(mut delivery) => {
                        delivery.next_attempt_ms = lease_until_ms;
                        Some((due as u64, delivery))
                    }
                    Err(err) => {
                        tracing::warn!(error = %botgate_model::report::Report(&err), "a webhook in the outbox cannot be read; it is skipped");
                        None
                    }
                }
            })
            .collect();
        due_and_claimed.sort_by(|(a, x), (b, y)| a.cmp(b).then(x.id.cmp(&y.id)));
        Ok(due_and_claimed.into_iter().map(|(_, d)| d).collect())
    }

    async fn retry_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        self.put_delivery(None, delivery).await
    }

    async fn finish_delivery(&self, id: &str) -> Result<(), StoreError> {
        const LUA: &str = concat!(
            include_str!("lua/outbox.lua"),
            include_str!("lua/finish_delivery.lua")
        );
        let _: i64 = self
            .write_script(
                LUA,
                vec![self.key(&format!("delivery:{id}"))],
                vec![id.to_owned(), self.config.prefix.clone()],
            )
            .await?;
        Ok(())
    }

    async fn waiting_deliveries(
        &self,
        partner: &PartnerName,
        at_most: usize,
    ) -> Result<usize, StoreError> {
        const LUA: &str = concat!(
            include_str!("lua/outbox.lua"),
            include_str!("lua/waiting_deliveries.lua")
        );
        let waiting: usize = self
            .write_script_with(
                // A count, and ids of deliveries gone dropped: nothing a repeat changes.
                Retry::RunAgain,
                LUA,
                vec![self.key(&format!("deliveries-due:{partner}"))],
                vec![
                    at_most.to_string(),
                    self.config.prefix.clone(),
                    partner.as_str().to_owned(),
                ],
            )
            .await?;
        Ok(waiting)
    }

    async fn deliveries(&self) -> Result<Vec<Delivery>, StoreError> {
        let partners_due = self.key("partners-due");
        let partners: Vec<String> = self
            .run(move |c| {
                let index = partners_due.clone();
                Box::pin(async move { c.zrange(index, 0, -1).await })
            })
            .await
            .map_err(backend)?;
        let mut indexes: Vec<String> = partners
            .iter()
            .map(|partner| self.key(&format!("deliveries-due:{partner}")))
            .collect();
        // A former release's index, until the next claim moves it.
        indexes.push(self.key("deliveries"));
        let mut due = BTreeMap::new();
        for index in indexes {
            let scored: Vec<(String, f64)> = self
                .run(move |c| {
                    let index = index.clone();
                    Box::pin(async move { c.zrange_withscores(index, 0, -1).await })
                })
                .await
                .map_err(backend)?;
            due.extend(scored);
        }
        let mut all = Vec::with_capacity(due.len());
        for (id, due) in due {
            let key = self.key(&format!("delivery:{id}"));
            if let Some(stored) = self.get(key.clone()).await? {
                let mut delivery: Delivery = decode(&key, &stored)?;
                delivery.next_attempt_ms = due as u64;
                all.push(delivery);
            }
        }
        Ok(all)
    }
}

impl SharedState for RedisStore {
    async fn shared_secret(&self, name: &str, candidate: &str) -> Result<String, StoreError> {
        // Set only if absent, then answer what is stored: first writer wins everywhere.
        const LUA: &str = include_str!("lua/shared_secret.lua");
        self.write_script_with(
            Retry::RunAgain,
            LUA,
            vec![self.key(&format!("secret:{name}"))],
            vec![candidate.to_owned()],
        )
        .await
    }

    async fn put_ephemeral(&self, key: &str, value: &str, until_ms: u64) -> Result<(), StoreError> {
        const LUA: &str = include_str!("lua/put_ephemeral.lua");
        let ttl = until_ms.saturating_sub(crate::now_ms()).max(1);
        let _: i64 = self
            .write_script_with(
                Retry::RunAgain,
                LUA,
                vec![self.key(&format!("ephemeral:{key}"))],
                vec![value.to_owned(), ttl.to_string()],
            )
            .await?;
        Ok(())
    }

    async fn ephemeral(&self, key: &str, _now_ms: u64) -> Result<Option<String>, StoreError> {
        // Redis expires the key itself.
        self.get(self.key(&format!("ephemeral:{key}"))).await
    }

    async fn count(&self, key: &str, until_ms: u64) -> Result<u64, StoreError> {
        const LUA: &str = include_str!("lua/count.lua");
        self.write_script_with(
            Retry::RunAgain,
            LUA,
            vec![self.key(&format!("ephemeral:{key}"))],
            vec![until_ms.to_string()],
        )
        .await
    }

    async fn remove_ephemeral(&self, key: &str) -> Result<(), StoreError> {
        const LUA: &str = include_str!("lua/remove_ephemeral.lua");
        let _: i64 = self
            .write_script_with(
                Retry::RunAgain,
                LUA,
                vec![self.key(&format!("ephemeral:{key}"))],
                vec![],
            )
            .await?;
        Ok(())
    }

    async fn lease(
        &self,
        key: &str,
        holder: &str,
        now_ms: u64,
        until_ms: u64,
    ) -> Result<bool, StoreError> {
        const LUA: &str = include_str!("lua/lease.lua");
        let ttl = until_ms.saturating_sub(now_ms).max(1);
        let held: i64 = self
            .write_script_with(
                Retry::RunAgain,
                LUA,
                vec![self.key(&format!("ephemeral:{key}"))],
                vec![holder.to_owned(), ttl.to_string()],
            )
            .await?;
        Ok(held == 1)
    }
}

impl RedisStore {
    /// Adds a partner, or replaces one unless `only_new`.
    async fn write_partner(
        &self,
        partner: &PartnerRecord,
        only_new: bool,
    ) -> Result<(), StoreError> {
        const LUA: &str = include_str!("lua/put_partner.lua");
        let name = partner.name.as_str();
        let _: i64 = self
            .write_script(
                LUA,
                vec![
                    self.key(&format!("partner:{name}")),
                    self.key(&format!("partner-key:{}", partner.key_sha256)),
                ],
                vec![
                    json(partner),
                    name.to_owned(),
                    changed(&Changed::Partner {
                        name: partner.name.clone(),
                    }),
                    self.key("partner-key:"),
                    if only_new { "new" } else { "any" }.to_owned(),
                ],
            )
            .await?;
        Ok(())
    }

    fn traffic_key(&self, domain: &Domain, resolution: Resolution, number: u64) -> String {
        self.key(&format!(
            "traffic:{domain}:{}:{number}",
            resolution.letter()
        ))
    }
}

impl TrafficStore for RedisStore {
    async fn add_traffic(
        &self,
        domain: &Domain,
        owner: Owner<'_>,
        minute: u64,
        counts: &Counts,
        events: &[TrafficEvent],
    ) -> Result<(), StoreError> {
        const LUA: &str = include_str!("lua/add_traffic.lua");
        use crate::traffic::{
            EVENTS_KEPT, HOUR_BUCKETS_KEPT, MINUTE_BUCKETS_KEPT, TOP_LIST_ENTRIES,
        };
        let (counters, tops): (Vec<_>, Vec<_>) = counts
            .0
            .iter()
            .partition(|(field, _)| Counts::is_counter(field));
        let mut args = vec![
            owner.partner.as_str().to_owned(),
            owner.user.as_str().to_owned(),
            (MINUTE_BUCKETS_KEPT * 60_000).to_string(),
            (HOUR_BUCKETS_KEPT * 3_600_000).to_string(),
            TOP_LIST_ENTRIES.to_string(),
            EVENTS_KEPT.to_string(),
        ];
        for list in [counters, tops] {
            args.push(list.len().to_string());
            for (field, count) in list {
                args.push(field.clone());
                args.push(count.to_string());
            }
        }
        args.extend(events.iter().map(json));
        let _: i64 = self
            .write_script_with(
                // Once per flush: a retry after a lost reply must not count twice.
                Retry::FrequentFirstReply,
                LUA,
                vec![
                    self.traffic_key(domain, Resolution::Minute, minute),
                    self.traffic_key(domain, Resolution::Hour, minute / 60),
                    self.key(&format!("events:{domain}")),
                    self.key(&format!("website:{domain}")),
                ],
                args,
            )
            .await?;
        Ok(())
    }

    async fn traffic(
        &self,
        domain: &Domain,
        resolution: Resolution,
        from: u64,
        to: u64,
    ) -> Result<Vec<Counts>, StoreError> {
        let from = from.max(to.saturating_sub(crate::traffic::MAX_BUCKETS_READ - 1));
        let keys: Vec<String> = (from..=to)
            .map(|number| self.traffic_key(domain, resolution, number))
            .collect();
        let buckets: Vec<BTreeMap<String, u64>> = self
            .run(move |c| {
                let mut pipe = redis::pipe();
                for key in &keys {
                    pipe.hgetall(key);
                }
                Box::pin(async move { pipe.query_async(c).await })
            })
            .await
            .map_err(backend)?;
        // Without the lists' sizes (`#p:`…), which only the script reads.
        Ok(buckets
            .into_iter()
            .map(|bucket| {
                Counts(
                    bucket
                        .into_iter()
                        .filter(|(field, _)| !field.starts_with('#'))
                        .collect(),
                )
            })
            .collect())
    }

    async fn events(&self, domain: &Domain, limit: usize) -> Result<Vec<TrafficEvent>, StoreError> {
        let key = self.key(&format!("events:{domain}"));
        let stop = limit.min(crate::traffic::EVENTS_KEPT) as isize - 1;
        if stop < 0 {
            return Ok(Vec::new());
        }
        let listed: Vec<String> = self
            .run({
                let key = key.clone();
                move |c| {
                    let key = key.clone();
                    Box::pin(async move { c.lrange(key, 0, stop).await })
                }
            })
            .await
            .map_err(backend)?;
        listed.iter().map(|text| decode(&key, text)).collect()
    }
}

impl RulesetStore for RedisStore {
    async fn push_ruleset(
        &self,
        record: &PushedRuleset,
        bytes: &[u8],
    ) -> Result<Pushed, StoreError> {
        const LUA: &str = include_str!("lua/push_ruleset.lua");
        // The bytes first, under their digest (a repeat writes nothing), then the record,
        // whose confirmation (`WAIT`) covers both.
        let blob = self.key(&format!("ruleset-blob:{}", record.sha256));
        // A version stored with other bytes is refused before its bytes are written.
        let versions = self.key("ruleset-versions");
        let stored: Option<String> = self
            .run({
                let (versions, field) = (versions.clone(), record.key());
                move |c| {
                    let (versions, field) = (versions.clone(), field.clone());
                    Box::pin(async move { c.hget(versions, field).await })
                }
            })
            .await
            .map_err(backend)?;
        if let Some(stored) = stored {
            let stored: PushedRuleset = decode(&versions, &stored)?;
            if stored.sha256 != record.sha256 {
                return Err(StoreError::Conflict(format!(
                    "rule set {} with other content",
                    record.key()
                )));
            }
        }
        let bytes = Arc::new(bytes.to_vec());
        let _: bool = self
            .run({
                let (blob, bytes) = (blob.clone(), bytes.clone());
                move |c| {
                    let (blob, bytes) = (blob.clone(), bytes.clone());
                    Box::pin(async move { c.set_nx(blob, bytes.as_slice()).await })
                }
            })
            .await
            .map_err(backend)?;
        let stored: i64 = self
            .write_script(
                LUA,
                vec![self.key("ruleset-versions"), blob],
                vec![
                    record.key(),
                    json(record),
                    record.sha256.clone(),
                    if record.signature.is_some() { "1" } else { "0" }.to_owned(),
                ],
            )
            .await?;
        Ok(match stored {
            1 => Pushed::Stored,
            _ => Pushed::AlreadyStored,
        })
    }

    async fn pushed_rulesets(&self) -> Result<Listed<Vec<PushedRuleset>>, StoreError> {
        let key = self.key("ruleset-versions");
        let stored: BTreeMap<String, String> = self
            .run({
                let key = key.clone();
                move |c| {
                    let key = key.clone();
                    Box::pin(async move { c.hgetall(key).await })
                }
            })
            .await
            .map_err(backend)?;
        let mut listed = Listed::<Vec<PushedRuleset>>::default();
        for (field, text) in &stored {
            match decode(&format!("{key} {field}"), text) {
                Ok(pushed) => listed.records.push(pushed),
                Err(error) => {
                    let name = field.split('@').next().unwrap_or_default();
                    listed.unreadable.push(unreadable(name, error));
                }
            }
        }
        sort_pushed(&mut listed.records);
        Ok(listed)
    }

    async fn ruleset_bytes(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let blob = self.key(&format!("ruleset-blob:{sha256}"));
        self.run(move |c| {
            let blob = blob.clone();
            Box::pin(async move { c.get(blob).await })
        })
        .await
        .map_err(backend)
    }

    async fn ruleset_states(&self) -> Result<Listed<BTreeMap<String, StoredState>>, StoreError> {
        let (states_key, revisions_key) = (
            self.key("ruleset-states"),
            self.key("ruleset-state-revisions"),
        );
        let (states, revisions): (BTreeMap<String, String>, BTreeMap<String, u64>) = self
            .run({
                let (states_key, revisions_key) = (states_key.clone(), revisions_key.clone());
                move |c| {
                    // One transaction: a state and its revision as one writer left them.
                    let mut pipe = redis::pipe();
                    pipe.atomic().hgetall(&states_key).hgetall(&revisions_key);
                    Box::pin(async move { pipe.query_async(c).await })
                }
            })
            .await
            .map_err(backend)?;
        let mut listed = Listed::<BTreeMap<_, _>>::default();
        for (name, text) in states {
            match decode::<RulesetState>(&format!("{states_key} {name}"), &text) {
                Ok(state) => {
                    let revision = revisions.get(&name).copied().unwrap_or(0);
                    listed.records.insert(name, StoredState { state, revision });
                }
                Err(error) => listed.unreadable.push(unreadable(&name, error)),
            }
        }
        Ok(listed)
    }

    async fn put_ruleset_state(
        &self,
        name: &str,
        expected: u64,
        state: &RulesetState,
    ) -> Result<u64, StoreError> {
        const LUA: &str = include_str!("lua/put_ruleset_state.lua");
        self.write_script(
            LUA,
            vec![
                self.key("ruleset-states"),
                self.key("ruleset-state-revisions"),
                self.key("ruleset-revision"),
            ],
            vec![name.to_owned(), expected.to_string(), json(state)],
        )
        .await
    }

    async fn rulesets_revision(&self) -> Result<u64, StoreError> {
        let revision = self.get(self.key("ruleset-revision")).await?;
        Ok(revision.and_then(|r| r.parse().ok()).unwrap_or(0))
    }

    async fn add_shadow_results(
        &self,
        name: &str,
        version: &str,
        results: &ShadowResults,
    ) -> Result<(), StoreError> {
        const LUA: &str = include_str!("lua/add_shadow_results.lua");
        let key = version_key(name, version);
        let mut args = vec![
            SHADOW_SAMPLES_KEPT.to_string(),
            results.counts.len().to_string(),
        ];
        for (pair, count) in &results.counts {
            args.push(pair.clone());
            args.push(count.to_string());
        }
        // Oldest first: each is pushed in front of the list.
        args.extend(results.samples.iter().map(json));
        let _: i64 = self
            .write_script_with(
                // Once per flush: a retry after a lost reply must not count twice.
                Retry::FrequentFirstReply,
                LUA,
                vec![
                    self.key(&format!("shadow-counts:{key}")),
                    self.key(&format!("shadow-samples:{key}")),
                ],
                args,
            )
            .await?;
        Ok(())
    }

    async fn shadow_results(&self, name: &str, version: &str) -> Result<ShadowResults, StoreError> {
        let key = version_key(name, version);
        let (counts_key, samples_key) = (
            self.key(&format!("shadow-counts:{key}")),
            self.key(&format!("shadow-samples:{key}")),
        );
        let (counts, samples): (BTreeMap<String, u64>, Vec<String>) = self
            .run({
                let (counts_key, samples_key) = (counts_key.clone(), samples_key.clone());
                move |c| {
                    let mut pipe = redis::pipe();
                    pipe.hgetall(&counts_key).lrange(&samples_key, 0, -1);
                    Box::pin(async move { pipe.query_async(c).await })
                }
            })
            .await
            .map_err(backend)?;
        let samples = samples
            .iter()
            .map(|text| decode(&samples_key, text))
            .collect::<Result<_, _>>()?;
        Ok(ShadowResults { counts, samples })
    }

    async fn remove_ruleset(&self, name: &str, version: &str) -> Result<bool, StoreError> {
        const LUA: &str = include_str!("lua/remove_ruleset.lua");
        let key = version_key(name, version);
        let removed: i64 = self
            .write_script(
                LUA,
                vec![
                    self.key("ruleset-versions"),
                    self.key("ruleset-states"),
                    self.key("ruleset-state-revisions"),
                    self.key("ruleset-revision"),
                    self.key(&format!("shadow-counts:{key}")),
                    self.key(&format!("shadow-samples:{key}")),
                ],
                vec![
                    name.to_owned(),
                    version.to_owned(),
                    self.key("ruleset-blob:"),
                    key,
                ],
            )
            .await?;
        Ok(removed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::RedisConfig;

    #[test]
    fn logs_show_where_redis_is_never_its_password() {
        for url in [
            "redis://:secret@10.0.0.1:16379/2",
            "redis://user:s/e?c#ret@10.0.0.1:16379/2",
            "redis://10.0.0.1:16379/2?password=secret",
        ] {
            let config = RedisConfig {
                password: Some("other-secret".into()),
                ..RedisConfig::new(url)
            };
            let shown = format!("{} {config:?}", config.location());
            assert!(!shown.contains("secret"), "{url}: {shown}");
        }
        let shown = RedisConfig::new("redis://:secret@10.0.0.1:16379/2").location();
        assert_eq!(shown, "10.0.0.1:16379, database 2");
        assert_eq!(
            RedisConfig::new("not a url").location(),
            "an unreadable Redis URL"
        );
    }
}
