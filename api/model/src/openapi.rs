//! OpenAPI schemas of the settings objects (feature `openapi`), built from the same
//! key lists the model validates with, so the document cannot drift from the checks.

use crate::policy::{Action, Category};
use crate::rulesets::KNOWN_RULESETS;
use crate::settings::{CertsIssuer, LOADBALANCER_FLAGS, Settings, SettingsPatch};
use crate::website::Status;
use std::borrow::Cow;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};

fn boolean() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Boolean)
}

fn one_of(values: &[&str]) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
}

/// An object of exactly `keys`, each of schema `value`; every key required when the
/// whole object is shown, none when it is a partial update.
fn object_of<'a>(
    keys: impl IntoIterator<Item = (&'a str, ObjectBuilder)>,
    required: bool,
    description: &str,
) -> ObjectBuilder {
    let mut object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    for (key, value) in keys {
        object = object.property(key, value);
        if required {
            object = object.required(key);
        }
    }
    object
}

const ACTIONS: [&str; 3] = [
    Action::Grant.as_str(),
    Action::Deny.as_str(),
    Action::Captcha.as_str(),
];

/// `settings` in full (`required`) or as a partial update.
fn settings_schema(required: bool) -> Schema {
    let rulesets = object_of(
        KNOWN_RULESETS.iter().map(|name| (*name, boolean())),
        required,
        "Which CMS rule sets run for the website (the classifier and the Core Rule Set always run).",
    );
    let rules = object_of(
        Category::NAMES.iter().map(|name| (*name, one_of(&ACTIONS))),
        required,
        "The action for each traffic category.",
    );
    let loadbalancer = object_of(
        LOADBALANCER_FLAGS
            .iter()
            .map(|name| (*name, boolean()))
            .chain([(
                "certs_issuer",
                one_of(&[CertsIssuer::Custom.as_str(), CertsIssuer::Acme.as_str()]),
            )]),
        required,
        "Load-balancer options. `monitoring_mode` (default false): every request is \
         decided and logged with the action bot protection would take (`would_deny`, \
         `would_captcha` in the access log and metrics) and passed to the origin.",
    );
    object_of(
        [
            ("rulesets", rulesets),
            ("rules", rules),
            ("loadbalancer", loadbalancer),
        ],
        required,
        if required {
            "The website's settings."
        } else {
            "A partial settings object: only the keys sent change."
        },
    )
    .into()
}

impl utoipa::PartialSchema for Settings {
    fn schema() -> RefOr<Schema> {
        settings_schema(true).into()
    }
}

impl utoipa::ToSchema for Settings {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Settings")
    }
}

impl utoipa::PartialSchema for SettingsPatch {
    fn schema() -> RefOr<Schema> {
        settings_schema(false).into()
    }
}

impl utoipa::ToSchema for SettingsPatch {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("SettingsPatch")
    }
}

impl utoipa::PartialSchema for Status {
    fn schema() -> RefOr<Schema> {
        one_of(&[
            Status::Setup.as_str(),
            Status::Online.as_str(),
            Status::Paused.as_str(),
            Status::Error.as_str(),
        ])
        .description(Some(
            "setup: DNS or certificate work pending; online; paused: protection off, \
             traffic passes; error: asynchronous work failed (see status_reason).",
        ))
        .into()
    }
}

impl utoipa::ToSchema for Status {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Status")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::PartialSchema;

    #[test]
    fn the_settings_schema_names_every_key_the_model_writes() {
        let schema = serde_json::to_value(Settings::schema()).unwrap();
        let shown = serde_json::to_value(Settings::default()).unwrap();
        for (section, keys) in shown.as_object().unwrap() {
            let documented = &schema["properties"][section]["properties"];
            for key in keys.as_object().unwrap().keys() {
                assert!(
                    documented.get(key).is_some(),
                    "{section}.{key} undocumented"
                );
            }
            assert_eq!(
                documented.as_object().unwrap().len(),
                keys.as_object().unwrap().len(),
                "{section}"
            );
        }
    }
}
