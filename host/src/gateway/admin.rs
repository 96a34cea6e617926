//! The admin listener: Prometheus metrics and a health endpoint, for operators only
//! (it listens on loopback by default).

use super::Gateway;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;
use std::time::Duration;

/// What `/health` says of the store, and when it stops calling the gateway healthy.
#[derive(Debug, Clone)]
pub struct HealthConfig {
    /// `embedded` or `redis`.
    pub backend: &'static str,
    /// The embedded file, or Redis's address and database.
    pub address: String,
    /// A store that has not answered for longer than this makes the gateway unhealthy
    /// (503): its websites and settings may be stale.
    pub unreachable_after: Duration,
}

struct Admin {
    gateway: Arc<Gateway>,
    health: HealthConfig,
}

/// `/metrics` (OpenMetrics text) and `/health` (JSON).
pub fn router(gateway: Arc<Gateway>, health: HealthConfig) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(self::health))
        .with_state(Arc::new(Admin { gateway, health }))
}

async fn metrics(State(admin): State<Arc<Admin>>) -> Response {
    let gateway = &admin.gateway;
    let mut response = gateway.metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

/// Healthy when the classifier is loaded (a gateway without it would pass every request
/// unjudged) and the store has answered within `unreachable_after`. The body says the
/// store's backend and address, the website snapshot's version and age (since the
/// store last confirmed it), and each loaded component's version.
async fn health(State(admin): State<Arc<Admin>>) -> Response {
    let gateway = &admin.gateway;
    let freshness = gateway.websites.freshness();
    let websites = gateway.websites.current().len();
    let components = gateway.rulesets.snapshot();
    let classifier = components.get(crate::rules::CLASSIFIER).is_some();
    let store_lost = freshness
        .unreachable_for
        .is_some_and(|lost| lost > admin.health.unreachable_after);
    let (status, word) = match (classifier, store_lost) {
        (true, false) => (StatusCode::OK, "ok"),
        (false, _) => (StatusCode::SERVICE_UNAVAILABLE, "no classifier"),
        (true, true) => (StatusCode::SERVICE_UNAVAILABLE, "store unreachable"),
    };
    let versions: serde_json::Map<String, serde_json::Value> = components
        .iter()
        .map(|component| (component.name().to_owned(), component.version().into()))
        .collect();
    let body = serde_json::json!({
        "status": word,
        "store": {
            "backend": admin.health.backend,
            "address": admin.health.address,
            "reachable": freshness.unreachable_for.is_none(),
            "unreachable_for_seconds": freshness.unreachable_for.map(|lost| lost.as_secs()),
        },
        "snapshot": {
            "version": freshness.version,
            "age_seconds": freshness.age.as_secs(),
            "websites": websites,
        },
        "components": versions,
        "classifier_loaded": classifier,
    });
    (status, axum::Json(body)).into_response()
}
