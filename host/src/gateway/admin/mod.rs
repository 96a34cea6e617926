//! The admin listener: Prometheus metrics and a health endpoint, for operators only
//! (it listens on loopback by default); and, with the operator's token (a file only the
//! gateway's user can read), the operator's commands on a running gateway: partners
//! and status. Metrics listeners (a cluster's private network) serve the first two only.

mod rulesets;

pub use rulesets::{OPERATOR_HEADER, SIGNATURE_HEADER};

use super::Gateway;
use crate::operator::{self, OperatorError};
use axum::Router;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use botgate_store::{AnyStore, WebsiteIndex, WebsiteRecord};
use sha2::{Digest, Sha256};
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

/// The operator's side of the admin listener: the store, and the token its requests
/// carry (`Authorization: Bearer …`); without a token the operator's routes answer 404.
pub struct OperatorAccess {
    pub store: Arc<AnyStore>,
    pub token: Option<String>,
    /// The keys a pushed component must be signed with to be activated.
    pub trusted_keys: crate::fleet::signing::TrustedKeys,
    /// Told when the operator asks for a configuration reload.
    pub reload: Arc<tokio::sync::Notify>,
}

/// What `/metrics` and `/health` read.
struct Monitoring {
    gateway: Arc<Gateway>,
    health: HealthConfig,
    /// The last index's [`domains_digest`], worked out once per index. The websites whose
    /// records the gateway could not read are left out, as the store's own snapshot
    /// leaves them out: the two compare like for like, and `unreadable_websites` tells.
    digest: std::sync::Mutex<Option<(Arc<WebsiteIndex>, String)>>,
}

impl Monitoring {
    fn new(gateway: Arc<Gateway>, health: HealthConfig) -> Monitoring {
        Monitoring {
            gateway,
            health,
            digest: std::sync::Mutex::new(None),
        }
    }

    fn digest_of(&self, index: &Arc<WebsiteIndex>) -> String {
        let mut last = self.digest.lock().unwrap_or_else(|e| e.into_inner());
        match &*last {
            Some((seen, digest)) if Arc::ptr_eq(seen, index) => digest.clone(),
            _ => {
                let readable = index.websites().filter(|record| {
                    let domain = record.website.domain.as_str();
                    index
                        .unreadable()
                        .binary_search_by(|d| d.as_str().cmp(domain))
                        .is_err()
                });
                let digest = domains_digest(readable.map(|record| record.as_ref()));
                *last = Some((index.clone(), digest.clone()));
                digest
            }
        }
    }
}

struct Admin {
    monitoring: Arc<Monitoring>,
    operator: OperatorAccess,
}

/// `/metrics` (OpenMetrics text), `/health` (JSON), and the operator's routes:
/// `GET /operator/proof` (without the token), `GET /operator/status`, `GET
/// /operator/partners`, `POST /operator/partners/{name}/{create|rotate|revoke}`, `POST
/// /operator/reload`, and the rule sets' (`rulesets.rs`); each for a `Host` that is an
/// address or `localhost` only ([`reached_by_address`]).
pub fn router(gateway: Arc<Gateway>, health: HealthConfig, operator: OperatorAccess) -> Router {
    let monitoring = Arc::new(Monitoring::new(gateway, health));
    Router::new()
        .route("/operator/status", get(status))
        .route("/operator/partners", get(partners))
        .route("/operator/reload", post(reload))
        .route("/operator/proof", get(proof))
        .route("/operator/partners/{name}/{action}", post(partner_action))
        .merge(rulesets::routes())
        .with_state(Arc::new(Admin {
            monitoring: monitoring.clone(),
            operator,
        }))
        .merge(monitoring_routes(monitoring))
        .layer(axum::middleware::from_fn(reached_by_address))
}

/// Refuses (421) a request whose `Host` names anything but an address or `localhost`:
/// this listener is on loopback, and a web page whose name was pointed at this machine
/// (DNS rebinding) sends its own name. Metrics listeners, scraped by name over a private
/// network, take any.
async fn reached_by_address(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let by_address = request.headers().get(header::HOST).is_none_or(|host| {
        let host = host.to_str().ok();
        host.and_then(|host| host.parse::<axum::http::uri::Authority>().ok())
            .is_some_and(|host| {
                let name = host.host().trim_start_matches('[').trim_end_matches(']');
                name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok()
            })
    });
    match by_address {
        true => next.run(request).await,
        false => refused(
            StatusCode::MISDIRECTED_REQUEST,
            "the admin listener answers requests for its address or `localhost` only",
        ),
    }
}

