//! A website's `settings`: `rulesets`, `rules` and `loadbalancer`, every key as the
//! specification names it, botgate's `custom_rules`, with defaults for keys not sent,
//! and partial updates.

use crate::custom_rules::CustomRules;
use crate::invalid::Invalid;
use crate::policy::{Action, Category, Policy};
use crate::rulesets::{ALWAYS_ON_RULESETS, KNOWN_RULESETS, MAX_OTHER_RULESETS, RulesetName};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A website's settings; the default is what a website created without `settings` has.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Which rule sets run for the website: the specification's nine CMS rule sets and
    /// operators' own components by name (the classifier and the Core Rule Set always run).
    pub rulesets: Rulesets,
    /// The action per traffic category.
    pub rules: Rules,
    /// The load-balancer options.
    pub loadbalancer: Loadbalancer,
    /// The website's own rules, before the rule components (none by default).
    #[serde(default)]
    pub custom_rules: CustomRules,
}

/// `settings.rulesets`: one boolean per rule set of [`KNOWN_RULESETS`], all `false`
/// until the partner enables the one for the website's CMS, and the names of any other
/// rule sets (operators' own components) enabled, at most [`MAX_OTHER_RULESETS`]. The
/// nine are always shown; another name is shown while it is on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "BTreeMap<String, bool>", into = "BTreeMap<String, bool>")]
pub struct Rulesets {
    known: [bool; 9],
    /// Sorted, without repeats (a few at most: an empty one costs the data plane's
    /// walk over the enabled names nothing).
    others: Vec<String>,
}

impl Rulesets {
    /// Whether the rule set `name` is on.
    pub fn enabled(&self, name: &str) -> bool {
        match KNOWN_RULESETS.iter().position(|n| *n == name) {
            Some(i) => self.known[i],
            None => self.others.iter().any(|other| other == name),
        }
    }

    /// The names of the rule sets that are on: the specification's in its order, then
    /// the others by name.
    pub fn enabled_iter(&self) -> impl Iterator<Item = &str> + '_ {
        self.known_enabled().chain(self.others())
    }

    /// The specification's rule sets that are on, in its order.
    fn known_enabled(&self) -> impl Iterator<Item = &str> + '_ {
        KNOWN_RULESETS
            .iter()
            .zip(self.known)
            .filter_map(|(name, on)| on.then_some(*name))
    }

    /// Adds the names of the rule sets that are on to `out`, as [`Self::enabled_iter`]
    /// lists them: the data plane's list, built by two extends (cheaper than collecting
    /// the chained iterator).
    pub fn enabled_into<'a>(&'a self, out: &mut impl Extend<&'a str>) {
        out.extend(self.known_enabled());
        out.extend(self.others());
    }

    /// The names of the rule sets that are on.
    pub fn enabled_names(&self) -> Vec<&str> {
        self.enabled_iter().collect()
    }

    /// The names besides the specification's nine that are on.
    pub fn others(&self) -> impl Iterator<Item = &str> + '_ {
        self.others.iter().map(String::as_str)
    }

    /// Switches `name` (checked by [`check_ruleset_name`]) on or off.
    fn set(&mut self, name: &str, on: bool) {
        match KNOWN_RULESETS.iter().position(|n| *n == name) {
            Some(i) => self.known[i] = on,
            None => match (
                self.others
                    .binary_search_by(|other| other.as_str().cmp(name)),
                on,
            ) {
                (Err(at), true) => self.others.insert(at, name.to_owned()),
                (Ok(at), false) => {
                    self.others.remove(at);
                }
                _ => {}
            },
        }
    }

    /// Refuses more other rule sets than a website may enable.
    fn check_bound(&self) -> Result<(), Invalid> {
        if self.others.len() <= MAX_OTHER_RULESETS {
            return Ok(());
        }
        Err(Invalid::too_large(
            "settings.rulesets",
            format!(
                "{} rule sets besides the specification's nine are on; a website may enable \
                 at most {MAX_OTHER_RULESETS}",
                self.others.len()
            ),
        ))
    }
}

