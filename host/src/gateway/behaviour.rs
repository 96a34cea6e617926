//! Per-client behaviour counters for the rule components: requests, distinct paths and
//! abandoned challenges of each client on each website over a fixed window, in a
//! bounded cache (the least recently seen clients are forgotten first). The counts are
//! the contract's `behaviour` record, handed to the components as they are.

use crate::client::BehaviourCounts as Counts;
use foldhash::quality::FixedState;
use quick_cache::sync::Cache;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One client's window. Distinct paths are counted in a 512-bit set of path hashes:
/// exact for a few paths, an undercount past a few hundred, never more memory.
#[derive(Debug)]
struct Window {
    started: Instant,
    requests: u32,
    failed_challenges: u32,
    paths: [u64; 8],
}

impl Window {
    fn new(now: Instant) -> Window {
        Window {
            started: now,
            requests: 0,
            failed_challenges: 0,
            paths: [0; 8],
        }
    }
}

/// The counters of every client.
pub struct Behaviour {
    clients: Cache<(u64, IpAddr), Arc<Mutex<Window>>>,
    window: Duration,
}

fn path_bit(path: &str) -> (usize, u64) {
    let h = FixedState::with_seed(0).hash_one(path) as usize;
    ((h >> 6) % 8, 1 << (h % 64))
}

impl Behaviour {
    /// Counters for at most `capacity` clients over windows of `window`.
    pub fn new(capacity: usize, window: Duration) -> Behaviour {
        Behaviour {
            clients: Cache::new(capacity.max(16)),
            window,
        }
    }

    fn window(&self, site: u64, client: IpAddr, now: Instant) -> Arc<Mutex<Window>> {
        let key = (site, super::limits::client_network(client));
        match self.clients.get_or_insert_with(&key, || {
            Ok::<_, std::convert::Infallible>(Arc::new(Mutex::new(Window::new(now))))
        }) {
            Ok(window) => window,
            Err(never) => match never {},
        }
    }

    /// Runs `f` on the window of `client` on `site` as it is at `now` (restarted when
    /// over).
    fn with_window<T>(
        &self,
        site: u64,
        client: IpAddr,
        now: Instant,
        f: impl FnOnce(&mut Window) -> T,
    ) -> T {
        let window = self.window(site, client, now);
        let mut window = window.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_duration_since(window.started) >= self.window {
            *window = Window::new(now);
        }
        f(&mut window)
    }

    /// Counts a request of `client` to `site` for `path`, which arrived at `now`, and
    /// answers the counts with it included.
    pub fn record(&self, site: u64, client: IpAddr, path: &str, now: Instant) -> Counts {
        let window_seconds = self.window.as_secs() as u32;
        self.with_window(site, client, now, |w| {
            w.requests = w.requests.saturating_add(1);
            let (word, bit) = path_bit(path);
            w.paths[word] |= bit;
            Counts {
                window_seconds,
                requests: w.requests,
                distinct_paths: w.paths.iter().map(|p| p.count_ones()).sum(),
                failed_challenges: w.failed_challenges,
            }
        })
    }

    /// A challenge was served: it counts as failed until it is solved.
    pub fn challenge_served(&self, site: u64, client: IpAddr) {
        self.with_window(site, client, Instant::now(), |w| {
            w.failed_challenges = w.failed_challenges.saturating_add(1)
        });
    }

    /// A challenge was solved: the challenges served before it (parallel requests of
    /// one page view each got one) no longer count as failed.
    pub fn challenge_solved(&self, site: u64, client: IpAddr) {
        self.with_window(site, client, Instant::now(), |w| w.failed_challenges = 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_paths_and_challenges_per_site_and_client() {
        let b = Behaviour::new(100, Duration::from_secs(60));
        let a = IpAddr::from([192, 0, 2, 1]);
        b.record(1, a, "/", Instant::now());
        b.record(1, a, "/", Instant::now());
        let c = b.record(1, a, "/wp-login.php", Instant::now());
        assert_eq!((c.requests, c.distinct_paths), (3, 2));
        b.challenge_served(1, a);
        b.challenge_served(1, a);
        assert_eq!(b.record(1, a, "/", Instant::now()).failed_challenges, 2);
        b.challenge_solved(1, a);
        assert_eq!(b.record(1, a, "/", Instant::now()).failed_challenges, 0);
        assert_eq!(
            b.record(2, a, "/", Instant::now()).requests,
            1,
            "per website"
        );
        // An IPv6 client is its /64: moving among its addresses resets nothing.
        let (first, second) = (
            IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, 1]),
            IpAddr::from([0x2001, 0xdb8, 0, 1, 0xabcd, 0, 0, 2]),
        );
        b.record(1, first, "/", Instant::now());
        assert_eq!(b.record(1, second, "/", Instant::now()).requests, 2);
        let elsewhere = IpAddr::from([0x2001, 0xdb8, 0, 2, 0, 0, 0, 1]);
        assert_eq!(
            b.record(1, elsewhere, "/", Instant::now()).requests,
            1,
            "another /64"
        );
    }

    #[test]
    fn memory_is_bounded() {
        let b = Behaviour::new(100, Duration::from_secs(60));
        for i in 0..10_000u32 {
            b.record(1, IpAddr::from(i.to_be_bytes()), "/", Instant::now());
        }
        assert!(b.clients.len() <= 200);
    }

    #[test]
    fn windows_restart() {
        let b = Behaviour::new(100, Duration::from_millis(1));
        let a = IpAddr::from([192, 0, 2, 1]);
        b.record(1, a, "/", Instant::now());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(b.record(1, a, "/", Instant::now()).requests, 1);
    }
}
