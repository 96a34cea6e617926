//! Request bodies: `application/json` or `application/x-www-form-urlencoded`, read
//! within the size limit, and turned into the model's inputs with the specification's
//! encoding rules (form: comma-separated lists, no `settings`; JSON: arrays, objects).

use crate::Api;
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use botgate_model::{Certificate, WebsiteInput};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The fields a website create or update takes in a form.
pub const WEBSITE_FORM_FIELDS: [&str; 7] = [
    "domain",
    "subdomain",
    "user_id",
    "ip",
    "tag",
    "status",
    "callbackUrl",
];
/// The fields a website create or update takes in JSON: the form's, and the two that
/// need JSON.
pub const WEBSITE_JSON_FIELDS: [&str; 9] = [
    "domain",
    "subdomain",
    "user_id",
    "ip",
    "tag",
    "status",
    "callbackUrl",
    "certificate",
    "settings",
];
/// Fields the gateway sets; sending them back (as a GET's result would) is refused
/// unless they are `null`.
const READ_ONLY_FIELDS: [&str; 1] = ["status_reason"];
/// The fields of a user create.
pub const USER_FIELDS: [&str; 2] = ["id", "tag"];
/// The longest `callbackUrl` accepted.
const MAX_URL_BYTES: usize = 2048;

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

/// A user create as sent.
#[derive(Debug, Default)]
pub struct UserRequest {
    pub id: Option<String>,
    pub tag: Option<Vec<String>>,
}

/// A website create or update as sent: the model's input, and the `callbackUrl`.
#[derive(Debug, Default)]
pub struct WebsiteRequest {
    pub input: WebsiteInput,
    pub callback_url: Option<url::Url>,
}

impl WebsiteRequest {
    /// The names of the fields sent, in the specification's spelling.
    pub fn fields_sent(&self) -> Vec<&'static str> {
        let i = &self.input;
        [
            ("domain", i.domain.is_some()),
            ("subdomain", i.subdomain.is_some()),
            ("user_id", i.user_id.is_some()),
            ("ip", i.ip.is_some()),
            ("tag", i.tag.is_some()),
            ("status", i.status.is_some()),
            ("certificate", i.certificate.is_some()),
            ("settings", i.settings.is_some()),
            ("callbackUrl", self.callback_url.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, sent)| sent.then_some(name))
        .collect()
    }
}

fn unknown_field(field: &str, known: &[&str]) -> ApiError {
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

/// A comma-separated list, as forms send lists: items trimmed, empty items dropped.
fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

fn json_string(field: &str, value: Value) -> Result<String, ApiError> {
    match value {
        Value::String(s) => Ok(s),
        _ => Err(ApiError::bad_request(format!("`{field}` must be a string")).on(field)),
    }
}

/// A JSON list field: an array of strings, or (as in forms) one comma-separated string.
fn json_list(field: &str, value: Value) -> Result<Vec<String>, ApiError> {
    match value {
        Value::String(s) => Ok(split_list(&s)),
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| json_string(&format!("{field}[{i}]"), item))
            .collect(),
        _ => Err(ApiError::bad_request(format!("`{field}` must be an array of strings")).on(field)),
    }
}

fn json_certificate(value: Value) -> Result<Certificate, ApiError> {
    let Value::Object(mut object) = value else {
        return Err(ApiError::bad_request(
            "`certificate` must be an object with `public` and `private`",
        )
        .on("certificate"));
    };
    if let Some(extra) = object.keys().find(|k| *k != "public" && *k != "private") {
        return Err(unknown_field(
            &format!("certificate.{extra}"),
            &["public", "private"],
        ));
    }
    let mut take = |part: &str| {
        let field = format!("certificate.{part}");
        match object.remove(part) {
            Some(value) => json_string(&field, value),
            None => Err(ApiError::bad_request(format!("`{field}` is required")).on(field)),
        }
    };
    Ok(Certificate {
        public: take("public")?,
        private: take("private")?,
    })
}