/// A stored record's rule sets, read leniently: the API checked every name and the
/// bound when the record was written, and a later release may take names or more of
/// them that this one would refuse; one record it cannot read must not stop a gateway
/// from reading the others. A name that is not a rule-set name at all is left out.
impl From<BTreeMap<String, bool>> for Rulesets {
    fn from(map: BTreeMap<String, bool>) -> Self {
        let mut out = Rulesets::default();
        for (name, on) in map {
            if name.parse::<RulesetName>().is_ok() && !ALWAYS_ON_RULESETS.contains(&name.as_str()) {
                out.set(&name, on);
            }
        }
        out
    }
}

impl From<Rulesets> for BTreeMap<String, bool> {
    fn from(r: Rulesets) -> Self {
        KNOWN_RULESETS
            .iter()
            .zip(r.known)
            .map(|(name, on)| ((*name).to_owned(), on))
            .chain(r.others.into_iter().map(|name| (name, true)))
            .collect()
    }
}

/// A name `settings.rulesets` takes: one of the specification's nine, or another rule
/// component's name (an operator's own); not the always-on components'.
fn check_ruleset_name(name: &str) -> Result<(), Invalid> {
    let field = || format!("settings.rulesets.{}", crate::names::shorten(name));
    if KNOWN_RULESETS.contains(&name) {
        return Ok(());
    }
    if ALWAYS_ON_RULESETS.contains(&name) {
        return Err(Invalid::unacceptable(
            field(),
            format!("`{name}` runs for every website and cannot be switched"),
        ));
    }
    if name.parse::<RulesetName>().is_err() {
        return Err(Invalid::unacceptable(
            field(),
            format!(
                "`{}` is not a rule-set name: 1 to 64 characters of a-z, 0-9, `_` and `-` \
                 (the specification's are {})",
                crate::names::shorten(name),
                KNOWN_RULESETS.join(", ")
            ),
        ));
    }
    Ok(())
}

/// `settings.rules`: the action for each of the eight categories; shown in full, with
/// the defaults of the categories the partner did not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, String>",
    into = "BTreeMap<String, String>"
)]
pub struct Rules(pub Policy);

impl Default for Rules {
    /// Every category at its default action, written out: a website keeps the
    /// defaults it was created with even if a later release changes them.
    fn default() -> Self {
        let mut policy = Policy::default();
        for category in Category::ALL {
            policy.set(category, Some(category.default_action()));
        }
        Rules(policy)
    }
}

impl Rules {
    pub fn policy(&self) -> &Policy {
        &self.0
    }
}

impl TryFrom<BTreeMap<String, String>> for Rules {
    type Error = Invalid;
    fn try_from(map: BTreeMap<String, String>) -> Result<Self, Invalid> {
        let Rules(mut policy) = Rules::default();
        for (key, value) in map {
            let (category, action) = parse_rule(&key, &value)?;
            policy.set(category, Some(action));
        }
        Ok(Rules(policy))
    }
}

impl From<Rules> for BTreeMap<String, String> {
    fn from(r: Rules) -> Self {
        Category::ALL
            .iter()
            .map(|c| (c.as_str().to_owned(), r.0.action(*c).as_str().to_owned()))
            .collect()
    }
}

fn parse_rule(key: &str, value: &str) -> Result<(Category, Action), Invalid> {
    let category: Category = key.parse().map_err(|err: crate::ParseError| {
        Invalid::unacceptable(
            format!("settings.rules.{}", crate::names::shorten(key)),
            err.to_string(),
        )
    })?;
    let action: Action = value.parse().map_err(|err: crate::ParseError| {
        Invalid::unacceptable(format!("settings.rules.{key}"), err.to_string())
    })?;
    Ok((category, action))
}

/// Who issues a website's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CertsIssuer {
    /// The partner supplies it in `certificate`.
    Custom,
    /// The gateway obtains it from an ACME certificate authority.
    Acme,
}

impl CertsIssuer {
    pub const fn as_str(self) -> &'static str {
        match self {
            CertsIssuer::Custom => "custom",
            CertsIssuer::Acme => "acme",
        }
    }
}

