//! Traffic categories, policy actions and a website's policy table (`settings.rules`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// An unknown category or action name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unknown traffic category `{0}`; expected one of {list}", list = Category::NAMES.join(", "))]
    Category(String),
    #[error("unknown policy `{0}`; expected grant, deny or captcha")]
    Action(String),
}

/// The eight traffic categories, keyed as in the specification's `settings.rules` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    ContentScrapers,
    EmulatedHumans,
    Humans,
    SearchEngines,
    SecurityIssues,
    ServicesAndPayments,
    SocialNetworks,
    SuspiciousBehaviour,
}

impl Category {
    /// Every category, in the specification's (alphabetical) order.
    pub const ALL: [Category; 8] = [
        Category::ContentScrapers,
        Category::EmulatedHumans,
        Category::Humans,
        Category::SearchEngines,
        Category::SecurityIssues,
        Category::ServicesAndPayments,
        Category::SocialNetworks,
        Category::SuspiciousBehaviour,
    ];

    /// The policy keys, index-aligned with [`Category::ALL`].
    pub const NAMES: [&'static str; 8] = [
        "content_scrapers",
        "emulated_humans",
        "humans",
        "search_engines",
        "security_issues",
        "services_and_payments",
        "social_networks",
        "suspicious_behaviour",
    ];

    /// The policy key of this category (`content_scrapers`, ...).
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The action taken when a website sets no policy for this category.
    pub fn default_action(self) -> Action {
        match self {
            Category::Humans
            | Category::SearchEngines
            | Category::SocialNetworks
            | Category::ServicesAndPayments => Action::Grant,
            Category::SecurityIssues | Category::ContentScrapers => Action::Deny,
            Category::EmulatedHumans | Category::SuspiciousBehaviour => Action::Captcha,
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Category {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES
            .iter()
            .position(|name| *name == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| ParseError::Category(s.to_owned()))
    }
}

/// What the gateway does with a request of a given category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Forward to the origin.
    Grant,
    /// Answer 403.
    Deny,
    /// Answer the challenge unless the client holds a valid pass.
    Captcha,
}

impl Action {
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Grant => "grant",
            Action::Deny => "deny",
            Action::Captcha => "captcha",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Action {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "grant" => Ok(Action::Grant),
            "deny" => Ok(Action::Deny),
            "captcha" => Ok(Action::Captcha),
            other => Err(ParseError::Action(other.to_owned())),
        }
    }
}

/// A website's policy table: one optional action per category; a category the
/// website did not set falls back to [`Category::default_action`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    actions: [Option<Action>; 8],
}

impl Policy {
    /// The action for `category`, the website's own or the default.
    pub fn action(&self, category: Category) -> Action {
        self.actions[category as usize].unwrap_or_else(|| category.default_action())
    }

    /// The website's own setting for `category`, if it set one.
    pub fn explicit(&self, category: Category) -> Option<Action> {
        self.actions[category as usize]
    }

    /// Sets (or with `None`, clears) the website's action for `category`.
    pub fn set(&mut self, category: Category, action: Option<Action>) {
        self.actions[category as usize] = action;
    }

    /// Builder form of [`Policy::set`].
    pub fn with(mut self, category: Category, action: Action) -> Self {
        self.set(category, Some(action));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde_and_from_str() {
        for (category, name) in Category::ALL.iter().zip(Category::NAMES) {
            assert_eq!(category.as_str(), name);
            assert_eq!(name.parse::<Category>().unwrap(), *category);
            let json = serde_json::to_string(category).unwrap();
            assert_eq!(json, format!("\"{name}\""));
        }
    }

    #[test]
    fn defaults_follow_the_design_brief() {
        let p = Policy::default();
        assert_eq!(p.action(Category::Humans), Action::Grant);
        assert_eq!(p.action(Category::SearchEngines), Action::Grant);
        assert_eq!(p.action(Category::SocialNetworks), Action::Grant);
        assert_eq!(p.action(Category::ServicesAndPayments), Action::Grant);
        assert_eq!(p.action(Category::SecurityIssues), Action::Deny);
        assert_eq!(p.action(Category::ContentScrapers), Action::Deny);
        assert_eq!(p.action(Category::EmulatedHumans), Action::Captcha);
        assert_eq!(p.action(Category::SuspiciousBehaviour), Action::Captcha);
    }

    #[test]
    fn explicit_setting_overrides_default() {
        let p = Policy::default().with(Category::Humans, Action::Captcha);
        assert_eq!(p.action(Category::Humans), Action::Captcha);
        assert_eq!(p.explicit(Category::SecurityIssues), None);
    }

    #[test]
    fn unknown_names_are_named_in_the_error() {
        let err = "robots".parse::<Category>().unwrap_err();
        assert!(err.to_string().contains("`robots`"), "{err}");
        let err = "allow".parse::<Action>().unwrap_err();
        assert!(err.to_string().contains("`allow`"), "{err}");
    }
}
