//! `ddos_protection`: per-client and per-website request rates (GCRA, the `governor`
//! crate), and `ddos_protection_advanced`: stricter per-client limits, and an "under
//! attack" mode that challenges every client without a pass while a website's traffic
//! is over its strict rate. A website over its own rate locks nobody out: clients with
//! a pass draw on a share reserved for them, new clients are challenged, and only a
//! client over its own limit is answered 429.

use arc_swap::ArcSwap;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, NotUntil, Quota, RateLimiter};
use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The limits. The advanced ones are the plain ones divided by `strict_divisor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdosConfig {
    /// Requests a second one client may make to one website, sustained.
    pub client_rate: NonZeroU32,
    /// Requests one client may make to one website at once.
    pub client_burst: NonZeroU32,
    /// Requests a second one website may receive, sustained.
    pub website_rate: NonZeroU32,
    /// Requests one website may receive at once.
    pub website_burst: NonZeroU32,
    /// How much stricter `ddos_protection_advanced` is.
    pub strict_divisor: NonZeroU32,
    /// The share of a website's rate (and burst), in percent, kept for clients with a
    /// pass when the website is over its rate.
    pub reserved_percent: u32,
    /// How long a website stays under attack after its traffic went over the strict rate.
    pub attack_cooldown: Duration,
    /// Most clients tracked at once; past that the oldest state is dropped.
    pub max_tracked_clients: usize,
}

impl Default for DdosConfig {
    fn default() -> Self {
        let n = |v| NonZeroU32::new(v).expect("non-zero");
        DdosConfig {
            client_rate: n(20),
            client_burst: n(100),
            website_rate: n(2000),
            website_burst: n(4000),
            strict_divisor: n(5),
            reserved_percent: 50,
            attack_cooldown: Duration::from_secs(60),
            max_tracked_clients: 1_000_000,
        }
    }
}

/// The limits' verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within every limit.
    Pass,
    /// Within the limits, but the website is under attack: challenge a client
    /// without a pass.
    UnderAttack,
    /// The client is over its own limit: answer 429, retry after this many seconds.
    Limited { retry_after: u64 },
    /// The website is over its rate (the client is not): a client with a pass draws
    /// on the reserved share ([`DdosLimits::reserved`]), a new one is challenged.
    WebsiteBusy,
}

/// What the limits and the behaviour counters count as one client: an IPv4 address, or
/// an IPv6 /64 (one subscriber's network, as the challenge pass is bound to): a client
/// with a /64 has 2^64 addresses to move among, and would get a fresh allowance with
/// each. The listener has already turned IPv4-mapped IPv6 addresses into IPv4.
pub fn client_network(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
    }
}

/// Challenge answers a second one client (by [`client_network`]) may send to the
/// gateway, sustained, whatever its websites' settings: each one the gateway checks is a
/// store write (the answer spent once), so their number is bounded before any check.
pub const ANSWERS_PER_SECOND: u32 = 2;
/// Challenge answers one client may send at once.
pub const ANSWERS_BURST: u32 = 60;

/// The rate-limit state of every website and client.
pub struct DdosLimits {
    /// Swapped whole when the limits change: the counts start afresh.
    limiters: ArcSwap<Limiters>,
    under_attack: Mutex<HashMap<u64, Instant>>,
}

/// The limiters of one configuration.
struct Limiters {
    config: DdosConfig,
    client: ArcSwap<DefaultKeyedRateLimiter<(u64, IpAddr)>>,
    strict_client: ArcSwap<DefaultKeyedRateLimiter<(u64, IpAddr)>>,
    client_quota: Quota,
    strict_client_quota: Quota,
    /// Challenge answers, keyed as the client limiters are, under site 0.
    answers: ArcSwap<DefaultKeyedRateLimiter<(u64, IpAddr)>>,
    answers_quota: Quota,
    website: DefaultKeyedRateLimiter<u64>,
    strict_website: DefaultKeyedRateLimiter<u64>,
    /// The share of each website's rate kept for clients with a pass.
    reserved: DefaultKeyedRateLimiter<u64>,
}

fn quota(rate: NonZeroU32, burst: NonZeroU32, divisor: NonZeroU32) -> Quota {
    let strict =
        |v: NonZeroU32| NonZeroU32::new(v.get() / divisor.get()).unwrap_or(NonZeroU32::MIN);
    Quota::per_second(strict(rate)).allow_burst(strict(burst))
}

impl Limiters {
    fn new(config: DdosConfig) -> Limiters {
        let one = NonZeroU32::MIN;
        let div = config.strict_divisor;
        let client_quota = quota(config.client_rate, config.client_burst, one);
        let strict_client_quota = quota(config.client_rate, config.client_burst, div);
        let n = |v| NonZeroU32::new(v).unwrap_or(NonZeroU32::MIN);
        let answers_quota = quota(n(ANSWERS_PER_SECOND), n(ANSWERS_BURST), one);
        Limiters {
            answers: ArcSwap::from_pointee(RateLimiter::keyed(answers_quota)),
            answers_quota,
            client: ArcSwap::from_pointee(RateLimiter::keyed(client_quota)),
            strict_client: ArcSwap::from_pointee(RateLimiter::keyed(strict_client_quota)),
            client_quota,
            strict_client_quota,
            website: RateLimiter::keyed(quota(config.website_rate, config.website_burst, one)),
            strict_website: RateLimiter::keyed(quota(
                config.website_rate,
                config.website_burst,
                div,
            )),
            reserved: RateLimiter::keyed(quota(
                share(config.website_rate, config.reserved_percent),
                share(config.website_burst, config.reserved_percent),
                one,
            )),
            config,
        }
    }
}

impl DdosLimits {
    pub fn new(config: DdosConfig) -> DdosLimits {
        DdosLimits {
            limiters: ArcSwap::from_pointee(Limiters::new(config)),
            under_attack: Mutex::new(HashMap::new()),
        }
    }

    /// Takes `config` from the next request on; when it differs from the limits in
    /// force, every count starts afresh.
    pub fn set_config(&self, config: DdosConfig) {
        if self.limiters.load().config != config {
            self.limiters
                .store(std::sync::Arc::new(Limiters::new(config)));
        }
    }

    /// Counts one request of `client` (by [`client_network`]) to the website `site` (a
    /// hash of its domain).
    pub fn check(&self, site: u64, client: IpAddr, advanced: bool) -> Verdict {
        let limits = self.limiters.load();
        let limiter = if advanced {
            &limits.strict_client
        } else {
            &limits.client
        };
        if let Err(not_until) = limiter.load().check_key(&(site, client_network(client))) {
            return Verdict::Limited {
                retry_after: seconds_until(&not_until),
            };
        }
        if limits.website.check_key(&site).is_err() {
            self.attacks()
                .insert(site, Instant::now() + limits.config.attack_cooldown);
            return Verdict::WebsiteBusy;
        }
        if !advanced {
            return Verdict::Pass;
        }
        let now = Instant::now();
        let mut attacks = self.attacks();
        if limits.strict_website.check_key(&site).is_err() {
            if !attacks.contains_key(&site) {
                tracing::warn!(site, "website under attack: challenging every new client");
            }
            attacks.insert(site, now + limits.config.attack_cooldown);
        }
        match attacks.get(&site) {
            Some(until) if *until > now => Verdict::UnderAttack,
            Some(_) => {
                attacks.remove(&site);
                Verdict::Pass
            }
            None => Verdict::Pass,
        }
    }

    /// Counts one challenge answer of `client`: whether it is within
    /// [`ANSWERS_PER_SECOND`]; the seconds to wait otherwise.
    pub fn answer(&self, client: IpAddr) -> Result<(), u64> {
        let limits = self.limiters.load();
        let checked = limits
            .answers
            .load()
            .check_key(&(0, client_network(client)));
        checked.map_err(|not_until| seconds_until(&not_until))
    }

    /// Whether `site` went over its rate, or (`ddos_protection_advanced`) was under
    /// attack, within the cooldown: challenges are harder meanwhile. Counts nothing.
    pub fn under_pressure(&self, site: u64) -> bool {
        let now = Instant::now();
        self.attacks().get(&site).is_some_and(|until| *until > now)
    }

    fn attacks(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        self.under_attack.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one request of a client with a pass to `site` while the website is over
    /// its rate: whether the share reserved for such clients has room; 503 otherwise.
    pub fn reserved(&self, site: u64) -> Result<(), u64> {
        let limits = self.limiters.load();
        limits
            .reserved
            .check_key(&site)
            .map_err(|not_until| seconds_until(&not_until))
    }

    /// Drops the state of clients and websites that are back to a full allowance, and
    /// everything when more clients than allowed are tracked (a flood of spoofed
    /// sources); run now and then.
    pub fn housekeeping(&self) {
        let limits = self.limiters.load();
        for (limiter, quota) in [
            (&limits.client, limits.client_quota),
            (&limits.strict_client, limits.strict_client_quota),
            (&limits.answers, limits.answers_quota),
        ] {
            let current = limiter.load();
            current.retain_recent();
            if current.len() > limits.config.max_tracked_clients {
                tracing::warn!(
                    tracked = current.len(),
                    "too many clients tracked by the rate limits; starting afresh"
                );
                limiter.store(std::sync::Arc::new(RateLimiter::keyed(quota)));
            } else {
                current.shrink_to_fit();
            }
        }
        for limiter in [&limits.website, &limits.strict_website, &limits.reserved] {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        let now = Instant::now();
        self.attacks().retain(|_, until| *until > now);
    }
}

/// `percent` of `value`, at least one.
fn share(value: NonZeroU32, percent: u32) -> NonZeroU32 {
    let part = u64::from(value.get()) * u64::from(percent.min(100)) / 100;
    NonZeroU32::new(part as u32).unwrap_or(NonZeroU32::MIN)
}

/// The wait a limiter's refusal names, in whole seconds, rounded up, at least one.
fn seconds_until(not_until: &NotUntil<<DefaultClock as Clock>::Instant>) -> u64 {
    let wait = not_until.wait_time_from(DefaultClock::default().now());
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(client: u32, website: u32) -> DdosLimits {
        let n = |v| NonZeroU32::new(v).unwrap();
        DdosLimits::new(DdosConfig {
            client_rate: n(1),
            client_burst: n(client),
            website_rate: n(1),
            website_burst: n(website),
            strict_divisor: n(2),
            ..DdosConfig::default()
        })
    }

    #[test]
    fn a_client_over_its_burst_is_limited_and_others_are_not() {
        let l = limits(4, 100);
        let a = IpAddr::from([192, 0, 2, 1]);
        let b = IpAddr::from([192, 0, 2, 2]);
        for _ in 0..4 {
            assert_eq!(l.check(1, a, false), Verdict::Pass);
        }
        assert!(matches!(
            l.check(1, a, false),
            Verdict::Limited { retry_after: 1.. }
        ));
        assert_eq!(l.check(1, b, false), Verdict::Pass);
        assert_eq!(
            l.check(2, a, false),
            Verdict::Pass,
            "limits are per website"
        );
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let l = limits(4, 100);
        let address = |last: u16, net: u16| {
            IpAddr::from([0x2001, 0xdb8, 0, net, 0x1111, 0x2222, 0x3333, last])
        };
        // Four addresses of one /64 share one allowance, as one client's would.
        for last in 0..4 {
            assert_eq!(l.check(1, address(last, 1), false), Verdict::Pass);
        }
        assert!(matches!(
            l.check(1, address(99, 1), false),
            Verdict::Limited { .. }
        ));
        assert_eq!(
            l.check(1, address(0, 2), false),
            Verdict::Pass,
            "another /64"
        );
        assert_eq!(
            client_network(address(7, 1)),
            IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, 0])
        );
        let v4 = IpAddr::from([192, 0, 2, 1]);
        assert_eq!(client_network(v4), v4);
    }

    #[test]
    fn a_busy_website_keeps_a_share_for_clients_with_a_pass() {
        let l = limits(100, 4);
        let mut verdicts: Vec<_> = (0..4)
            .map(|i| l.check(1, IpAddr::from([198, 51, 100, i]), false))
            .collect();
        assert_eq!(verdicts, [Verdict::Pass; 4]);
        assert!(!l.under_pressure(1));
        verdicts.extend((4..6).map(|i| l.check(1, IpAddr::from([198, 51, 100, i]), false)));
        assert_eq!(
            &verdicts[4..],
            [Verdict::WebsiteBusy; 2],
            "not 429: the clients are within their limits"
        );
        assert!(l.under_pressure(1), "challenges are harder for a while");
        assert!(!l.under_pressure(2));
        // Half the website's burst is reserved for clients with a pass.
        assert_eq!(l.reserved(1), Ok(()));
        assert_eq!(l.reserved(1), Ok(()));
        assert!(l.reserved(1).is_err());
        assert_eq!(l.reserved(2), Ok(()), "per website");
    }

    #[test]
    fn advanced_is_stricter_and_detects_attacks() {
        let l = limits(4, 8);
        let a = IpAddr::from([192, 0, 2, 1]);
        assert_eq!(l.check(1, a, true), Verdict::Pass);
        assert_eq!(l.check(1, a, true), Verdict::Pass);
        assert!(matches!(l.check(1, a, true), Verdict::Limited { .. }));
        // Many clients: the strict website rate (4) is crossed → under attack.
        let verdicts: Vec<_> = (0..6)
            .map(|i| l.check(1, IpAddr::from([198, 51, 100, i]), true))
            .collect();
        assert!(verdicts.contains(&Verdict::UnderAttack), "{verdicts:?}");
        assert!(l.under_pressure(1));
        l.housekeeping();
        assert!(l.under_pressure(1), "within the cooldown");
    }
}
