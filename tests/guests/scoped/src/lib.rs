//! A rule component with a narrow scope whose logic answers every request: the host
//! must call it only for requests inside the scope.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

struct Scoped;

impl Ruleset for Scoped {
    const SCOPE: &'static [&'static str] = &[
        "/members/",
        "token=",
        "ua:members-sync/",
        // Compound: key files under a vault folder; the vault API from the vault agent.
        "/vault/&.key",
        "/vault-api&ua:vault-agent/",
        // By method: posts to the inbox, and every PURGE.
        "/inbox/&method:post",
        "method:purge",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "scoped",
            "Flags /members/, tokens, the sync client, vault keys and the vault agent."
        )
    }

    // Deliberately ignores its scope: only the host's check stands between this logic
    // and requests outside the scope.
    fn evaluate(_req: &Request<'_>) -> Option<Opinion> {
        opinion(Category::SuspiciousBehaviour, 90, "scoped.inside")
    }
}

botgate_ruleset_sdk::export_ruleset!(Scoped);
