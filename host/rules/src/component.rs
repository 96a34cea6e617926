//! One loaded rule component: validation on load, warm instances kept per thread, bounded
//! calls, failure accounting and the switch-off of a component that keeps failing.

use super::bindings::{
    CONTRACT, ComponentInfo, IpAddress, Opinion, RequestFacts, Ruleset, RulesetPre,
};
use super::cache::ComponentCache;
use super::facts::smoke_facts;
use super::sandbox::{GuestState, Sandbox};
use botgate_model::RulesetName;
use std::cell::Cell;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use thread_local::ThreadLocal;
use wasmtime::component::{Component, Linker, types::ComponentItem};
use wasmtime::{Store, Trap};

/// Longest accepted `reason`, `version` and `description`.
const MAX_REASON: usize = 64;
const MAX_VERSION: usize = 64;
const MAX_DESCRIPTION: usize = 1024;
/// Warm instances a component in service keeps beyond one per data-plane thread: the one
/// a thread takes when its own trapped (or grew too large), replaced in the background.
const SPARES: usize = 1;

/// Why a component was refused. The previous version, if any, stays in service.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    BadName(#[from] botgate_model::InvalidRulesetName),
    #[error("not a WebAssembly file (no `\\0asm` header)")]
    NotWasm,
    #[error(
        "a core WebAssembly module, not a component; build for wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    #[error("does not compile: {0}")]
    Compile(String),
    #[error(
        "imports `{0}`, which botgate does not provide (rule components may import only WASI, which traps, and botgate:ruleset types)"
    )]
    ForeignImport(String),
    #[error("is not a `{CONTRACT}` component (wrong world): {0}")]
    WrongWorld(String),
    #[error(
        "was built against `botgate:ruleset@{found}`, and this gateway runs `{CONTRACT}`: rebuild it with the matching SDK"
    )]
    OtherContract { found: String },
    #[error("cannot be instantiated: {0}")]
    Instantiate(String),
    #[error("`info` failed: {0}")]
    Info(String),
    #[error("`info` says its name is `{claimed}`, but the file says `{file}`")]
    NameMismatch { claimed: String, file: String },
    #[error("`info` returned an invalid {field}: {why}")]
    BadInfo { field: &'static str, why: String },
    #[error("fails on the smoke request: {0}")]
    Smoke(String),
    #[error(
        "holds {memory} bytes after the smoke request, more than an instance may keep \
         between calls ({most})"
    )]
    TooLarge { memory: usize, most: usize },
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The component gave an opinion.
    Opinion(Opinion),
    /// The component abstained.
    Abstain,
    /// The component is switched off after repeated failures; it was not called.
    Disabled,
    /// The call failed; the opinion is dropped (fail-open).
    Failed(Failure),
    /// The request is outside the component's declared scope; it was not called and
    /// counts as an abstention. Only [`super::decide`] reports this.
    OutOfScope,
}

/// How a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The guest trapped (panic, unreachable, stack overflow, a WASI call).
    #[error("trapped: {0}")]
    Trap(String),
    /// The call ran past its CPU deadline.
    #[error("ran past its CPU deadline")]
    Deadline,
    /// The guest asked for more memory than its cap.
    #[error("exceeded its memory cap")]
    Memory,
    /// The guest returned an opinion the contract forbids (bad reason id).
    #[error("returned a malformed opinion: {0}")]
    BadOutput(String),
    /// A fresh instance could not be created.
    #[error("could not be instantiated: {0}")]
    Instantiate(String),
}

/// Counters of one component, kept for metrics and logs.
#[derive(Debug, Default)]
pub struct ComponentStats {
    pub opinions: AtomicU64,
    pub abstains: AtomicU64,
    pub traps: AtomicU64,
    pub deadlines: AtomicU64,
    pub memory: AtomicU64,
    pub bad_output: AtomicU64,
    pub skipped_disabled: AtomicU64,
    pub disabled_times: AtomicU64,
    pub instances_created: AtomicU64,
    /// Of those, the ones a thread made while a request waited (no spare was ready).
    pub instances_made_on_request: AtomicU64,
}

impl ComponentStats {
    /// All calls: each ends in an opinion, an abstention or a failure (derived, so a
    /// call writes one shared counter, not two).
    pub fn calls(&self) -> u64 {
        self.opinions.load(Relaxed) + self.abstains.load(Relaxed) + self.failures()
    }