fn callback_url(value: &str) -> Result<url::Url, ApiError> {
    let refuse = |why: &str| {
        Err(ApiError::unprocessable(format!(
            "`callbackUrl` must be an absolute http or https URL: {why}"
        ))
        .on("callbackUrl"))
    };
    if value.len() > MAX_URL_BYTES {
        return refuse(&format!("longer than {MAX_URL_BYTES} bytes"));
    }
    match url::Url::parse(value.trim()) {
        Ok(url) if !matches!(url.scheme(), "http" | "https") => {
            refuse(&format!("the scheme is `{}`", url.scheme()))
        }
        Ok(url) if url.host().is_none() => refuse("it has no host"),
        Ok(url) => Ok(url),
        Err(error) => refuse(&error.to_string()),
    }
}

/// Whether a form key carries what only JSON may carry.
fn needs_json(key: &str) -> bool {
    ["settings", "certificate"].iter().any(|json_only| {
        key == *json_only
            || key
                .strip_prefix(json_only)
                .is_some_and(|rest| rest.starts_with('[') || rest.starts_with('.'))
    })
}

/// Form values by field, refusing repeats of single-valued fields and concatenating
/// repeated lists.
fn form_fields(
    pairs: Vec<(String, String)>,
    known: &[&str],
    lists: &[&str],
) -> Result<Vec<(String, String)>, ApiError> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for (key, value) in pairs {
        if needs_json(&key) {
            return Err(ApiError::unsupported_media_type(
                "rules management needs `Content-Type: application/json`: send `settings` \
                 and `certificate` as JSON objects",
            )
            .on(botgate_model::names::shorten(&key)));
        }
        if !known.contains(&key.as_str()) {
            return Err(unknown_field(&key, known));
        }
        match fields.iter_mut().find(|(k, _)| *k == key) {
            Some((_, existing)) if lists.contains(&key.as_str()) => {
                existing.push(',');
                existing.push_str(&value);
            }
            Some(_) => {
                return Err(
                    ApiError::bad_request(format!("`{key}` was sent more than once")).on(key),
                );
            }
            None => fields.push((key, value)),
        }
    }
    Ok(fields)
}

impl Payload {
    /// The body as a user create.
    pub fn into_user(self) -> Result<UserRequest, ApiError> {
        let mut request = UserRequest::default();
        match self {
            Payload::Form(pairs) => {
                for (key, value) in form_fields(pairs, &USER_FIELDS, &["tag"])? {
                    match key.as_str() {
                        "id" => request.id = Some(value),
                        _ => request.tag = Some(split_list(&value)),
                    }
                }
            }
            Payload::Json(object) => {
                for (key, value) in object {
                    match (key.as_str(), value) {
                        (_, Value::Null) if USER_FIELDS.contains(&key.as_str()) => {}
                        ("id", value) => request.id = Some(json_string("id", value)?),
                        ("tag", value) => request.tag = Some(json_list("tag", value)?),
                        _ => return Err(unknown_field(&key, &USER_FIELDS)),
                    }
                }
            }
        }
        Ok(request)
    }

