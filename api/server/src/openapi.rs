//! The OpenAPI 3.1 document, generated from the handlers' annotations and the model's
//! schemas: the request bodies (one typed body serves both content types), the error
//! body on every operation, and the bearer scheme.

use crate::error::ErrorBody;
use crate::listing::{UserPage, WebsitePage};
use botgate_model::{Status, UserView, WebsiteView};
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

/// The status codes any operation may answer with the error body, and when.
const ERRORS: [(u16, &str); 11] = [
    (
        400,
        "Malformed request: a value of the wrong form, or a body that does not parse.",
    ),
    (401, "No API key, or one that is not valid."),
    (
        403,
        "A user key on a call that needs the partner's key, or a creation past the \
         partner's quota of users or websites.",
    ),
    (404, "No such user or website for this caller."),
    (
        409,
        "The user id or domain exists already, or a concurrent change won.",
    ),
    (413, "The body, or a value in it, is over its limit."),
    (
        415,
        "A content type other than JSON or form, or settings sent as a form.",
    ),
    (422, "A well-formed value that is not accepted."),
    (429, "Too many requests with this key; see Retry-After."),
    (500, "The request failed inside the gateway."),
    (
        503,
        "The store is unavailable, or a record it holds cannot be read by this server; \
         see Retry-After.",
    ),
];

/// Adds the bearer scheme, and the error responses to every operation.
struct Conventions;

impl Modify for Conventions {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A partner key (`bgp_…`), a user key (`bgu_…`), or a dashboard \
                         session token (`bgs_…`, with its user key's rights).",
                    ))
                    .build(),
            ),
        );
        openapi.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
        for item in openapi.paths.paths.values_mut() {
            let operations: [&mut Option<Operation>; 4] = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                for (code, description) in ERRORS {
                    operation
                        .responses
                        .responses
                        .entry(code.to_string())
                        .or_insert_with(|| {
                            ResponseBuilder::new()
                                .description(description)
                                .content(
                                    "application/json",
                                    ContentBuilder::new()
                                        .schema(Some(Ref::from_schema_name("Error")))
                                        .build(),
                                )
                                .build()
                                .into()
                        });
                }
            }
        }
    }
}

/// The management API's OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "botgate management API",
        version = "1.0",
        description = "Partners (hosting providers) manage users and websites. Every call \
                       carries `Authorization: Bearer <key>`: a partner key reaches the \
                       partner's users and their websites; a user key reaches the user's \
                       own websites (read, and settings changes)."
    ),
    paths(
        crate::users::create_user,
        crate::users::list_users,
        crate::users::get_user,
        crate::users::replace_key,
        crate::users::delete_user,
        crate::websites::create_website,
        crate::websites::list_websites,
        crate::websites::get_website,
        crate::websites::update_website,
        crate::websites::delete_website,
        crate::webhooks::get_secret,
        crate::webhooks::rotate_secret,
        crate::traffic::statistics,
        crate::traffic::events,
        crate::dashboard::open_session,
        crate::dashboard::get_settings,
        crate::dashboard::put_settings,
    ),
    components(schemas(ErrorBody, Status, UserView, WebsiteView, UserPage, WebsitePage, crate::webhooks::WebhookSecret)),
    modifiers(&Conventions),
    tags(
        (name = "users", description = "A partner's users (subaccounts) and their keys."),
        (name = "websites", description = "Protected websites and their settings."),
        (name = "webhooks", description = "The secret website-change webhooks are signed with (Standard Webhooks)."),
        (name = "dashboard", description = "The website owners' dashboard: where it is, which panel origins may frame it, and the session a user key opens in it."),
    )
)]
pub struct ApiDoc;