/// `settings.loadbalancer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loadbalancer {
    /// Connect to the origin over HTTPS.
    pub upstreams_use_https: bool,
    /// Offer HTTP/3 on the HTTPS port.
    pub enable_http3: bool,
    /// Redirect plain HTTP to HTTPS.
    pub force_https: bool,
    /// Cache static files at the gateway.
    pub cache_static_files: bool,
    /// Cache dynamic pages that allow it.
    pub cache_dynamic_pages: bool,
    /// Per-client and per-website rate limits.
    pub ddos_protection: bool,
    /// Stricter limits, and a challenge for every new client while under attack.
    pub ddos_protection_advanced: bool,
    /// The master switch of bot protection.
    pub bot_protection: bool,
    /// Redirect listed subdomains to the main domain.
    pub force_subdomains_redirect: bool,
    /// Monitoring mode: every request is decided and logged as bot protection decides
    /// it, with the action it would take (`would_deny`, `would_captcha`), and passed to
    /// the origin. For trying the protection on live traffic before turning it on.
    #[serde(default)]
    pub monitoring_mode: bool,
    /// Who issues the certificate.
    pub certs_issuer: CertsIssuer,
}

impl Default for Loadbalancer {
    /// Protection on, static caching on, everything that changes how a site answers
    /// (redirects, HTTPS to the origin, page caching, HTTP/3) off until asked for;
    /// certificates from ACME.
    fn default() -> Self {
        Loadbalancer {
            upstreams_use_https: false,
            enable_http3: false,
            force_https: false,
            cache_static_files: true,
            cache_dynamic_pages: false,
            ddos_protection: true,
            ddos_protection_advanced: false,
            bot_protection: true,
            force_subdomains_redirect: false,
            monitoring_mode: false,
            certs_issuer: CertsIssuer::Acme,
        }
    }
}

/// The boolean keys of `settings.loadbalancer`: the specification's, in its order, then
/// botgate's own.
pub const LOADBALANCER_FLAGS: [&str; 10] = [
    "upstreams_use_https",
    "enable_http3",
    "force_https",
    "cache_static_files",
    "cache_dynamic_pages",
    "ddos_protection",
    "ddos_protection_advanced",
    "bot_protection",
    "force_subdomains_redirect",
    "monitoring_mode",
];

impl Loadbalancer {
    fn flag_mut(&mut self, key: &str) -> Option<&mut bool> {
        Some(match key {
            "upstreams_use_https" => &mut self.upstreams_use_https,
            "enable_http3" => &mut self.enable_http3,
            "force_https" => &mut self.force_https,
            "cache_static_files" => &mut self.cache_static_files,
            "cache_dynamic_pages" => &mut self.cache_dynamic_pages,
            "ddos_protection" => &mut self.ddos_protection,
            "ddos_protection_advanced" => &mut self.ddos_protection_advanced,
            "bot_protection" => &mut self.bot_protection,
            "force_subdomains_redirect" => &mut self.force_subdomains_redirect,
            "monitoring_mode" => &mut self.monitoring_mode,
            _ => return None,
        })
    }
}

/// A validated partial `settings` object: only the keys sent, each checked; applying it
/// changes those keys and nothing else.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingsPatch {
    rulesets: Vec<(String, bool)>,
    rules: Vec<(Category, Action)>,
    flags: Vec<(&'static str, bool)>,
    certs_issuer: Option<CertsIssuer>,
    custom_rules: Option<CustomRules>,
}

impl SettingsPatch {
    /// Checks a `settings` value as sent in JSON: an object with any of `rulesets`,
    /// `rules`, `loadbalancer`, each an object of known keys with values of the right
    /// type, and `custom_rules`, a list that replaces the website's. The first problem
    /// is reported with its dotted field name.
    pub fn parse(value: &Value) -> Result<SettingsPatch, Invalid> {
        let settings = object(value, "settings")?;
        let mut patch = SettingsPatch::default();
        for (key, value) in settings {
            match key.as_str() {
                "rulesets" => {
                    for (name, on) in object(value, "settings.rulesets")? {
                        check_ruleset_name(name)?;
                        let field = format!("settings.rulesets.{name}");
                        patch.rulesets.push((name.clone(), boolean(on, &field)?));
                    }
                }
                "rules" => {
                    for (category, action) in object(value, "settings.rules")? {
                        let field = format!("settings.rules.{}", crate::names::shorten(category));
                        let Some(action) = action.as_str() else {
                            return Err(Invalid::malformed(
                                field,
                                "a policy is a string: grant, deny or captcha",
                            ));
                        };
                        patch.rules.push(parse_rule(category, action)?);
                    }
                }
                "loadbalancer" => {
                    for (option, v) in object(value, "settings.loadbalancer")? {
                        let field =
                            format!("settings.loadbalancer.{}", crate::names::shorten(option));
                        if option == "certs_issuer" {
                            patch.certs_issuer = Some(match v.as_str() {
                                Some("custom") => CertsIssuer::Custom,
                                Some("acme") => CertsIssuer::Acme,
                                _ => {
                                    return Err(Invalid::unacceptable(
                                        field,
                                        format!("certs_issuer is `custom` or `acme`, not {v}"),
                                    ));
                                }
                            });
                        } else if let Some(flag) = LOADBALANCER_FLAGS.iter().find(|f| **f == option)
                        {
                            patch.flags.push((flag, boolean(v, &field)?));
                        } else {
                            return Err(Invalid::unacceptable(
                                field,
                                format!(
                                    "unknown load-balancer option; expected one of {}, certs_issuer",
                                    LOADBALANCER_FLAGS.join(", ")
                                ),
                            ));
                        }
                    }
                }
                "custom_rules" => patch.custom_rules = Some(CustomRules::parse(value)?),
                other => {
                    return Err(Invalid::unacceptable(
                        format!("settings.{}", crate::names::shorten(other)),
                        format!(
                            "unknown settings key `{}`; expected rulesets, rules, loadbalancer or custom_rules",
                            crate::names::shorten(other)
                        ),
                    ));
                }
            }
        }
        Ok(patch)
    }

