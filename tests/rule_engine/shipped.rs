//! The shipped components: each loads under its own name, each is exercised here with
//! a request it must have an opinion on, and the full decision over the realistic mix
//! gives the expected category and action.

use botgate_host::rules::RulesetSet;
use botgate_host::rules::SandboxConfig;
use botgate_host::rules::{
    Decision, DirectorySource, LoadedComponent, Outcome, RequestFacts, decide, decide_observed,
};
use botgate_model::{Action, Category, KNOWN_RULESETS, Policy};
use botgate_tests::mix::{maximal_requests, realistic_mix};
use botgate_tests::{facts, init_logs, registry, registry_with, repo_root, shipped, shipped_dir};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// Every shipped component, loaded and validated.
fn loaded_shipped() -> Arc<RulesetSet> {
    loaded_shipped_with(registry())
}

fn loaded_shipped_with(registry: Arc<botgate_host::rules::Registry>) -> Arc<RulesetSet> {
    init_logs();
    let dir = shipped_dir();
    let report = registry.sync(&DirectorySource::new(dir.path()));
    assert!(report.refused.is_empty(), "{report:?}");
    registry.snapshot()
}

#[test]
fn every_shipped_component_loads_under_its_own_name() {
    let set = loaded_shipped();
    for name in shipped() {
        let component = set.get(name).unwrap_or_else(|| panic!("{name} not loaded"));
        assert_eq!(component.name(), name);
        assert_eq!(component.version(), "2.0.0");
        assert!(
            !component.description().is_empty(),
            "{name} describes itself"
        );
    }
}

