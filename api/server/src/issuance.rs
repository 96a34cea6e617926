//! The most ACME orders placed for one partner and one website, counted in the store
//! (so across gateways): the API refuses a change that would start an issuance past
//! them, and the provisioner waits with a renewal or a retry past them.

use botgate_model::{Domain, PartnerName, UserId};
use botgate_store::{SharedState, StoreError};

/// The most ACME issuances started, so that flipping `certs_issuer` or the subdomains,
/// renewals or retries cannot run up the CA's limits, which every partner of the
/// gateway shares (Let's Encrypt: 300 new orders per account in 3 hours, 5 identical
/// certificates a week).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuanceLimits {
    /// Per website in a day (UTC).
    pub per_website_per_day: u64,
    /// Per partner in an hour.
    pub per_partner_per_hour: u64,
    /// Started by one user's own key (or its dashboard) in an hour, so that one website
    /// owner cannot spend its partner's hour for every other owner.
    pub per_user_key_per_hour: u64,
}

impl Default for IssuanceLimits {
    fn default() -> Self {
        IssuanceLimits {
            per_website_per_day: 5,
            per_partner_per_hour: 50,
            per_user_key_per_hour: 10,
        }
    }
}

/// One window issuances are counted in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The store's counter.
    pub key: String,
    /// When the window ends, in ms since the Unix epoch.
    pub ends_ms: u64,
    pub limit: u64,
    /// What the limit is per: `partner per hour`, `website per day`.
    pub per: &'static str,
}

impl IssuanceLimits {
    /// The windows an issuance for `domain` of `partner` counts in at `now_ms`, and in
    /// `by_user`'s when that user's own key asked for it. The website's window is the
    /// partner's own, so another partner's attempts at the same domain never count
    /// against it.
    pub fn windows(
        &self,
        partner: &PartnerName,
        domain: &Domain,
        by_user: Option<&UserId>,
        now_ms: u64,
    ) -> Vec<Window> {
        const HOUR_MS: u64 = 3_600_000;
        const DAY_MS: u64 = 24 * HOUR_MS;
        let (p, d) = (partner.as_str(), domain.as_str());
        let window = |length: u64, key: String, limit, per| Window {
            key,
            ends_ms: (now_ms / length + 1) * length,
            limit,
            per,
        };
        let mut windows = vec![
            window(
                HOUR_MS,
                format!("acme-orders:{p}:{}", now_ms / HOUR_MS),
                self.per_partner_per_hour,
                "partner per hour",
            ),
            window(
                DAY_MS,
                format!("acme-orders:{p}:{d}:{}", now_ms / DAY_MS),
                self.per_website_per_day,
                "website per day",
            ),
        ];
        // User ids hold no `:`, domains no `@`: the keys cannot meet.
        if let Some(user) = by_user {
            windows.push(window(
                HOUR_MS,
                format!("acme-orders:{p}:@{user}:{}", now_ms / HOUR_MS),
                self.per_user_key_per_hour,
                "user key per hour",
            ));
        }
        windows
    }

    /// The first window whose limit is reached, if one is.
    pub async fn full_window(
        &self,
        store: &impl SharedState,
        partner: &PartnerName,
        domain: &Domain,
        by_user: Option<&UserId>,
        now_ms: u64,
    ) -> Result<Option<Window>, StoreError> {
        for window in self.windows(partner, domain, by_user, now_ms) {
            let count: u64 = store
                .ephemeral(&window.key, now_ms)
                .await?
                .and_then(|count| count.parse().ok())
                .unwrap_or(0);
            if count >= window.limit {
                return Ok(Some(window));
            }
        }
        Ok(None)
    }

    /// Counts one issuance in its windows (each count one atomic step in the store, so
    /// gateways counting at the same moment never pass a limit together); the first
    /// window whose limit that passes, if one does.
    pub async fn take(
        &self,
        store: &impl SharedState,
        partner: &PartnerName,
        domain: &Domain,
        by_user: Option<&UserId>,
        now_ms: u64,
    ) -> Result<Option<Window>, StoreError> {
        let mut passed = None;
        for window in self.windows(partner, domain, by_user, now_ms) {
            if store.count(&window.key, window.ends_ms).await? > window.limit {
                passed.get_or_insert(window);
            }
        }
        Ok(passed)
    }
}
