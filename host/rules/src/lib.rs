//! botgate's rule engine: sandboxed Wasm rule components and the decision they feed.
//! It compiles components once, keeps them in an atomically swapped [`Registry`], calls
//! each under a CPU deadline and a memory cap, and merges their opinions into one
//! [`Decision`]. What the gateway learns of a client ([`client`]) becomes the WIT
//! contract's request record in one place, [`facts`].
//!
//! Phases of one evaluation (see ARCHITECTURE.md):
//! 1. the data plane builds a [`RequestFacts`] record ([`facts`]);
//! 2. [`decide`] takes one [`RulesetSet`] snapshot from the [`Registry`], runs the
//!    classifier and each enabled rule set once ([`component`]), each call bounded by
//!    the [`sandbox`];
//! 3. opinions are merged by the documented precedence into a [`Decision`] and the
//!    website's policy picks the action.

pub mod bindings;
pub mod cache;
pub mod client;
pub mod component;
pub mod decision;
pub mod facts;
pub mod recent;
pub mod registry;
pub mod sandbox;
pub mod scope;
pub mod source;
pub mod watcher;

pub use bindings::RequestFacts;
pub use component::{ComponentStats, LoadError, LoadedComponent, Outcome};
pub use decision::{
    ALWAYS_ON, CLASSIFIER, CORE_RULE_SET, Decider, Decision, decide, decide_observed,
};
pub use registry::{NotInService, Registry, RulesetSet, SyncReport};
pub use sandbox::{Sandbox, SandboxConfig};
pub use source::{DirectorySource, RulesetBlob, RulesetSource};
pub use watcher::Watcher;
