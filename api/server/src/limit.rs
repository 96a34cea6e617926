//! The per-key rate limit of the API (GCRA, from `governor`): a partner's automation
//! gets a steady rate with a burst; beyond it, 429 with `Retry-After`.

use crate::error::ApiError;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;

/// Buckets kept before idle ones are dropped (the limiter's memory stays bounded).
const MAX_BUCKETS: usize = 100_000;

/// One bucket per caller.
pub struct KeyLimiter {
    limiter: DefaultKeyedRateLimiter<String>,
    clock: DefaultClock,
}

impl KeyLimiter {
    /// `per_second` requests a second sustained, `burst` at once.
    pub fn new(per_second: NonZeroU32, burst: NonZeroU32) -> Self {
        KeyLimiter {
            limiter: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
            clock: DefaultClock::default(),
        }
    }

    /// Takes one request from `bucket`, or says how long to wait.
    pub fn check(&self, bucket: &str) -> Result<(), ApiError> {
        if self.limiter.len() > MAX_BUCKETS {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&bucket.to_owned())
            .map_err(|not_until| {
                let wait = not_until.wait_time_from(self.clock.now());
                ApiError::too_many_requests(wait.as_secs_f64().ceil() as u64)
            })
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
            limiter.check("a").unwrap();
        }
        let refused = limiter.check("a").unwrap_err();
        assert_eq!(refused.status.as_u16(), 429);
        assert_eq!(refused.retry_after, Some(1));
        limiter.check("b").unwrap();
    }
}
