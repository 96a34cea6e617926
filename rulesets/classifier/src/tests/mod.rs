//! Native tests of the classifier, one realistic request per test, grouped by the
//! category the request should get; `data` checks the crawler table against the JSON.

mod content_scrapers;
mod data;
mod emulated_humans;
mod fixtures;
mod humans;
mod search_engines;
mod security;
mod services;
mod social_networks;
mod suspicious;

use fixtures::*;

#[test]
fn info_names_the_component() {
    let info = <Classifier as botgate_ruleset_sdk::Ruleset>::info();
    assert_eq!(info.name, "classifier");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
}
