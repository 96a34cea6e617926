//! The sandbox every rule component runs in: one wasmtime `Engine`, epoch deadlines,
//! per-store memory caps, a linker that grants nothing, and the thread that makes spare
//! instances off the data plane.

use super::bindings::RequestFacts;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::thread;
use std::time::Duration;
use wasmtime::{Config, Engine, ResourceLimiter, Store};

/// Bytes of a request's target and headers for each of which a call gets its
/// deadline once more.
pub const DEADLINE_BYTES: usize = 8 * 1024;

/// Limits of the sandbox.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// CPU deadline of one `evaluate` call on a small request; it grows with the
    /// request ([`Sandbox::call_deadline_for`]).
    pub call_deadline: Duration,
    /// Deadline of each step of loading a component (instantiation, `info`, the smoke
    /// request on a fresh instance, which builds lazily initialised tables).
    pub warmup_deadline: Duration,
    /// Deadline of each step of creating an extra instance while serving requests
    /// (when the calling thread has none yet): shorter than `warmup_deadline`, because a
    /// request waits.
    pub instantiate_deadline: Duration,
    /// Most linear memory one instance may hold, all its memories together, in bytes.
    pub max_memory_bytes: usize,
    /// An instance whose memory grew beyond this is dropped after its call instead of
    /// being kept for the thread's next call, so idle instances stay small.
    pub max_pooled_memory_bytes: usize,
    /// Failures, less one for each success in between, after which a component is
    /// switched off (once failures came from [`FAILING_NETWORKS_TO_DISABLE`] client
    /// networks within a minute).
    ///
    /// [`FAILING_NETWORKS_TO_DISABLE`]: crate::component::FAILING_NETWORKS_TO_DISABLE
    pub failures_before_disable: u32,
    /// How long a failing component stays switched off.
    pub disable_for: Duration,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            call_deadline: Duration::from_millis(20),
            warmup_deadline: Duration::from_millis(2_000),
            instantiate_deadline: Duration::from_millis(200),
            max_memory_bytes: 32 << 20,
            max_pooled_memory_bytes: 8 << 20,
            failures_before_disable: 5,
            disable_for: Duration::from_secs(30),
        }
    }
}

/// The epoch tick for `call_deadline`: deadlines are counted in these. A quarter of the
/// call deadline, between 1 and 10 ms: a deadline then overshoots by at most a quarter,
/// and the ticker thread wakes (and takes a core from the data plane) only as often as
/// that needs, 200 times a second at the default 20 ms rather than 1000.
fn epoch_tick(call_deadline: Duration) -> Duration {
    (call_deadline / 4).clamp(Duration::from_millis(1), Duration::from_millis(10))
}

/// The one engine all rule components are compiled for and run on.
pub struct Sandbox {
    engine: Engine,
    config: SandboxConfig,
    /// Instances each component gets ready when it loads: one for every thread that
    /// calls components, so that none is made (and warmed up) while a request waits.
    warm_instances: AtomicUsize,
    /// Work for the `botgate-spares` thread: making instances no request waits for.
    background: mpsc::Sender<BackgroundJob>,
}

/// A piece of work the sandbox's background thread runs.
type BackgroundJob = Box<dyn FnOnce() + Send>;