    /// All failed calls.
    pub fn failures(&self) -> u64 {
        self.traps.load(Relaxed)
            + self.deadlines.load(Relaxed)
            + self.memory.load(Relaxed)
            + self.bad_output.load(Relaxed)
    }
}

/// A warm instance and its store.
struct Instance {
    store: Store<GuestState>,
    bindings: Ruleset,
}

/// A validated, compiled component ready to be called from many threads.
pub struct LoadedComponent {
    name: Arc<str>,
    version: Arc<str>,
    description: String,
    /// Markers over the normalised path and query, or (`ua:…`) the user agent; empty:
    /// every request.
    scope: Box<[Box<str>]>,
    hash: String,
    origin: String,
    sandbox: Arc<Sandbox>,
    pre: RulesetPre<GuestState>,
    /// Each thread's instance, taken for a call and given back after it without a
    /// lock: a data-plane core calling a component writes no memory the other cores
    /// use. A thread keeps at most one, since its calls never overlap.
    local: ThreadLocal<Cell<Option<Instance>>>,
    /// Warm instances not yet taken by a thread: one for each thread's first call, and
    /// [`SPARES`] for a thread whose instance was dropped.
    warm: Mutex<Vec<Instance>>,
    /// Set when the component is put in service: itself, for the background refill.
    in_service: OnceLock<Weak<LoadedComponent>>,
    /// A background refill of `warm` is queued or running.
    refilling: AtomicBool,
    /// Failures minus successes since the last switch-off, never below zero.
    failure_score: AtomicU32,
    /// The client networks of the latest failed calls: a component is switched off only
    /// when its failures come from several (one visitor's crafted requests alone do not
    /// switch it off for every website).
    failing_networks: Mutex<FailingNetworks>,
    /// Milliseconds since [`clock_base`] until which the component is switched off.
    disabled_until_ms: AtomicU64,
    stats: ComponentStats,
}

/// Distinct client networks whose failed calls a switch-off needs.
pub const FAILING_NETWORKS_TO_DISABLE: usize = 3;

/// How long a failed call's client network counts towards a switch-off.
const FAILING_NETWORK_COUNTS_MS: u64 = 60_000;

/// A client network: IPv4 /24 or IPv6 /48.
type Network = (u8, [u8; 6]);

/// The client networks of a component's latest failed calls, each with when it last
/// failed (milliseconds since [`clock_base`]) and how often in the window.
#[derive(Debug, Default)]
struct FailingNetworks {
    latest: [Option<(Network, u64, u32)>; 8],
    next: usize,
}

/// What the failed calls of the last minute came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spread {
    /// Distinct client networks.
    networks: usize,
    /// Failures from networks other than the one that failed most.
    from_others: u32,
}

impl Spread {
    /// Whether failures this spread say the component is broken for everyone, not one
    /// visitor's crafted requests: several networks, and `limit` failures (less one)
    /// besides the most failing network's.
    fn broad(&self, limit: u32) -> bool {
        self.networks >= FAILING_NETWORKS_TO_DISABLE && self.from_others + 1 >= limit
    }
}

impl FailingNetworks {
    /// Notes a failed call of a client at `ip` at `now`; answers how the failures of the
    /// last minute are spread.
    fn note(&mut self, ip: &IpAddress, now: u64) -> Spread {
        let network = match *ip {
            IpAddress::Ipv4((a, b, c, _)) => (4, [a, b, c, 0, 0, 0]),
            IpAddress::Ipv6((a, b, c, ..)) => {
                let [a, b, c] = [a.to_be_bytes(), b.to_be_bytes(), c.to_be_bytes()];
                (6, [a[0], a[1], b[0], b[1], c[0], c[1]])
            }
        };
        let recent = |when: u64| now.saturating_sub(when) < FAILING_NETWORK_COUNTS_MS;
        match self
            .latest
            .iter_mut()
            .flatten()
            .find(|(n, ..)| *n == network)
        {
            Some((_, when, count)) => {
                *count = if recent(*when) {
                    count.saturating_add(1)
                } else {
                    1
                };
                *when = now;
            }
            None => {
                self.latest[self.next] = Some((network, now, 1));
                self.next = (self.next + 1) % self.latest.len();
            }
        }
        let counts = self
            .latest
            .iter()
            .flatten()
            .filter(|(_, when, _)| recent(*when))
            .map(|(.., count)| *count);
        let (networks, total, most) = counts.fold((0, 0u32, 0u32), |(n, total, most), c| {
            (n + 1, total.saturating_add(c), most.max(c))
        });
        Spread {
            networks,
            from_others: total - most,
        }
    }
}

