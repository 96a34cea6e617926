//! Rule-engine tests against real built components: isolation and fail-open, load-time
//! validation, hot reload, the compile cache, and the shipped rule sets' decisions.

mod cache;
mod hot_reload;
mod isolation;
mod scope;
mod shipped;
mod validation;
