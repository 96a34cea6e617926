//! A rule component that never returns: it must be refused at load time.

use botgate_ruleset_sdk::{Info, Opinion, Request, Ruleset};

struct Spinner;

impl Ruleset for Spinner {
    fn info() -> Info {
        botgate_ruleset_sdk::info!("spinner", "Loops forever.")
    }

    fn evaluate(_req: &Request<'_>) -> Option<Opinion> {
        loop {
            std::hint::black_box(());
        }
    }
}

botgate_ruleset_sdk::export_ruleset!(Spinner);
