//! Load-time validation: what is not a sound rule component is refused with a clear
//! reason, and the previous good version stays in service.

use botgate_host::rules::{DirectorySource, LoadError};
use botgate_tests::{guest, guest_bytes, init_logs, registry, replace_atomically, ruleset_dir};

fn check(name: &str, bytes: &[u8]) -> LoadError {
    match registry().check(name, bytes, "test") {
        Ok(c) => panic!(
            "{name} should be refused, loaded {} {}",
            c.name(),
            c.version()
        ),
        Err(err) => err,
    }
}

#[test]
fn garbage_is_not_wasm() {
    let err = check("garbage", b"this is not wasm at all");
    assert!(matches!(err, LoadError::NotWasm), "{err}");
    assert!(err.to_string().contains("not a WebAssembly file"));
}

#[test]
fn truncated_component_does_not_compile() {
    let bytes = guest_bytes("template");
    let err = check("template", &bytes[..bytes.len() / 2]);
    assert!(matches!(err, LoadError::Compile(_)), "{err}");
}

#[test]
fn core_module_is_not_a_component() {
    // The smallest valid core module: magic and version 1.
    let err = check("core", b"\0asm\x01\0\0\0");
    assert!(matches!(err, LoadError::CoreModule), "{err}");
    assert!(err.to_string().contains("wasm32-wasip2"));
}

#[test]
fn component_of_another_world_is_refused() {
    let err = check("wrong_world", &guest_bytes("wrong_world"));
    assert!(matches!(err, LoadError::WrongWorld(_)), "{err}");
    assert!(err.to_string().contains("wrong world"));
}

#[test]
fn component_of_another_contract_version_is_refused_naming_both() {
    let err = check("old_contract", &guest_bytes("old_contract"));
    match &err {
        LoadError::OtherContract { found } => assert_eq!(found, "1.0.0"),
        other => panic!("expected OtherContract, got {other}"),
    }
    let message = err.to_string();
    assert!(message.contains("botgate:ruleset@1.0.0"), "{message}");
    assert!(
        message.contains(botgate_host::rules::bindings::CONTRACT),
        "{message}"
    );
}

#[test]
fn info_that_lies_about_its_name_is_refused() {
    let err = check("liar", &guest_bytes("liar"));
    match &err {
        LoadError::NameMismatch { claimed, file } => {
            assert_eq!(claimed, "wordpress");
            assert_eq!(file, "liar");
        }
        other => panic!("expected NameMismatch, got {other}"),
    }
}

#[test]
fn component_that_never_answers_fails_its_smoke_request() {
    let err = check("spinner", &guest_bytes("spinner"));
    assert!(matches!(err, LoadError::Smoke(_)), "{err}");
    assert!(err.to_string().contains("smoke request"));
}

#[test]
fn invalid_file_name_is_refused() {
    let err = check("Bad Name", &guest_bytes("template"));
    assert!(matches!(err, LoadError::BadName(_)), "{err}");
}

#[test]
fn refused_replacement_keeps_the_previous_version() {
    init_logs();
    let registry = registry();
    let dir = ruleset_dir(&[("template", "template"), ("classifier", "classifier")]);
    let source = DirectorySource::new(dir.path());
    let first = registry.sync(&source);
    assert_eq!(first.loaded.len(), 2, "{first:?}");
    let before = registry
        .snapshot()
        .get("template")
        .unwrap()
        .hash()
        .to_owned();

    // Replace the template with a component that lies about its name, add garbage.
    replace_atomically(&guest("liar"), &dir.path().join("template.wasm"));
    std::fs::write(dir.path().join("broken.wasm"), b"\0asm garbage").unwrap();
    let report = registry.sync(&source);
    assert_eq!(report.refused.len(), 2, "{report:?}");
    assert!(
        report
            .refused
            .iter()
            .any(|(origin, why)| origin.ends_with("template.wasm") && why.contains("`wordpress`"))
    );
    assert!(
        report
            .refused
            .iter()
            .any(|(origin, _)| origin.ends_with("broken.wasm"))
    );
    let set = registry.snapshot();
    assert_eq!(
        set.get("template").unwrap().hash(),
        before,
        "the previous template stays"
    );
    assert!(set.get("classifier").is_some());
    assert!(set.get("broken").is_none());
    // Both are named as not in service, with their reasons, until the files are mended.
    let held: Vec<(String, bool)> = registry
        .not_in_service()
        .into_iter()
        .map(|n| (n.name, n.origin.ends_with(".wasm") && !n.reason.is_empty()))
        .collect();
    assert_eq!(
        held,
        [("broken".to_owned(), true), ("template".to_owned(), true)]
    );
    assert!(
        registry
            .not_in_service()
            .iter()
            .any(|n| n.name == "template" && n.reason.contains("`wordpress`"))
    );
    replace_atomically(&guest("template"), &dir.path().join("template.wasm"));
    std::fs::remove_file(dir.path().join("broken.wasm")).unwrap();
    let mended = registry.sync(&source);
    assert!(mended.refused.is_empty(), "{mended:?}");
    assert_eq!(registry.not_in_service(), []);
}

#[test]
fn files_that_are_not_components_are_ignored() {
    let registry = registry();
    let dir = ruleset_dir(&[("template", "template")]);
    std::fs::write(dir.path().join("README.md"), "notes").unwrap();
    std::fs::write(dir.path().join(".template.wasm.tmp"), "partial").unwrap();
    let report = registry.sync(&DirectorySource::new(dir.path()));
    assert!(report.refused.is_empty(), "{report:?}");
    assert_eq!(registry.snapshot().len(), 1);
}

#[test]
fn scope_that_can_never_match_is_refused() {
    let err = check("bad_scope", &guest_bytes("bad_scope"));
    match &err {
        LoadError::BadInfo { field, why } => {
            assert_eq!(*field, "scope");
            assert!(why.contains("/WP-ADMIN/"), "{why}");
        }
        other => panic!("expected BadInfo on the scope, got {other}"),
    }
}

#[test]
fn a_component_with_its_own_allocator_is_served_by_it() {
    // `export_ruleset!(_, own_allocator)` installs no allocator beside the component's.
    let component = registry()
        .check("own_allocator", &guest_bytes("own_allocator"), "test")
        .expect("a component with its own allocator loads");
    let outcome = component.evaluate(&botgate_tests::facts("GET", "/", &[]));
    match outcome {
        botgate_host::rules::Outcome::Opinion(opinion) => {
            assert_eq!(opinion.reason, "own-allocator.counted")
        }
        other => panic!("expected its opinion, got {other:?}"),
    }
}
