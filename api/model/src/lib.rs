//! botgate's domain model: the types every other crate speaks, with validation and no I/O.

pub mod policy;
pub mod rulesets;

pub use policy::{Action, Category, ParseError, Policy};
pub use rulesets::{InvalidRulesetName, KNOWN_RULESETS, RulesetName};
