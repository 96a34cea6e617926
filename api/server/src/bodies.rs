//! The API's request bodies as typed structs, read by [`crate::payload`] and shown by
//! the OpenAPI document from the same derive; and the answer to a user deletion.

use crate::error::ApiError;
use crate::payload::{RequestBody, fields};
use botgate_model::{Certificate, SettingsPatch, WebsiteInput};
use serde::{Deserialize, Deserializer, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, SchemaType, Type};
use utoipa::openapi::{AllOfBuilder, Ref, RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

/// The longest `callbackUrl` accepted.
const MAX_URL_BYTES: usize = 2048;

/// A list of strings: in JSON an array, or one comma-separated string; in a form,
/// comma-separated or one key repeated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct List(pub Vec<String>);

/// A comma-separated list: items trimmed, empty items dropped.
fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

impl<'de> Deserialize<'de> for List {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<List, D::Error> {
        struct ListVisitor;
        impl<'de> serde::de::Visitor<'de> for ListVisitor {
            type Value = List;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of strings, or one comma-separated string")
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<List, E> {
                Ok(List(split_list(value)))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<List, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    items.push(item);
                }
                Ok(List(items))
            }
        }
        deserializer.deserialize_any(ListVisitor)
    }
}

impl PartialSchema for List {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String)))
            .item(ObjectBuilder::new().schema_type(Type::String))
            .description(Some(
                "An array of strings, or one comma-separated string (in a form: \
                 comma-separated, or the key repeated).",
            ))
            .into()
    }
}

impl ToSchema for List {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("List")
    }
}

/// The statuses a partner may ask for.
fn requested_status() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some([Some("online"), Some("paused"), Some("setup"), None]))
        .description(Some(
            "online; paused (protection off, traffic passes); or, on create only, setup: \
             the website waits in `setup` until asked to be `online` (and until its DNS \
             check and certificate are done). `error` is the gateway's to set.",
        ))
}

/// A user create.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct UserCreate {
    /// The user's id, chosen by the partner: letters, digits and `. _ - + @`.
    #[schema(example = "alice@example.com", required = true)]
    pub id: Option<String>,
    /// Free labels.
    pub tag: Option<List>,
}

impl RequestBody for UserCreate {
    const LISTS: &'static [&'static str] = &["tag"];

    fn known_fields() -> &'static [String] {
        static FIELDS: OnceLock<Vec<String>> = OnceLock::new();
        FIELDS.get_or_init(fields::<Self>)
    }
}

/// The answer to a user deletion.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserDeleted {
    pub id: String,
    /// The websites deleted with the user.
    pub deleted_websites: Vec<String>,
}

/// A website create or update: when updating, only what is sent changes. `settings`
/// and `certificate` need JSON.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct WebsiteBody {
    /// The domain (Unicode or ASCII). Required to create; on update it may be sent but
    /// cannot change.
    #[schema(example = "example.com")]
    pub domain: Option<String>,
    /// Subdomain labels (`www`, `shop`).
    pub subdomain: Option<List>,
    /// The owning user's id. Required to create; on update it may be sent but cannot
    /// change.
    pub user_id: Option<String>,
    /// Origin addresses, IPv4 or IPv6; at least one (here or in `ipv6`) is required to
    /// create. Sent, it replaces the list.
    pub ip: Option<List>,
    /// IPv6 origin addresses, apart from `ip` (as GateKeeper clients send them): they
    /// replace the website's IPv6 addresses, or add to `ip`'s when both are sent. The
    /// website shows every origin address in `ip`.
    pub ipv6: Option<List>,
    /// Free labels.
    pub tag: Option<List>,
    #[schema(schema_with = requested_status)]
    pub status: Option<String>,
    /// A custom certificate and its key (JSON only).
    pub certificate: Option<Certificate>,
    /// The settings to change: only the keys sent (JSON only).
    #[schema(value_type = Option<SettingsPatch>)]
    pub settings: Option<serde_json::Value>,
    /// Where the website-change webhook goes (absolute http or https URL). A website
    /// in `setup` holds at most 16 different ones (one more is 422), a partner's
    /// websites 1000 in all (one more is 429 and changes nothing).
    #[serde(rename = "callbackUrl")]
    #[schema(format = "uri")]
    pub callback_url: Option<String>,
}

impl RequestBody for WebsiteBody {
    const LISTS: &'static [&'static str] = &["subdomain", "ip", "ipv6", "tag"];

    fn known_fields() -> &'static [String] {
        static FIELDS: OnceLock<Vec<String>> = OnceLock::new();
        FIELDS.get_or_init(fields::<Self>)
    }
}

/// A website create as the document shows it: a [`WebsiteBody`] with the fields a
/// create needs (an origin address may come in `ipv6` instead of `ip`).
pub struct WebsiteCreate;

impl WebsiteCreate {
    /// The fields a create must send.
    pub const REQUIRED: [&str; 2] = ["domain", "user_id"];
}

impl PartialSchema for WebsiteCreate {
    fn schema() -> RefOr<Schema> {
        let required = WebsiteCreate::REQUIRED
            .into_iter()
            .fold(ObjectBuilder::new(), ObjectBuilder::required);
        AllOfBuilder::new()
            .item(Ref::from_schema_name(WebsiteBody::name()))
            .item(required)
            .into()
    }
}

impl ToSchema for WebsiteCreate {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((WebsiteBody::name().into(), WebsiteBody::schema()));
        WebsiteBody::schemas(schemas);
    }
}