/// The document, as served at `/v1.0/openapi.json`.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bodies::{UserCreate, WebsiteBody, WebsiteCreate};
    use crate::payload::fields;
    use std::collections::BTreeSet;

    fn properties(doc: &serde_json::Value, schema: &str) -> BTreeSet<String> {
        doc["components"]["schemas"][schema]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{schema} missing"))
            .keys()
            .cloned()
            .collect()
    }

    fn set(fields: &[&str]) -> BTreeSet<String> {
        fields.iter().map(|f| f.to_string()).collect()
    }

    /// The bodies take the specification's fields under its names, and the document
    /// shows each body for both content types, with what a create requires.
    #[test]
    fn request_bodies_are_the_specifications_fields() {
        let doc = serde_json::to_value(document()).unwrap();
        let website = set(&[
            "domain",
            "subdomain",
            "user_id",
            "ip",
            "ipv6",
            "tag",
            "status",
            "callbackUrl",
            "certificate",
            "settings",
        ]);
        assert_eq!(properties(&doc, "WebsiteBody"), website);
        assert_eq!(
            fields::<WebsiteBody>().into_iter().collect::<BTreeSet<_>>(),
            website
        );
        assert_eq!(properties(&doc, "UserCreate"), set(&["id", "tag"]));
        assert_eq!(fields::<UserCreate>().len(), 2);
        assert_eq!(
            doc["components"]["schemas"]["UserCreate"]["required"],
            serde_json::json!(["id"])
        );
        let create = &doc["components"]["schemas"]["WebsiteCreate"]["allOf"];
        assert_eq!(create[0]["$ref"], "#/components/schemas/WebsiteBody");
        assert_eq!(
            create[1]["required"],
            serde_json::json!(WebsiteCreate::REQUIRED)
        );
        for (path, method, schema) in [
            ("/v1.0/user", "post", "UserCreate"),
            ("/v1.0/website", "post", "WebsiteCreate"),
            ("/v1.0/website/{domain}", "put", "WebsiteBody"),
        ] {
            let content = &doc["paths"][path][method]["requestBody"]["content"];
            for media_type in ["application/json", "application/x-www-form-urlencoded"] {
                assert_eq!(
                    content[media_type]["schema"]["$ref"],
                    format!("#/components/schemas/{schema}"),
                    "{method} {path} {media_type}"
                );
            }
        }
    }

    #[test]
    fn the_website_schema_documents_every_field_the_api_shows() {
        let doc = serde_json::to_value(document()).unwrap();
        let website = botgate_model::Website::create(botgate_model::WebsiteInput {
            domain: Some("example.com".into()),
            user_id: Some("alice".into()),
            ip: Some(vec!["192.0.2.1".into()]),
            ..Default::default()
        })
        .unwrap();
        let shown = serde_json::to_value(website.view()).unwrap();
        let shown: BTreeSet<String> = shown.as_object().unwrap().keys().cloned().collect();
        assert_eq!(properties(&doc, "Website"), shown);
    }

    /// `settings.rulesets` takes other components' names besides the nine: the
    /// document says which names, and how many a whole object holds.
    #[test]
    fn the_rulesets_schema_takes_other_names() {
        let doc = serde_json::to_value(document()).unwrap();
        let rulesets = &doc["components"]["schemas"]["Settings"]["properties"]["rulesets"];
        assert_eq!(
            rulesets["additionalProperties"]["type"], "boolean",
            "{rulesets}"
        );
        assert_eq!(
            rulesets["propertyNames"]["pattern"], "^[a-z0-9_-]{1,64}$",
            "{rulesets}"
        );
        assert_eq!(rulesets["maxProperties"], 25, "{rulesets}");
        let patch = &doc["components"]["schemas"]["SettingsPatch"]["properties"]["rulesets"];
        assert_eq!(patch["additionalProperties"]["type"], "boolean", "{patch}");
        assert!(patch.get("maxProperties").is_none(), "{patch}");
    }

    #[test]
    fn every_operation_documents_the_error_body_and_needs_a_key() {
        let doc = serde_json::to_value(document()).unwrap();
        assert_eq!(doc["security"][0]["bearer"], serde_json::json!([]));
        let mut operations = 0;
        for item in doc["paths"].as_object().unwrap().values() {
            for operation in item.as_object().unwrap().values() {
                operations += 1;
                for (code, _) in ERRORS {
                    let schema = &operation["responses"][code.to_string()]["content"]["application/json"]
                        ["schema"]["$ref"];
                    assert_eq!(schema, "#/components/schemas/Error");
                }
            }
        }
        assert_eq!(operations, 17);
    }
}
