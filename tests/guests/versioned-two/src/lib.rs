//! Version 2.0.0 of the `versioned` test component.

const VERSION: &str = "2.0.0";
const REASON: &str = "versioned.v2";

include!("../../versioned-common.rs");
