//! Website-change webhooks on the API side: a create or change sent with `callbackUrl`
//! queues its webhook in the store's outbox when it finishes, and a partner reads and
//! rotates the secret its webhooks are signed with (`/v1.0/webhook-secret`).

use crate::Api;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::keys::new_webhook_secret;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use botgate_model::{PartnerName, WebsiteView};
use botgate_store::{AccountStore, OutboxStore, StoreError};
use serde::Serialize;
use std::sync::Arc;
use utoipa::ToSchema;

/// The secret a partner's webhooks are signed with.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookSecret {
    /// `whsec_` and the base64 of the key: give it to a Standard Webhooks library
    /// to verify `webhook-signature`.
    pub secret: String,
}

/// Queues the webhook of a `callbackUrl` accepted with an earlier request (held while
/// the website was in `setup`), refused only past
/// [`botgate_webhooks::OUTBOX_PER_PARTNER`].
pub async fn queue_accepted(
    api: &Api,
    partner: &PartnerName,
    url: &url::Url,
    website: &WebsiteView,
) -> Result<(), ApiError> {
    enqueue(
        api,
        partner,
        url,
        website,
        botgate_webhooks::OUTBOX_PER_PARTNER,
    )
    .await
}

/// Refuses a request that sends `callbackUrl` before anything of it is written, while
/// [`botgate_webhooks::WAITING_PER_PARTNER`] of the partner's webhooks wait for delivery
/// already: those a website holds in `setup` are queued unasked when its work ends, so
/// they are accepted only while the outbox has room.
pub async fn check_room(api: &Api, partner: &PartnerName) -> Result<(), ApiError> {
    let most = botgate_webhooks::WAITING_PER_PARTNER;
    let waiting = api
        .store
        .waiting_deliveries(partner, most)
        .await
        .map_err(|err| ApiError::from_store(err, "callbackUrl"))?;
    if waiting < most {
        return Ok(());
    }
    Err(callback_refused(format!(
        "{most} of this partner's webhooks wait for delivery already, the most allowed; \
         nothing was changed: send the request without `callbackUrl`, or again once they \
         have gone"
    )))
}

/// A `callbackUrl` refused for a partner's bound (429 on the field, again in a minute).
pub(crate) fn callback_refused(message: String) -> ApiError {
    ApiError {
        retry_after: Some(60),
        ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, message).on("callbackUrl")
    }
}

/// Queues the webhook that tells `partner` at `url` that the change to `website`
/// finished, unless [`botgate_webhooks::WAITING_PER_PARTNER`] of the partner's wait.
pub async fn queue(
    api: &Api,
    partner: &PartnerName,
    url: &url::Url,
    website: &WebsiteView,
) -> Result<(), ApiError> {
    enqueue(
        api,
        partner,
        url,
        website,
        botgate_webhooks::WAITING_PER_PARTNER,
    )
    .await
}

async fn enqueue(
    api: &Api,
    partner: &PartnerName,
    url: &url::Url,
    website: &WebsiteView,
    waiting_at_most: usize,
) -> Result<(), ApiError> {
    match botgate_webhooks::queue(api.store.as_ref(), partner, url, website, waiting_at_most).await
    {
        Ok(_) => Ok(()),
        Err(botgate_webhooks::QueueError::Store(StoreError::Full(_))) => {
            Err(callback_refused(format!(
                "the change is made, but its webhook is not queued: {waiting_at_most} of this \
                 partner's webhooks wait for delivery already; send the change again with \
                 `callbackUrl` once they have gone"
            )))
        }
        Err(botgate_webhooks::QueueError::Store(err)) => {
            Err(ApiError::from_store(err, "callbackUrl"))
        }
        Err(err) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            err.to_string(),
        )),
    }
}

/// The secret the calling partner's webhooks are signed with.
#[utoipa::path(get, path = "/v1.0/webhook-secret", tag = "webhooks",
    responses((status = 200, description = "The signing secret.", body = WebhookSecret)))]
pub async fn get_secret(caller: Caller) -> Result<Json<WebhookSecret>, ApiError> {
    let partner = caller.require_partner("reading the webhook secret")?;
    Ok(Json(WebhookSecret {
        secret: partner.webhook_secret.clone(),
    }))
}

/// Replaces the calling partner's webhook secret with a new one: every webhook sent
/// from now on (retries of earlier ones too) is signed with it.
#[utoipa::path(post, path = "/v1.0/webhook-secret", tag = "webhooks",
    responses((status = 200, description = "The new signing secret.", body = WebhookSecret)))]
pub async fn rotate_secret(
    State(api): State<Arc<Api>>,
    caller: Caller,
) -> Result<Json<WebhookSecret>, ApiError> {
    let partner = caller.require_partner("rotating the webhook secret")?;
    let secret = new_webhook_secret()
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    // Only the secret is written: a key the operator rotated meanwhile stays rotated.
    let rotated = api
        .store
        .update_partner(
            &partner.name,
            botgate_store::PartnerChange::WebhookSecret(secret),
        )
        .await
        .map_err(|e| ApiError::from_store(e, "secret"))?;
    tracing::info!(partner = %rotated.name, "webhook secret rotated");
    Ok(Json(WebhookSecret {
        secret: rotated.webhook_secret,
    }))
}
