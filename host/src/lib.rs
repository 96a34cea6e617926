//! botgate's gateway library: the data plane and the sandboxed Wasm rule engine.
//!
//! The rule engine is the `botgate-rules` crate, re-exported as [`rules`]; [`server`]
//! starts the whole gateway from one configuration.

pub mod api_host;
pub mod cluster;
pub mod fleet;
pub mod gateway;
pub mod log_writer;
pub mod operator;
pub mod provisioning;
pub mod server;

/// The rule engine, and what it reads of clients.
pub use botgate_rules::{self as rules, client, recent};

/// Errors with their sources on one line, for logs.
pub use botgate_model::report;
