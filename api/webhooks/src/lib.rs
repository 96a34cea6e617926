//! Website-change webhooks: when an asynchronous create or change finishes, the full
//! website object is POSTed to the `callbackUrl` sent with it, signed the Standard
//! Webhooks way (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,…`, an
//! HMAC-SHA256 with the partner's `whsec_` secret).
//!
//! Delivery goes through the store's outbox ([`botgate_store::Delivery`]): a webhook is
//! stored first, then every gateway's [`Outbox::run`] claims due deliveries with a
//! lease, attempts them (a bounded share of the slots per partner), and removes them
//! on a 2xx or reschedules them with exponential backoff and jitter, for at least a
//! day. The same id goes out on every
//! attempt (at-least-once; receivers deduplicate on `webhook-id`). A gateway that dies
//! mid-attempt leaves the delivery to be claimed again when its lease ends.

pub mod address;
pub mod send;

pub use address::AddressPolicy;
pub use send::{AttemptError, Sender};

use botgate_model::report::Report;
use botgate_model::{PartnerName, WebsiteView};
use botgate_store::{ClaimShares, Delivery, Store};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// How webhooks are delivered.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Where they may go.
    pub policy: AddressPolicy,
    /// The longest one attempt may take; a 2xx within it counts.
    pub timeout: Duration,
    /// The wait after the first failed attempt; each later wait doubles, up to
    /// `retry_cap`, and is then jittered down by up to a half.
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// How long after it was queued a delivery is still tried.
    pub give_up_after: Duration,
    /// How often the outbox is looked at.
    pub poll_every: Duration,
    /// Deliveries attempted at once by one gateway.
    pub batch: usize,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            policy: AddressPolicy::default(),
            timeout: Duration::from_secs(15),
            retry_base: Duration::from_secs(5),
            retry_cap: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(25 * 3600),
            poll_every: Duration::from_secs(1),
            batch: 32,
        }
    }
}

pub use botgate_store::now_ms;

/// A new webhook id: `msg_` and 26 random base-32 characters.
pub fn new_id() -> Result<String, getrandom::Error> {
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut random = [0u8; 26];
    getrandom::fill(&mut random)?;
    Ok(std::iter::once("msg_".to_owned())
        .chain(
            random
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(b & 31)]).to_string()),
        )
        .collect())
}

/// The webhook telling `partner` at `url` that a change to `website` finished, due now.
pub fn delivery(
    partner: &PartnerName,
    url: &Url,
    website: &WebsiteView,
) -> Result<Delivery, getrandom::Error> {
    let now = now_ms();
    Ok(Delivery {
        id: new_id()?,
        partner: partner.clone(),
        url: url.to_string(),
        body: serde_json::to_string(website).expect("a website view always serialises"),
        created_ms: now,
        attempts: 0,
        next_attempt_ms: now,
        last_error: None,
    })
}

/// Why a webhook could not be queued.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("no randomness for the webhook id: {0}")]
    Randomness(getrandom::Error),
    #[error(transparent)]
    Store(#[from] botgate_store::StoreError),
}

/// The most webhooks of one partner that may wait for delivery when a change the API
/// finishes at once queues another: a receiver that never answers, or a flood of
/// changes, cannot fill the store or crowd out other partners' webhooks.
pub const WAITING_PER_PARTNER: usize = 1000;

/// The most `callbackUrl`s one partner's websites in `setup` may hold for the end of
/// their work. A `callbackUrl` is accepted only while fewer than
/// [`WAITING_PER_PARTNER`] of its partner's webhooks wait, and the held ones are queued
/// when the work ends, so one partner's outbox stays within [`OUTBOX_PER_PARTNER`].
pub const HELD_PER_PARTNER: usize = 1000;

/// The most webhooks of one partner the outbox holds: a held `callbackUrl` released
/// past it is not queued (never reached while the API refuses `callbackUrl`s at
/// [`WAITING_PER_PARTNER`], but for requests racing each other).
pub const OUTBOX_PER_PARTNER: usize = WAITING_PER_PARTNER + HELD_PER_PARTNER;

/// The most attempts of one partner's webhooks one gateway makes at once, of its
/// `batch`: a receiver that never answers ties up at most these.
pub const IN_FLIGHT_PER_PARTNER: usize = 8;

/// The attempts one gateway has under way (whose; at most `batch`).
#[derive(Default)]
struct Slots {
    attempts: tokio::task::JoinSet<()>,
    started: HashMap<tokio::task::Id, PartnerName>,
}

impl Slots {
    fn start(&mut self, partner: PartnerName, attempt: impl Future<Output = ()> + Send + 'static) {
        let id = self.attempts.spawn(attempt).id();
        self.started.insert(id, partner);
    }