/// `/metrics` and `/health` alone, for listeners other machines reach.
pub fn monitoring_router(gateway: Arc<Gateway>, health: HealthConfig) -> Router {
    monitoring_routes(Arc::new(Monitoring::new(gateway, health)))
}

fn monitoring_routes(monitoring: Arc<Monitoring>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(self::health))
        .with_state(monitoring)
}

async fn metrics(State(monitoring): State<Arc<Monitoring>>) -> Response {
    let gateway = &monitoring.gateway;
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
/// store last confirmed it) with its [`domains_digest`], and each loaded component's
/// version.
async fn health(State(monitoring): State<Arc<Monitoring>>) -> Response {
    let (status, body) = health_body(&monitoring);
    (status, axum::Json(body)).into_response()
}

/// The SHA-256 (hex) of every website's `domain status` line, sorted: equal on two
/// gateways when they list the same domains with the same statuses.
pub fn domains_digest<'a>(websites: impl Iterator<Item = &'a WebsiteRecord>) -> String {
    let mut lines: Vec<(&str, &str)> = websites
        .map(|record| {
            (
                record.website.domain.as_str(),
                record.website.status.as_str(),
            )
        })
        .collect();
    lines.sort_unstable();
    let mut digest = Sha256::new();
    for (domain, status) in lines {
        digest.update(domain.as_bytes());
        digest.update(b" ");
        digest.update(status.as_bytes());
        digest.update(b"\n");
    }
    digest
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn health_body(monitoring: &Monitoring) -> (StatusCode, serde_json::Value) {
    let gateway = &monitoring.gateway;
    let freshness = gateway.websites.freshness();
    let index = gateway.websites.index();
    let websites = index.len();
    let digest = monitoring.digest_of(&index);
    let components = gateway.rulesets.snapshot();
    let classifier = components.get(crate::rules::CLASSIFIER).is_some();
    let store_lost = freshness
        .unreachable_for
        .is_some_and(|lost| lost > monitoring.health.unreachable_after);
    let (status, word) = match (classifier, store_lost) {
        (true, false) => (StatusCode::OK, "ok"),
        (false, _) => (StatusCode::SERVICE_UNAVAILABLE, "no classifier"),
        (true, true) => (StatusCode::SERVICE_UNAVAILABLE, "store unreachable"),
    };
    let versions: serde_json::Map<String, serde_json::Value> = components
        .iter()
        .map(|component| (component.name().to_owned(), component.version().into()))
        .collect();
    let sources: serde_json::Map<String, serde_json::Value> = components
        .iter()
        .map(|c| {
            let source = crate::fleet::follow::source_of(c.origin());
            (c.name().to_owned(), source.into())
        })
        .collect();
    let body = serde_json::json!({
        "status": word,
        "store": {
            "backend": monitoring.health.backend,
            "address": monitoring.health.address,
            "reachable": freshness.unreachable_for.is_none(),
            "unreachable_for_seconds": freshness.unreachable_for.map(|lost| lost.as_secs()),
        },
        "snapshot": {
            "version": freshness.version,
            "age_seconds": freshness.age.as_secs(),
            "websites": websites,
            "domains_digest": digest,
            "unreadable_websites": index.unreadable(),
        },
        "components": versions,
        "component_sources": sources,
        "components_switched_off": components
            .iter()
            .filter(|c| c.is_disabled())
            .map(|c| c.name())
            .collect::<Vec<_>>(),
        "components_fail_closed": components
            .iter()
            .filter(|c| components.fails_closed(c.name()))
            .map(|c| c.name())
            .collect::<Vec<_>>(),
        "components_fail_closed_missing": components
            .missing_fail_closed()
            .iter()
            .map(|name| &**name)
            .collect::<Vec<_>>(),
        "components_not_in_service": gateway
            .rulesets
            .not_in_service()
            .into_iter()
            .map(|n| serde_json::json!({"name": n.name, "origin": n.origin, "reason": n.reason}))
            .collect::<Vec<_>>(),
        "classifier_loaded": classifier,
    });
    (status, body)
}

/// A JSON error for the operator.
fn refused(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (
        status,
        axum::Json(serde_json::json!({ "error": message.to_string() })),
    )
        .into_response()
}

/// An operator's request: from this machine (a token and partner keys never cross the
/// network in clear) with the operator's token. Anything else is refused before the
/// handler runs.
struct Operator;

impl axum::extract::FromRequestParts<Arc<Admin>> for Operator {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        admin: &Arc<Admin>,
    ) -> Result<Operator, Response> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<std::net::SocketAddr>>()
            .map(|ConnectInfo(peer)| crate::gateway::connection::canonical_address(*peer));
        if !peer.is_some_and(|peer| peer.ip().is_loopback()) {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "operator commands are taken from this machine only",
            ));
        }
        let Some(token) = &admin.operator.token else {
            return Err(refused(
                StatusCode::NOT_FOUND,
                "this gateway takes no operator commands (no operator token)",
            ));
        };
        let presented = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .unwrap_or_default();
        // Digests compared, not the token: the comparison's time says nothing of it.
        if Sha256::digest(presented.as_bytes()) != Sha256::digest(token.as_bytes()) {
            return Err(refused(
                StatusCode::UNAUTHORIZED,
                "the operator token is missing or wrong",
            ));
        }
        Ok(Operator)
    }
}

