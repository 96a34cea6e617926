//! The operator's rule-set routes on the admin listener: push a component into the
//! store, list what is pushed and what this gateway runs, activate, roll back, remove.

use super::{Admin, Operator, refused};
use crate::fleet::{self, FleetError};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use botgate_store::rulesets::{FailurePolicy, MAX_COMPONENT_BYTES, Pushed};
use std::sync::Arc;

/// The header naming who asks (the operator's user and machine, as the command saw
/// them), kept with what they changed.
pub const OPERATOR_HEADER: &str = "x-botgate-operator";
/// The header carrying a pushed component's detached signature (base64).
pub const SIGNATURE_HEADER: &str = "x-botgate-signature";

/// `GET /operator/rulesets`, `POST /operator/rulesets/{name}` (the component's bytes;
/// 201 stored, 200 stored already), `POST …/{name}/activate/{version}`, `POST
/// …/{name}/rollback`, `POST …/{name}/failure/{open|closed}`, `POST
/// …/{name}/shadow/{version}/{percent}`, `DELETE …/{name}/shadow`, `GET
/// …/{name}/diff[?version=V]`, `DELETE …/{name}/versions/{version}`.
pub(super) fn routes() -> Router<Arc<Admin>> {
    Router::new()
        .route("/operator/rulesets", get(list))
        .route(
            "/operator/rulesets/{name}",
            post(push).layer(DefaultBodyLimit::max(MAX_COMPONENT_BYTES + 1)),
        )
        .route(
            "/operator/rulesets/{name}/activate/{version}",
            post(activate),
        )
        .route("/operator/rulesets/{name}/rollback", post(rollback))
        .route("/operator/rulesets/{name}/failure/{policy}", post(failure))
        .route(
            "/operator/rulesets/{name}/shadow/{version}/{percent}",
            post(shadow),
        )
        .route("/operator/rulesets/{name}/shadow", delete(unshadow))
        .route("/operator/rulesets/{name}/diff", get(diff))
        .route(
            "/operator/rulesets/{name}/versions/{version}",
            delete(remove),
        )
}

fn fleet_error(error: FleetError) -> Response {
    let status = match &error {
        FleetError::Invalid(_) | FleetError::Refused(_) | FleetError::Signing(_) => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        FleetError::NoSuchVersion { .. } => StatusCode::NOT_FOUND,
        FleetError::VersionTaken { .. }
        | FleetError::NothingToRollBack(_)
        | FleetError::InService { .. }
        | FleetError::Concurrent(_) => StatusCode::CONFLICT,
        FleetError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    refused(status, crate::report::Report(&error))
}

/// The JSON of what an operation returned, or its error.
fn answer<T: serde::Serialize>(done: Result<T, FleetError>) -> Response {
    match done {
        Ok(value) => axum::Json(value).into_response(),
        Err(error) => fleet_error(error),
    }
}

fn operator_of(headers: &HeaderMap) -> String {
    headers
        .get(OPERATOR_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(|who| who.chars().filter(|c| !c.is_control()).take(128).collect())
        .unwrap_or_else(|| "operator".to_owned())
}

async fn list(State(admin): State<Arc<Admin>>, _: Operator) -> Response {
    let listing = match fleet::list(admin.operator.store.as_ref()).await {
        Ok(listing) => listing,
        Err(error) => return fleet_error(error),
    };
    let running: serde_json::Map<String, serde_json::Value> = admin
        .monitoring
        .gateway
        .rulesets
        .snapshot()
        .iter()
        .map(|c| {
            let entry = serde_json::json!({"version": c.version(), "origin": c.origin()});
            (c.name().to_owned(), entry)
        })
        .collect();
    axum::Json(serde_json::json!({
        "pushed": listing.pushed,
        "states": listing.states,
        "running": running,
    }))
    .into_response()
}

async fn push(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let signature = headers
        .get(SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let pushed = fleet::push(
        admin.operator.store.as_ref(),
        &admin.monitoring.gateway.rulesets,
        &name,
        body.to_vec(),
        &operator_of(&headers),
        signature,
        &admin.operator.trusted_keys,
    )
    .await;
    match pushed {
        Ok((record, outcome)) => {
            let (status, already) = match outcome {
                Pushed::Stored => (StatusCode::CREATED, false),
                Pushed::AlreadyStored => (StatusCode::OK, true),
            };
            let body = serde_json::json!({"pushed": record, "already_stored": already});
            (status, axum::Json(body)).into_response()
        }
        Err(error) => fleet_error(error),
    }
}

async fn activate(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let store = admin.operator.store.as_ref();
    let (by, trusted) = (operator_of(&headers), &admin.operator.trusted_keys);
    answer(fleet::activate(store, &name, &version, &by, trusted).await)
}

async fn rollback(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let store = admin.operator.store.as_ref();
    let (by, trusted) = (operator_of(&headers), &admin.operator.trusted_keys);
    answer(fleet::rollback(store, &name, &by, trusted).await)
}

async fn remove(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path((name, version)): Path<(String, String)>,
) -> Response {
    match fleet::remove(admin.operator.store.as_ref(), &name, &version).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => fleet_error(error),
    }
}

async fn failure(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path((name, policy)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let policy: FailurePolicy = match policy.parse() {
        Ok(policy) => policy,
        Err(why) => return refused(StatusCode::NOT_FOUND, why),
    };
    let store = admin.operator.store.as_ref();
    answer(fleet::set_failure_policy(store, &name, policy, &operator_of(&headers)).await)
}

async fn shadow(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path((name, version, percent)): Path<(String, String, u8)>,
    headers: HeaderMap,
) -> Response {
    let store = admin.operator.store.as_ref();
    let (by, trusted) = (operator_of(&headers), &admin.operator.trusted_keys);
    answer(fleet::shadow(store, &name, &version, percent, &by, trusted).await)
}

async fn unshadow(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let store = admin.operator.store.as_ref();
    answer(fleet::unshadow(store, &name, &operator_of(&headers)).await)
}

#[derive(serde::Deserialize)]
struct DiffQuery {
    version: Option<String>,
}

async fn diff(
    State(admin): State<Arc<Admin>>,
    _: Operator,
    Path(name): Path<String>,
    axum::extract::Query(query): axum::extract::Query<DiffQuery>,
) -> Response {
    let store = admin.operator.store.as_ref();
    match fleet::diff(store, &name, query.version.as_deref()).await {
        Ok((version, results)) => {
            axum::Json(serde_json::json!({"version": version, "results": results})).into_response()
        }
        Err(error) => fleet_error(error),
    }
}
