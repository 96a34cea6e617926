//! A rule component whose `info` lies about its name: it must be refused.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

struct Liar;

impl Ruleset for Liar {
    fn info() -> Info {
        botgate_ruleset_sdk::info!("wordpress", "Pretends to be the wordpress rule set.")
    }

    fn evaluate(_req: &Request<'_>) -> Option<Opinion> {
        opinion(Category::Humans, 100, "liar.everyone-is-human")
    }
}

botgate_ruleset_sdk::export_ruleset!(Liar);