    /// The share of the next claim: what each partner holds now.
    fn shares(&self) -> ClaimShares {
        let mut held = HashMap::new();
        for partner in self.started.values() {
            *held.entry(partner.clone()).or_insert(0) += 1;
        }
        ClaimShares {
            per_partner: IN_FLIGHT_PER_PARTNER,
            held,
        }
    }

    /// Waits for an attempt to end and frees its slot; `None` when none runs.
    async fn next_ended(&mut self) -> Option<()> {
        let id = match self.attempts.join_next_with_id().await? {
            Ok((id, ())) => id,
            Err(error) => error.id(),
        };
        self.started.remove(&id);
        Some(())
    }
}

/// Queues the webhook telling `partner` at `url` that a change to `website` finished,
/// unless `waiting_at_most` of the partner's wait already ([`StoreError::Full`]).
///
/// [`StoreError::Full`]: botgate_store::StoreError::Full
pub async fn queue<S: Store>(
    store: &S,
    partner: &PartnerName,
    url: &Url,
    website: &WebsiteView,
    waiting_at_most: usize,
) -> Result<Delivery, QueueError> {
    let delivery = delivery(partner, url, website).map_err(QueueError::Randomness)?;
    store.enqueue_delivery(&delivery, waiting_at_most).await?;
    tracing::info!(id = %delivery.id, %partner, url = %logged(&delivery.url), "webhook queued");
    Ok(delivery)
}

/// The longest reason for a failed attempt that is logged and stored.
const MAX_REASON_BYTES: usize = 512;

