//! Hot reload through the watched directory: versions swap atomically under load,
//! in-flight evaluations finish on the version they started with, files come and go.

use botgate_host::rules::facts::smoke_facts;
use botgate_host::rules::{DirectorySource, Outcome, Registry, Watcher};
use botgate_tests::{guest, init_logs, registry, replace_atomically, ruleset_dir};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Waits (bounded) until `done` holds for the registry's current set.
fn wait_for(registry: &Registry, what: &str, done: impl Fn(&Registry) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(registry) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn version_of(registry: &Registry, name: &str) -> Option<String> {
    registry
        .snapshot()
        .get(name)
        .map(|c| c.version().to_owned())
}

#[test]
fn replacing_a_component_under_load_swaps_with_zero_errors() {
    init_logs();
    let registry = registry();
    let dir = ruleset_dir(&[("versioned_one", "versioned")]);
    let _watcher = Watcher::start(registry.clone(), DirectorySource::new(dir.path())).unwrap();
    assert_eq!(version_of(&registry, "versioned").as_deref(), Some("1.0.0"));

    const WORKERS: usize = 4;
    let stop = AtomicBool::new(false);
    let v1: [AtomicU64; WORKERS] = Default::default();
    let v2: [AtomicU64; WORKERS] = Default::default();
    let errors = AtomicU64::new(0);
    let facts = smoke_facts();
    std::thread::scope(|s| {
        for worker in 0..WORKERS {
            let (stop, v1, v2, errors, facts, registry) =
                (&stop, &v1, &v2, &errors, &facts, &registry);
            s.spawn(move || {
                while !stop.load(Relaxed) {
                    // One snapshot per evaluation, as the data plane does.
                    let set = registry.snapshot();
                    let component = set.get("versioned").expect("never missing during a swap");
                    match component.evaluate(facts) {
                        Outcome::Opinion(o) if o.reason == "versioned.v1" => {
                            v1[worker].fetch_add(1, Relaxed);
                        }
                        Outcome::Opinion(o) if o.reason == "versioned.v2" => {
                            v2[worker].fetch_add(1, Relaxed);
                        }
                        _ => {
                            errors.fetch_add(1, Relaxed);
                        }
                    }
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while v1.iter().any(|n| n.load(Relaxed) == 0) {
            assert!(Instant::now() < deadline, "workers did not start");
            std::thread::yield_now();
        }
        replace_atomically(&guest("versioned_two"), &dir.path().join("versioned.wasm"));
        wait_for(&registry, "version 2.0.0", |r| {
            version_of(r, "versioned").as_deref() == Some("2.0.0")
        });
        // Every worker takes up the new version without a restart.
        while v2.iter().any(|n| n.load(Relaxed) < 10) {
            assert!(
                Instant::now() < deadline,
                "a worker never evaluated version 2.0.0"
            );
            std::thread::yield_now();
        }
        stop.store(true, Relaxed);
    });
    assert_eq!(
        errors.load(Relaxed),
        0,
        "no evaluation failed during the swap"
    );
}

#[test]
fn the_watcher_is_quiet_when_nothing_changes() {
    init_logs();
    let registry = registry();
    let dir = ruleset_dir(&[("classifier", "classifier"), ("template", "template")]);
    let _watcher = Watcher::start(registry.clone(), DirectorySource::new(dir.path())).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let after_start = registry.sync_count();
    // Reading files (as every sync does) must not wake the watcher again.
    for _ in 0..5 {
        let _ = std::fs::read(dir.path().join("template.wasm")).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(
        registry.sync_count(),
        after_start,
        "a sync triggered another sync"
    );
}

#[test]
fn an_unreadable_directory_keeps_every_rule_set_in_service() {
    init_logs();
    let registry = registry();
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("rulesets");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(guest("template"), dir.join("template.wasm")).unwrap();
    let source = DirectorySource::new(&dir);
    registry.sync(&source);
    assert!(registry.snapshot().get("template").is_some());

    std::fs::rename(&dir, parent.path().join("moved-away")).unwrap();
    let report = registry.sync(&source);
    assert!(report.source_error.is_some(), "{report:?}");
    assert!(report.removed.is_empty());
    assert!(
        registry.snapshot().get("template").is_some(),
        "nothing was dropped"
    );
}

#[test]
fn added_and_removed_files_are_picked_up() {
    init_logs();
    let registry = registry();
    let dir = ruleset_dir(&[("classifier", "classifier")]);
    let _watcher = Watcher::start(registry.clone(), DirectorySource::new(dir.path())).unwrap();
    let generation = registry.snapshot().generation();

    replace_atomically(&guest("template"), &dir.path().join("template.wasm"));
    wait_for(&registry, "template to appear", |r| {
        r.snapshot().get("template").is_some()
    });
    assert!(registry.snapshot().generation() > generation);

    std::fs::remove_file(dir.path().join("template.wasm")).unwrap();
    wait_for(&registry, "template to go", |r| {
        r.snapshot().get("template").is_none()
    });
    assert!(registry.snapshot().get("classifier").is_some());
}

#[test]
fn bad_replacement_through_the_watcher_keeps_the_old_version_serving() {
    init_logs();
    let registry = registry();
    let dir = ruleset_dir(&[("versioned_one", "versioned")]);
    let _watcher = Watcher::start(registry.clone(), DirectorySource::new(dir.path())).unwrap();
    let generation = registry.snapshot().generation();
    std::fs::write(dir.path().join(".tmp"), b"").unwrap();
    let broken = dir.path().join("broken-copy");
    std::fs::write(&broken, b"\0asm\x0d\0\x01\0 truncated").unwrap();
    replace_atomically(&broken, &dir.path().join("versioned.wasm"));
    // Then a good file elsewhere proves the watcher processed the events.
    replace_atomically(&guest("template"), &dir.path().join("template.wasm"));
    wait_for(&registry, "template to appear", |r| {
        r.snapshot().get("template").is_some()
    });
    assert!(registry.snapshot().generation() > generation);
    assert_eq!(version_of(&registry, "versioned").as_deref(), Some("1.0.0"));
    let set = registry.snapshot();
    assert!(matches!(
        set.get("versioned").unwrap().evaluate(&smoke_facts()),
        Outcome::Opinion(_)
    ));
}
