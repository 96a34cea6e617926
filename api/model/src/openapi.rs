//! OpenAPI schemas of the settings objects (feature `openapi`), built from the same
//! key lists the model validates with, so the document cannot drift from the checks.

use crate::custom_rules::{Field, MAX_CONDITIONS, MAX_RULES, Operator};
use crate::policy::{Action, Category};
use crate::rulesets::{KNOWN_RULESETS, MAX_OTHER_RULESETS};
use crate::settings::{CertsIssuer, LOADBALANCER_FLAGS, Settings, SettingsPatch};
use crate::website::Status;
use std::borrow::Cow;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, Schema, Type};

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

/// `settings.custom_rules`: the list of rules.
fn custom_rules_schema() -> ArrayBuilder {
    let condition = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .property("field", one_of(&Field::ALL.map(Field::as_str)))
        .required("field")
        .property(
            "name",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("The header's name, for `field: header` only.")),
        )
        .property("operator", one_of(&Operator::ALL.map(Operator::as_str)))
        .required("operator")
        .property(
            "value",
            ObjectBuilder::new().description(Some(
                "A string (at most 1024 bytes); for `asn` a number or \"AS13335\"; for \
                 `is_any_of` a list of at most 100 values; for `in_network` and \
                 `not_in_network` a network (CIDR) or a list of them; for `matches` a \
                 regular expression of at most 256 bytes (at most 20 per website), \
                 case-insensitive, its classes (`\\w`, `\\d`, `.`) ASCII.",
            )),
        )
        .required("value");
    let rule = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .property(
            "description",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(200)),
        )
        .property(
            "conditions",
            ArrayBuilder::new()
                .items(condition)
                .min_items(Some(1))
                .max_items(Some(MAX_CONDITIONS)),
        )
        .required("conditions")
        .property("action", one_of(&ACTIONS))
        .property("category", one_of(&Category::NAMES));
    ArrayBuilder::new()
        .items(rule)
        .max_items(Some(MAX_RULES))
        .description(Some(
            "The website's custom rules, tried in order before the rule components while \
             `bot_protection` is on: the first rule all of whose conditions hold decides, \
             with its `action`, or with the policy's action for its `category` (a rule \
             has one of the two). Operators by field: `ip` takes is, is_not, is_any_of, \
             in_network, not_in_network; `country` and `asn` take is, is_not, is_any_of; \
             the others take is, is_not, contains, starts_with, matches, is_any_of. \
             `header` names the header in `name`; an absent header reads as empty, one \
             sent several times holds a condition when one of its values does (for \
             is_not, when none is the value). Text comparisons ignore case; the path and \
             query are compared as the gateway reads them (decoded, dot segments \
             resolved). `country` and `asn` come from \
             the operator's GeoIP database; a client whose country or ASN is unknown holds \
             no condition on them. The access log and metrics name the rule as \
             `custom.<n>`, from 1 for the first. A partial update replaces the whole list.",
        ))
}

/// `settings` in full (`required`) or as a partial update.
fn settings_schema(required: bool) -> Schema {
    let rulesets = object_of(
        KNOWN_RULESETS.iter().map(|name| (*name, boolean())),
        required,
        &format!(
            "Which CMS rule sets run for the website (the classifier and the Core Rule Set \
             always run). Besides the specification's nine, the name of another rule \
             component (an operator's own, running on the gateway or pushed to its store) \
             switches it on or off for the website, up to {MAX_OTHER_RULESETS} such names; \
             the nine are always shown, another name while it is on. `classifier` and \
             `crs` cannot be switched."
        ),
    )
    .additional_properties(Some(boolean()))
    .property_names(Some(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[a-z0-9_-]{1,64}$")),
    ))
    // A whole object holds at most these; a partial update may switch more off.
    .max_properties(required.then_some(KNOWN_RULESETS.len() + MAX_OTHER_RULESETS));
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
    let mut settings = object_of(
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
    .property("custom_rules", custom_rules_schema());
    if required {
        settings = settings.required("custom_rules");
    }
    settings.into()
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
            if section == "custom_rules" {
                assert_eq!(schema["properties"][section]["type"], "array");
                continue;
            }
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
