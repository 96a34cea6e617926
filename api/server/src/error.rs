//! The API's one error body, `{"status":"error","code":…,"message":"…","field":"…"}`,
//! and how every failure (a refused value, a store error, a rejected request) maps to it.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use botgate_model::report::Report;
use botgate_model::{Invalid, InvalidKind};
use botgate_store::StoreError;
use serde::Serialize;
use utoipa::ToSchema;

/// Every failure of the API, as the partner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The request field the problem is about (dotted: `settings.rules.humans`).
    pub field: Option<String>,
    /// Seconds to wait before retrying (429, 503).
    pub retry_after: Option<u64>,
}

/// The JSON body of every error response.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    /// Always `error`.
    #[schema(example = "error")]
    pub status: &'static str,
    /// The HTTP status code, repeated.
    #[schema(example = 422)]
    pub code: u16,
    /// What is wrong, in a sentence a partner can act on.
    pub message: String,
    /// The request field the problem is about, dotted; `null` when it is about no
    /// single field.
    #[schema(example = "settings.rules.humans")]
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    /// The same error, about `field`.
    pub fn on(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn unprocessable(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }

    pub fn too_many_requests(retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after.max(1)),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too many requests with this key; retry after the time in `Retry-After`",
            )
        }
    }

    /// A store error, with the request field that names the thing (`id`, `domain`).
    pub fn from_store(error: StoreError, field: &str) -> Self {
        match error {
            StoreError::Conflict(what) => {
                ApiError::new(StatusCode::CONFLICT, format!("{what} already exists")).on(field)
            }
            StoreError::HostTaken { field, host, clash } => {
                ApiError::new(StatusCode::CONFLICT, format!("`{host}` {clash}")).on(field.as_str())
            }
            StoreError::NotFound(what) => ApiError::not_found(format!("{what} does not exist")),
            StoreError::Stale(what) => ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "a newer version of {what} already exists: another request changed it \
                     at the same time; retry"
                ),
            ),
            StoreError::Backend { .. } => {
                let reason = Report(&error);
                tracing::error!(%reason, "store unavailable");
                ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the store is unavailable; retry shortly",
                    )
                }
            }
            StoreError::AtLimit(what) => ApiError::new(
                StatusCode::FORBIDDEN,
                format!("{what} by this gateway's operator; delete one first"),
            ),
            StoreError::Full(what) => ApiError {
                retry_after: Some(60),
                ..ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("{what} is full; retry later"),
                )
            },
            // Damaged, or written by a later release while a cluster is upgraded: the
            // rest of the store still answers.
            StoreError::Corrupt { key, reason } => {
                tracing::error!(%key, %reason, "unreadable stored record");
                ApiError {
                    retry_after: Some(60),
                    ..ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "a stored record cannot be read by this server (damaged, or written \
                         by a later release during an upgrade); the operator has been told \
                         in the log",
                    )
                }
            }
        }
    }

    /// The body this error is sent with.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            status: "error",
            code: self.status.as_u16(),
            message: self.message.clone(),
            field: self.field.clone(),
        }
    }
}

/// A value the model refused: malformed → 400, over a limit → 413, well-formed but not
/// acceptable → 422; always with the field named.
impl From<Invalid> for ApiError {
    fn from(invalid: Invalid) -> Self {
        let status = match invalid.kind {
            InvalidKind::Malformed => StatusCode::BAD_REQUEST,
            InvalidKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            InvalidKind::Unacceptable => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError::new(status, invalid.message).on(invalid.field)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"botgate\""),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use botgate_store::{HostClash, HostField};

    /// Clients written for GateKeeper recognise a duplicate by "already exists" in a
    /// 409's message: every 409 the store causes says it.
    #[test]
    fn every_conflict_says_already_exists() {
        let mut conflicts = vec![
            StoreError::Conflict("user `ann`".into()),
            StoreError::Stale("website example.com".into()),
        ];
        for clash in [HostClash::Taken, HostClash::Under, HostClash::Above] {
            conflicts.push(StoreError::HostTaken {
                field: HostField::Subdomain,
                host: "www.example.com".into(),
                clash,
            });
        }
        for conflict in conflicts {
            let error = ApiError::from_store(conflict, "domain");
            assert_eq!(error.status, StatusCode::CONFLICT);
            assert!(
                error.message.contains("already exists"),
                "{}",
                error.message
            );
        }
    }
}
