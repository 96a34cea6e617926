// The body shared by versioned-one and versioned-two; each defines VERSION and REASON.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

struct Versioned;

impl Ruleset for Versioned {
    fn info() -> Info {
        Info {
            name: "versioned".into(),
            version: VERSION.into(),
            description: "Answers with its own version in the reason id.".into(),
            scope: Vec::new(),
        }
    }

    fn evaluate(_req: &Request<'_>) -> Option<Opinion> {
        opinion(Category::ServicesAndPayments, 90, REASON)
    }
}

botgate_ruleset_sdk::export_ruleset!(Versioned);
