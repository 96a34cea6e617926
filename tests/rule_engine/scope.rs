//! Rule-set scopes: the host calls a component only for requests inside the scope it
//! declares, reads the path and query exactly as the guest SDK does, and skipping an
//! out-of-scope shipped rule set changes no decision.

use botgate_host::rules::{DirectorySource, Outcome, decide_observed};
use botgate_model::{Category, Policy};
use botgate_tests::{facts, init_logs, registry, ruleset_dir};

#[test]
fn a_component_is_called_only_inside_its_scope() {
    init_logs();
    let registry = registry();
    // `scoped` answers every request it is asked about; only the host's scope check
    // keeps it from answering outside `/members/` and `token=`.
    let dir = ruleset_dir(&[("scoped", "scoped")]);
    let report = registry.sync(&DirectorySource::new(dir.path()));
    assert!(report.refused.is_empty(), "{report:?}");
    let set = registry.snapshot();
    let scoped = set.get("scoped").unwrap();
    assert_eq!(&*scoped.scope()[0], "/members/");

    let run_method = |method: &str, target: &str, user_agent: &str| {
        let calls = scoped.stats().calls();
        let mut seen = None;
        let decision = decide_observed(
            &set,
            &facts(method, target, &[("user-agent", user_agent)]),
            &["scoped"],
            &Policy::default(),
            |c, outcome| {
                if c.name() == "scoped" {
                    seen = Some(outcome.clone());
                }
            },
        );
        let called = scoped.stats().calls() > calls;
        (decision, seen.expect("scoped is reported"), called)
    };
    let run = |target: &str, user_agent: &str| run_method("GET", target, user_agent);

    // Inside: by path, by a path the host must normalise first, by query, by user agent.
    for (target, user_agent) in [
        ("/members/list", "curl/8.5.0"),
        ("//Members//list", "curl/8.5.0"),
        ("/%6Dembers/list", "curl/8.5.0"),
        ("/public/?Token=abc", "curl/8.5.0"),
        ("/", "Members-Sync/2.1 (Linux)"),
        // Compound markers: every part present, in the path, the query or the agent.
        ("/vault/a.key", "curl/8.5.0"),
        ("/vault/list?f=A.KEY", "curl/8.5.0"),
        ("/vault-api/v1", "Vault-Agent/1.15"),
    ] {
        let (decision, outcome, called) = run(target, user_agent);
        assert!(called, "{target} is inside the scope");
        assert!(
            matches!(outcome, Outcome::Opinion(_)),
            "{target}: {outcome:?}"
        );
        assert_eq!(decision.category, Category::SuspiciousBehaviour, "{target}");
    }
    // Outside: not called at all, reported as such, counted as an abstention.
    for target in [
        "/",
        "/public/members",
        "/members",
        "/public/?tok=abc",
        "/members-sync/",
        // One part of a compound marker is not enough.
        "/vault/a.txt",
        "/a.key",
        "/vault-api/v1",
        // `/inbox/&method:post` needs a POST.
        "/inbox/new",
    ] {
        let (decision, outcome, called) = run(target, "curl/8.5.0");
        assert!(!called, "{target} is outside the scope");
        assert_eq!(outcome, Outcome::OutOfScope, "{target}");
        assert_ne!(
            decision.decided_by.as_ref().map(|d| d.name.as_ref()),
            Some("scoped"),
            "{target}"
        );
    }
    // Method parts: compared with the method, ignoring case.
    for (method, target, inside) in [
        ("POST", "/inbox/new", true),
        ("post", "/inbox/new", true),
        ("GET", "/inbox/new", false),
        ("POST", "/outbox/new", false),
        ("PURGE", "/anything", true),
        ("Purge", "/", true),
        ("GET", "/purge", false),
    ] {
        let (_, outcome, called) = run_method(method, target, "curl/8.5.0");
        assert_eq!(called, inside, "{method} {target}");
        assert_eq!(
            matches!(outcome, Outcome::OutOfScope),
            !inside,
            "{method} {target}: {outcome:?}"
        );
    }
}