fn clock_base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    clock_base().elapsed().as_millis() as u64
}

/// Checks the 8-byte preamble: `\0asm`, then version and layer (layer 1 = component).
fn check_preamble(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm);
    }
    if bytes[6..8] == [0, 0] {
        return Err(LoadError::CoreModule);
    }
    Ok(())
}

fn valid_reason(reason: &str) -> bool {
    !reason.is_empty()
        && reason.len() <= MAX_REASON
        && reason
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
}

impl LoadedComponent {
    /// Compiles (or takes from `cache`) and validates the component `bytes` that the
    /// operator named `name` (the file stem); `origin` says where it came from, for logs.
    pub fn load(
        sandbox: &Arc<Sandbox>,
        cache: &ComponentCache,
        name: &str,
        bytes: &[u8],
        origin: &str,
    ) -> Result<LoadedComponent, LoadError> {
        let name: RulesetName = name.parse()?;
        check_preamble(bytes)?;
        let hash = super::cache::content_hash(bytes);
        let engine = sandbox.engine();
        let component = cache
            .compile(engine, bytes, &hash)
            .map_err(|e| LoadError::Compile(format!("{e:#}")))?;
        Self::check_imports(&component, engine)?;
        Self::check_contract(&component, engine)?;

        let mut linker: Linker<GuestState> = Linker::new(engine);
        // Every import (WASI included) becomes a function that traps: guests get no
        // files, network, clocks or randomness.
        linker
            .define_unknown_imports_as_traps(&component)
            .map_err(|e| LoadError::Instantiate(format!("{e:#}")))?;
        let instance_pre = linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Instantiate(format!("{e:#}")))?;
        let pre =
            RulesetPre::new(instance_pre).map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;

