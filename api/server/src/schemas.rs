//! The shapes of the API's request bodies in both content types, and of the answer to a
//! user deletion, as the OpenAPI document shows them. The parser ([`crate::payload`])
//! reads bodies field by field; the document's tests hold these shapes to its field
//! lists.

use botgate_model::{Certificate, SettingsPatch};
use serde::Serialize;
use utoipa::ToSchema;

/// A user create, JSON style.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct UserCreate {
    /// The user's id, chosen by the partner: letters, digits and `. _ - + @`.
    #[schema(example = "alice@example.com")]
    id: String,
    /// Free labels.
    tag: Option<Vec<String>>,
}

/// A user create, form style.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct UserCreateForm {
    #[schema(example = "alice@example.com")]
    id: String,
    /// Free labels, comma-separated.
    tag: Option<String>,
}

/// The answer to a user deletion.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserDeleted {
    pub id: String,
    /// The websites deleted with the user.
    pub deleted_websites: Vec<String>,
}

/// A list field in JSON: an array of strings, or one comma-separated string.
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(untagged)]
pub enum ListField {
    Items(Vec<String>),
    CommaSeparated(String),
}

/// The status a partner may ask for.
#[derive(ToSchema)]
#[allow(dead_code)]
#[serde(rename_all = "snake_case")]
pub enum RequestedStatus {
    Online,
    Paused,
}

/// A website create, JSON style.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct WebsiteCreate {
    #[schema(example = "example.com")]
    domain: String,
    user_id: String,
    /// Origin addresses, IPv4 or IPv6; at least one.
    ip: ListField,
    /// Subdomain labels (`www`, `shop`).
    subdomain: Option<ListField>,
    tag: Option<ListField>,
    status: Option<RequestedStatus>,
    certificate: Option<Certificate>,
    settings: Option<SettingsPatch>,
    /// Where the website-change webhook goes (absolute http or https URL).
    #[serde(rename = "callbackUrl")]
    callback_url: Option<String>,
}

/// A website create, form style: lists comma-separated; `settings` and `certificate`
/// need JSON.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct WebsiteCreateForm {
    domain: String,
    user_id: String,
    ip: String,
    subdomain: Option<String>,
    tag: Option<String>,
    status: Option<RequestedStatus>,
    #[serde(rename = "callbackUrl")]
    callback_url: Option<String>,
}

/// A website update, JSON style: only what is sent changes.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct WebsiteUpdate {
    /// May be sent; cannot change.
    domain: Option<String>,
    /// May be sent; cannot change.
    user_id: Option<String>,
    ip: Option<ListField>,
    subdomain: Option<ListField>,
    tag: Option<ListField>,
    status: Option<RequestedStatus>,
    certificate: Option<Certificate>,
    settings: Option<SettingsPatch>,
    #[serde(rename = "callbackUrl")]
    callback_url: Option<String>,
}

/// A website update, form style.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct WebsiteUpdateForm {
    domain: Option<String>,
    user_id: Option<String>,
    ip: Option<String>,
    subdomain: Option<String>,
    tag: Option<String>,
    status: Option<RequestedStatus>,
    #[serde(rename = "callbackUrl")]
    callback_url: Option<String>,
}