    /// The body as a website create or update.
    pub fn into_website(self) -> Result<WebsiteRequest, ApiError> {
        let mut request = WebsiteRequest::default();
        let fields: Vec<(String, Value)> = match self {
            Payload::Form(pairs) => {
                form_fields(pairs, &WEBSITE_FORM_FIELDS, &["subdomain", "ip", "tag"])?
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect()
            }
            Payload::Json(object) => object.into_iter().collect(),
        };
        for (key, value) in fields {
            let known = WEBSITE_JSON_FIELDS.contains(&key.as_str());
            if value.is_null() && (known || READ_ONLY_FIELDS.contains(&key.as_str())) {
                continue;
            }
            let input = &mut request.input;
            match key.as_str() {
                "domain" => input.domain = Some(json_string(&key, value)?),
                "user_id" => input.user_id = Some(json_string(&key, value)?),
                "status" => input.status = Some(json_string(&key, value)?),
                "subdomain" => input.subdomain = Some(json_list(&key, value)?),
                "ip" => input.ip = Some(json_list(&key, value)?),
                "tag" => input.tag = Some(json_list(&key, value)?),
                "certificate" => input.certificate = Some(json_certificate(value)?),
                "settings" => input.settings = Some(value),
                "callbackUrl" => {
                    request.callback_url = Some(callback_url(&json_string(&key, value)?)?)
                }
                _ => return Err(unknown_field(&key, &WEBSITE_JSON_FIELDS)),
            }
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(body: &str) -> Payload {
        Payload::Form(
            form_urlencoded::parse(body.as_bytes())
                .into_owned()
                .collect(),
        )
    }

    fn json(value: Value) -> Payload {
        let Value::Object(object) = value else {
            unreachable!()
        };
        Payload::Json(object)
    }

    #[test]
    fn a_form_website_splits_its_lists_on_commas() {
        let request = form("user_id=a%40b.c&domain=example.com&subdomain=www,%20shop&ip=192.0.2.1&tag=dc1&callbackUrl=https%3A%2F%2Fhooks.example%2Fbg")
            .into_website()
            .unwrap();
        assert_eq!(
            request.input.subdomain,
            Some(vec!["www".into(), "shop".into()])
        );
        assert_eq!(request.input.ip, Some(vec!["192.0.2.1".into()]));
        assert_eq!(request.input.tag, Some(vec!["dc1".into()]));
        assert_eq!(
            request.callback_url.unwrap().host_str(),
            Some("hooks.example")
        );
    }

    #[test]
    fn settings_in_a_form_need_json() {
        for body in [
            "settings=x",
            "settings[rules][humans]=deny",
            "certificate.public=x",
        ] {
            let error = form(body).into_website().unwrap_err();
            assert_eq!(error.status.as_u16(), 415, "{body}");
            assert!(error.message.contains("application/json"));
        }
    }

    #[test]
    fn json_lists_are_arrays_or_comma_strings_and_nulls_are_not_sent() {
        let request = json(json!({"ip": ["192.0.2.1", "2001:db8::1"], "tag": "a,b",
            "status_reason": null, "certificate": null}))
        .into_website()
        .unwrap();
        assert_eq!(request.fields_sent(), vec!["ip", "tag"]);
        assert_eq!(request.input.ip.unwrap().len(), 2);
        assert_eq!(request.input.tag.unwrap(), vec!["a", "b"]);
        let error = json(json!({"ip": [1]})).into_website().unwrap_err();
        assert_eq!(error.field.as_deref(), Some("ip[0]"));
    }

    #[test]
    fn unknown_read_only_and_repeated_fields_are_named() {
        let error = json(json!({"domian": "x"})).into_website().unwrap_err();
        assert_eq!(
            (error.status.as_u16(), error.field.as_deref()),
            (422, Some("domian"))
        );
        let error = json(json!({"status_reason": "x"}))
            .into_website()
            .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("status_reason"));
        let error = form("domain=a.com&domain=b.com")
            .into_website()
            .unwrap_err();
        assert_eq!(
            (error.status.as_u16(), error.field.as_deref()),
            (400, Some("domain"))
        );
        let both = form("ip=192.0.2.1&ip=192.0.2.2").into_website().unwrap();
        assert_eq!(both.input.ip.unwrap().len(), 2);
    }

    #[test]
    fn callback_urls_must_be_absolute_http() {
        for bad in ["/relative", "ftp://example.com/x", "https://", "notaurl"] {
            let error = json(json!({"callbackUrl": bad}))
                .into_website()
                .unwrap_err();
            assert_eq!(
                (error.status.as_u16(), error.field.as_deref()),
                (422, Some("callbackUrl")),
                "{bad}"
            );
        }
    }
}