/// A website create or update as sent: the model's input, and the `callbackUrl`.
#[derive(Debug, Default)]
pub struct WebsiteRequest {
    pub input: WebsiteInput,
    pub callback_url: Option<url::Url>,
}

impl WebsiteBody {
    /// The model's input, and the webhook's address checked.
    pub fn into_request(self) -> Result<WebsiteRequest, ApiError> {
        let list = |list: Option<List>| list.map(|List(items)| items);
        Ok(WebsiteRequest {
            callback_url: self.callback_url.as_deref().map(callback_url).transpose()?,
            input: WebsiteInput {
                domain: self.domain,
                subdomain: list(self.subdomain),
                user_id: self.user_id,
                ip: list(self.ip),
                ipv6: list(self.ipv6),
                tag: list(self.tag),
                status: self.status,
                certificate: self.certificate,
                settings: self.settings,
            },
        })
    }
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
            ("ipv6", i.ipv6.is_some()),
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
        Ok(url) if !url.username().is_empty() || url.password().is_some() => refuse(
            "it carries a user name or password, which webhooks do not send (a receiver \
             checks the signature instead)",
        ),
        Ok(url) => Ok(url),
        Err(error) => refuse(&error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Payload;
    use serde_json::{Value, json};

    fn website(payload: Payload) -> Result<WebsiteRequest, ApiError> {
        payload.parse::<WebsiteBody>()?.into_request()
    }

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
        let request = website(form("user_id=a%40b.c&domain=example.com&subdomain=www,%20shop&ip=192.0.2.1&tag=dc1&callbackUrl=https%3A%2F%2Fhooks.example%2Fbg"))
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
            let error = website(form(body)).unwrap_err();
            assert_eq!(error.status.as_u16(), 415, "{body}");
            assert!(error.message.contains("application/json"));
        }
    }

    #[test]
    fn json_lists_are_arrays_or_comma_strings_and_nulls_are_not_sent() {
        let request = website(json(
            json!({"ip": ["192.0.2.1", "2001:db8::1"], "tag": "a,b",
            "status_reason": null, "certificate": null}),
        ))
        .unwrap();
        assert_eq!(request.fields_sent(), vec!["ip", "tag"]);
        assert_eq!(request.input.ip.unwrap().len(), 2);
        assert_eq!(request.input.tag.unwrap(), vec!["a", "b"]);
        let error = website(json(json!({"ip": [1]}))).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("ip[0]"));
    }

    #[test]
    fn unknown_read_only_and_repeated_fields_are_named() {
        let error = website(json(json!({"domian": "x"}))).unwrap_err();
        assert_eq!(
            (error.status.as_u16(), error.field.as_deref()),
            (422, Some("domian"))
        );
        let error = website(json(json!({"status_reason": "x"}))).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("status_reason"));
        let error = website(form("domain=a.com&domain=b.com")).unwrap_err();
        assert_eq!(
            (error.status.as_u16(), error.field.as_deref()),
            (400, Some("domain"))
        );
        let both = website(form("ip=192.0.2.1&ip=192.0.2.2")).unwrap();
        assert_eq!(both.input.ip.unwrap().len(), 2);
    }

    #[test]
    fn callback_urls_must_be_absolute_http() {
        for bad in [
            "/relative",
            "ftp://example.com/x",
            "https://",
            "notaurl",
            "https://user:secret@hooks.example/x",
            "https://token@hooks.example/x",
        ] {
            let error = website(json(json!({"callbackUrl": bad}))).unwrap_err();
            assert_eq!(
                (error.status.as_u16(), error.field.as_deref()),
                (422, Some("callbackUrl")),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_user_create_reads_alike_from_json_and_a_form() {
        for payload in [
            form("id=ann&tag=a,b&tag=c"),
            json(json!({"id": "ann", "tag": ["a", "b", "c"]})),
        ] {
            let user: UserCreate = payload.parse().unwrap();
            assert_eq!(user.id.as_deref(), Some("ann"));
            assert_eq!(
                user.tag,
                Some(List(vec!["a".into(), "b".into(), "c".into()]))
            );
        }
        let named = |error: ApiError| (error.status.as_u16(), error.field);
        let error = json(json!({"id": 5})).parse::<UserCreate>().unwrap_err();
        assert_eq!(named(error), (400, Some("id".into())));
        let error = form("id=a&id=b").parse::<UserCreate>().unwrap_err();
        assert_eq!(named(error), (400, Some("id".into())));
        let error = json(json!({"ip": "192.0.2.1"}))
            .parse::<UserCreate>()
            .unwrap_err();
        assert_eq!(named(error), (422, Some("ip".into())));
    }

    #[test]
    fn a_certificate_is_an_object_of_two_strings() {
        let error = website(json(json!({"certificate": "pem"}))).unwrap_err();
        assert_eq!(
            (error.status.as_u16(), error.field.as_deref()),
            (400, Some("certificate"))
        );
        let error =
            website(json(json!({"certificate": {"public": 1, "private": "k"}}))).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("certificate.public"));
        assert!(
            error.message.contains("expected a string"),
            "{}",
            error.message
        );
        let error = website(json(
            json!({"certificate": {"public": "p", "private": "k", "chain": "c"}}),
        ))
        .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("certificate.chain"));
        assert!(
            error.message.contains("unknown field `chain`"),
            "{}",
            error.message
        );
    }
}
