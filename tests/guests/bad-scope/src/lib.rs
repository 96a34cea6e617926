//! A rule component whose scope holds a marker that can never match a normalised
//! path: it must be refused.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

struct BadScope;

impl Ruleset for BadScope {
    const SCOPE: &'static [&'static str] = &["/wp-login.php", "/WP-ADMIN/"];

    fn info() -> Info {
        botgate_ruleset_sdk::info!("bad_scope", "Declares an upper-case scope marker.")
    }

    fn evaluate(_req: &Request<'_>) -> Option<Opinion> {
        opinion(Category::Humans, 100, "bad-scope.any")
    }
}

botgate_ruleset_sdk::export_ruleset!(BadScope);
