//! A component of another world: it must be refused as not a rule component.

wit_bindgen::generate!({
    inline: "
        package test:other@1.0.0;
        interface thing { run: func() -> u32; }
        world other { export thing; }
    ",
    world: "other",
});

struct Other;

impl exports::test::other::thing::Guest for Other {
    fn run() -> u32 {
        7
    }
}

export!(Other);