    /// The `certs_issuer` this patch sets, if any.
    pub fn certs_issuer(&self) -> Option<CertsIssuer> {
        self.certs_issuer
    }

    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == SettingsPatch::default()
    }

    /// Changes the keys this patch holds, and only those; refuses a patch that would
    /// leave more rule sets on than a website may enable (nothing changed then).
    pub fn apply(&self, settings: &mut Settings) -> Result<(), Invalid> {
        let mut rulesets = settings.rulesets.clone();
        for (name, on) in &self.rulesets {
            rulesets.set(name, *on);
        }
        rulesets.check_bound()?;
        settings.rulesets = rulesets;
        for (category, action) in &self.rules {
            settings.rules.0.set(*category, Some(*action));
        }
        for (flag, on) in &self.flags {
            if let Some(slot) = settings.loadbalancer.flag_mut(flag) {
                *slot = *on;
            }
        }
        if let Some(issuer) = self.certs_issuer {
            settings.loadbalancer.certs_issuer = issuer;
        }
        if let Some(rules) = &self.custom_rules {
            settings.custom_rules = rules.clone();
        }
        Ok(())
    }
}

fn object<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>, Invalid> {
    value
        .as_object()
        .ok_or_else(|| Invalid::malformed(field, format!("`{field}` must be a JSON object")))
}

