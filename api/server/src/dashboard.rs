//! What the website owners' dashboard needs from the API: a user key traded for a
//! short-lived session token (`POST /v1.0/session`), so the key leaves the frame's
//! address at once; and the partner's dashboard settings (`/v1.0/dashboard`): the
//! address to frame, and the panel origins allowed to frame it.

use crate::Api;
use crate::auth::Caller;
use crate::bodies::List;
use crate::error::ApiError;
use crate::keys::{NoRandomness, SESSION_PREFIX, USER_KEY_PREFIX, new_session_token};
use crate::payload::{Payload, RequestBody};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use botgate_model::{FrameOrigin, PartnerName, User, UserId};
use botgate_store::{AccountStore, PartnerChange, SharedState, key_digest};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

/// How long a session token works: the dashboard is reopened from the partner's panel
/// after that.
pub const SESSION_SECONDS: u64 = 2 * 3600;

/// Sessions a user may open a minute.
pub const SESSIONS_PER_MINUTE: u64 = 20;

/// Sessions a user may open in a session's lifetime ([`SESSION_SECONDS`]), and all of a
/// partner's users together: each is kept in the store until it ends, so at most twice
/// these live at once, however many users a partner makes.
pub const SESSIONS_PER_USER_LIFETIME: u64 = 200;
pub const SESSIONS_PER_PARTNER_LIFETIME: u64 = 100_000;

/// A dashboard session.
#[derive(Debug, Serialize, ToSchema)]
pub struct Session {
    /// `bgs_…`: send it as `Authorization: Bearer <token>` instead of the user key.
    pub token: String,
    /// Seconds until it stops working.
    pub expires_in: u64,
}

fn session_key(token: &str) -> String {
    format!("session:{}", key_digest(token))
}

fn unavailable(error: NoRandomness) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
}

/// Trades a user key for a session token with the same rights, for
/// [`SESSION_SECONDS`]. Only a user key opens a session (a session does not extend
/// itself); a deleted user's sessions stop working.
#[utoipa::path(post, path = "/v1.0/session", tag = "dashboard",
    responses((status = 201, description = "A session token for the user.", body = Session)))]
pub async fn open_session(
    State(api): State<Arc<Api>>,
    caller: Caller,
    headers: HeaderMap,
) -> Result<
    (
        StatusCode,
        [(header::HeaderName, &'static str); 1],
        Json<Session>,
    ),
    ApiError,
> {
    let Caller::User(user) = caller else {
        return Err(ApiError::forbidden(
            "a session is opened with a user key (`bgu_…`), for that user's dashboard",
        ));
    };
    if !crate::auth::bearer_of(&headers).is_ok_and(|key| key.starts_with(USER_KEY_PREFIX)) {
        return Err(ApiError::forbidden(
            "a session is opened with the user key itself, not with another session",
        ));
    }
    // Each is kept for two hours: so many a minute per user, and so many in two hours
    // per user and per partner.
    let now = botgate_webhooks::now_ms();
    let lifetime = SESSION_SECONDS * 1000;
    let (p, id) = (user.partner.as_str(), user.id.as_str());
    for (counter, window, most) in [
        (format!("sessions:{p}:{id}"), 60_000, SESSIONS_PER_MINUTE),
        (
            format!("sessions-2h:{p}:{id}"),
            lifetime,
            SESSIONS_PER_USER_LIFETIME,
        ),
        (
            format!("sessions-2h:{p}"),
            lifetime,
            SESSIONS_PER_PARTNER_LIFETIME,
        ),
    ] {
        let ends = (now / window + 1) * window;
        let opened = api
            .store
            .count(&format!("{counter}:{}", now / window), ends)
            .await
            .map_err(|e| ApiError::from_store(e, "Authorization"))?;
        if opened > most {
            return Err(ApiError::too_many_requests(
                (ends - now).div_ceil(1000).max(1),
            ));
        }
    }
    let token = new_session_token().map_err(unavailable)?;
    let value = format!(
        "{}\n{}\n{}",
        user.partner.as_str(),
        user.id,
        key_digest(&user.api_key)
    );
    let until = now + SESSION_SECONDS * 1000;
    api.store
        .put_ephemeral(&session_key(&token), &value, until)
        .await
        .map_err(|e| ApiError::from_store(e, "Authorization"))?;
    Ok((
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        Json(Session {
            token,
            expires_in: SESSION_SECONDS,
        }),
    ))
}

/// The user a session token stands for: `None` when the token is unknown, expired,
/// or its user was deleted or has another key now.
pub async fn session_user(
    api_store: &impl Sessions,
    token: &str,
) -> Result<Option<User>, ApiError> {
    debug_assert!(token.starts_with(SESSION_PREFIX));
    let Some(value) = api_store
        .ephemeral(&session_key(token), botgate_webhooks::now_ms())
        .await
        .map_err(|e| ApiError::from_store(e, "Authorization"))?
    else {
        return Ok(None);
    };
    let mut parts = value.splitn(3, '\n');
    let (Some(partner), Some(id), Some(key_sha256)) = (parts.next(), parts.next(), parts.next())
    else {
        return Ok(None);
    };
    let (Ok(partner), Ok(id)) = (PartnerName::parse(partner), UserId::parse(id)) else {
        return Ok(None);
    };
    let Some(user) = api_store
        .user(&partner, &id)
        .await
        .map_err(|e| ApiError::from_store(e, "Authorization"))?
    else {
        return Ok(None);
    };
    let same_key = key_digest(&user.api_key)
        .as_bytes()
        .ct_eq(key_sha256.as_bytes());
    Ok(bool::from(same_key).then_some(user))
}

/// What [`session_user`] reads: short-lived values and users.
pub trait Sessions: SharedState + AccountStore {}
impl<S: SharedState + AccountStore> Sessions for S {}

/// The partner's dashboard settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct DashboardSettings {
    /// Where the dashboard is served: frame
    /// `{url}/{lang}/website/{domain}/edit?api-key=<the user's api_key>` (also
    /// `statistics` and `events`; `lang` is `en` or `ru`). `null` when the operator has
    /// not set one.
    pub url: Option<String>,
    /// The origins of the partner's control panel: only pages of these origins may
    /// show the dashboard in a frame (`Content-Security-Policy: frame-ancestors`).
    /// Empty: no page may frame it.
    pub frame_origins: Vec<String>,
}

/// A change of the dashboard settings.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct DashboardChange {
    /// Every panel origin, replacing the list: `https://panel.example`, with a port
    /// when it is not the scheme's, or `https://*.panel.example`; at most 16.
    #[schema(value_type = Vec<String>, example = json!(["https://panel.example"]), required = true)]
    pub frame_origins: Option<List>,
}

