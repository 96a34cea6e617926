//! Per-client behaviour counters for the rule components: requests, distinct paths and
//! abandoned challenges of each client on each website over a fixed window, in a
//! bounded cache (`quick_cache`'s CLOCK-Pro: a crowd of clients seen once is forgotten
//! before the clients that returned). The counts are the contract's `behaviour` record,
//! handed to the components as they are.
//!
//! A request writes one shared counter (two for a path new to the window) and takes no
//! lock: a client's window is a set of atomics, and each thread remembers the windows
//! of the clients it served lately, so a repeat visitor skips the cache's shard lock
//! and the window's reference count (which every data-plane core would otherwise write
//! for a client whose connections are spread over them, as a browser's are).

use crate::rules::bindings::Behaviour as Counts;
use quick_cache::sync::Cache;
use quick_cache::{DefaultHashBuilder, Lifecycle, UnitWeighter};
use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use thread_local::ThreadLocal;

/// A website and a client.
type ClientKey = (u64, IpAddr);

/// How many clients each thread remembers the window of.
const REMEMBERED_PER_THREAD: usize = 64;

/// One client's window. Distinct paths are counted in a 512-bit set of path hashes:
/// exact for a few paths, an undercount past a few hundred, never more memory.
///
/// Threads update it without a lock. A window that ends is restarted by the one thread
/// whose compare-and-swap of `started_ms` wins; a request counted by another thread in
/// that instant may be lost, which leaves a behaviour signal no less sound.
#[derive(Debug)]
struct Window {
    /// When the window started, in milliseconds since [`clock_base`].
    started_ms: AtomicU64,
    requests: AtomicU32,
    failed_challenges: AtomicU32,
    paths: [AtomicU64; 8],
    /// Set when the cache forgets the client: a thread that still remembers this
    /// window then looks the client up again.
    forgotten: AtomicBool,
}

impl Window {
    fn new(now_ms: u64) -> Window {
        Window {
            started_ms: AtomicU64::new(now_ms),
            requests: AtomicU32::new(0),
            failed_challenges: AtomicU32::new(0),
            paths: Default::default(),
            forgotten: AtomicBool::new(false),
        }
    }

