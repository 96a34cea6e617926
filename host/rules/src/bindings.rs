//! Host bindings generated from the one WIT source (`wit/ruleset.wit`), and conversions
//! between the WIT types and the domain model.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "ruleset",
    additional_derives: [PartialEq, Eq],
});

pub use botgate::ruleset::types::{
    AlpnProtocol, Behaviour, Category as WitCategory, ChallengePass, ComponentInfo,
    CrawlerVerification, HttpVersion, IpAddress, Opinion, RequestFacts, Scheme, TlsFacts,
    TlsVersion,
};

use botgate_model::Category;

/// The WIT package this gateway implements, as `wit/ruleset.wit` declares it.
pub const CONTRACT: &str = "botgate:ruleset@2.0.0";

impl From<WitCategory> for Category {
    fn from(c: WitCategory) -> Self {
        match c {
            WitCategory::ContentScrapers => Category::ContentScrapers,
            WitCategory::EmulatedHumans => Category::EmulatedHumans,
            WitCategory::Humans => Category::Humans,
            WitCategory::SearchEngines => Category::SearchEngines,
            WitCategory::SecurityIssues => Category::SecurityIssues,
            WitCategory::ServicesAndPayments => Category::ServicesAndPayments,
            WitCategory::SocialNetworks => Category::SocialNetworks,
            WitCategory::SuspiciousBehaviour => Category::SuspiciousBehaviour,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_contract_constant_is_the_wit_package() {
        let wit = include_str!("../../../wit/ruleset.wit");
        assert!(wit.contains(&format!("package {};", super::CONTRACT)));
    }
}
