//! A rule component with a narrow scope whose logic answers every request: the host
//! must call it only for requests inside the scope.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

struct Scoped;

impl Ruleset for Scoped {
    const SCOPE: &'static [&'static str] = &["/members/", "token=", "ua:members-sync/"];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "scoped",
            "Flags everything under /members/, with a token, or from the sync client."
        )
    }

    // Deliberately ignores its scope: the test proves the host enforces it.
    fn evaluate(_req: &Request<'_>) -> Option<Opinion> {
        opinion(Category::SuspiciousBehaviour, 90, "scoped.inside")
    }
}

// Exported without the SDK's in-guest scope check, so only the host's check stands
// between this logic and requests outside the scope.
#[cfg(target_arch = "wasm32")]
const _: () = {
    use botgate_ruleset_sdk::bindings;
    struct Export;
    impl bindings::exports::botgate::ruleset::rules::Guest for Export {
        fn info() -> Info {
            botgate_ruleset_sdk::info_of::<Scoped>()
        }
        fn evaluate(facts: botgate_ruleset_sdk::RequestFacts) -> Option<Opinion> {
            Scoped::evaluate(&Request::new(&facts))
        }
    }
    bindings::export_bindings!(Export with_types_in bindings);
};