        let loaded = LoadedComponent {
            name: Arc::from(name.as_str()),
            version: Arc::from(""),
            description: String::new(),
            scope: Box::default(),
            hash,
            origin: origin.to_owned(),
            sandbox: sandbox.clone(),
            pre,
            local: ThreadLocal::new(),
            warm: Mutex::new(Vec::new()),
            in_service: OnceLock::new(),
            refilling: AtomicBool::new(false),
            failure_score: AtomicU32::new(0),
            failing_networks: Mutex::new(FailingNetworks::default()),
            disabled_until_ms: AtomicU64::new(0),
            stats: ComponentStats::default(),
        };
        let warmup = sandbox.config().warmup_deadline;
        let (mut instance, info) = loaded.instantiate(warmup).map_err(|e| match e {
            InstantiateError::Instantiate(e) => LoadError::Instantiate(e),
            InstantiateError::Info(e) => LoadError::Info(e),
            InstantiateError::Smoke(e) => LoadError::Smoke(e),
        })?;
        let loaded = loaded.with_info(info)?;
        // The smoke request must succeed within the ordinary deadline on a warm instance.
        match loaded.call(
            &mut instance,
            &smoke_facts(),
            loaded.sandbox.config().call_deadline,
        ) {
            Outcome::Failed(f) => return Err(LoadError::Smoke(f.to_string())),
            _ => {
                // Kept, it would be dropped after every call, and every request would
                // wait for a new instance.
                let memory = instance.store.data().limiter.memory_bytes;
                let most = loaded.sandbox.config().max_pooled_memory_bytes;
                if memory > most {
                    return Err(LoadError::TooLarge { memory, most });
                }
                loaded
                    .warm
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(instance);
            }
        }
        Ok(loaded)
    }

    /// Readies a component to serve requests (not one only being checked): the warm
    /// instances the other data-plane threads take on their first call
    /// ([`Sandbox::set_warm_instances`]) and [`SPARES`] more, so that none is made while
    /// a request waits; from now on a spare taken is replaced in the background.
    pub fn make_spares(self: &Arc<Self>) {
        let _ = self.in_service.set(Arc::downgrade(self));
        self.fill_warm(self.sandbox.warm_instances() + SPARES);
    }

    /// Warm instances not taken by any thread yet.
    pub fn spares(&self) -> usize {
        self.warm
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Makes instances (under the warm-up deadline) until `wanted` are waiting in `warm`;
    /// false when one could not be made.
    fn fill_warm(&self, wanted: usize) -> bool {
        while self.spares() < wanted {
            match self.instantiate(self.sandbox.config().warmup_deadline) {
                Ok((instance, _)) => self
                    .warm
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(instance),
                Err(err) => {
                    tracing::warn!(component = %self.name, error = %err, "could not make a spare warm instance; a thread will make its own");
                    return false;
                }
            }
        }
        true
    }

    /// Asks the sandbox's background thread to bring the spares back to [`SPARES`], once
    /// at a time; only for a component in service.
    fn refill_in_background(&self) {
        let Some(me) = self.in_service.get() else {
            return;
        };
        if self.refilling.swap(true, Relaxed) {
            return;
        }
        let me = me.clone();
        self.sandbox.in_background(move || {
            // A component replaced meanwhile needs no spares.
            let Some(component) = me.upgrade() else {
                return;
            };
            /// Clears the flag however the fill ends (a panic included).
            struct Refilled<'a>(&'a AtomicBool);
            impl Drop for Refilled<'_> {
                fn drop(&mut self) {
                    self.0.store(false, Relaxed);
                }
            }
            loop {
                let filled = {
                    let _refilled = Refilled(&component.refilling);
                    component.fill_warm(SPARES)
                };
                // One that cannot be made is tried again at the next spare taken. A
                // spare taken between the fill and the flag: fill again, unless a new
                // refill was queued for it.
                if !filled
                    || component.spares() >= SPARES
                    || component.refilling.swap(true, Relaxed)
                {
                    return;
                }
            }
        });
    }

    /// Refuses components that import anything but WASI and the contract's types.
    fn check_imports(component: &Component, engine: &wasmtime::Engine) -> Result<(), LoadError> {
        for (name, item) in component.component_type().imports(engine) {
            let allowed = name.starts_with("wasi:") || name.starts_with("botgate:ruleset/types@");
            let harmless_type =
                matches!(item.ty, ComponentItem::Type(_) | ComponentItem::Resource(_));
            if !allowed && !harmless_type {
                return Err(LoadError::ForeignImport(name.to_owned()));
            }
        }
        Ok(())
    }

    /// Refuses, naming both versions, a component that exports the rules of another
    /// version of the contract (its types differ from this gateway's).
    fn check_contract(component: &Component, engine: &wasmtime::Engine) -> Result<(), LoadError> {
        let major = |version: &str| version.split('.').next().map(str::to_owned);
        let current = major(CONTRACT.trim_start_matches("botgate:ruleset@"));
        let exported: Vec<String> = component
            .component_type()
            .exports(engine)
            .filter_map(|(name, _)| {
                name.strip_prefix("botgate:ruleset/rules@")
                    .map(str::to_owned)
            })
            .collect();
        // None exported is the wrong world, which instantiation reports; one of this
        // major version is for wasmtime to match.
        match exported.first() {
            Some(found) if !exported.iter().any(|v| major(v) == current) => {
                Err(LoadError::OtherContract {
                    found: found.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    fn with_info(mut self, info: ComponentInfo) -> Result<Self, LoadError> {
        if info.name != *self.name {
            return Err(LoadError::NameMismatch {
                claimed: info.name.chars().take(80).collect(),
                file: self.name.to_string(),
            });
        }
        let version_ok = !info.version.is_empty()
            && info.version.len() <= MAX_VERSION
            && info.version.bytes().all(|b| b.is_ascii_graphic());
        if !version_ok {
            return Err(LoadError::BadInfo {
                field: "version",
                why: format!("expected 1 to {MAX_VERSION} printable ASCII characters"),
            });
        }
        if info.description.len() > MAX_DESCRIPTION {
            return Err(LoadError::BadInfo {
                field: "description",
                why: format!("longer than {MAX_DESCRIPTION} bytes"),
            });
        }
        botgate_normalise::check_scope(&info.scope).map_err(|e| LoadError::BadInfo {
            field: "scope",
            why: e.to_string(),
        })?;
        self.scope = info.scope.into_iter().map(Box::from).collect();
        self.version = Arc::from(info.version.as_str());
        self.description = info.description;
        Ok(self)
    }

    /// A fresh instance, its `info` (where a component builds its tables, as `crs`
    /// does), and one warm-up call so lazily built tables exist before it serves
    /// traffic; each step bounded by `warmup`.
    fn instantiate(&self, warmup: Duration) -> Result<(Instance, ComponentInfo), InstantiateError> {
        self.stats.instances_created.fetch_add(1, Relaxed);
        let sandbox = &self.sandbox;
        let mut store = sandbox.new_store();
        sandbox.arm_deadline(&mut store, warmup);
        let bindings = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| InstantiateError::Instantiate(describe(&store, &e)))?;
        sandbox.arm_deadline(&mut store, warmup);
        let info = bindings
            .botgate_ruleset_rules()
            .call_info(&mut store)
            .map_err(|e| InstantiateError::Info(describe(&store, &e)))?;
        let mut instance = Instance { store, bindings };
        if let Outcome::Failed(f) = self.call(&mut instance, &smoke_facts(), warmup) {
            return Err(InstantiateError::Smoke(f.to_string()));
        }
        Ok((instance, info))
    }

    /// One bounded call of `evaluate` on `instance`. Does not touch the counters.
    fn call(&self, instance: &mut Instance, facts: &RequestFacts, deadline: Duration) -> Outcome {
        let store = &mut instance.store;
        store.data_mut().limiter.memory_cap_hit = false;
        self.sandbox.arm_deadline(store, deadline);
        match instance
            .bindings
            .botgate_ruleset_rules()
            .call_evaluate(&mut *store, facts)
        {
            Ok(Some(mut opinion)) => {
                if !valid_reason(&opinion.reason) {
                    let shown: String = opinion.reason.chars().take(80).collect();
                    return Outcome::Failed(Failure::BadOutput(format!(
                        "reason id {shown:?} ({} bytes) is not 1-{MAX_REASON} bytes of [a-z0-9.-]",
                        opinion.reason.len()
                    )));
                }
                opinion.confidence = opinion.confidence.min(100);
                Outcome::Opinion(opinion)
            }
            Ok(None) => Outcome::Abstain,
            Err(err) => Outcome::Failed(classify(store, &err)),
        }
    }

    /// The component's opinion of `facts`, bounded by the sandbox; never panics and
    /// never fails the caller. Failures are counted, and a component that keeps
    /// failing is switched off for a while.
    pub fn evaluate(&self, facts: &RequestFacts) -> Outcome {
        self.evaluate_unless_closed(facts, || false)
    }

    /// [`evaluate`](Self::evaluate) for a component that may fail closed (asked only
    /// when it would be switched off): one that does is never switched off, since off
    /// it would refuse every request it judges; each failed call refuses its own.
    pub fn evaluate_unless_closed(
        &self,
        facts: &RequestFacts,
        fails_closed: impl Fn() -> bool,
    ) -> Outcome {
        let until = self.disabled_until_ms.load(Relaxed);
        if until != 0 && now_ms() < until {
            if !fails_closed() {
                self.stats.skipped_disabled.fetch_add(1, Relaxed);
                return Outcome::Disabled;
            }
            // Switched off before it was made to fail closed: on again.
            self.disabled_until_ms.store(0, Relaxed);
        }
        let local = self.local.get_or_default();
        let pooled = local.take().or_else(|| {
            let mut warm = self.warm.lock().unwrap_or_else(PoisonError::into_inner);
            let taken = warm.pop();
            // The last spare taken (a thread's own instance was dropped): another is
            // made off the data plane before the next thread needs one.
            if warm.len() < SPARES {
                drop(warm);
                self.refill_in_background();
            }
            taken
        });
        let mut instance = match pooled {
            Some(instance) => instance,
            None => match self.instantiate(self.sandbox.config().instantiate_deadline) {
                Ok((instance, _)) => {
                    self.stats.instances_made_on_request.fetch_add(1, Relaxed);
                    instance
                }
                Err(err) => {
                    let failure = Failure::Instantiate(err.to_string());
                    self.stats.traps.fetch_add(1, Relaxed);
                    self.record_failure(&failure, facts, &fails_closed);
                    return Outcome::Failed(failure);
                }
            },
        };
        let outcome = self.call(&mut instance, facts, self.sandbox.call_deadline_for(facts));
        match &outcome {
            Outcome::Opinion(_) | Outcome::Abstain => {
                if matches!(outcome, Outcome::Opinion(_)) {
                    self.stats.opinions.fetch_add(1, Relaxed);
                } else {
                    self.stats.abstains.fetch_add(1, Relaxed);
                }
                // A success forgives one earlier failure: a component failing most of its
                // calls still reaches the switch-off threshold. (Read first: a sound
                // component's score stays 0, and a load keeps the line shared between
                // the data-plane cores where a read-modify-write would bounce it.)
                if self.failure_score.load(Relaxed) != 0 {
                    let _ = self
                        .failure_score
                        .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
                }
                self.recycle(instance);
            }
            Outcome::Failed(failure) => {
                let counter = match failure {
                    Failure::Deadline => &self.stats.deadlines,
                    Failure::Memory => &self.stats.memory,
                    Failure::BadOutput(_) => &self.stats.bad_output,
                    Failure::Trap(_) | Failure::Instantiate(_) => &self.stats.traps,
                };
                counter.fetch_add(1, Relaxed);
                self.record_failure(failure, facts, &fails_closed);
                // A bad opinion leaves the instance sound; a trapped one is poisoned
                // and dropped here.
                if matches!(failure, Failure::BadOutput(_)) {
                    self.recycle(instance);
                }
            }
            // `call` answers neither; had it, the instance would still be sound.
            Outcome::Disabled | Outcome::OutOfScope => self.recycle(instance),
        }
        outcome
    }

    /// Keeps a sound instance for this thread's next call (the call emptied the
    /// thread's slot), unless its memory grew past what idle instances may keep.
    fn recycle(&self, instance: Instance) {
        if instance.store.data().limiter.memory_bytes
            <= self.sandbox.config().max_pooled_memory_bytes
        {
            self.local.get_or_default().set(Some(instance));
        }
    }

    /// Counts a failed call of `facts`; past the threshold, with failures spread over
    /// several client networks ([`Spread::broad`]), switches the component off unless
    /// it `fails_closed`.
    fn record_failure(
        &self,
        failure: &Failure,
        facts: &RequestFacts,
        fails_closed: &impl Fn() -> bool,
    ) {
        let failures = self.failure_score.fetch_add(1, Relaxed) + 1;
        tracing::debug!(component = %self.name, version = %self.version, ?failure, "rule component call failed; opinion dropped");
        let mut networks = self
            .failing_networks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let spread = networks.note(&facts.client_ip, now_ms());
        let limit = self.sandbox.config().failures_before_disable;
        // One network's flood keeps the score at most twice the limit, so that the
        // successes after it still forgive.
        if failures > 2 * limit {
            self.failure_score.store(2 * limit, Relaxed);
        }
        if failures >= limit && spread.broad(limit) && !fails_closed() {
            *networks = FailingNetworks::default();
            drop(networks);
            let pause = self.sandbox.config().disable_for;
            self.disabled_until_ms
                .store(now_ms() + pause.as_millis() as u64, Relaxed);
            self.failure_score.store(0, Relaxed);
            self.stats.disabled_times.fetch_add(1, Relaxed);
            tracing::warn!(
                component = %self.name,
                version = %self.version,
                failures,
                last_failure = ?failure,
                disabled_for_s = pause.as_secs_f64(),
                "rule component keeps failing; switched off for a while (requests are decided without it)"
            );
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as a shared string, for decisions and logs.
    pub fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// The version as a shared string, for decisions and logs.
    pub fn version_arc(&self) -> &Arc<str> {
        &self.version
    }

    /// The scope the component declared: markers over the normalised path and query, or
    /// (`ua:…`) the user agent (empty: every request).
    pub fn scope(&self) -> &[Box<str>] {
        &self.scope
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    /// SHA-256 of the component's bytes, in hex.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Where the component came from (a file path, a store key).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn stats(&self) -> &ComponentStats {
        &self.stats
    }

    /// Whether the component is switched off now.
    pub fn is_disabled(&self) -> bool {
        let until = self.disabled_until_ms.load(Relaxed);
        until != 0 && now_ms() < until
    }
}

#[derive(Debug, thiserror::Error)]
enum InstantiateError {
    #[error("{0}")]
    Instantiate(String),
    #[error("`info` failed: {0}")]
    Info(String),
    #[error("the warm-up request failed: {0}")]
    Smoke(String),
}

/// Names a failed call: memory cap, deadline or trap.
fn classify(store: &Store<GuestState>, err: &wasmtime::Error) -> Failure {
    if store.data().limiter.memory_cap_hit {
        Failure::Memory
    } else if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        Failure::Deadline
    } else {
        // Short: backtraces are off (`Sandbox::new`), and a guest's message is cut.
        let text = format!("{err:#}");
        Failure::Trap(crate::facts::truncate(&text, 512).to_owned())
    }
}

fn describe(store: &Store<GuestState>, err: &wasmtime::Error) -> String {
    classify(store, err).to_string()
}
