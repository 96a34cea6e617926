//! Hostile guests cannot hurt the host: deadlines, memory caps, traps, denied WASI,
//! oversized or malformed output all drop only that component's opinion.

use botgate_host::rules::component::Failure;
use botgate_host::rules::facts::smoke_facts;
use botgate_host::rules::{
    DirectorySource, Outcome, RequestFacts, SandboxConfig, decide, decide_observed,
};
use botgate_model::{Action, Category, Policy};
use botgate_tests::{init_logs, registry, registry_with, ruleset_dir, test_config};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

fn facts_for(path: &str) -> RequestFacts {
    let mut facts = smoke_facts();
    facts.target = path.into();
    facts
}

/// As [`facts_for`], from a client in network `n` (198.51.n.0/24).
fn facts_from(path: &str, n: u8) -> RequestFacts {
    let mut facts = facts_for(path);
    facts.client_ip = botgate_host::rules::facts::ip_address([198, 51, n, 7].into());
    facts
}

fn load_hostile(config: SandboxConfig) -> std::sync::Arc<botgate_host::rules::LoadedComponent> {
    let registry = registry_with(config);
    let dir = ruleset_dir(&[("hostile", "hostile")]);
    let report = registry.sync(&DirectorySource::new(dir.path()));
    assert!(report.refused.is_empty(), "{report:?}");
    registry
        .snapshot()
        .get("hostile")
        .expect("hostile loaded")
        .clone()
}

fn lenient() -> SandboxConfig {
    SandboxConfig {
        failures_before_disable: 1000,
        ..test_config()
    }
}

#[test]
fn endless_loop_hits_the_deadline_and_the_next_call_works() {
    init_logs();
    let hostile = load_hostile(lenient());
    assert_eq!(
        hostile.evaluate(&facts_for("/loop")),
        Outcome::Failed(Failure::Deadline)
    );
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
    assert_eq!(hostile.stats().deadlines.load(Relaxed), 1);
}

#[test]
fn memory_bomb_hits_the_cap() {
    init_logs();
    let hostile = load_hostile(SandboxConfig {
        max_memory_bytes: 16 << 20,
        ..lenient()
    });
    assert_eq!(
        hostile.evaluate(&facts_for("/bomb")),
        Outcome::Failed(Failure::Memory)
    );
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
}

#[test]
fn panic_is_a_trap() {
    init_logs();
    let hostile = load_hostile(lenient());
    assert!(
        matches!(
            hostile.evaluate(&facts_for("/trap")),
            Outcome::Failed(Failure::Trap(_))
        ),
        "a panic must surface as a trap"
    );
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
}

