//! botgate's gateway library: the data plane and the sandboxed Wasm rule engine.
//!
//! The rule engine lives in [`rules`]: it compiles rule components once, keeps them in
//! an atomically swapped [`rules::Registry`], calls each one under a CPU deadline and a
//! memory cap, and merges their opinions into one [`rules::Decision`].

pub mod client;
pub mod gateway;
pub mod log_writer;
pub mod provisioning;
pub mod recent;
pub mod rules;
pub mod server;

/// Errors with their sources on one line, for logs.
pub use botgate_model::report;
