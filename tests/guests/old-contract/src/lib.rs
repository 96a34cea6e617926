//! A component built against version 1 of the contract: it must be refused with an
//! error naming both versions, not an opaque type mismatch.

wit_bindgen::generate!({
    inline: "
        package botgate:ruleset@1.0.0;
        interface rules { info: func() -> string; }
        world ruleset { export rules; }
    ",
    world: "ruleset",
});

struct Old;

impl exports::botgate::ruleset::rules::Guest for Old {
    fn info() -> String {
        "old-contract".into()
    }
}

export!(Old);