#[test]
fn shipped_list_matches_the_rulesets_workspace() {
    let mut crates: Vec<String> = std::fs::read_dir(repo_root().join("rulesets"))
        .unwrap()
        .flatten()
        // A component crate builds a `cdylib`; the SDK is a library.
        .filter(|e| {
            std::fs::read_to_string(e.path().join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.contains("\"cdylib\""))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    let mut expected: Vec<String> = shipped().iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        crates, expected,
        "every rule-set crate must be shipped (and so tested)"
    );
}

/// For every shipped component, a request it must give this opinion on.
fn exercise() -> Vec<(&'static str, RequestFacts, Category)> {
    let scanner = [("user-agent", "python-requests/2.31.0"), ("accept", "*/*")];
    vec![
        (
            "classifier",
            facts(
                "GET",
                "/",
                &[("user-agent", "sqlmap/1.8#stable (https://sqlmap.org)")],
            ),
            Category::SecurityIssues,
        ),
        (
            "crs",
            facts(
                "GET",
                "/?id=1%20union%20select%201,2--",
                &[(
                    "user-agent",
                    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
                )],
            ),
            Category::SecurityIssues,
        ),
        (
            "template",
            facts("GET", "/backup-2024.tar.gz", &scanner),
            Category::SecurityIssues,
        ),
        (
            "bitrix",
            facts("GET", "/bitrix/php_interface/dbconn.php", &scanner),
            Category::SecurityIssues,
        ),
        (
            "cpanel",
            facts("GET", "/.cpanel/", &scanner),
            Category::SecurityIssues,
        ),
        (
            "dokuwiki",
            facts("GET", "/conf/users.auth.php", &scanner),
            Category::SecurityIssues,
        ),
        (
            "drupal",
            facts("GET", "/sites/default/settings.php.bak", &scanner),
            Category::SecurityIssues,
        ),
        (
            "joomla",
            facts("GET", "/configuration.php.bak", &scanner),
            Category::SecurityIssues,
        ),
        (
            "nextcloud",
            facts("GET", "/config/config.php", &scanner),
            Category::SecurityIssues,
        ),
        (
            "prestashop",
            facts("GET", "/app/config/parameters.php", &scanner),
            Category::SecurityIssues,
        ),
        (
            "wordpress",
            facts("GET", "/wp-config.php.bak", &scanner),
            Category::SecurityIssues,
        ),
        (
            "xenforo",
            facts("GET", "/src/config.php", &scanner),
            Category::SecurityIssues,
        ),
    ]
}

#[test]
fn every_shipped_component_is_exercised() {
    let set = loaded_shipped();
    let cases = exercise();
    for name in shipped() {
        assert!(
            cases.iter().any(|(n, ..)| *n == name),
            "{name} has no exercise case"
        );
    }
    for (name, facts, expected) in cases {
        let component = set.get(name).unwrap();
        match component.evaluate(&facts) {
            Outcome::Opinion(o) => {
                assert_eq!(Category::from(o.category), expected, "{name}: {o:?}");
                assert!(
                    o.reason.starts_with(&format!("{name}.")),
                    "{name}: reason {}",
                    o.reason
                );
            }
            other => panic!("{name} gave no opinion: {other:?}"),
        }
        assert_eq!(component.stats().failures(), 0, "{name}");
    }
}

#[test]
fn realistic_mix_is_decided_as_expected() {
    let set = loaded_shipped();
    let policy = Policy::default();
    let expected: &[(&str, Category, Action)] = &[
        ("browser home page", Category::Humans, Action::Grant),
        ("browser blog post", Category::Humans, Action::Grant),
        ("browser search", Category::Humans, Action::Grant),
        ("browser asset", Category::Humans, Action::Grant),
        ("browser product", Category::Humans, Action::Grant),
        ("browser login", Category::Humans, Action::Grant),
        ("browser nextcloud files", Category::Humans, Action::Grant),
        ("browser cart", Category::Humans, Action::Grant),
        ("verified googlebot", Category::SearchEngines, Action::Grant),
        (
            "googlebot impostor",
            Category::SuspiciousBehaviour,
            Action::Captcha,
        ),
        ("gptbot", Category::ContentScrapers, Action::Deny),
        ("sqlmap", Category::SecurityIssues, Action::Deny),
        ("env probe", Category::SecurityIssues, Action::Deny),
        (
            "wp-login brute force",
            Category::SecurityIssues,
            Action::Deny,
        ),
        (
            "nextcloud sync client",
            Category::ServicesAndPayments,
            Action::Grant,
        ),
        (
            "uptime monitor",
            Category::ServicesAndPayments,
            Action::Grant,
        ),
    ];
    let mix = realistic_mix();
    assert_eq!(mix.len(), expected.len());
    for (request, (label, category, action)) in mix.iter().zip(expected) {
        assert_eq!(request.label, *label);
        let decision = decide(&set, &request.facts, &KNOWN_RULESETS, &policy);
        assert_eq!(
            (decision.category, decision.action),
            (*category, *action),
            "{label}: {decision:?}"
        );
        assert_eq!(decision.failed_components, 0, "{label}");
    }
}

#[test]
fn website_policy_decides_the_action() {
    let set = loaded_shipped();
    let mix = realistic_mix();
    let gptbot = &mix.iter().find(|r| r.label == "gptbot").unwrap().facts;
    let permissive = Policy::default().with(Category::ContentScrapers, Action::Grant);
    let decision = decide(&set, gptbot, &KNOWN_RULESETS, &permissive);
    assert_eq!(
        (decision.category, decision.action),
        (Category::ContentScrapers, Action::Grant)
    );
    assert_eq!(decision.decided_by.unwrap().name.as_ref(), "classifier");
}

#[test]
fn the_data_plane_decides_what_the_observed_decision_decides() {
    // `decide` walks the components in scope and keeps the enabled ones;
    // `decide_observed` looks every enabled name up: the same decision, and the same
    // calls, for any list of enabled rule sets.
    let set = loaded_shipped();
    let strict = Policy::default()
        .with(Category::ContentScrapers, Action::Deny)
        .with(Category::ServicesAndPayments, Action::Captcha);
    let enabled_lists: &[&[&str]] = &[
        &KNOWN_RULESETS,
        &[],
        &["wordpress"],
        &["nextcloud", "no-such-rule-set", "nextcloud"],
        &["classifier", "joomla", "drupal", "bitrix"],
    ];
    // What `decide` returns, and each component's calls while it ran.
    let counting_calls = |decide: &dyn Fn() -> Decision| {
        let calls = || -> Vec<u64> { set.iter().map(|c| c.stats().calls()).collect() };
        let before = calls();
        let decision = decide();
        let made: Vec<u64> = calls().iter().zip(&before).map(|(a, b)| a - b).collect();
        (decision, made)
    };
    let mut decided_by_rule_sets = 0;
    for request in realistic_mix() {
        for enabled in enabled_lists {
            for policy in [Policy::default(), strict] {
                let (fast, fast_calls) =
                    counting_calls(&|| decide(&set, &request.facts, enabled, &policy));
                let (observed, observed_calls) = counting_calls(&|| {
                    decide_observed(&set, &request.facts, enabled, &policy, |_, _| {})
                });
                let label = request.label;
                assert_eq!(fast, observed, "{label}, enabled {enabled:?}");
                assert_eq!(fast_calls, observed_calls, "{label}, enabled {enabled:?}");
                decided_by_rule_sets += usize::from(
                    fast.decided_by
                        .is_some_and(|d| d.name.as_ref() != "classifier"),
                );
            }
        }
    }
    assert!(decided_by_rule_sets > 0, "the mix reaches rule sets");
}

#[test]
fn cms_rule_sets_run_only_when_enabled() {
    let set = loaded_shipped();
    let mix = realistic_mix();
    let sync = &mix
        .iter()
        .find(|r| r.label == "nextcloud sync client")
        .unwrap()
        .facts;
    let with = decide(&set, sync, &["nextcloud"], &Policy::default());
    assert_eq!(
        with.decided_by.as_ref().unwrap().name.as_ref(),
        "nextcloud",
        "{with:?}"
    );
    assert_eq!(with.category, Category::ServicesAndPayments);
    let without = decide(&set, sync, &["wordpress"], &Policy::default());
    assert_ne!(
        without.decided_by.as_ref().map(|d| d.name.as_ref()),
        Some("nextcloud")
    );
}

#[test]
fn each_component_runs_once_per_decision() {
    let set = loaded_shipped();
    let calls = |name: &str| set.get(name).unwrap().stats().calls();
    let (wordpress, classifier) = (calls("wordpress"), calls("classifier"));
    let facts = &realistic_mix()
        .into_iter()
        .find(|r| r.label == "browser login")
        .unwrap()
        .facts;
    decide(
        &set,
        facts,
        &["wordpress", "classifier", "wordpress"],
        &Policy::default(),
    );
    assert_eq!(calls("wordpress"), wordpress + 1);
    assert_eq!(calls("classifier"), classifier + 1);
}

/// The components `decide` calls (not skipped as out of scope) for `facts`, every
/// shipped rule set enabled.
fn called(set: &RulesetSet, facts: &RequestFacts) -> Vec<String> {
    let mut called = Vec::new();
    decide_observed(set, facts, &KNOWN_RULESETS, &Policy::default(), |c, o| {
        if *o != Outcome::OutOfScope {
            called.push(c.name().to_owned());
        }
    });
    called
}

#[test]
fn a_request_calls_only_the_rule_sets_it_concerns() {
    let set = loaded_shipped();
    let expected: &[(&str, &[&str])] = &[
        // Page views, crawlers and monitors: the always-on classifier and Core Rule Set
        // alone, with every rule set enabled (a post to the blog would be Bitrix's business, a view is not).
        ("browser home page", &["classifier", "crs"]),
        ("browser blog post", &["classifier", "crs"]),
        ("browser product", &["classifier", "crs"]),
        ("browser cart", &["classifier", "crs"]),
        ("browser search", &["classifier", "crs"]),
        // A WordPress theme's stylesheet: no rule answers assets.
        ("browser asset", &["classifier", "crs"]),
        ("verified googlebot", &["classifier", "crs"]),
        ("gptbot", &["classifier", "crs"]),
        ("uptime monitor", &["classifier", "crs"]),
        // One application's entry point: that application's rule set, not every rule
        // set that has rules about some PHP file.
        ("browser login", &["classifier", "crs", "wordpress"]),
        ("wp-login brute force", &["classifier", "crs", "wordpress"]),
        ("nextcloud sync client", &["classifier", "crs", "nextcloud"]),
    ];
    let mix = realistic_mix();
    for (label, components) in expected {
        let facts = &mix.iter().find(|r| r.label == *label).unwrap().facts;
        assert_eq!(called(&set, facts), *components, "{label}");
    }
}

#[test]
fn skipping_out_of_scope_rule_sets_changes_no_decision() {
    let set = loaded_shipped();
    let mut requests: Vec<RequestFacts> = realistic_mix().into_iter().map(|r| r.facts).collect();
    requests.extend(exercise().into_iter().map(|(_, facts, _)| facts));
    let browser = [(
        "user-agent",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    )];
    for target in [
        "/WP-LOGIN.PHP",
        "/blog//wp%2Dadmin/",
        "/?author=1",
        "/index.php?option=com_users&view=registration",
        "/index.php?rest_route=/wp/v2/users",
        "/remote.php/dav/files/alice/",
        "/user/login?destination=/node/1",
        "/bitrix/admin/",
        "/doku.php?id=start&do=login",
        "/index.php?controller=authentication",
        "/login/login",
        "/cpanel",
        "/about-us/",
        "/assets/app.js?v=3",
    ] {
        requests.push(facts("GET", target, &browser));
        requests.push(facts(
            "POST",
            target,
            &[("user-agent", "python-requests/2.31.0")],
        ));
    }
    let mut skipped = 0;
    for facts in &requests {
        let mut out_of_scope = Vec::new();
        let decision = decide_observed(
            &set,
            facts,
            &KNOWN_RULESETS,
            &Policy::default(),
            |c, outcome| {
                if *outcome == Outcome::OutOfScope {
                    out_of_scope.push(set.get(c.name()).unwrap().clone());
                }
            },
        );
        for component in out_of_scope {
            skipped += 1;
            // Called anyway, it abstains: the host read the scope as the guest does.
            assert_eq!(
                component.evaluate(facts),
                Outcome::Abstain,
                "{} skipped for {} {}, but has an opinion there (decision {decision:?})",
                component.name(),
                facts.method,
                facts.target
            );
        }
    }
    assert!(
        skipped > requests.len(),
        "scopes skip most rule sets for most requests ({skipped})"
    );
}

/// `crs` after one clean call, and how many instances it had made by then.
fn warm_crs(set: &RulesetSet) -> (&Arc<LoadedComponent>, u64) {
    let crs = set.get("crs").expect("crs is shipped");
    let first = crs.evaluate(&facts("GET", "/", &[("user-agent", "agent/first")]));
    assert!(matches!(first, Outcome::Abstain), "{first:?}");
    (crs, crs.stats().instances_created.load(Relaxed))
}

/// A flood of requests that are all new (each header block, cookie and query unseen,
/// blocks of 3 KB) neither fails `crs` nor grows its instance past the pooled-memory
/// cap: what it remembers is bounded, and the instance that served the first request
/// serves them all.
#[test]
fn crs_stays_one_bounded_instance_under_a_flood_of_new_requests() {
    let set = loaded_shipped();
    let (crs, created) = warm_crs(&set);
    for i in 0..3_000 {
        let cookie = format!("session={i:08x}; prefs={}", "a".repeat(3_000));
        let agent = format!("agent/{i}");
        let target = format!("/search?q=item-{i}&page={}", i % 7);
        let request = facts(
            "GET",
            &target,
            &[("user-agent", agent.as_str()), ("cookie", cookie.as_str())],
        );
        let outcome = crs.evaluate(&request);
        assert!(matches!(outcome, Outcome::Abstain), "{i}: {outcome:?}");
    }
    assert_eq!(crs.stats().instances_created.load(Relaxed), created);
    assert_eq!(crs.stats().failures(), 0);
}

/// One request of a thousand new values, as many as `crs` reads (distinct arguments
/// filling the target, distinct cookies): `crs` inspects it without failing and keeps
/// its instance (what it works out per value is not kept for the request).
#[test]
fn crs_inspects_a_request_of_a_thousand_new_values_within_its_memory() {
    let set = loaded_shipped();
    let (crs, created) = warm_crs(&set);
    for round in 0..3 {
        let query: Vec<String> = (0..255)
            .map(|i| format!("k{round}x{i}={i}{}", "v".repeat(50)))
            .collect();
        let cookies: Vec<String> = (0..255).map(|i| format!("c{round}x{i}=v")).collect();
        let target = format!("/?{}", query.join("&"));
        let (first, second) = cookies.split_at(128);
        let (first, second) = (first.join("; "), second.join("; "));
        let request = facts(
            "GET",
            &target,
            &[("cookie", first.as_str()), ("cookie", second.as_str())],
        );
        assert!(!request.truncated, "within the host's bounds");
        let outcome = crs.evaluate(&request);
        assert!(
            matches!(outcome, Outcome::Abstain),
            "round {round}: {outcome:?}"
        );
    }
    assert_eq!(crs.stats().instances_created.load(Relaxed), created);
    assert_eq!(crs.stats().failures(), 0);
}

/// Requests unlike the load-time smoke request (a plain browser page view): a session
/// cookie, a query, a script's path, a form post's headers, an odd agent.
fn unusual_requests() -> Vec<RequestFacts> {
    vec![
        facts(
            "GET",
            "/index.php?q=shoes&page=2&sort=price%27",
            &[
                (
                    "user-agent",
                    "Mozilla/5.0 (X11; Linux x86_64) Firefox/133.0",
                ),
                ("cookie", "session=8f2c1a; prefs=dark; cart=3"),
                ("referer", "https://www.example.com/search?q=shoes"),
            ],
        ),
        facts(
            "POST",
            "/wp-login.php?redirect_to=%2Fwp-admin%2F",
            &[
                ("user-agent", "curl/8.5.0"),
                ("content-type", "application/x-www-form-urlencoded"),
                ("content-length", "42"),
                ("x-forwarded-for", "198.51.100.7"),
            ],
        ),
        facts(
            "GET",
            "/static/app.js?v=1.2.3",
            &[
                ("user-agent", "python-requests/2.31.0"),
                ("accept", "*/*"),
                ("cookie", "a=1; b=2; c=3; d=4"),
                ("range", "bytes=0-99"),
            ],
        ),
    ]
}

/// What building a component's tables costs is paid before its first request, under
/// the warm-up deadline, not inside a request's call: with a call deadline of 8 ms
/// (building `crs`'s matchers for a request like these takes more), each shipped
/// component judges the first requests of shapes it has not seen. A thread descheduled
/// on a busy machine can still run past so short a deadline, so a load refused or a call
/// failed is tried again, twice: a trapped instance is replaced by one warmed the same
/// way, where building the tables inside the call fails every time.
#[test]
fn shipped_components_judge_their_first_unusual_requests_within_a_tight_deadline() {
    init_logs();
    let tight = botgate_host::rules::SandboxConfig {
        call_deadline: std::time::Duration::from_millis(8),
        failures_before_disable: 1_000,
        ..botgate_tests::test_config()
    };
    let loaded = (0..3).find_map(|_| {
        let registry = botgate_tests::registry_with(tight.clone());
        let report = registry.sync(&DirectorySource::new(shipped_dir().path()));
        report.refused.is_empty().then(|| registry.snapshot())
    });
    let set = loaded.expect("the shipped components load with an 8 ms call deadline");
    for request in unusual_requests() {
        for name in shipped() {
            let component = set.get(name).expect("shipped");
            let outcome = (0..3)
                .map(|_| component.evaluate(&request))
                .find(|outcome| !matches!(outcome, Outcome::Failed(_)));
            assert!(
                outcome.is_some(),
                "{name} failed {} {} three times",
                request.method,
                request.target
            );
        }
    }
}

/// Each component gets an instance ready for every data-plane thread when it loads, and
/// a spare: threads' first calls take those, and none is made while a request waits.
#[test]
fn components_load_with_a_warm_instance_for_every_thread() {
    init_logs();
    let registry = registry();
    registry.sandbox().set_warm_instances(3);
    let report = registry.sync(&DirectorySource::new(shipped_dir().path()));
    assert!(report.refused.is_empty(), "{report:?}");
    let set = registry.snapshot();
    let made = |name: &str| {
        set.get(name)
            .expect("shipped")
            .stats()
            .instances_created
            .load(Relaxed)
    };
    for name in shipped() {
        assert_eq!(made(name), 3 + 1, "{name} at load");
    }
    let requests = unusual_requests();
    std::thread::scope(|threads| {
        for _ in 0..3 {
            threads.spawn(|| {
                for request in &requests {
                    for name in shipped() {
                        let outcome = set.get(name).expect("shipped").evaluate(request);
                        assert!(
                            !matches!(outcome, Outcome::Failed(_)),
                            "{name}: {outcome:?}"
                        );
                    }
                }
            });
        }
    });
    for name in shipped() {
        let component = set.get(name).expect("shipped");
        assert_eq!(made(name), 3 + 1, "{name} after three threads' calls");
        // One spare at least (a thread that started after another ended may take over
        // its slot, and its instance, leaving one more).
        assert!(component.spares() >= 1, "{name}");
        let on_request = component.stats().instances_made_on_request.load(Relaxed);
        assert_eq!(on_request, 0, "{name}");
    }
    // A component only being checked (a push, say) gets the one instance its checks ran on.
    let bytes = std::fs::read(shipped_dir().path().join("crs.wasm")).unwrap();
    let checked = registry.check("crs", &bytes, "checked").unwrap();
    assert_eq!(checked.stats().instances_created.load(Relaxed), 1);
}

/// A request with more arguments or cookies than `crs` reads is an attack at once,
/// under the gateway's own deadlines: read, thousands of values took `crs` past its
/// deadline, and the attack after them reached the origin without its opinion.
#[test]
fn crs_judges_requests_past_its_bounds_without_reading_them() {
    let set = loaded_shipped_with(registry_with(SandboxConfig::default()));
    let policy = Policy::default();
    let browser = [
        (
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        ),
        ("accept", "text/html,*/*;q=0.8"),
    ];
    // Java deserialisation: crs's alone among the components. 2 000 distinct arguments
    // fill 14 KB of the target; 256 cookies, 1.8 KB of the one merged `Cookie` field.
    let payload = "x=java.lang.Runtime.getRuntime().exec";
    let filler: Vec<String> = (0..2000).map(|i| format!("a{i:x}=1")).collect();
    let target = format!("/search?{}&{payload}", filler.join("&"));
    let cookies: Vec<String> = (0..256).map(|i| format!("c{i:x}=1")).collect();
    let cookie = format!("{}; {payload}", cookies.join("; "));
    let mut with_cookies: Vec<(&str, &str)> = browser.to_vec();
    with_cookies.push(("cookie", &cookie));
    for (request, reason) in [
        (facts("GET", &target, &browser), "crs.too-many-arguments"),
        (
            facts(
                "GET",
                "/?x=java.lang.Runtime.getRuntime().exec",
                &with_cookies,
            ),
            "crs.too-many-cookies",
        ),
    ] {
        assert!(!request.truncated, "{reason}: within the host's bounds");
        let decision = decide(&set, &request, &KNOWN_RULESETS, &policy);
        assert_eq!(
            (decision.category, decision.action),
            (Category::SecurityIssues, Action::Deny),
            "{decision:?}"
        );
        assert_eq!(decision.reason.as_str(), reason, "{decision:?}");
    }
}

/// The largest requests the gateway passes on (its bounds on the target, header bytes
/// and lines; `crs`'s on arguments and cookies), with values made to pass the rules'
/// prefilters: every component judges them without a trap or its memory cap (the
/// deadline here is the tests' long one: `decision at the bounds` in the decision
/// benchmark measures the time), `crs` reads them all, and the one attack among them is
/// found.
#[test]
fn every_component_judges_requests_at_the_bounds() {
    let set = loaded_shipped();
    let policy = Policy::default();
    let mut attacks = 0;
    for salt in 0..3 {
        for request in maximal_requests(salt) {
            assert!(
                request.facts.target.len() <= botgate_host::rules::facts::MAX_TARGET_BYTES
                    && request.facts.headers.len() <= botgate_host::rules::facts::MAX_HEADER_BYTES
                    && !request.facts.truncated,
                "{}: within the bounds",
                request.label
            );
            let mut failures = Vec::new();
            decide_observed(
                &set,
                &request.facts,
                &KNOWN_RULESETS,
                &policy,
                |component, outcome| match outcome {
                    Outcome::Failed(failure) => {
                        failures.push(format!("{}: {failure}", component.name()))
                    }
                    Outcome::Opinion(o) if o.reason.starts_with("crs.too-many") => {
                        failures.push(format!("crs did not read it: {}", o.reason))
                    }
                    Outcome::Opinion(o) if o.reason.starts_with("crs.941") => attacks += 1,
                    _ => {}
                },
            );
            assert!(failures.is_empty(), "{}: {failures:?}", request.label);
        }
    }
    assert_eq!(attacks, 3, "the markup is cross-site scripting, every time");
}
