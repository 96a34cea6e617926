//! The per-key rate limit of the API (GCRA, from `governor`): a partner's automation
//! gets a steady rate with a burst, and so does each user key, while the users of one
//! partner together get [`USERS_TOGETHER`] times that (however many users it made);
//! beyond it, 429 with `Retry-After`.

use crate::error::ApiError;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::net::IpAddr;
use std::num::NonZeroU32;

/// Buckets kept before idle ones are dropped (the limiter's memory stays bounded).
const MAX_BUCKETS: usize = 100_000;

/// How many keys' rate the user keys of one partner get together.
pub const USERS_TOGETHER: u32 = 10;

/// One bucket per caller, and one for each partner's users together.
pub struct KeyLimiter {
    limiter: DefaultKeyedRateLimiter<String>,
    users_of_partner: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
}

impl KeyLimiter {
    /// `per_second` requests a second sustained, `burst` at once, for each key.
    pub fn new(per_second: NonZeroU32, burst: NonZeroU32) -> Self {
        let times = NonZeroU32::new(USERS_TOGETHER).unwrap_or(NonZeroU32::MIN);
        let together = |n: NonZeroU32| n.saturating_mul(times);
        KeyLimiter {
            limiter: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
            users_of_partner: RateLimiter::keyed(
                Quota::per_second(together(per_second)).allow_burst(together(burst)),
            ),
            clock: DefaultClock::default(),
        }
    }

    /// Takes one request from `bucket`, and with `users_of` one from that partner's
    /// users' bucket, or says how long to wait.
    pub fn check(&self, bucket: &str, users_of: Option<&str>) -> Result<(), ApiError> {
        let refused = |not_until| refused(&self.clock, not_until);
        for limiter in [&self.limiter, &self.users_of_partner] {
            if limiter.len() > MAX_BUCKETS {
                limiter.retain_recent();
            }
        }
        self.limiter
            .check_key(&bucket.to_owned())
            .map_err(refused)?;
        if let Some(partner) = users_of {
            self.users_of_partner
                .check_key(&partner.to_owned())
                .map_err(refused)?;
        }
        Ok(())
    }
}

/// The 429 for a request a limiter refused until `not_until`.
pub(crate) fn refused(
    clock: &DefaultClock,
    not_until: governor::NotUntil<<DefaultClock as Clock>::Instant>,
) -> ApiError {
    let wait = not_until.wait_time_from(clock.now());
    ApiError::too_many_requests(wait.as_secs_f64().ceil() as u64)
}

/// Failed key look-ups per client address (an IPv4 address, or an IPv6 /64): past a
/// burst, a request from an address that keeps presenting unknown keys is answered 429
/// before its key is looked up (the store is not asked on a stranger's behalf), until
/// the failures have drained at the sustained rate. A key that authenticated lately
/// goes on working from a blocked address, so a stranger sharing it (behind one NAT or
/// proxy) does not lock partners out.
pub struct FailedKeys {
    limiter: governor::DefaultKeyedRateLimiter<IpAddr>,
    clock: DefaultClock,
    /// Clients over their budget, and until when.
    blocked: std::sync::Mutex<std::collections::HashMap<IpAddr, std::time::Instant>>,
    /// The SHA-256 of keys that authenticated lately (bounded: emptied when full).
    known: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Keys remembered as known good at most.
const MAX_KNOWN_KEYS: usize = 10_000;

impl FailedKeys {
    /// `per_minute` failures a minute sustained, `burst` at once.
    pub fn new(per_minute: NonZeroU32, burst: NonZeroU32) -> Self {
        FailedKeys {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            clock: DefaultClock::default(),
            blocked: std::sync::Mutex::default(),
            known: std::sync::Mutex::default(),
        }
    }

    /// Remembers that the key with digest `key_sha256` authenticated.
    pub fn succeeded(&self, key_sha256: &str) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if known.len() >= MAX_KNOWN_KEYS {
            known.clear();
        }
        if !known.contains(key_sha256) {
            known.insert(key_sha256.to_owned());
        }
    }

