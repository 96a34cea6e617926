//! botgate's management API: the `/v1.0` HTTP endpoints through which partners manage
//! users and websites, with bearer keys, tenant isolation, one JSON error body for every
//! failure, a per-key rate limit, and a generated OpenAPI document.
//!
//! The request phases, in order: routing → authentication and rate limit ([`auth`]) →
//! body ([`payload`]: content type, size limit, encoding rules) → the model's checks →
//! the store. Every failure on the way is an [`error::ApiError`]; whatever axum itself
//! refuses (an unknown path, a wrong method) is rewritten into the same body by
//! [`uniform_errors`], and a panic becomes a 500 with that body, never a dropped
//! connection.

pub mod auth;
pub mod bodies;
pub mod dashboard;
pub mod error;
pub mod issuance;
pub mod keys;
pub mod limit;
pub mod listing;
pub mod openapi;
pub mod payload;
pub mod traffic;
pub mod users;
pub mod webhooks;
pub mod websites;

pub use issuance::IssuanceLimits;

use crate::error::ApiError;
use crate::limit::KeyLimiter;
use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use botgate_model::addresses::OriginPolicy;
use botgate_store::AnyStore;
use http_body_util::BodyExt;
use std::num::NonZeroU32;
use std::sync::Arc;

/// Limits of the API.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The largest request body, in bytes (a certificate bundle and its key fit).
    pub body_limit: usize,
    /// Requests a second per key, sustained.
    pub rate_per_second: NonZeroU32,
    /// Requests per key at once.
    pub rate_burst: NonZeroU32,
    /// Whether a website waits in `setup` until its names resolve to the gateway (the
    /// gateway's provisioner checks and ends the wait); online at once otherwise.
    pub dns_check: bool,
    /// Whether websites with `certs_issuer: acme` get certificates (and wait in `setup`
    /// for them).
    pub acme: bool,
    /// Which addresses a website's `ip` may name (a reload changes it).
    pub origins: LiveOriginPolicy,
    /// How many users and websites one partner may hold.
    pub quotas: PartnerQuotas,
    /// How many certificate issuances (ACME orders) the API starts.
    pub issuance: IssuanceLimits,
    /// Failed key look-ups a minute per client address, sustained; past
    /// `failed_keys_burst`, 429 before any look-up.
    pub failed_keys_per_minute: NonZeroU32,
    pub failed_keys_burst: NonZeroU32,
    /// Host names the gateway serves itself (mounted services, canonical): no website
    /// may claim one.
    pub reserved_hosts: ReservedHosts,
    /// The dashboard's address, handed to partners (`GET /v1.0/dashboard`).
    pub dashboard_url: Option<String>,
    /// The rule components this gateway runs, for the names `settings.rulesets` may
    /// switch on besides the nine.
    pub rule_components: RuleComponents,
}

/// Whether this gateway runs a rule component of a given name, asked when a website
/// switches on a rule set of another name than the specification's nine: a name no
/// component has (run here, or pushed to the store) is refused, so that a misspelt
/// name never leaves a website silently unprotected. The default runs none.
#[derive(Clone, Default)]
pub struct RuleComponents(Option<std::sync::Arc<RunsComponent>>);

/// Whether a component of the name given runs.
type RunsComponent = dyn Fn(&str) -> bool + Send + Sync;

impl RuleComponents {
    /// Asks `runs` of the gateway's components.
    pub fn new(runs: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        RuleComponents(Some(std::sync::Arc::new(runs)))
    }

    /// Whether a component named `name` runs here.
    pub fn runs(&self, name: &str) -> bool {
        self.0.as_ref().is_some_and(|runs| runs(name))
    }
}

impl std::fmt::Debug for RuleComponents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "RuleComponents(the gateway's)"
        } else {
            "RuleComponents(none)"
        })
    }
}

/// The host names no website may claim, shared with the server that mounts them and
/// changed while it runs.
#[derive(Debug, Clone, Default)]
pub struct ReservedHosts(std::sync::Arc<std::sync::RwLock<Vec<String>>>);

impl ReservedHosts {
    /// Reserves exactly `hosts` (canonical names) from now on.
    pub fn set(&self, hosts: Vec<String>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = hosts;
    }

    /// Whether `host` (canonical) is reserved.
    pub fn contains(&self, host: &str) -> bool {
        let hosts = self.0.read().unwrap_or_else(|e| e.into_inner());
        hosts.iter().any(|reserved| reserved == host)
    }
}

/// The origin policy in force, shared with whoever changes it (a reload).
#[derive(Debug, Clone, Default)]
pub struct LiveOriginPolicy(std::sync::Arc<std::sync::RwLock<std::sync::Arc<OriginPolicy>>>);

impl LiveOriginPolicy {
    /// `policy` from now on.
    pub fn set(&self, policy: OriginPolicy) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = std::sync::Arc::new(policy);
    }

    /// The policy in force.
    pub fn get(&self) -> std::sync::Arc<OriginPolicy> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The most users and websites one partner may hold: each takes memory on every