impl RequestBody for DashboardChange {
    const LISTS: &'static [&'static str] = &["frame_origins"];

    fn known_fields() -> &'static [String] {
        static FIELDS: OnceLock<Vec<String>> = OnceLock::new();
        FIELDS.get_or_init(crate::payload::fields::<Self>)
    }
}

fn settings(api: &Api, origins: &[FrameOrigin]) -> DashboardSettings {
    DashboardSettings {
        url: api.config.dashboard_url.clone(),
        frame_origins: origins.iter().map(|o| o.as_str().to_owned()).collect(),
    }
}

/// The calling partner's dashboard settings.
#[utoipa::path(get, path = "/v1.0/dashboard", tag = "dashboard",
    responses((status = 200, description = "The dashboard's address and panel origins.", body = DashboardSettings)))]
pub async fn get_settings(
    State(api): State<Arc<Api>>,
    caller: Caller,
) -> Result<Json<DashboardSettings>, ApiError> {
    let partner = caller.require_partner("reading the dashboard settings")?;
    Ok(Json(settings(&api, &partner.frame_origins)))
}

/// Sets the panel origins that may frame the calling partner's dashboard.
#[utoipa::path(put, path = "/v1.0/dashboard", tag = "dashboard",
    request_body(content(
        (DashboardChange = "application/json"),
        (DashboardChange = "application/x-www-form-urlencoded"),
    )),
    responses((status = 200, description = "The dashboard settings now.", body = DashboardSettings)))]
pub async fn put_settings(
    State(api): State<Arc<Api>>,
    caller: Caller,
    payload: Payload,
) -> Result<Json<DashboardSettings>, ApiError> {
    let partner = caller.require_partner("changing the dashboard settings")?;
    let change: DashboardChange = payload.parse()?;
    let List(texts) = change.frame_origins.ok_or_else(|| {
        ApiError::bad_request("`frame_origins` is required (an empty list allows no panel)")
            .on("frame_origins")
    })?;
    let origins = FrameOrigin::parse_list(&texts)?;
    let updated = api
        .store
        .update_partner(&partner.name, PartnerChange::FrameOrigins(origins))
        .await
        .map_err(|e| ApiError::from_store(e, "frame_origins"))?;
    tracing::info!(partner = %updated.name, origins = ?updated.frame_origins, "dashboard panel origins set");
    Ok(Json(settings(&api, &updated.frame_origins)))
}
