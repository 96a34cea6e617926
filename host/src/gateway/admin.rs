//! The admin listener: Prometheus metrics and a health endpoint, for operators only
//! (it listens on loopback by default).

use super::Gateway;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;

/// `/metrics` (OpenMetrics text) and `/health` (JSON).
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .with_state(gateway)
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> Response {
    let mut response = gateway.metrics.encode().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

/// Healthy when the website index is loaded and at least the classifier is: a gateway
/// without its classifier would pass every request unjudged.
async fn health(State(gateway): State<Arc<Gateway>>) -> Response {
    let index = gateway.websites.index();
    let components = gateway.rulesets.snapshot();
    let classifier = components.get(crate::rules::CLASSIFIER).is_some();
    let status = if classifier {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "status": if classifier { "ok" } else { "degraded" },
        "websites": index.len(),
        "store_version": index.version,
        "components": components.len(),
        "classifier_loaded": classifier,
    });
    (status, axum::Json(body)).into_response()
}