/// gateway (the website index) and room in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartnerQuotas {
    pub users: usize,
    pub websites: usize,
}

impl Default for PartnerQuotas {
    fn default() -> Self {
        PartnerQuotas {
            users: 100_000,
            websites: 100_000,
        }
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            body_limit: 256 * 1024,
            rate_per_second: NonZeroU32::new(50).unwrap_or(NonZeroU32::MIN),
            rate_burst: NonZeroU32::new(100).unwrap_or(NonZeroU32::MIN),
            dns_check: false,
            acme: false,
            origins: LiveOriginPolicy::default(),
            quotas: PartnerQuotas::default(),
            issuance: IssuanceLimits::default(),
            failed_keys_per_minute: NonZeroU32::new(30).unwrap_or(NonZeroU32::MIN),
            failed_keys_burst: NonZeroU32::new(30).unwrap_or(NonZeroU32::MIN),
            reserved_hosts: ReservedHosts::default(),
            dashboard_url: None,
            rule_components: RuleComponents::default(),
        }
    }
}

/// What every handler shares.
pub struct Api {
    pub store: Arc<AnyStore>,
    pub config: ApiConfig,
    limiter: KeyLimiter,
    failed_keys: limit::FailedKeys,
    statistics: traffic::StatisticsCache,
    /// Custom rules' new patterns each partner's callers may have compiled.
    patterns: limit::PatternBudget,
}

impl Api {
    pub fn new(store: Arc<AnyStore>, config: ApiConfig) -> Arc<Api> {
        Arc::new(Api {
            store,
            limiter: KeyLimiter::new(config.rate_per_second, config.rate_burst),
            failed_keys: limit::FailedKeys::new(
                config.failed_keys_per_minute,
                config.failed_keys_burst,
            ),
            statistics: traffic::StatisticsCache::default(),
            patterns: limit::PatternBudget::default(),
            config,
        })
    }
}

/// The API's routes.
pub fn router(api: Arc<Api>) -> Router {
    // Serialised once; each request shares the bytes.
    let document =
        axum::body::Bytes::from(serde_json::to_vec(&openapi::document()).unwrap_or_default());
    Router::new()
        .route(
            "/v1.0/user",
            get(users::list_users).post(users::create_user),
        )
        .route(
            "/v1.0/user/{id}",
            get(users::get_user).delete(users::delete_user),
        )
        .route("/v1.0/user/{id}/key", post(users::replace_key))
        .route(
            "/v1.0/website",
            get(websites::list_websites).post(websites::create_website),
        )
        .route(
            "/v1.0/website/{domain}",
            get(websites::get_website)
                .put(websites::update_website)
                .delete(websites::delete_website),
        )
        .route(
            "/v1.0/webhook-secret",
            get(webhooks::get_secret).post(webhooks::rotate_secret),
        )
        .route(
            "/v1.0/website/{domain}/statistics",
            get(traffic::statistics),
        )
        .route("/v1.0/website/{domain}/events", get(traffic::events))
        .route("/v1.0/session", post(dashboard::open_session))
        .route(
            "/v1.0/dashboard",
            get(dashboard::get_settings).put(dashboard::put_settings),
        )
        .route(
            "/v1.0/openapi.json",
            get(move || {
                let document = document.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], document) }
            }),
        )
        .with_state(api)
        // Its own fallback, so that it stays the fallback when other routers (the
        // dashboard's) are merged beside the API.
        .fallback(|request: Request| async move {
            ApiError::not_found(no_endpoint(request.method(), request.uri().path()))
        })
        .layer(middleware::from_fn(uniform_errors))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                tracing::error!("an API handler panicked");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the request failed inside the gateway; the operator has been told in the log",
                )
                .into_response()
            },
        ))
}

/// What a request for a path the API does not have is told.
fn no_endpoint(method: &axum::http::Method, path: &str) -> String {
    format!(
        "no endpoint `{method} {}`; the API is under /v1.0 (see /v1.0/openapi.json)",
        botgate_model::names::shorten(path)
    )
}

/// Rewrites every error response that is not already the API's JSON error body (axum's
/// own: an unknown route, a method not allowed, a path that does not decode) into it,
/// keeping the status and headers such as `Allow`.
pub async fn uniform_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if status.as_u16() < 400 || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match body.collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    let message = match status {
        StatusCode::NOT_FOUND => no_endpoint(&method, &path),
        StatusCode::METHOD_NOT_ALLOWED => format!(
            "`{method}` is not allowed on this path; the `Allow` header lists the methods that are"
        ),
        _ if !text.trim().is_empty() => text.trim().to_owned(),
        _ => status.canonical_reason().unwrap_or("error").to_owned(),
    };
    let body = serde_json::to_vec(&ApiError::new(status, message).body()).unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(body))
}
