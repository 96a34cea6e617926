//! The sandbox every rule component runs in: one wasmtime `Engine`, epoch deadlines,
//! per-store memory caps, and a linker that grants nothing.

use std::sync::{Arc, Weak};
use std::thread;
use std::time::Duration;
use wasmtime::{Config, Engine, ResourceLimiter, Store};

/// Limits of the sandbox.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// CPU deadline of one `evaluate` call.
    pub call_deadline: Duration,
    /// Deadline of each step of loading a component (instantiation, `info`, the smoke
    /// request on a fresh instance, which builds lazily initialised tables).
    pub warmup_deadline: Duration,
    /// Deadline of each step of creating an extra instance while serving requests
    /// (when the pool is empty): shorter than `warmup_deadline`, because a request waits.
    pub instantiate_deadline: Duration,
    /// Most linear memory one instance may hold, all its memories together, in bytes.
    pub max_memory_bytes: usize,
    /// An instance whose memory grew beyond this is dropped after its call instead of
    /// going back to the pool, so idle instances stay small.
    pub max_pooled_memory_bytes: usize,
    /// Failures, less one for each success in between, after which a component is
    /// switched off.
    pub failures_before_disable: u32,
    /// How long a failing component stays switched off.
    pub disable_for: Duration,
    /// Idle instances kept per component (more are created under load, and dropped
    /// when returned to a full pool).
    pub max_idle_instances: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        let threads = thread::available_parallelism().map_or(2, |n| n.get());
        SandboxConfig {
            call_deadline: Duration::from_millis(20),
            warmup_deadline: Duration::from_millis(2_000),
            instantiate_deadline: Duration::from_millis(200),
            max_memory_bytes: 32 << 20,
            max_pooled_memory_bytes: 8 << 20,
            failures_before_disable: 5,
            disable_for: Duration::from_secs(30),
            max_idle_instances: threads * 2,
        }
    }
}

/// The epoch tick: deadlines are counted in these.
const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The one engine all rule components are compiled for and run on.
pub struct Sandbox {
    engine: Engine,
    config: SandboxConfig,
}

impl Sandbox {
    /// Creates the engine and starts the epoch ticker, which stops when the sandbox is
    /// dropped.
    pub fn new(config: SandboxConfig) -> wasmtime::Result<Arc<Sandbox>> {
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(true)
            .cranelift_opt_level(wasmtime::OptLevel::Speed);
        let engine = Engine::new(&wasm)?;
        let sandbox = Arc::new(Sandbox { engine, config });
        let weak: Weak<Sandbox> = Arc::downgrade(&sandbox);
        thread::Builder::new()
            .name("botgate-epoch".into())
            .spawn(move || {
                while let Some(sandbox) = weak.upgrade() {
                    sandbox.engine.increment_epoch();
                    drop(sandbox);
                    thread::sleep(EPOCH_TICK);
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

    /// Arms the deadline of the next call on `store`.
    pub(crate) fn arm_deadline(&self, store: &mut Store<GuestState>, deadline: Duration) {
        // +1: the current tick may be about to end.
        let ticks = deadline.as_millis().div_ceil(EPOCH_TICK.as_millis()) as u64 + 1;
        store.set_epoch_deadline(ticks);
    }
}

/// What a store holds: only its limiter. Guests get no host state.
pub struct GuestState {
    pub(crate) limiter: GuestLimiter,
}

/// Caps the linear memory of a store (all its memories together) and its tables, and
/// remembers that the cap was hit so that the failure is reported as memory exhaustion
/// rather than a generic trap.
pub(crate) struct GuestLimiter {
    max_memory_bytes: usize,
    /// Bytes of linear memory the store holds now.
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

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
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
