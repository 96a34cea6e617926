//! botgate's domain model: the types every other crate speaks, with validation and no I/O.

pub mod addresses;
pub mod certificate;
pub mod custom_rules;
pub mod dashboard;
pub mod html;
pub mod invalid;
pub mod names;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod policy;
pub mod report;
pub mod rulesets;
pub mod settings;
pub mod user;
pub mod website;

pub use certificate::Certificate;
pub use custom_rules::CustomRules;
pub use dashboard::FrameOrigin;
pub use invalid::{Invalid, InvalidKind};
pub use names::{Domain, Subdomain, UserId};
pub use policy::{Action, Category, ParseError, Policy};
pub use rulesets::{
    ALWAYS_ON_RULESETS, InvalidRulesetName, KNOWN_RULESETS, MAX_OTHER_RULESETS, RulesetName,
};
pub use settings::{CertsIssuer, Loadbalancer, Rules, Rulesets, Settings, SettingsPatch};
pub use user::{PartnerName, User, UserView};
pub use website::{Pending, Status, Website, WebsiteInput, WebsiteView};
