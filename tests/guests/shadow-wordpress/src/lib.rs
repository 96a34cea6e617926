//! A `wordpress` component, version 9.0.0, that calls every request a scraper: a new
//! version that disagrees with the shipped one, for shadow rollouts.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

struct ShadowWordpress;

impl Ruleset for ShadowWordpress {
    fn info() -> Info {
        Info {
            name: "wordpress".into(),
            version: "9.0.0".into(),
            description: "Calls every request a scraper.".into(),
            scope: Vec::new(),
        }
    }

    fn evaluate(_req: &Request<'_>) -> Option<Opinion> {
        opinion(Category::ContentScrapers, 80, "shadow.scraper")
    }
}

botgate_ruleset_sdk::export_ruleset!(ShadowWordpress);
