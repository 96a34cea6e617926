//! The rule-set names of the specification's `settings.rulesets` table.

use std::fmt;
use std::str::FromStr;

/// The nine CMS rule sets a website can enable, as the specification names them.
pub const KNOWN_RULESETS: [&str; 9] = [
    "bitrix",
    "cpanel",
    "dokuwiki",
    "drupal",
    "joomla",
    "nextcloud",
    "prestashop",
    "wordpress",
    "xenforo",
];

/// The components that run for every website, whatever its `settings.rulesets`: the
/// general classifier and the OWASP Core Rule Set.
pub const ALWAYS_ON_RULESETS: [&str; 2] = ["classifier", "crs"];

/// How many rule sets besides [`KNOWN_RULESETS`] (operators' own components) one
/// website may enable: each is a component call for the requests in its scope.
pub const MAX_OTHER_RULESETS: usize = 16;

/// The name of a rule component: `[a-z0-9_-]`, 1 to 64 bytes, the stem of its
/// `.wasm` file. The nine CMS names of [`KNOWN_RULESETS`] and `classifier` are the
/// shipped ones; operators may load others.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RulesetName(String);

/// A string that is not a valid rule-set name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid rule-set name `{0}`: use 1 to 64 characters of a-z, 0-9, `_` and `-`")]
pub struct InvalidRulesetName(pub String);

impl RulesetName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for RulesetName {
    type Err = InvalidRulesetName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let valid = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if valid {
            Ok(RulesetName(s.to_owned()))
        } else {
            Err(InvalidRulesetName(s.to_owned()))
        }
    }
}

impl fmt::Display for RulesetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_are_valid() {
        for name in KNOWN_RULESETS {
            assert_eq!(name.parse::<RulesetName>().unwrap().as_str(), name);
        }
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["", "WordPress", "../x", "a b", &"x".repeat(65)] {
            assert!(bad.parse::<RulesetName>().is_err(), "{bad:?}");
        }
    }
}