fn boolean(value: &Value, field: &str) -> Result<bool, Invalid> {
    value
        .as_bool()
        .ok_or_else(|| Invalid::malformed(field, format!("`{field}` must be true or false")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_cover_every_key_the_specification_names() {
        let json = serde_json::to_value(Settings::default()).unwrap();
        let rulesets = json["rulesets"].as_object().unwrap();
        assert_eq!(rulesets.len(), 9);
        assert!(rulesets.values().all(|v| v == false));
        let rules = json["rules"].as_object().unwrap();
        assert_eq!(rules.len(), 8);
        assert_eq!(rules["security_issues"], "deny");
        assert_eq!(rules["humans"], "grant");
        let lb = json["loadbalancer"].as_object().unwrap();
        // The specification's nine flags and `certs_issuer`, and botgate's
        // `monitoring_mode`.
        assert_eq!(lb.len(), 11);
        assert_eq!(lb["bot_protection"], true);
        assert_eq!(lb["monitoring_mode"], false);
        assert_eq!(lb["certs_issuer"], "acme");
        assert_eq!(json["custom_rules"], serde_json::json!([]));
        let back: Settings = serde_json::from_value(json).unwrap();
        assert_eq!(back, Settings::default());
    }

    #[test]
    fn settings_stored_before_monitoring_mode_load_with_it_off() {
        let mut json = serde_json::to_value(Settings::default()).unwrap();
        json["loadbalancer"]
            .as_object_mut()
            .unwrap()
            .remove("monitoring_mode");
        let back: Settings = serde_json::from_value(json).unwrap();
        assert!(!back.loadbalancer.monitoring_mode);
        let patch = SettingsPatch::parse(&json!({"loadbalancer": {"monitoring_mode": true}}));
        let mut settings = Settings::default();
        patch.unwrap().apply(&mut settings).unwrap();
        assert!(settings.loadbalancer.monitoring_mode);
        let wrong = SettingsPatch::parse(&json!({"loadbalancer": {"monitoring_mode": "yes"}}));
        assert!(wrong.is_err());
    }

    #[test]
    fn custom_rules_are_replaced_whole_and_settings_stored_without_them_load() {
        let mut json = serde_json::to_value(Settings::default()).unwrap();
        json.as_object_mut().unwrap().remove("custom_rules");
        let mut settings: Settings = serde_json::from_value(json).unwrap();
        assert!(settings.custom_rules.is_empty());
        let rule = |method: &str| json!({"conditions": [{"field": "method", "operator": "is", "value": method}], "action": "deny"});
        SettingsPatch::parse(&json!({"custom_rules": [rule("PUT"), rule("DELETE")]}))
            .unwrap()
            .apply(&mut settings)
            .unwrap();
        assert_eq!(settings.custom_rules.rules().len(), 2);
        SettingsPatch::parse(&json!({"rules": {"humans": "captcha"}}))
            .unwrap()
            .apply(&mut settings)
            .unwrap();
        assert_eq!(settings.custom_rules.rules().len(), 2, "kept when not sent");
        SettingsPatch::parse(&json!({"custom_rules": [rule("PATCH")]}))
            .unwrap()
            .apply(&mut settings)
            .unwrap();
        assert_eq!(settings.custom_rules.rules().len(), 1, "replaced whole");
        let stored = serde_json::to_value(&settings).unwrap();
        let back: Settings = serde_json::from_value(stored).unwrap();
        assert_eq!(back, settings);
        let err = SettingsPatch::parse(&json!({"custom_rules": [{"conditions": []}]})).unwrap_err();
        assert_eq!(err.field, "settings.custom_rules[0]");
    }

    #[test]
    fn a_patch_changes_only_the_keys_sent() {
        let mut settings = Settings::default();
        SettingsPatch::parse(&json!({"rules": {"humans": "captcha"}}))
            .unwrap()
            .apply(&mut settings)
            .unwrap();
        assert_eq!(settings.rules.0.action(Category::Humans), Action::Captcha);
        assert_eq!(
            settings.rules.0.action(Category::SecurityIssues),
            Action::Deny
        );
        SettingsPatch::parse(
            &json!({"loadbalancer": {"certs_issuer": "custom"}, "rulesets": {"wordpress": true}}),
        )
        .unwrap()
        .apply(&mut settings)
        .unwrap();
        assert_eq!(settings.loadbalancer.certs_issuer, CertsIssuer::Custom);
        assert!(settings.loadbalancer.bot_protection);
        assert_eq!(settings.rulesets.enabled_names(), ["wordpress"]);
        assert_eq!(settings.rules.0.action(Category::Humans), Action::Captcha);
    }

    #[test]
    fn operators_rule_sets_are_enabled_by_name_and_shown_while_on() {
        let mut settings = Settings::default();
        SettingsPatch::parse(&json!({"rulesets": {"magento": true, "wordpress": true}}))
            .unwrap()
            .apply(&mut settings)
            .unwrap();
        assert!(settings.rulesets.enabled("magento"));
        assert_eq!(settings.rulesets.enabled_names(), ["wordpress", "magento"]);
        let json = serde_json::to_value(&settings).unwrap();
        assert_eq!(json["rulesets"]["magento"], true);
        assert_eq!(json["rulesets"].as_object().unwrap().len(), 10);
        // Stored and read back (the store keeps settings as this JSON).
        let read: Settings = serde_json::from_value(json).unwrap();
        assert_eq!(read, settings);
        // Off again: no longer shown, as a name never enabled is not.
        SettingsPatch::parse(&json!({"rulesets": {"magento": false, "joomla": false}}))
            .unwrap()
            .apply(&mut settings)
            .unwrap();
        assert!(!settings.rulesets.enabled("magento"));
        let json = serde_json::to_value(&settings).unwrap();
        assert_eq!(json["rulesets"].as_object().unwrap().len(), 9);
        assert_eq!(settings.rulesets.enabled_names(), ["wordpress"]);
    }

    #[test]
    fn other_rule_sets_are_kept_by_name_once_each() {
        let mut settings = Settings::default();
        for patch in [
            json!({"rulesets": {"zeta": true, "alpha": true}}),
            json!({"rulesets": {"zeta": true, "mid": true, "gone": false}}),
        ] {
            SettingsPatch::parse(&patch)
                .unwrap()
                .apply(&mut settings)
                .unwrap();
        }
        assert_eq!(settings.rulesets.enabled_names(), ["alpha", "mid", "zeta"]);
        let mut into = Vec::new();
        settings.rulesets.enabled_into(&mut into);
        assert_eq!(into, settings.rulesets.enabled_names());
        assert!(settings.rulesets.enabled("mid") && !settings.rulesets.enabled("gone"));
    }

    #[test]
    fn a_website_enables_a_bounded_number_of_other_rule_sets() {
        let names = |range: std::ops::Range<usize>| -> Value {
            range
                .map(|i| (format!("own-{i}"), json!(true)))
                .collect::<Map<_, _>>()
                .into()
        };
        let mut settings = Settings::default();
        SettingsPatch::parse(&json!({"rulesets": names(0..MAX_OTHER_RULESETS)}))
            .unwrap()
            .apply(&mut settings)
            .unwrap();
        // One more in a later update is refused, and nothing of that update is kept.
        let refused = SettingsPatch::parse(&json!({
            "rulesets": names(MAX_OTHER_RULESETS..MAX_OTHER_RULESETS + 1),
            "rules": {"humans": "deny"},
        }))
        .unwrap()
        .apply(&mut settings)
        .unwrap_err();
        assert_eq!(refused.field, "settings.rulesets", "{refused}");
        assert!(refused.to_string().contains("at most 16"), "{refused}");
        assert_eq!(settings.rulesets.enabled_names().len(), MAX_OTHER_RULESETS);
        assert_eq!(settings.rules.0.action(Category::Humans), Action::Grant);
        // Switching one off makes room.
        SettingsPatch::parse(&json!({"rulesets": {"own-0": false, "own-99": true}}))
            .unwrap()
            .apply(&mut settings)
            .unwrap();
        assert!(settings.rulesets.enabled("own-99"));
        // A stored record is read whatever a later release let it hold: over the bound,
        // or with a name this one refuses (left out).
        let mut stored = serde_json::to_value(Settings::default()).unwrap();
        stored["rulesets"] = names(0..MAX_OTHER_RULESETS + 1);
        stored["rulesets"]["crs"] = json!(false);
        stored["rulesets"]["Not A Name"] = json!(true);
        let read: Settings = serde_json::from_value(stored).unwrap();
        assert_eq!(read.rulesets.others().count(), MAX_OTHER_RULESETS + 1);
        assert!(!read.rulesets.enabled("Not A Name"));
    }

    #[test]
    fn bad_patches_name_the_field() {
        let cases = [
            (json!([]), "settings"),
            (json!({"rulez": {}}), "settings.rulez"),
            (json!({"rulesets": {"crs": false}}), "settings.rulesets.crs"),
            (
                json!({"rulesets": {"classifier": true}}),
                "settings.rulesets.classifier",
            ),
            (
                json!({"rulesets": {"Magento": true}}),
                "settings.rulesets.Magento",
            ),
            (json!({"rulesets": {"": true}}), "settings.rulesets."),
            (
                json!({"rulesets": {"wordpress": "yes"}}),
                "settings.rulesets.wordpress",
            ),
            (
                json!({"rules": {"robots": "deny"}}),
                "settings.rules.robots",
            ),
            (
                json!({"rules": {"humans": "allow"}}),
                "settings.rules.humans",
            ),
            (json!({"rules": {"humans": 1}}), "settings.rules.humans"),
            (
                json!({"loadbalancer": {"turbo": true}}),
                "settings.loadbalancer.turbo",
            ),
            (
                json!({"loadbalancer": {"force_https": 1}}),
                "settings.loadbalancer.force_https",
            ),
            (
                json!({"loadbalancer": {"certs_issuer": "letsencrypt"}}),
                "settings.loadbalancer.certs_issuer",
            ),
        ];
        for (value, field) in cases {
            let err = SettingsPatch::parse(&value).unwrap_err();
            assert_eq!(err.field, field, "{value}: {err}");
        }
    }
}