/// `GET /operator/proof?challenge=HEX`: that this gateway holds the operator token,
/// without the token: the challenge's HMAC-SHA256 under it, which the command checks
/// before it sends the token (so a process that took the admin port of a gateway
/// no longer running learns nothing).
async fn proof(
    State(admin): State<Arc<Admin>>,
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    let Some(token) = &admin.operator.token else {
        return refused(
            StatusCode::NOT_FOUND,
            "this gateway takes no operator commands (no operator token)",
        );
    };
    match query.get("challenge") {
        Some(challenge) if (16..=128).contains(&challenge.len()) => {
            axum::Json(serde_json::json!({ "proof": operator_proof(token, challenge) }))
                .into_response()
        }
        _ => refused(
            StatusCode::BAD_REQUEST,
            "`challenge` (16 to 128 characters) is missing",
        ),
    }
}

/// The proof of holding `token` for `challenge`: HMAC-SHA256, in hex.
pub fn operator_proof(token: &str, challenge: &str) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(token.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(challenge.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn operator_error(error: OperatorError) -> Response {
    let status = match &error {
        OperatorError::InvalidName(_) => StatusCode::BAD_REQUEST,
        OperatorError::Exists(_) => StatusCode::CONFLICT,
        OperatorError::NoSuchPartner(_) => StatusCode::NOT_FOUND,
        OperatorError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        OperatorError::Random(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    refused(status, crate::report::Report(&error))
}

/// `/health`'s body and the certificates that expire within 14 days.
async fn status(State(admin): State<Arc<Admin>>, _: Operator) -> Response {
    let (_, mut body) = health_body(&admin.monitoring);
    let now_s = (botgate_webhooks::now_ms() / 1000) as i64;
    let index = admin.monitoring.gateway.websites.index();
    let websites = index.websites().map(|record| record.as_ref());
    let expiring = operator::expiring_certificates(websites, now_s, operator::EXPIRING_WITHIN);
    body["expiring_certificates"] = serde_json::json!(expiring);
    axum::Json(body).into_response()
}

/// Asks the gateway to read its configuration file again (as SIGHUP does).
async fn reload(State(admin): State<Arc<Admin>>, _: Operator) -> Response {
    admin.operator.reload.notify_one();
    (
        StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({ "reload": "asked; the gateway's log says what changed" })),
    )
        .into_response()
}

async fn partners(State(admin): State<Arc<Admin>>, _: Operator) -> Response {
    match operator::partner_names(admin.operator.store.as_ref()).await {
        Ok(names) => axum::Json(serde_json::json!({ "partners": names })).into_response(),
        Err(error) => operator_error(error),
    }
}

async fn partner_action(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path((name, action)): Path<(String, String)>,
) -> Response {
    let store = admin.operator.store.as_ref();
    let key = match action.as_str() {
        "create" => operator::create_partner(store, &name).await.map(Some),
        "rotate" => operator::rotate_partner_key(store, &name).await.map(Some),
        "revoke" => operator::revoke_partner_key(store, &name)
            .await
            .map(|()| None),
        _ => {
            return refused(
                StatusCode::NOT_FOUND,
                "the actions are create, rotate and revoke",
            );
        }
    };
    match key {
        Ok(key) => axum::Json(serde_json::json!({ "partner": name, "key": key })).into_response(),
        Err(error) => operator_error(error),
    }
}