/// Waits (up to 30 s) for the background thread to bring `what` about.
fn wait_for_background(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < until, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A thread whose instance trapped takes the spare made at load, and the spare is
/// replaced in the background: no request waits while an instance is made and warmed
/// up, trap after trap (one at a time: a burst faster than the refill still waits).
#[test]
fn a_trapped_instance_is_replaced_off_the_request_path() {
    init_logs();
    let hostile = load_hostile(lenient());
    let stats = hostile.stats();
    assert_eq!(hostile.spares(), 2, "one for the one thread, one spare");
    for round in 0..4 {
        assert!(
            matches!(hostile.evaluate(&facts_for("/")), Outcome::Opinion(_)),
            "round {round}"
        );
        assert!(
            matches!(
                hostile.evaluate(&facts_for("/trap")),
                Outcome::Failed(Failure::Trap(_))
            ),
            "round {round}"
        );
        wait_for_background("a spare again", || hostile.spares() == 1);
    }
    assert_eq!(stats.instances_made_on_request.load(Relaxed), 0);
    // Two at load, then one spare for each trapped instance after the first.
    assert_eq!(stats.instances_created.load(Relaxed), 2 + 3);
}

#[test]
fn wasi_is_not_granted() {
    init_logs();
    let hostile = load_hostile(lenient());
    match hostile.evaluate(&facts_for("/wasi")) {
        Outcome::Failed(Failure::Trap(message)) => {
            assert!(message.contains("wasi:clocks"), "{message}")
        }
        other => panic!("reading the clock must trap, got {other:?}"),
    }
}

#[test]
fn huge_output_is_dropped() {
    init_logs();
    let hostile = load_hostile(lenient());
    assert!(matches!(
        hostile.evaluate(&facts_for("/huge")),
        Outcome::Failed(Failure::BadOutput(_) | Failure::Memory)
    ));
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
}

#[test]
fn malformed_reason_is_dropped() {
    init_logs();
    let hostile = load_hostile(lenient());
    match hostile.evaluate(&facts_for("/bad-reason")) {
        Outcome::Failed(Failure::BadOutput(why)) => assert!(why.contains("Bad Reason"), "{why}"),
        other => panic!("expected BadOutput, got {other:?}"),
    }
}

#[test]
fn failing_component_never_fails_the_decision() {
    init_logs();
    let registry = registry_with(lenient());
    let dir = ruleset_dir(&[("classifier", "classifier"), ("hostile", "hostile")]);
    registry.sync(&DirectorySource::new(dir.path()));
    let set = registry.snapshot();
    for path in ["/loop", "/bomb", "/trap", "/wasi", "/huge", "/bad-reason"] {
        let decision = decide(&set, &facts_for(path), &["hostile"], &Policy::default());
        assert_eq!(decision.failed_components, 1, "{path}");
        assert_eq!(
            decision.decided_by.as_ref().map(|d| &*d.name),
            Some("classifier"),
            "{path}: the classifier decides when the hostile guest fails"
        );
    }
    // When it behaves, its opinion (content_scrapers, 99) counts.
    let decision = decide(&set, &facts_for("/"), &["hostile"], &Policy::default());
    assert_eq!(decision.category, Category::ContentScrapers);
    assert_eq!(decision.action, Action::Deny);
}

#[test]
fn a_component_made_to_fail_closed_refuses_the_requests_it_fails_on() {
    init_logs();
    let registry = registry_with(lenient());
    let dir = ruleset_dir(&[("classifier", "classifier"), ("hostile", "hostile")]);
    registry.sync(&DirectorySource::new(dir.path()));
    let set = registry.snapshot();
    // Every policy grants, so only the failure can refuse.
    let grant_all = Category::ALL
        .into_iter()
        .fold(Policy::default(), |p, c| p.with(c, Action::Grant));
    registry.set_fail_closed(["hostile".to_owned()].into());
    assert!(set.fails_closed("hostile") && !set.fails_closed("classifier"));
    for path in ["/trap", "/loop"] {
        let decision = decide(&set, &facts_for(path), &["hostile"], &grant_all);
        assert_eq!(decision.action, Action::Deny, "{path}");
        assert_eq!(decision.category, Category::SecurityIssues, "{path}");
        assert_eq!(decision.reason, "hostile.failed", "{path}");
        assert_eq!(
            decision.decided_by.as_ref().map(|d| &*d.name),
            Some("hostile")
        );
    }
    // Where it is not called, or behaves, nothing changes.
    let behaved = decide(&set, &facts_for("/"), &["hostile"], &grant_all);
    assert_eq!(behaved.reason, "hostile.everything");
    let not_enabled = decide(&set, &facts_for("/trap"), &[], &grant_all);
    assert_eq!(not_enabled.action, Action::Grant);
    // Open again: the classifier decides, as before.
    registry.set_fail_closed(Default::default());
    let open = decide(&set, &facts_for("/trap"), &["hostile"], &grant_all);
    assert_eq!(
        open.decided_by.map(|d| d.name.to_string()).as_deref(),
        Some("classifier")
    );
}

/// A component whose warm instance holds more memory than instances may keep between
/// calls is refused when it loads: kept, it would be dropped after every call and every
/// request would wait for a new instance.
#[test]
fn a_component_too_large_to_keep_between_calls_is_refused() {
    init_logs();
    let registry = registry_with(SandboxConfig {
        max_pooled_memory_bytes: 4096,
        ..test_config()
    });
    let dir = ruleset_dir(&[("classifier", "classifier")]);
    let report = registry.sync(&DirectorySource::new(dir.path()));
    let refused = format!("{:?}", report.refused);
    assert!(
        refused.contains("more than an instance may keep"),
        "{refused}"
    );
    assert!(registry.snapshot().get_with_slot("classifier").is_none());
}

/// A component made to fail closed is never switched off by the breaker: off, it would
/// refuse every request it judges (for an always-on one, all traffic) on the strength
/// of a few failing requests; each failing call refuses only its own.
#[test]
fn a_component_made_to_fail_closed_is_not_switched_off_by_failures() {
    init_logs();
    let registry = registry_with(SandboxConfig {
        failures_before_disable: 3,
        disable_for: Duration::from_secs(60),
        ..lenient()
    });
    let dir = ruleset_dir(&[("classifier", "classifier"), ("hostile", "hostile")]);
    registry.sync(&DirectorySource::new(dir.path()));
    let set = registry.snapshot();
    let hostile = set.get_with_slot("hostile").unwrap().1;
    let grant_all = Category::ALL
        .into_iter()
        .fold(Policy::default(), |p, c| p.with(c, Action::Grant));
    // Open, it is switched off by failures from many networks...
    for n in 0..8 {
        decide(&set, &facts_from("/trap", n), &["hostile"], &grant_all);
    }
    assert!(hostile.is_disabled());
    // ...and made to fail closed, it is on again and never switched off.
    registry.set_fail_closed(["hostile".to_owned()].into());
    for n in 0..8 {
        let failed = decide(&set, &facts_from("/trap", n), &["hostile"], &grant_all);
        assert_eq!(failed.reason, "hostile.failed");
    }
    assert!(!hostile.is_disabled());
    let behaved = decide(&set, &facts_for("/"), &["hostile"], &grant_all);
    assert_eq!(behaved.reason, "hostile.everything");
    assert_eq!(behaved.action, Action::Grant);
}

/// A name made to fail closed with no component loaded (a pushed version refused and no
/// file) refuses the requests it would judge: a critical component that cannot judge
/// never lets them through unjudged.
#[test]
fn a_component_made_to_fail_closed_that_is_not_loaded_refuses_what_it_would_judge() {
    init_logs();
    let registry = registry_with(lenient());
    let without = ruleset_dir(&[("classifier", "classifier")]);
    registry.sync(&DirectorySource::new(without.path()));
    let grant_all = Category::ALL
        .into_iter()
        .fold(Policy::default(), |p, c| p.with(c, Action::Grant));
    registry.set_fail_closed(["hostile".to_owned()].into());
    let set = registry.snapshot();
    let refused = decide(&set, &facts_for("/"), &["hostile"], &grant_all);
    assert_eq!(refused.action, Action::Deny);
    assert_eq!(refused.category, Category::SecurityIssues);
    assert_eq!(refused.reason, "hostile.failed");
    assert_eq!(
        refused.decided_by.as_ref().map(|d| &*d.name),
        Some("hostile")
    );
    let observed = decide_observed(&set, &facts_for("/"), &["hostile"], &grant_all, |_, _| {});
    assert_eq!(observed, refused);
    // Websites that do not enable it are not its to judge.
    let elsewhere = decide(&set, &facts_for("/"), &[], &grant_all);
    assert_eq!(elsewhere.action, Action::Grant);
    // Loaded, it judges.
    let with = ruleset_dir(&[("classifier", "classifier"), ("hostile", "hostile")]);
    registry.sync(&DirectorySource::new(with.path()));
    let judged = decide(
        &registry.snapshot(),
        &facts_for("/"),
        &["hostile"],
        &grant_all,
    );
    assert_eq!(judged.reason, "hostile.everything");
    // An always-on component that fails closed and is missing refuses every request.
    registry.set_fail_closed(["crs".to_owned()].into());
    let every = decide(&registry.snapshot(), &facts_for("/"), &[], &grant_all);
    assert_eq!(every.reason, "crs.failed");
}

#[test]
fn component_that_keeps_failing_is_switched_off_then_retried() {
    init_logs();
    let hostile = load_hostile(SandboxConfig {
        failures_before_disable: 3,
        disable_for: Duration::from_millis(300),
        ..test_config()
    });
    for n in 0..3 {
        assert!(matches!(
            hostile.evaluate(&facts_from("/trap", n)),
            Outcome::Failed(_)
        ));
    }
    assert!(hostile.is_disabled());
    assert_eq!(hostile.evaluate(&facts_for("/")), Outcome::Disabled);
    std::thread::sleep(Duration::from_millis(400));
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
    assert!(!hostile.is_disabled());
    let stats = hostile.stats();
    assert_eq!(stats.disabled_times.load(Relaxed), 1);
    assert_eq!(stats.skipped_disabled.load(Relaxed), 1);
}

#[test]
fn hostile_guest_is_safe_under_concurrency() {
    init_logs();
    let hostile = load_hostile(lenient());
    std::thread::scope(|s| {
        for t in 0..4 {
            let hostile = &hostile;
            s.spawn(move || {
                for i in 0..20 {
                    let path = match (t + i) % 4 {
                        0 => "/trap",
                        1 => "/bad-reason",
                        _ => "/",
                    };
                    let outcome = hostile.evaluate(&facts_for(path));
                    assert_eq!(
                        matches!(outcome, Outcome::Opinion(_)),
                        path == "/",
                        "{path}: {outcome:?}"
                    );
                }
            });
        }
    });
}

#[test]
fn unknown_enabled_ruleset_is_skipped() {
    init_logs();
    let registry = registry();
    let dir = ruleset_dir(&[("classifier", "classifier")]);
    registry.sync(&DirectorySource::new(dir.path()));
    let decision = decide(
        &registry.snapshot(),
        &smoke_facts(),
        &["not-loaded"],
        &Policy::default(),
    );
    assert_eq!(decision.failed_components, 0);
    assert_eq!(
        decision.decided_by.map(|d| d.name.to_string()).as_deref(),
        Some("classifier")
    );
}

#[test]
fn a_mostly_failing_component_is_still_switched_off() {
    init_logs();
    let hostile = load_hostile(SandboxConfig {
        failures_before_disable: 3,
        disable_for: Duration::from_secs(60),
        ..test_config()
    });
    // Two failures for every success: successes forgive, but not enough.
    for n in 0..4 {
        hostile.evaluate(&facts_from("/trap", 2 * n));
        hostile.evaluate(&facts_from("/trap", 2 * n + 1));
        if hostile.is_disabled() {
            break;
        }
        hostile.evaluate(&facts_for("/"));
    }
    assert!(hostile.is_disabled());
}

/// One visitor's requests that make a component fail (a trap, a deadline) drop its
/// opinion of those requests only: they never switch it off for every website, which
/// would let that visitor's other requests through undecided.
#[test]
fn failures_from_one_network_never_switch_a_component_off() {
    init_logs();
    let hostile = load_hostile(SandboxConfig {
        failures_before_disable: 3,
        disable_for: Duration::from_secs(60),
        ..test_config()
    });
    for host in 0..50u8 {
        let mut facts = facts_for("/trap");
        facts.client_ip = botgate_host::rules::facts::ip_address([203, 0, 113, host].into());
        assert!(matches!(hostile.evaluate(&facts), Outcome::Failed(_)));
    }
    assert!(!hostile.is_disabled());
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
    // Failures from a second and a third network as well: it is broken for everyone.
    hostile.evaluate(&facts_from("/trap", 1));
    assert!(!hostile.is_disabled());
    hostile.evaluate(&facts_from("/trap", 2));
    assert!(hostile.is_disabled());
}

#[test]
fn instances_that_grew_large_are_not_kept_idle() {
    init_logs();
    let hostile = load_hostile(SandboxConfig {
        max_pooled_memory_bytes: 4 << 20,
        ..lenient()
    });
    let created = || hostile.stats().instances_created.load(Relaxed);
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
    let before = created();
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
    assert_eq!(created(), before, "a small instance is reused");
    assert!(matches!(
        hostile.evaluate(&facts_for("/grow")),
        Outcome::Opinion(_)
    ));
    assert!(matches!(
        hostile.evaluate(&facts_for("/")),
        Outcome::Opinion(_)
    ));
    // The grown instance was dropped: the call took the spare, replaced in the background.
    wait_for_background("the spare replaced", || hostile.spares() == 1);
    assert_eq!(created(), before + 1);
    assert_eq!(hostile.stats().instances_made_on_request.load(Relaxed), 0);
}