    /// Starts the window again if it is `window_ms` old at `now_ms`.
    fn restart_if_over(&self, now_ms: u64, window_ms: u64) {
        let started = self.started_ms.load(Relaxed);
        if now_ms.saturating_sub(started) >= window_ms
            && self
                .started_ms
                .compare_exchange(started, now_ms, Relaxed, Relaxed)
                .is_ok()
        {
            self.requests.store(0, Relaxed);
            self.failed_challenges.store(0, Relaxed);
            for word in &self.paths {
                word.store(0, Relaxed);
            }
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

/// Marks a window forgotten when the cache evicts its client.
#[derive(Debug, Clone, Copy, Default)]
struct MarkForgotten;

impl Lifecycle<ClientKey, Arc<Window>> for MarkForgotten {
    type RequestState = ();

    fn begin_request(&self) -> Self::RequestState {}

    fn on_evict(&self, _: &mut (), _: ClientKey, window: Arc<Window>) {
        window.forgotten.store(true, Relaxed);
    }
}

/// A thread's memory of the windows of the clients it served lately, in direct-mapped
/// slots.
type Remembered = RefCell<Vec<(ClientKey, Arc<Window>)>>;

/// The counters of every client.
pub struct Behaviour {
    clients: Cache<ClientKey, Arc<Window>, UnitWeighter, DefaultHashBuilder, MarkForgotten>,
    remembered: ThreadLocal<Remembered>,
    /// Picks a client's slot in a thread's memory.
    slot_hasher: DefaultHashBuilder,
    window: Duration,
}

fn path_bit(path: &str) -> (usize, u64) {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut hasher);
    let h = hasher.finish() as usize;
    ((h >> 6) % 8, 1 << (h % 64))
}

impl Behaviour {
    /// Counters for at most `capacity` clients over windows of `window`.
    pub fn new(capacity: usize, window: Duration) -> Behaviour {
        let capacity = capacity.max(16);
        Behaviour {
            clients: Cache::with(
                capacity,
                capacity as u64,
                UnitWeighter,
                DefaultHashBuilder::default(),
                MarkForgotten,
            ),
            remembered: ThreadLocal::new(),
            slot_hasher: DefaultHashBuilder::default(),
            window,
        }
    }

    /// The window of `key`, from this thread's memory or else from the cache, restarted
    /// if it is over.
    fn with_window<T>(&self, key: ClientKey, f: impl FnOnce(&Window) -> T) -> T {
        let now = now_ms();
        let window_ms = self.window.as_millis() as u64;
        let remembered = self.remembered.get_or(|| {
            // Slots start on a window that is already forgotten, so they never hit.
            let nobody = Window::new(now);
            nobody.forgotten.store(true, Relaxed);
            let nobody = Arc::new(nobody);
            RefCell::new(vec![
                ((0, IpAddr::from([0; 4])), nobody);
                REMEMBERED_PER_THREAD
            ])
        });
        let slot = (self.slot_hasher.hash_one(key) as usize) % REMEMBERED_PER_THREAD;
        let mut remembered = remembered.borrow_mut();
        let entry = &mut remembered[slot];
        if entry.0 != key || entry.1.forgotten.load(Relaxed) {
            let window = match self.clients.get_or_insert_with(&key, || {
                Ok::<_, std::convert::Infallible>(Arc::new(Window::new(now)))
            }) {
                Ok(window) => window,
                Err(never) => match never {},
            };
            *entry = (key, window);
        }
        let window = &entry.1;
        window.restart_if_over(now, window_ms);
        f(window)
    }

    /// Counts a request of `client` to `site` for `path`, and answers the counts with
    /// it included.
    pub fn record(&self, site: u64, client: IpAddr, path: &str) -> Counts {
        let window_seconds = self.window.as_secs() as u32;
        self.with_window((site, client), |w| {
            let requests = w.requests.fetch_add(1, Relaxed).saturating_add(1);
            let (word, bit) = path_bit(path);
            // Read first: a path seen before writes nothing.
            if w.paths[word].load(Relaxed) & bit == 0 {
                w.paths[word].fetch_or(bit, Relaxed);
            }
            Counts {
                window_seconds,
                requests,
                distinct_paths: w.paths.iter().map(|p| p.load(Relaxed).count_ones()).sum(),
                failed_challenges: w.failed_challenges.load(Relaxed),
            }
        })
    }

    /// A challenge was served: it counts as failed until it is solved.
    pub fn challenge_served(&self, site: u64, client: IpAddr) {
        self.with_window((site, client), |w| {
            w.failed_challenges.fetch_add(1, Relaxed);
        });
    }

    /// A challenge was solved: the challenges served before it (parallel requests of
    /// one page view each got one) no longer count as failed.
    pub fn challenge_solved(&self, site: u64, client: IpAddr) {
        self.with_window((site, client), |w| w.failed_challenges.store(0, Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_paths_and_challenges_per_site_and_client() {
        let b = Behaviour::new(100, Duration::from_secs(60));
        let a = IpAddr::from([192, 0, 2, 1]);
        b.record(1, a, "/");
        b.record(1, a, "/");
        let c = b.record(1, a, "/wp-login.php");
        assert_eq!((c.requests, c.distinct_paths), (3, 2));
        b.challenge_served(1, a);
        b.challenge_served(1, a);
        assert_eq!(b.record(1, a, "/").failed_challenges, 2);
        b.challenge_solved(1, a);
        assert_eq!(b.record(1, a, "/").failed_challenges, 0);
        assert_eq!(b.record(2, a, "/").requests, 1, "per website");
    }

    #[test]
    fn memory_is_bounded() {
        let b = Behaviour::new(100, Duration::from_secs(60));
        for i in 0..10_000u32 {
            b.record(1, IpAddr::from(i.to_be_bytes()), "/");
        }
        assert!(b.clients.len() <= 200);
    }

    #[test]
    fn requests_counted_on_several_threads_add_up() {
        let b = Behaviour::new(100, Duration::from_secs(60));
        let a = IpAddr::from([192, 0, 2, 1]);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                let b = &b;
                scope.spawn(move || {
                    for i in 0..1_000 {
                        b.record(1, a, if i % 2 == 0 { "/" } else { "/t" });
                    }
                    b.challenge_served(1, a);
                });
            }
        });
        let c = b.record(1, a, "/");
        assert_eq!(c.requests, 3_001);
        assert_eq!(c.distinct_paths, 2);
        assert_eq!(c.failed_challenges, 3);
    }

    #[test]
    fn a_thread_that_remembers_a_forgotten_client_counts_into_its_new_window() {
        let b = Behaviour::new(16, Duration::from_secs(60));
        let a = IpAddr::from([192, 0, 2, 1]);
        // This thread remembers `a`'s window.
        assert_eq!(b.record(1, a, "/").requests, 1);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Another thread's crowd of clients, each seen twice by the cache (as
                // a returning client's requests are), makes the cache forget `a`...
                for i in 0..10_000u32 {
                    let client = IpAddr::from(i.to_be_bytes());
                    b.record(2, client, "/");
                    b.clients.get(&(2, client));
                }
                // ...so `a` starts a new window there.
                assert_eq!(b.record(1, a, "/").requests, 1, "forgotten");
                assert_eq!(b.record(1, a, "/").requests, 2);
            });
        });
        // This thread's memory of `a` is stale: it counts into the new window.
        assert_eq!(b.record(1, a, "/").requests, 3);
    }

    #[test]
    fn windows_restart() {
        let b = Behaviour::new(100, Duration::from_millis(1));
        let a = IpAddr::from([192, 0, 2, 1]);
        b.record(1, a, "/");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(b.record(1, a, "/").requests, 1);
    }
}
