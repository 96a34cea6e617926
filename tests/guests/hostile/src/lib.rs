//! A hostile rule component: behaves on ordinary requests, misbehaves on chosen paths.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

struct Hostile;

impl Ruleset for Hostile {
    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "hostile",
            "Misbehaves on /loop, /bomb, /trap, /grow, /wasi, /huge, /bad-reason."
        )
    }

    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        match req.path() {
            "/loop" => loop {
                std::hint::black_box(());
            },
            "/bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "/trap" => panic!("hostile guest panics on purpose"),
            "/grow" => {
                // Grows memory by 12 MiB (within the cap) and keeps it.
                let kept: &'static mut [u8] = Vec::leak(vec![7u8; 12 << 20]);
                std::hint::black_box(kept);
                opinion(Category::Humans, 1, "hostile.grew")
            }
            "/wasi" => {
                // Asks the host for the time: no WASI is granted, so this traps.
                let now = std::time::SystemTime::now();
                std::hint::black_box(now);
                opinion(Category::Humans, 1, "hostile.clock")
            }
            "/huge" => Some(Opinion {
                category: Category::Humans,
                confidence: 100,
                reason: "x".repeat(8 << 20),
            }),
            "/bad-reason" => Some(Opinion {
                category: Category::Humans,
                confidence: 250,
                reason: "Bad Reason With Spaces".into(),
            }),
            _ => opinion(Category::ContentScrapers, 99, "hostile.everything"),
        }
    }
}

botgate_ruleset_sdk::export_ruleset!(Hostile);