    /// What limits `client`: its /64 for IPv6, the IPv4 address of a mapped one.
    fn key(client: IpAddr) -> IpAddr {
        match client.to_canonical() {
            IpAddr::V6(v6) => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(std::net::Ipv6Addr::from(bits))
            }
            v4 => v4,
        }
    }

    /// 429 when `client` is over its budget of failures, unless the key it presents
    /// (`key_sha256`) authenticated lately (checked before a look-up).
    pub fn check(&self, client: IpAddr, key_sha256: &str) -> Result<(), ApiError> {
        let key = FailedKeys::key(client);
        let now = std::time::Instant::now();
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        match blocked.get(&key) {
            Some(until)
                if *until > now
                    && !self
                        .known
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .contains(key_sha256) =>
            {
                Err(ApiError {
                    retry_after: Some(
                        until.duration_since(now).as_secs_f64().ceil().max(1.0) as u64
                    ),
                    ..ApiError::new(
                        axum::http::StatusCode::TOO_MANY_REQUESTS,
                        "too many unknown API keys from this address; retry after the time in \
                     `Retry-After`",
                    )
                    .on("Authorization")
                })
            }
            Some(until) if *until > now => Ok(()),
            Some(_) => {
                blocked.remove(&key);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Counts one failed look-up by `client`.
    pub fn failed(&self, client: IpAddr) {
        let key = FailedKeys::key(client);
        if self.limiter.len() > MAX_BUCKETS {
            self.limiter.retain_recent();
        }
        if let Err(not_until) = self.limiter.check_key(&key) {
            let now = std::time::Instant::now();
            let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
            if blocked.len() > MAX_BUCKETS {
                blocked.retain(|_, until| *until > now);
            }
            blocked.insert(key, now + not_until.wait_time_from(self.clock.now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_runs_dry_after_its_burst_and_others_do_not() {
        let one = NonZeroU32::new(1).unwrap();
        let limiter = KeyLimiter::new(one, NonZeroU32::new(3).unwrap());
        for _ in 0..3 {
            limiter.check("a", None).unwrap();
        }
        let refused = limiter.check("a", None).unwrap_err();
        assert_eq!(refused.status.as_u16(), 429);
        assert_eq!(refused.retry_after, Some(1));
        limiter.check("b", None).unwrap();
    }

    /// A partner that makes many users does not get many keys' rate: its users share
    /// one bucket of [`USERS_TOGETHER`] keys' burst, and another partner's users theirs.
    #[test]
    fn the_users_of_one_partner_share_a_bucket() {
        let one = NonZeroU32::new(1).unwrap();
        let limiter = KeyLimiter::new(one, NonZeroU32::new(3).unwrap());
        let together = 3 * USERS_TOGETHER as usize;
        for n in 0..together {
            limiter
                .check(&format!("user\nacme\n{n}"), Some("acme"))
                .unwrap();
        }
        let refused = limiter
            .check("user\nacme\nfresh", Some("acme"))
            .unwrap_err();
        assert_eq!(refused.status.as_u16(), 429);
        limiter
            .check("user\nglobex\nfresh", Some("globex"))
            .unwrap();
        limiter.check("partner\nacme", None).unwrap();
    }

    #[test]
    fn a_client_that_keeps_failing_is_stopped_before_its_keys_are_looked_up() {
        let failed = FailedKeys::new(NonZeroU32::new(1).unwrap(), NonZeroU32::new(3).unwrap());
        let client: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let neighbour: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        failed.succeeded("known");
        for _ in 0..3 {
            failed.check(client, "x").unwrap();
            failed.failed(client);
        }
        failed.failed(client);
        let refused = failed.check(neighbour, "x").unwrap_err();
        assert_eq!(refused.status.as_u16(), 429);
        assert!(refused.retry_after.is_some_and(|s| s >= 1));
        failed.check(neighbour, "known").unwrap();
        failed.check("192.0.2.1".parse().unwrap(), "x").unwrap();
        // A mapped IPv4 address is its IPv4 address, not the /64 of every one of them.
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        for _ in 0..4 {
            failed.failed(mapped);
        }
        assert!(failed.check("192.0.2.7".parse().unwrap(), "x").is_err());
        failed
            .check("::ffff:192.0.2.8".parse().unwrap(), "x")
            .unwrap();
    }
}

/// What compiling custom rules' new patterns (a few milliseconds each, on the threads
/// that serve visitors too) may cost one partner's callers on this gateway: [`BURST`]
/// at once, then one a second. While the partner owes, a request that needs a new
/// pattern is refused (429); patterns compiled before cost nothing.
///
/// [`BURST`]: PatternBudget::BURST
#[derive(Default)]
pub struct PatternBudget {
    /// Each partner's patterns in hand (negative: owed), and when they were counted.
    balances: std::sync::Mutex<std::collections::HashMap<String, (f64, std::time::Instant)>>,
}

impl PatternBudget {
    pub const BURST: f64 = 100.0;
    pub const PER_SECOND: f64 = 1.0;

    /// Runs `parse` for `partner`, counting the patterns it compiled: as many as a
    /// website may have are set aside first (so requests at once cannot all pass with
    /// the same balance), and what it did not compile is given back.
    pub fn spend<T>(&self, partner: &str, parse: impl FnOnce() -> T) -> Result<T, ApiError> {
        const SET_ASIDE: f64 = botgate_model::custom_rules::MAX_PATTERNS as f64;
        let balance = self.settle(partner, SET_ASIDE) + SET_ASIDE;
        let (parsed, compiled) = botgate_model::custom_rules::compiling(balance >= 0.0, parse);
        self.settle(partner, compiled.new as f64 - SET_ASIDE);
        if compiled.refused {
            let wait = (-balance / Self::PER_SECOND).ceil().max(1.0) as u64;
            return Err(ApiError {
                retry_after: Some(wait),
                ..ApiError::new(
                    axum::http::StatusCode::TOO_MANY_REQUESTS,
                    "too many new custom-rule patterns were compiled for this partner's \
                     websites lately (patterns used before cost nothing); retry after the \
                     time in `Retry-After`",
                )
                .on("settings.custom_rules")
            });
        }
        Ok(parsed)
    }

    /// Refills `partner`'s balance, takes `spent` (gives back a negative); the balance.
    fn settle(&self, partner: &str, spent: f64) -> f64 {
        // One entry a partner that called (partners are the operator's: few).
        let mut balances = self.balances.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        let (balance, counted) = balances
            .entry(partner.to_owned())
            .or_insert((Self::BURST, now));
        let refill = now.duration_since(*counted).as_secs_f64() * Self::PER_SECOND;
        *balance = (*balance + refill).min(Self::BURST) - spent;
        *counted = now;
        *balance
    }
}