/// A `callbackUrl` as logs show it: without a user name, password or query, which may
/// hold the receiver's secrets.
pub fn logged(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) => {
            let query = parsed.query().is_some();
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            let mut shown = botgate_model::names::shorten(parsed.as_str());
            if query {
                shown.push_str("?…");
            }
            shown
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// The `webhook-signature` value for one attempt.
pub fn signature(
    secret: &str,
    id: &str,
    timestamp: i64,
    body: &str,
) -> Result<String, standardwebhooks::WebhookError> {
    standardwebhooks::Webhook::new(secret)?.sign(id, timestamp, body.as_bytes())
}

/// The wait before attempt `attempts + 1`, with jitter: between half of and the whole
/// of `base · 2^(attempts − 1)`, capped.
pub fn backoff(config: &WebhookConfig, attempts: u32, random: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(30);
    let full = config
        .retry_base
        .saturating_mul(1u32 << exponent)
        .min(config.retry_cap);
    let half = full / 2;
    half + half.mul_f64(f64::from(random) / f64::from(u32::MAX))
}

/// The outbox's deliverer on one gateway.
pub struct Outbox<S> {
    store: Arc<S>,
    config: WebhookConfig,
    sender: Sender,
}

impl<S: Store> Outbox<S> {
    pub fn new(store: Arc<S>, config: WebhookConfig) -> Outbox<S> {
        let sender = Sender::new(config.policy.clone(), config.timeout);
        Outbox {
            store,
            config,
            sender,
        }
    }

    /// Delivers due webhooks until `stop` resolves, then waits for the attempts under
    /// way (each bounded by the timeout), so that none is cut off and sent again.
    ///
    /// Up to `batch` attempts run at once, and a slot is filled again at the next look
    /// (every `poll_every`), not when a whole batch has ended. One partner holds at
    /// most [`IN_FLIGHT_PER_PARTNER`] of them, and a free slot goes to the partner with
    /// something due that holds fewest ([`ClaimShares`]): a partner whose receiver is
    /// slow or never answers, or with a long backlog, delays its own webhooks; another
    /// partner's wait at most until one slot is free (one attempt's timeout).
    pub async fn run(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut slots = Slots::default();
        loop {
            if let Err(err) = self.start_due(&mut slots).await {
                tracing::warn!(error = %Report(&err), "webhook outbox: cannot read the store");
            }
            let next_look = tokio::time::sleep(self.config.poll_every);
            tokio::pin!(next_look);
            loop {
                tokio::select! {
                    _ = &mut stop => {
                        while slots.next_ended().await.is_some() {}
                        return;
                    }
                    _ = &mut next_look => break,
                    Some(()) = slots.next_ended() => {}
                }
            }
        }
    }

    /// Claims as many due deliveries as there are free slots, shared among partners by
    /// what each holds already, and starts them.
    async fn start_due(
        self: &Arc<Self>,
        slots: &mut Slots,
    ) -> Result<(), botgate_store::StoreError> {
        let free = self.config.batch.saturating_sub(slots.attempts.len());
        if free == 0 {
            return Ok(());
        }
        let lease = self.config.timeout + Duration::from_secs(30);
        let now = now_ms();
        let claimed = self
            .store
            .claim_deliveries(now, now + lease.as_millis() as u64, free, &slots.shares())
            .await?;
        for delivery in claimed {
            let outbox = self.clone();
            slots.start(delivery.partner.clone(), async move {
                outbox.attempt(delivery).await
            });
        }
        Ok(())
    }

    async fn attempt(&self, mut delivery: Delivery) {
        let outcome = self.send(&delivery).await;
        delivery.attempts += 1;
        let stored = match outcome {
            Ok(status) => {
                tracing::info!(id = %delivery.id, url = %logged(&delivery.url), status, attempts = delivery.attempts, "webhook delivered");
                self.store.finish_delivery(&delivery.id).await
            }
            Err(mut reason) => {
                // What a receiver sent shows in it: kept to a bound in logs and the store.
                if reason.len() > MAX_REASON_BYTES {
                    reason.truncate(reason.floor_char_boundary(MAX_REASON_BYTES));
                    reason.push('…');
                }
                let mut random = [0u8; 4];
                let _ = getrandom::fill(&mut random);
                let wait = backoff(&self.config, delivery.attempts, u32::from_le_bytes(random));
                let next = now_ms() + wait.as_millis() as u64;
                let deadline = delivery.created_ms + self.config.give_up_after.as_millis() as u64;
                if next > deadline {
                    tracing::warn!(id = %delivery.id, url = %logged(&delivery.url), attempts = delivery.attempts, %reason, "webhook given up");
                    self.store.finish_delivery(&delivery.id).await
                } else {
                    tracing::info!(id = %delivery.id, url = %logged(&delivery.url), attempts = delivery.attempts, %reason, retry_in_ms = wait.as_millis() as u64, "webhook not delivered; retrying later");
                    delivery.next_attempt_ms = next;
                    delivery.last_error = Some(reason);
                    self.store.retry_delivery(&delivery).await
                }
            }
        };
        if let Err(err) = stored {
            // The lease runs out and the delivery is attempted again: at least once.
            tracing::warn!(id = %delivery.id, error = %Report(&err), "webhook outcome not stored");
        }
    }

    async fn send(&self, delivery: &Delivery) -> Result<u16, String> {
        let url = Url::parse(&delivery.url).map_err(|err| format!("bad URL: {err}"))?;
        let partner = self
            .store
            .partner(&delivery.partner)
            .await
            .map_err(|err| format!("store: {}", Report(&err)))?
            .ok_or_else(|| format!("partner {} is gone", delivery.partner))?;
        let timestamp = (now_ms() / 1000) as i64;
        let signed = signature(
            &partner.webhook_secret,
            &delivery.id,
            timestamp,
            &delivery.body,
        )
        .map_err(|err| format!("cannot sign: {err}"))?;
        let headers = [
            ("webhook-id", delivery.id.clone()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signed),
        ];
        self.sender
            .post(&url, &headers, Bytes::from(delivery.body.clone()))
            .await
            .map_err(|err| err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_show_no_credentials_of_a_callback_url() {
        assert_eq!(
            logged("https://user:secret@hooks.example:8443/in?token=t0k#x"),
            "https://hooks.example:8443/in?…"
        );
        assert_eq!(logged("http://hooks.example/a"), "http://hooks.example/a");
        assert_eq!(logged("::"), "(not a URL)");
    }

    #[test]
    fn signatures_match_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let signed = signature(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn backoff_doubles_with_jitter_and_stops_at_the_cap() {
        let config = WebhookConfig::default();
        assert_eq!(backoff(&config, 1, u32::MAX), Duration::from_secs(5));
        assert_eq!(backoff(&config, 1, 0), Duration::from_millis(2500));
        assert_eq!(backoff(&config, 4, u32::MAX), Duration::from_secs(40));
        assert_eq!(backoff(&config, 40, u32::MAX), Duration::from_secs(3600));
        // A day of retries at the cap is about two dozen attempts past the first ones.
        let mut waited = Duration::ZERO;
        let mut attempts = 0;
        while waited < Duration::from_secs(24 * 3600) {
            attempts += 1;
            waited += backoff(&config, attempts, u32::MAX / 2);
        }
        assert!((25..60).contains(&attempts), "{attempts}");
    }

    #[test]
    fn ids_are_distinct_and_well_formed() {
        let (a, b) = (new_id().unwrap(), new_id().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with("msg_") && a.len() == 30, "{a}");
    }
}
