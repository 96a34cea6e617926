//! `/v1.0/user`: create, retrieve, list and delete a partner's users, and replace a
//! user's key.

use crate::Api;
use crate::auth::Caller;
use crate::bodies::{List, UserCreate, UserDeleted};
use crate::error::ApiError;
use crate::keys::new_user_key;
use crate::listing::{ListQuery, UserPage};
use crate::payload::Payload;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use botgate_model::{User, UserId, UserView};
use botgate_store::AccountStore;
use std::sync::Arc;

fn user_id(id: &str) -> Result<UserId, ApiError> {
    UserId::parse(id).map_err(|invalid| ApiError::from(invalid.at("id")))
}

/// A new user key (503 when the system has no randomness to give).
fn fresh_key() -> Result<String, ApiError> {
    new_user_key().map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))
}

fn no_such_user(id: &UserId) -> ApiError {
    ApiError::not_found(format!("no user `{id}`")).on("id")
}

/// Creates a user of the calling partner, with a new key.
#[utoipa::path(post, path = "/v1.0/user", tag = "users",
    request_body(content(
        (UserCreate = "application/json"),
        (UserCreate = "application/x-www-form-urlencoded"),
    )),
    responses((status = 201, description = "The user, with its new key.", body = UserView)))]
pub async fn create_user(
    State(api): State<Arc<Api>>,
    caller: Caller,
    payload: Payload,
) -> Result<(StatusCode, Json<UserView>), ApiError> {
    let partner = caller.require_partner("creating users")?;
    let request: UserCreate = payload.parse()?;
    let id = request
        .id
        .ok_or_else(|| ApiError::bad_request("`id` is required").on("id"))?;
    let key = fresh_key()?;
    let user = User::create(
        &id,
        partner.name.clone(),
        key,
        request.tag.map(|List(tags)| tags).unwrap_or_default(),
    )?;
    api.store
        .create_user_within(&user, api.config.quotas.users)
        .await
        .map_err(|e| ApiError::from_store(e, "id"))?;
    Ok((StatusCode::CREATED, Json(user.view())))
}

/// Retrieves one of the partner's users, with its key.
#[utoipa::path(get, path = "/v1.0/user/{id}", tag = "users",
    params(("id" = String, Path, description = "The user's id.")),
    responses((status = 200, description = "The user.", body = UserView)))]
pub async fn get_user(
    State(api): State<Arc<Api>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<UserView>, ApiError> {
    let partner = caller.require_partner("reading users")?;
    let id = user_id(&id)?;
    let user = api
        .store
        .user(&partner.name, &id)
        .await
        .map_err(|e| ApiError::from_store(e, "id"))?
        .ok_or_else(|| no_such_user(&id))?;
    Ok(Json(user.view()))
}

/// Gives one of the partner's users a new key: the old key, and the dashboard sessions
/// opened with it, stop working at once (a key that leaked, say). The user's websites
/// are untouched.
#[utoipa::path(post, path = "/v1.0/user/{id}/key", tag = "users",
    params(("id" = String, Path, description = "The user's id.")),
    responses((status = 200, description = "The user, with its new key.", body = UserView)))]
pub async fn replace_key(
    State(api): State<Arc<Api>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<UserView>, ApiError> {
    let partner = caller.require_partner("replacing a user's key")?;
    let id = user_id(&id)?;
    let key = fresh_key()?;
    let user = api
        .store
        .replace_user_key(&partner.name, &id, &key)
        .await
        .map_err(|e| match e {
            botgate_store::StoreError::NotFound(_) => no_such_user(&id),
            e => ApiError::from_store(e, "id"),
        })?;
    tracing::info!(partner = %partner.name, user = %id, "user key replaced");
    Ok(Json(user.view()))
}

/// Lists the partner's users in id order, a page at a time.
#[utoipa::path(get, path = "/v1.0/user", tag = "users",
    params(("after" = Option<String>, Query, description = "The `next` of the previous page."),
           ("limit" = Option<usize>, Query, minimum = 1, maximum = 1000, description = "Users per page (100 when not sent).")),
    responses((status = 200, description = "A page of users.", body = UserPage)))]
pub async fn list_users(
    State(api): State<Arc<Api>>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<UserPage>, ApiError> {
    let partner = caller.require_partner("listing users")?;
    let query = ListQuery::parse(query.as_deref(), false)?;
    let page = api
        .store
        .users(&partner.name, query.after.as_deref(), query.limit())
        .await
        .map_err(|e| ApiError::from_store(e, "after"))?;
    Ok(Json(UserPage {
        items: page.items.iter().map(User::view).collect(),
        next: page.next,
    }))
}

/// Deletes one of the partner's users and every website of that user.
#[utoipa::path(delete, path = "/v1.0/user/{id}", tag = "users",
    params(("id" = String, Path, description = "The user's id.")),
    responses((status = 200, description = "The user is deleted, with these websites.", body = UserDeleted)))]
pub async fn delete_user(
    State(api): State<Arc<Api>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<UserDeleted>, ApiError> {
    let partner = caller.require_partner("deleting users")?;
    let id = user_id(&id)?;
    let domains = api
        .store
        .delete_user(&partner.name, &id)
        .await
        .map_err(|e| match e {
            botgate_store::StoreError::NotFound(_) => no_such_user(&id),
            e => ApiError::from_store(e, "id"),
        })?;
    Ok(Json(UserDeleted {
        id: id.as_str().to_owned(),
        deleted_websites: domains.iter().map(|d| d.as_str().to_owned()).collect(),
    }))
}
