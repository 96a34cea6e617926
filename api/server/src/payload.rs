//! Request bodies: `application/json` or `application/x-www-form-urlencoded`, read
//! within the size limit into the typed bodies of [`crate::bodies`], whose derived
//! schemas are the OpenAPI document's. The encoding rules are the specification's:
//! forms send lists comma-separated (or as repeated keys) and no `settings` or
//! `certificate`; in JSON a list may also be an array, and `null` is a field not sent.

use crate::Api;
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::sync::Arc;
use utoipa::openapi::{RefOr, Schema};

/// Fields the gateway sets; sending them back (as a GET's result would) is refused
/// unless they are `null`.
const READ_ONLY_FIELDS: [&str; 1] = ["status_reason"];
/// Fields only JSON can carry.
const JSON_ONLY_FIELDS: [&str; 2] = ["settings", "certificate"];

/// A typed request body: its fields are its schema's properties.
pub trait RequestBody: DeserializeOwned + utoipa::ToSchema {
    /// The list fields: repeated in a form, their values join as one list.
    const LISTS: &'static [&'static str];

    /// [`fields`] of this body, made once (its schema is built only then).
    fn known_fields() -> &'static [String];
}

/// A request body, parsed by its content type.
#[derive(Debug)]
pub enum Payload {
    Json(Map<String, Value>),
    Form(Vec<(String, String)>),
}

fn media_type(request: &Request) -> Option<String> {
    let value = request.headers().get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(value.split(';').next()?.trim().to_ascii_lowercase())
}

async fn read_limited(body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => Err(
            ApiError::too_large(format!("the request body is larger than {limit} bytes"))
                .on("body"),
        ),
        Err(error) => Err(ApiError::bad_request(format!(
            "the request body could not be read: {error}"
        ))
        .on("body")),
    }
}

impl FromRequest<Arc<Api>> for Payload {
    type Rejection = ApiError;

    async fn from_request(request: Request, api: &Arc<Api>) -> Result<Self, ApiError> {
        let media_type = media_type(&request);
        let is_json =
            matches!(&media_type, Some(t) if t == "application/json" || t.ends_with("+json"));
        let is_form = media_type.as_deref() == Some("application/x-www-form-urlencoded");
        if !is_json && !is_form {
            return Err(ApiError::unsupported_media_type(format!(
                "send the body as `application/json` or `application/x-www-form-urlencoded`{}",
                media_type
                    .map(|t| format!(", not `{t}`"))
                    .unwrap_or_default()
            ))
            .on("Content-Type"));
        }
        let bytes = read_limited(request.into_body(), api.config.body_limit).await?;
        if is_form {
            return Ok(Payload::Form(
                form_urlencoded::parse(&bytes).into_owned().collect(),
            ));
        }
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(object)) => Ok(Payload::Json(object)),
            Ok(_) => Err(ApiError::bad_request("the JSON body must be an object").on("body")),
            Err(error) => Err(ApiError::bad_request(format!(
                "the body is not valid JSON: {error}"
            ))
            .on("body")),
        }
    }
}

/// The fields a body of `T` takes: its schema's properties, as the document shows them.
pub fn fields<T: utoipa::ToSchema>() -> Vec<String> {
    match T::schema() {
        RefOr::T(Schema::Object(object)) => object.properties.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

fn unknown_field(field: &str, known: &[String]) -> ApiError {
    if READ_ONLY_FIELDS.contains(&field) {
        return ApiError::unprocessable(format!("`{field}` is set by the gateway, not sent"))
            .on(field);
    }
    ApiError::unprocessable(format!(
        "unknown field `{}`; the fields are {}",
        botgate_model::names::shorten(field),
        known
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .on(botgate_model::names::shorten(field))
}

/// Whether a form key carries what only JSON may carry.
fn needs_json(key: &str) -> bool {
    JSON_ONLY_FIELDS.iter().any(|json_only| {
        key == *json_only
            || key
                .strip_prefix(json_only)
                .is_some_and(|rest| rest.starts_with('[') || rest.starts_with('.'))
    })
}

/// A form's pairs as a JSON object of strings, refusing repeats of single-valued
/// fields and joining repeated lists.
fn form_object(
    pairs: Vec<(String, String)>,
    lists: &[&str],
) -> Result<Map<String, Value>, ApiError> {
    let mut object = Map::new();
    for (key, value) in pairs {
        if needs_json(&key) {
            return Err(ApiError::unsupported_media_type(
                "rules management needs `Content-Type: application/json`: send `settings` \
                 and `certificate` as JSON objects",
            )
            .on(botgate_model::names::shorten(&key)));
        }
        match object.get_mut(&key) {
            Some(Value::String(existing)) if lists.contains(&key.as_str()) => {
                existing.push(',');
                existing.push_str(&value);
            }
            Some(_) => {
                return Err(
                    ApiError::bad_request(format!("`{key}` was sent more than once")).on(key),
                );
            }
            None => {
                object.insert(key, Value::String(value));
            }
        }
    }
    Ok(object)
}

impl Payload {
    /// The body as a `T`: unknown and read-only fields refused by name, then every
    /// value read by `T`'s types, an error naming the value's path (`ip[0]`).
    pub fn parse<T: RequestBody>(self) -> Result<T, ApiError> {
        let object = match self {
            Payload::Form(pairs) => form_object(pairs, T::LISTS)?,
            Payload::Json(object) => object,
        };
        let known = T::known_fields();
        let mut sent = Map::new();
        for (key, value) in object {
            if known.contains(&key) {
                sent.insert(key, value);
            } else if !(value.is_null() && READ_ONLY_FIELDS.contains(&key.as_str())) {
                return Err(unknown_field(&key, known));
            }
        }
        serde_path_to_error::deserialize(Value::Object(sent)).map_err(|error| {
            let field = error.path().to_string();
            ApiError::bad_request(format!("`{field}`: {}", error.inner())).on(field)
        })
    }
}