impl Sandbox {
    /// Creates the engine and starts the epoch ticker, which stops when the sandbox is
    /// dropped.
    pub fn new(config: SandboxConfig) -> wasmtime::Result<Arc<Sandbox>> {
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(true)
            .cranelift_opt_level(wasmtime::OptLevel::Speed)
            // A trap's stack walk and its frames' names (the guest's) would be paid
            // for by every request that makes one trap.
            .wasm_backtrace_max_frames(None);
        // `BOTGATE_PERF_MAP=1`: components' compiled functions are named in
        // /tmp/perf-<pid>.map, so `perf record` / `perf report` show where a rule set
        // spends its time.
        if std::env::var_os("BOTGATE_PERF_MAP").is_some_and(|v| v == "1") {
            wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&wasm)?;
        let tick = epoch_tick(config.call_deadline);
        let (background, jobs) = mpsc::channel::<BackgroundJob>();
        // Ends when the sandbox (the only sender) is dropped.
        thread::Builder::new()
            .name("botgate-spares".into())
            .spawn(move || {
                for job in jobs {
                    // A job that panics loses its spare, not the thread.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            })
            .map_err(|e| wasmtime::Error::msg(format!("cannot start the spares thread: {e}")))?;
        let sandbox = Arc::new(Sandbox {
            engine,
            config,
            warm_instances: AtomicUsize::new(1),
            background,
        });
        let weak: Weak<Sandbox> = Arc::downgrade(&sandbox);
        thread::Builder::new()
            .name("botgate-epoch".into())
            .spawn(move || {
                while let Some(sandbox) = weak.upgrade() {
                    sandbox.engine.increment_epoch();
                    drop(sandbox);
                    thread::sleep(tick);
                }
            })
            .map_err(|e| wasmtime::Error::msg(format!("cannot start the epoch thread: {e}")))?;
        Ok(sandbox)
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// How many instances each component loaded from now on gets ready at load: the
    /// number of threads that call components (at least one).
    pub fn set_warm_instances(&self, threads: usize) {
        self.warm_instances.store(threads.max(1), Ordering::Relaxed);
    }

    pub fn warm_instances(&self) -> usize {
        self.warm_instances.load(Ordering::Relaxed)
    }

    /// Runs `job` on the sandbox's background thread, one job after another.
    pub(crate) fn in_background(&self, job: impl FnOnce() + Send + 'static) {
        // The thread lives as long as the sandbox, its only sender.
        let _ = self.background.send(Box::new(job));
    }

    /// A store for one instance, with the memory cap installed and epoch interruption
    /// turned into a trap.
    pub(crate) fn new_store(&self) -> Store<GuestState> {
        let mut store = Store::new(
            &self.engine,
            GuestState {
                limiter: GuestLimiter {
                    max_memory_bytes: self.config.max_memory_bytes,
                    memory_bytes: 0,
                    memory_cap_hit: false,
                },
            },
        );
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_trap();
        store
    }

    /// The deadline of one `evaluate` call on `facts`: `call_deadline`, and as much again
    /// for every [`DEADLINE_BYTES`] of target and headers, since the rules' work grows
    /// with what they read (the largest request the gateway hands over, about five
    /// times it). A deadline the largest requests outgrow would drop their opinions: an
    /// attack dressed as one would pass unjudged.
    pub fn call_deadline_for(&self, facts: &RequestFacts) -> Duration {
        let bytes = facts.target.len() + facts.headers.len();
        let units = u32::try_from(DEADLINE_BYTES + bytes).unwrap_or(u32::MAX);
        // Saturating: an operator's "no deadline" (a huge one) never overflows.
        self.config.call_deadline.saturating_mul(units) / DEADLINE_BYTES as u32
    }

    /// Arms the deadline of the next call on `store`.
    pub(crate) fn arm_deadline(&self, store: &mut Store<GuestState>, deadline: Duration) {
        store.set_epoch_deadline(self.deadline_ticks(deadline));
    }

    /// The epoch ticks that cover `deadline`: +1, since the current tick may be about to
    /// end.
    fn deadline_ticks(&self, deadline: Duration) -> u64 {
        deadline.as_nanos().div_ceil(self.tick().as_nanos()) as u64 + 1
    }

    /// How often the epoch advances.
    fn tick(&self) -> Duration {
        epoch_tick(self.config.call_deadline)
    }
}

/// What a store holds: only its limiter. Guests get no host state.
pub struct GuestState {
    pub(crate) limiter: GuestLimiter,
}

/// What one table element is counted as against the memory cap (wasmtime keeps a
/// pointer-sized reference per element, with its lazy-initialisation bit).
const TABLE_ELEMENT_BYTES: usize = 8;

/// Caps the linear memory of a store (all its memories together) and its tables, and
/// remembers that the cap was hit so that the failure is reported as memory exhaustion
/// rather than a generic trap.
pub(crate) struct GuestLimiter {
    max_memory_bytes: usize,
    /// Bytes of linear memory (and of tables) the store holds now.
    pub(crate) memory_bytes: usize,
    pub(crate) memory_cap_hit: bool,
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.memory_bytes - current.min(self.memory_bytes) + desired;
        if total > self.max_memory_bytes {
            self.memory_cap_hit = true;
            return Ok(false);
        }
        self.memory_bytes = total;
        Ok(true)
    }

    /// Tables take memory too (a reference, or more, per element): counted against
    /// the same cap.
    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired
            .saturating_sub(current)
            .saturating_mul(TABLE_ELEMENT_BYTES);
        let total = self.memory_bytes.saturating_add(growth);
        if desired > 100_000 || total > self.max_memory_bytes {
            self.memory_cap_hit = true;
            return Ok(false);
        }
        self.memory_bytes = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_count_against_the_memory_cap() {
        let mut limiter = GuestLimiter {
            max_memory_bytes: 1 << 20,
            memory_bytes: 0,
            memory_cap_hit: false,
        };
        assert!(limiter.table_growing(0, 100_000, None).unwrap());
        assert_eq!(limiter.memory_bytes, 100_000 * TABLE_ELEMENT_BYTES);
        // A second table of as many elements passes the cap: refused.
        assert!(!limiter.table_growing(0, 100_000, None).unwrap());
        assert!(limiter.memory_cap_hit);
        // Memory and tables share the cap.
        assert!(!limiter.memory_growing(0, 512 << 10, None).unwrap());
        assert!(limiter.memory_growing(0, 64 << 10, None).unwrap());
    }

    #[test]
    fn the_epoch_tick_is_a_quarter_of_the_call_deadline_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(epoch_tick(ms(20)), ms(5));
        assert_eq!(epoch_tick(ms(2)), ms(1));
        assert_eq!(epoch_tick(ms(1_000)), ms(10));
    }

    /// The largest request the host hands over gets five deadlines: the rules' work
    /// on it grows with its bytes (the Core Rule Set's on 31 KiB of words took 25 ms
    /// against the 20 ms a small request gets).
    #[test]
    fn a_call_deadline_grows_with_the_request() {
        let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
        let mut facts = crate::facts::smoke_facts();
        facts.target = "/".into();
        facts.headers = String::new();
        let ms = Duration::from_millis;
        assert!(sandbox.call_deadline_for(&facts) - ms(20) < Duration::from_micros(3));
        facts.target = "a".repeat(crate::facts::MAX_TARGET_BYTES);
        assert_eq!(sandbox.call_deadline_for(&facts), ms(60));
        facts.headers = "h".repeat(crate::facts::MAX_HEADER_BYTES);
        assert_eq!(sandbox.call_deadline_for(&facts), ms(100));
    }

    #[test]
    fn a_deadline_is_never_shorter_than_asked() {
        let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
        assert_eq!(sandbox.tick(), Duration::from_millis(5));
        for (deadline, ticks) in [(20, 5), (21, 6), (2_000, 401), (1, 2)] {
            let got = sandbox.deadline_ticks(Duration::from_millis(deadline));
            assert_eq!(got, ticks, "{deadline} ms");
            // The epoch may be about to advance when the deadline is armed: the
            // ticks after the first one still cover the whole deadline.
            assert!(sandbox.tick() * (got as u32 - 1) >= Duration::from_millis(deadline));
        }
    }
}
