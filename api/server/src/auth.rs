//! Who is calling: the `Authorization: Bearer` key resolved to a partner or a user (a
//! user key, or a dashboard session opened with one),
//! compared in constant time, and held to the per-key rate limit.

use crate::Api;
use crate::error::ApiError;
use crate::keys::{PARTNER_KEY_PREFIX, SESSION_PREFIX, USER_KEY_PREFIX};
use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use botgate_model::{PartnerName, User};
use botgate_store::{PartnerRecord, Store, key_digest};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A partner (a hosting provider): its users and their websites.
    Partner(PartnerRecord),
    /// A user: its own websites, to read and to change their settings.
    User(User),
}

impl Caller {
    /// The partner the caller is or belongs to.
    pub fn partner(&self) -> &PartnerName {
        match self {
            Caller::Partner(partner) => &partner.name,
            Caller::User(user) => &user.partner,
        }
    }

    /// The partner, or 403 for a user key: `what` says which call needs the partner.
    pub fn require_partner(&self, what: &str) -> Result<&PartnerRecord, ApiError> {
        match self {
            Caller::Partner(partner) => Ok(partner),
            Caller::User(_) => Err(ApiError::forbidden(format!(
                "{what} needs the partner's key; a user key reads its own websites and \
                 changes their settings"
            ))),
        }
    }

    /// Whether the caller may see `website` of `owner` (a partner: its own websites; a
    /// user: its own). A website the caller may not see is answered like one that
    /// does not exist.
    pub fn reaches(&self, owner: botgate_store::Owner<'_>) -> bool {
        match self {
            Caller::Partner(partner) => &partner.name == owner.partner,
            Caller::User(user) => &user.partner == owner.partner && &user.id == owner.user,
        }
    }

    /// The rate-limit bucket of the caller.
    fn bucket(&self) -> String {
        match self {
            Caller::Partner(partner) => format!("partner\n{}", partner.name.as_str()),
            Caller::User(user) => format!("user\n{}\n{}", user.partner.as_str(), user.id),
        }
    }
}

/// The key of an `Authorization: Bearer <key>` header.
pub fn bearer_of(headers: &axum::http::HeaderMap) -> Result<&str, ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| {
            ApiError::unauthorized("send the API key as `Authorization: Bearer <key>`")
                .on("Authorization")
        })?
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
    let (scheme, key) = value.trim().split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") || key.trim().is_empty() {
        return Err(
            ApiError::unauthorized("the Authorization header must be `Bearer <key>`")
                .on("Authorization"),
        );
    }
    Ok(key.trim())
}

fn unknown_key() -> ApiError {
    ApiError::unauthorized("the API key is not valid").on("Authorization")
}

impl Caller {
    /// Resolves a presented key: looked up by its SHA-256, then compared in constant
    /// time with what the lookup found.
    pub async fn authenticate(store: &impl Store, key: &str) -> Result<Caller, ApiError> {
        if key.starts_with(PARTNER_KEY_PREFIX) {
            let digest = key_digest(key);
            let partner = store
                .partner_by_key(&digest)
                .await
                .map_err(|e| ApiError::from_store(e, "Authorization"))?
                .ok_or_else(unknown_key)?;
            if bool::from(partner.key_sha256.as_bytes().ct_eq(digest.as_bytes())) {
                return Ok(Caller::Partner(partner));
            }
        } else if key.starts_with(USER_KEY_PREFIX) {
            let user = store
                .user_by_key(key)
                .await
                .map_err(|e| ApiError::from_store(e, "Authorization"))?
                .ok_or_else(unknown_key)?;
            if bool::from(user.api_key.as_bytes().ct_eq(key.as_bytes())) {
                return Ok(Caller::User(user));
            }
        } else if key.starts_with(SESSION_PREFIX) {
            if let Some(user) = crate::dashboard::session_user(store, key).await? {
                return Ok(Caller::User(user));
            }
            return Err(ApiError::unauthorized(
                "the dashboard session has ended or is not valid; open the dashboard again",
            )
            .on("Authorization"));
        }
        Err(unknown_key())
    }
}

impl FromRequestParts<Arc<Api>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Arc<Api>) -> Result<Self, ApiError> {
        let key = bearer_of(&parts.headers)?;
        // The client's address, when the server was started with it (see `serve`).
        let client = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| info.0.ip());
        let digest = key_digest(key);
        if let Some(client) = client {
            api.failed_keys.check(client, &digest)?;
        }
        let caller = match Caller::authenticate(api.store.as_ref(), key).await {
            Ok(caller) => {
                api.failed_keys.succeeded(&digest);
                caller
            }
            Err(refused) => {
                if let Some(client) = client
                    && refused.status == axum::http::StatusCode::UNAUTHORIZED
                {
                    api.failed_keys.failed(client);
                }
                return Err(refused);
            }
        };
        let users_of = match &caller {
            Caller::User(user) => Some(user.partner.as_str()),
            Caller::Partner(_) => None,
        };
        api.limiter.check(&caller.bucket(), users_of)?;
        Ok(caller)
    }
}
