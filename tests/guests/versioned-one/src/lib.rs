//! Version 1.0.0 of the `versioned` test component.

const VERSION: &str = "1.0.0";
const REASON: &str = "versioned.v1";

include!("../../versioned-common.rs");
