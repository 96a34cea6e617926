//! Rule components for a fleet: pushed once with `botgate ruleset push`, activated,
//! rolled back and removed, while two real `botgate serve` processes share one Redis
//! and visitors keep coming to both; on the embedded store, the same commands through
//! the running gateway's admin listener, the failure policy, a shadow rollout; signed
//! components with trusted keys; and a rule author's path from `ruleset new` to live.

use botgate_tests::http::Client;
use botgate_tests::origin::Origin;
use botgate_tests::servers::{Gateway, GatewayStore, RedisServer, Resp, wait_until};
use botgate_tests::visitor::{Outgoing, Visit, send};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// `botgate ruleset ARGS` with the compile cache every test shares.
fn ruleset(args: &[&str], target: &[String]) -> Output {
    super::botgate()
        .arg("ruleset")
        .args(args)
        .args(target)
        .env("BOTGATE_CACHE_DIR", botgate_tests::cache_dir())
        .output()
        .unwrap()
}

fn said(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// What `botgate ruleset ARGS` said, having failed.
fn refusal_said(args: &[&str], target: &[String]) -> String {
    let refused = ruleset(args, target);
    assert!(!refused.status.success(), "{args:?}: {}", said(&refused));
    said(&refused)
}

/// What `botgate status` said of the gateway `target` reaches.
fn status_said(target: &[String]) -> String {
    said(
        &super::botgate()
            .arg("status")
            .args(target)
            .output()
            .unwrap(),
    )
}

/// A copy of the test guest `guest` named `versioned.wasm` (the name it reports).
fn versioned(dir: &Path, guest: &str) -> PathBuf {
    let folder = dir.join(guest);
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("versioned.wasm");
    std::fs::copy(botgate_tests::guest(guest), &file).unwrap();
    file
}

/// The command-line options that reach `gateway`'s admin listener (the embedded store's
/// commands go there while a gateway holds it).
fn through_admin(gateway: &Gateway) -> Vec<String> {
    vec![
        "--data-dir".to_owned(),
        gateway.data_dir().display().to_string(),
        "--admin-url".to_owned(),
        format!("http://{}", gateway.admin),
    ]
}

/// The command-line options that reach `redis`.
fn redis_target(redis: &RedisServer) -> Vec<String> {
    vec![
        "--redis-url".to_owned(),
        redis.url(),
        "--redis-password".to_owned(),
        redis.password.clone(),
    ]
}

/// Makes the classifier fail closed with `botgate ruleset failure` and waits until
/// `gateway`'s `/health` says so.
fn classifier_fails_closed(gateway: &Gateway, target: &[String]) {
    let closed = ruleset(&["failure", "classifier", "closed"], target);
    assert!(closed.status.success(), "{}", said(&closed));
    until_health(gateway, "the classifier failing closed", |health| {
        health["components_fail_closed"] == json!(["classifier"])
    });
}

/// Waits until `gateway`'s `/health` `shows` something (`what`, named on failure).
fn until_health(gateway: &Gateway, what: &str, shows: impl Fn(&serde_json::Value) -> bool) {
    let admin = Client::new(&format!("http://{}", gateway.admin), None);
    wait_until(
        Duration::from_secs(10),
        || admin.get("/health").is_ok_and(|reply| shows(&reply.json())),
        || format!("/health never showed {what}; log:\n{}", gateway.log()),
    )
    .unwrap();
}

/// An origin and `count` gateways on `store` (the first with the partner `hoster`), each
/// serving `visited.example`: bot protection on with the rule sets `rulesets`, the rate
/// limits off and the classifier's `suspicious_behaviour` (too many requests) granted,
/// for test visitors this eager.
fn visited_website(
    store: GatewayStore<'_>,
    count: usize,
    rulesets: serde_json::Value,
) -> (Origin, Vec<Gateway>) {
    let origin = Origin::start("origin", [127, 0, 0, 1].into(), 0).unwrap();
    let port = origin.address.port().to_string();
    let args = ["--origin-http-port", port.as_str()];
    let binary = Path::new(env!("CARGO_BIN_EXE_botgate"));
    let gateways: Vec<Gateway> = (0..count)
        .map(|n| {
            let partners: &[&str] = if n == 0 { &["hoster"] } else { &[] };
            Gateway::start_protecting(binary, store, partners, &args).unwrap()
        })
        .collect();
    let partner = Client::new(&gateways[0].api, Some(&gateways[0].partner_keys[0]));
    super::create_owner(&partner);
    let created = partner
        .post_json(
            "/v1.0/website",
            &json!({"domain": "visited.example", "user_id": "owner", "ip": ["127.0.0.1"],
                    "settings": {"rulesets": rulesets,
                                 "loadbalancer": {"ddos_protection": false,
                                                  "ddos_protection_advanced": false},
                                 "rules": {"suspicious_behaviour": "grant"}}}),
        )
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.text);
    for gateway in &gateways {
        super::wait_served(gateway, "visited.example");
    }
    (origin, gateways)
}

/// The version of `versioned` a gateway's `/health` says it runs, and from where.
fn running(gateway: &Gateway) -> Option<(String, String)> {
    let health = Client::new(&format!("http://{}", gateway.admin), None)
        .get("/health")
        .ok()?
        .json();
    Some((
        health["components"]["versioned"].as_str()?.to_owned(),
        health["component_sources"]["versioned"]
            .as_str()?
            .to_owned(),
    ))
}

/// How long until every gateway runs `version` of `versioned` from `source`.
fn until_running(gateways: &[&Gateway], version: &str, source: &str) -> Duration {
    let started = Instant::now();
    let wanted = Some((version.to_owned(), source.to_owned()));
    wait_until(
        Duration::from_secs(10),
        || gateways.iter().all(|g| running(g) == wanted),
        || {
            let seen: Vec<_> = gateways.iter().map(|g| running(g)).collect();
            format!(
                "not every gateway runs versioned {version} from the {source}: {seen:?}; logs:\n{}",
                gateways
                    .iter()
                    .map(|g| g.log())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        },
    )
    .unwrap();
    started.elapsed()
}

#[test]
fn a_pushed_component_runs_on_every_gateway_of_the_store_without_a_failed_request() {
    let redis = RedisServer::start().unwrap();
    let (_origin, gateways) = visited_website(GatewayStore::Redis(&redis), 2, json!({}));
    let [one, two] = <[Gateway; 2]>::try_from(gateways).ok().unwrap();
    // Server one holds a `versioned` of its own in its directory: the store's wins.
    let files = tempfile::tempdir().unwrap();
    std::fs::copy(
        versioned(files.path(), "versioned_two"),
        one.rulesets_dir().join("versioned.wasm"),
    )
    .unwrap();
    wait_until(
        Duration::from_secs(20),
        || running(&one) == Some(("2.0.0".into(), "directory".into())),
        || {
            format!(
                "the directory's component never loaded; log:\n{}",
                one.log()
            )
        },
    )
    .unwrap();
    let target = redis_target(&redis);

    let visitors = super::Visitors::default();
    let mut took = Vec::new();
    std::thread::scope(|scope| {
        visitors.start(scope, &[&one, &two], Duration::from_millis(5));
        let _stop = super::StopOnDrop(&visitors);

        // Pushed: stored, not in service.
        let one_file = versioned(files.path(), "versioned_one");
        let pushed = ruleset(&["push", one_file.to_str().unwrap()], &target);
        assert!(pushed.status.success(), "{}", said(&pushed));
        assert!(
            said(&pushed).contains("pushed versioned 1.0.0"),
            "{}",
            said(&pushed)
        );
        let again = ruleset(&["push", one_file.to_str().unwrap()], &target);
        assert!(again.status.success(), "{}", said(&again));
        assert!(said(&again).contains("pushed already"), "{}", said(&again));
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(running(&one), Some(("2.0.0".into(), "directory".into())));
        assert_eq!(running(&two), None);

        // Activated: every gateway runs it, the store's over the directory's.
        let activated = ruleset(&["activate", "versioned", "1.0.0"], &target);
        assert!(activated.status.success(), "{}", said(&activated));
        took.push(until_running(&[&one, &two], "1.0.0", "store"));

        // A new version, then back.
        let two_file = versioned(files.path(), "versioned_two");
        let pushed = ruleset(&["push", two_file.to_str().unwrap()], &target);
        assert!(pushed.status.success(), "{}", said(&pushed));
        let activated = ruleset(&["activate", "versioned", "2.0.0"], &target);
        assert!(activated.status.success(), "{}", said(&activated));
        assert!(
            said(&activated).contains("rollback returns to 1.0.0"),
            "{}",
            said(&activated)
        );
        took.push(until_running(&[&one, &two], "2.0.0", "store"));
        let rolled = ruleset(&["rollback", "versioned"], &target);
        assert!(rolled.status.success(), "{}", said(&rolled));
        assert!(
            said(&rolled).contains("versioned is back to 1.0.0"),
            "{}",
            said(&rolled)
        );
        took.push(until_running(&[&one, &two], "1.0.0", "store"));
    });
    visitors.assert_none_failed(50);
    eprintln!(
        "every gateway ran each activation after {took:?} ({} visits)",
        visitors.visits()
    );

    // Versions: the one in service stays, the other goes.
    let refused = ruleset(&["remove", "versioned", "1.0.0"], &target);
    assert!(!refused.status.success());
    assert!(
        said(&refused).contains("is in service"),
        "{}",
        said(&refused)
    );
    let removed = ruleset(&["remove", "versioned", "2.0.0"], &target);
    assert!(removed.status.success(), "{}", said(&removed));
    let listed = ruleset(&["list"], &target);
    assert!(listed.status.success(), "{}", said(&listed));
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(
        out.contains("versioned") && out.contains("1.0.0") && out.contains("active"),
        "{out}"
    );
    assert!(!out.contains("2.0.0"), "{out}");
    let nothing = ruleset(&["rollback", "versioned"], &target);
    assert!(!nothing.status.success());
    assert!(
        said(&nothing).contains("no earlier version"),
        "{}",
        said(&nothing)
    );

    // Bytes changed in the store behind the record: no gateway loads them.
    let two_file = versioned(files.path(), "versioned_two");
    let pushed = ruleset(&["push", two_file.to_str().unwrap()], &target);
    assert!(pushed.status.success(), "{}", said(&pushed));
    let sha = botgate_store::sha256_hex(&std::fs::read(&two_file).unwrap());
    let blob = format!("botgate:ruleset-blob:{sha}");
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], redis.port));
    botgate_tests::servers::resp_at(address, Some(&redis.password), &["SET", &blob, "\0asm?"])
        .unwrap();
    let activated = ruleset(&["activate", "versioned", "2.0.0"], &target);
    assert!(activated.status.success(), "{}", said(&activated));
    for gateway in [&one, &two] {
        wait_until(
            Duration::from_secs(10),
            || {
                gateway
                    .log()
                    .contains("the stored bytes do not match their SHA-256")
            },
            || format!("a gateway took the bytes; log:\n{}", gateway.log()),
        )
        .unwrap();
        assert_eq!(running(gateway), Some(("1.0.0".into(), "store".into())));
    }
}

/// A rule-set record this release cannot read (a later release's, or damaged) holds only
/// its own name: the other names change as the store says on every gateway, the name
/// keeps what it ran, and the commands name the record.
#[test]
fn an_unreadable_rule_set_record_holds_only_its_own_name() {
    let redis = RedisServer::start().unwrap();
    let (_origin, gateways) = visited_website(GatewayStore::Redis(&redis), 1, json!({}));
    let gateway = &gateways[0];
    let target = redis_target(&redis);
    let files = tempfile::tempdir().unwrap();
    for guest in ["versioned_one", "versioned_two"] {
        let file = versioned(files.path(), guest);
        let pushed = ruleset(&["push", file.to_str().unwrap()], &target);
        assert!(pushed.status.success(), "{}", said(&pushed));
    }
    let activated = ruleset(&["activate", "versioned", "1.0.0"], &target);
    assert!(activated.status.success(), "{}", said(&activated));
    until_running(&[gateway], "1.0.0", "store");

    // Another name's state as a later release writes it (a policy this one lacks).
    let later = r#"{"active":null,"previous":[],"shadow":null,"failure":"quarantine","changed_by":"later","changed_at_ms":1}"#;
    redis
        .command(&["HSET", "botgate:ruleset-states", "drupal", later])
        .unwrap();
    let activated = ruleset(&["activate", "versioned", "2.0.0"], &target);
    assert!(activated.status.success(), "{}", said(&activated));
    until_running(&[gateway], "2.0.0", "store");
    wait_until(
        Duration::from_secs(5),
        || {
            gateway
                .log()
                .lines()
                .any(|l| l.contains("a rule-set record is unreadable") && l.contains("drupal"))
        },
        || format!("the unreadable record is not logged:\n{}", gateway.log()),
    )
    .unwrap();
    let listed = refusal_said(&["list"], &target);
    assert!(
        listed.contains("ruleset-states drupal is unreadable"),
        "{listed}"
    );

    // The record of its active version unreadable: the version keeps serving, and
    // /health names the record while another name's change still arrives.
    let record = ["botgate:ruleset-versions", "versioned@2.0.0"];
    let Ok(Resp::Bulk(Some(readable))) = redis.command(&[&["HGET"][..], &record].concat()) else {
        panic!("no record of versioned 2.0.0");
    };
    redis
        .command(&[&["HSET"][..], &record, &["{"]].concat())
        .unwrap();
    classifier_fails_closed(gateway, &target);
    assert_eq!(running(gateway), Some(("2.0.0".into(), "store".into())));
    until_health(gateway, "the active version's record named", |health| {
        let held = &health["components_not_in_service"];
        held[0]["name"] == "drupal"
            && held[1]["name"] == "versioned"
            && held[1]["origin"] == "store: versioned 2.0.0"
            && held[1]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("versioned@2.0.0"))
    });
    redis
        .command(&[&["HSET"][..], &record, &[readable.as_str()]].concat())
        .unwrap();

    // Its own state unreadable: the name keeps the version it runs while another
    // name's change (the classifier failing open again) still arrives.
    redis
        .command(&[
            "HSET",
            "botgate:ruleset-states",
            "versioned",
            "{\"active\":",
        ])
        .unwrap();
    let open = ruleset(&["failure", "classifier", "open"], &target);
    assert!(open.status.success(), "{}", said(&open));
    until_health(gateway, "no component failing closed", |health| {
        health["components_fail_closed"] == json!([])
    });
    assert_eq!(running(gateway), Some(("2.0.0".into(), "store".into())));
    let refused = refusal_said(&["activate", "versioned", "1.0.0"], &target);
    assert!(
        refused.contains("ruleset-states versioned is unreadable"),
        "{refused}"
    );
    // /health names both state records, also on a gateway started while they are
    // unreadable (which cannot know what the store activated for them), and not a
    // version record that is not the active version's.
    let unreadable_named = |gateway: &Gateway| {
        let admin = Client::new(&format!("http://{}", gateway.admin), None);
        let held = admin.get("/health").unwrap().json()["components_not_in_service"].clone();
        let named: Vec<(&str, bool)> = held
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let origin = n["origin"].as_str().unwrap_or_default();
                let reason = n["reason"].as_str().unwrap_or_default();
                let unreadable =
                    origin.starts_with("store record ") && reason.starts_with("unreadable: ");
                (n["name"].as_str().unwrap_or_default(), unreadable)
            })
            .collect();
        assert_eq!(named, [("drupal", true), ("versioned", true)], "{held}");
    };
    unreadable_named(gateway);
    redis
        .command(&["HSET", "botgate:ruleset-versions", "versioned@1.0.0", "{"])
        .unwrap();
    let mut gateways = gateways;
    gateways[0].restart().unwrap();
    unreadable_named(&gateways[0]);
}

#[test]
fn on_the_embedded_store_the_commands_go_through_the_admin_listener() {
    let (_origin, gateways) = visited_website(GatewayStore::Embedded, 1, json!({}));
    let gateway = gateways.into_iter().next().unwrap();
    let target = through_admin(&gateway);
    let files = tempfile::tempdir().unwrap();

    // What the directory source refuses, a push refuses, naming why.
    let not_wasm = files.path().join("versioned.wasm");
    std::fs::write(&not_wasm, b"<html>not a component</html>").unwrap();
    let refused = ruleset(&["push", not_wasm.to_str().unwrap()], &target);
    assert!(!refused.status.success());
    assert!(
        said(&refused).contains("not a WebAssembly file"),
        "{}",
        said(&refused)
    );
    let world = files.path().join("wrong_world.wasm");
    std::fs::copy(botgate_tests::guest("wrong_world"), &world).unwrap();
    let refused = ruleset(&["push", world.to_str().unwrap()], &target);
    assert!(!refused.status.success());
    assert!(
        said(&refused).contains("the component is refused"),
        "{}",
        said(&refused)
    );
    // A file whose name is not the component's.
    let misnamed = files.path().join("other.wasm");
    std::fs::copy(botgate_tests::guest("versioned_one"), &misnamed).unwrap();
    let refused = ruleset(&["push", misnamed.to_str().unwrap()], &target);
    assert!(!refused.status.success());
    assert!(said(&refused).contains("versioned"), "{}", said(&refused));

    let file = versioned(files.path(), "versioned_one");
    let pushed = ruleset(&["push", file.to_str().unwrap()], &target);
    assert!(pushed.status.success(), "{}", said(&pushed));
    let unknown = ruleset(&["activate", "versioned", "9.9.9"], &target);
    assert!(!unknown.status.success());
    assert!(
        said(&unknown).contains("no pushed version 9.9.9 of versioned"),
        "{}",
        said(&unknown)
    );
    let bad = ruleset(&["activate", "versioned", "1.0/../x"], &target);
    assert!(!bad.status.success());
    assert!(
        said(&bad).contains("version \"1.0/../x\""),
        "{}",
        said(&bad)
    );
    // Activated while visitors keep coming: none of them fails.
    let visitors = super::Visitors::default();
    std::thread::scope(|scope| {
        visitors.start(scope, &[&gateway], Duration::from_millis(5));
        let _stop = super::StopOnDrop(&visitors);
        std::thread::sleep(Duration::from_millis(300));
        let activated = ruleset(&["activate", "versioned", "1.0.0"], &target);
        assert!(activated.status.success(), "{}", said(&activated));
        until_running(&[&gateway], "1.0.0", "store");
        std::thread::sleep(Duration::from_millis(300));
    });
    visitors.assert_none_failed(20);
    let listed = ruleset(&["list"], &target);
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(
        out.contains("this gateway runs:")
            && out.contains("versioned 1.0.0 (store: versioned 1.0.0)"),
        "{out}"
    );
    let status = status_said(&target);
    assert!(status.contains("versioned 1.0.0 (pushed)"), "{status}");
    // The metrics name the version this gateway runs.
    let metrics = Client::new(&format!("http://{}", gateway.admin), None)
        .get("/metrics")
        .unwrap()
        .text;
    assert!(
        metrics.contains("component=\"versioned\",version=\"1.0.0\""),
        "{metrics}"
    );

    // The failure policy, on a component from the directory: in /health, the status
    // and the metrics, with the circuit breaker's state.
    classifier_fails_closed(&gateway, &target);
    let admin = Client::new(&format!("http://{}", gateway.admin), None);
    let status = status_said(&target);
    assert!(
        status.contains("components failing closed: classifier"),
        "{status}"
    );
    let metrics = admin.get("/metrics").unwrap().text;
    let value = |family: &str| {
        let start = format!("{family}{{component=\"classifier\"");
        let line = metrics.lines().find(|l| l.starts_with(&start));
        line.and_then(|l| l.rsplit(' ').next()).map(str::to_owned)
    };
    assert_eq!(
        value("botgate_component_fails_closed").as_deref(),
        Some("1"),
        "{metrics}"
    );
    assert_eq!(
        value("botgate_component_switched_off").as_deref(),
        Some("0"),
        "{metrics}"
    );
    let open = ruleset(&["failure", "classifier", "open"], &target);
    assert!(open.status.success(), "{}", said(&open));
    until_health(&gateway, "no component failing closed", |health| {
        health["components_fail_closed"] == json!([])
    });
    let wrong = ruleset(&["failure", "classifier", "sometimes"], &target);
    assert!(!wrong.status.success());
    // A name failing closed that no component here has: named apart, and by the status.
    let missing = ruleset(&["failure", "my_cms", "closed"], &target);
    assert!(missing.status.success(), "{}", said(&missing));
    until_health(&gateway, "my_cms failing closed, missing", |health| {
        health["components_fail_closed_missing"] == json!(["my_cms"])
    });
    let status = status_said(&target);
    assert!(status.contains("components failing closed NOT LOADED (the requests they would judge are refused): my_cms"), "{status}");
    let open = ruleset(&["failure", "my_cms", "open"], &target);
    assert!(open.status.success(), "{}", said(&open));

    // A restarted gateway starts with what the store runs.
    let mut gateway = gateway;
    gateway.restart().unwrap();
    until_running(&[&gateway], "1.0.0", "store");
}

/// Runs `openssl` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let ran = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(ran.status.success(), "openssl {args:?}: {}", said(&ran));
}

#[test]
fn with_trusted_keys_only_signed_components_are_activated_and_loaded() {
    let redis = RedisServer::start().unwrap();
    let keys = tempfile::tempdir().unwrap();
    // The operator's key pair, and someone else's.
    for name in ["operator", "stranger"] {
        let key = format!("{name}.pem");
        openssl(
            keys.path(),
            &["genpkey", "-algorithm", "ed25519", "-out", &key],
        );
        let public = format!("{name}.pub.pem");
        openssl(
            keys.path(),
            &["pkey", "-in", &key, "-pubout", "-out", &public],
        );
    }
    let trusted = keys.path().join("operator.pub.pem");
    let binary = Path::new(env!("CARGO_BIN_EXE_botgate"));
    let gateway = Gateway::start_protecting(
        binary,
        GatewayStore::Redis(&redis),
        &[],
        &["--ruleset-trusted-key", trusted.to_str().unwrap()],
    )
    .unwrap();
    let on_the_store = redis_target(&redis);
    let files = tempfile::tempdir().unwrap();
    let sign = |file: &Path, key: &str| {
        let signature = file.with_extension("sig");
        openssl(
            keys.path(),
            &[
                "pkeyutl",
                "-sign",
                "-rawin",
                "-inkey",
                key,
                "-in",
                file.to_str().unwrap(),
                "-out",
                signature.to_str().unwrap(),
            ],
        );
        signature
    };

    // Unsigned: stored, never activated where keys are trusted.
    let one = versioned(files.path(), "versioned_one");
    let pushed = ruleset(&["push", one.to_str().unwrap()], &on_the_store);
    assert!(pushed.status.success(), "{}", said(&pushed));
    let trusted_flag = ["--ruleset-trusted-key", trusted.to_str().unwrap()];
    for command in ["activate", "shadow"] {
        let refused = ruleset(
            &[&[command, "versioned", "1.0.0"][..], &trusted_flag[..]].concat(),
            &on_the_store,
        );
        assert!(!refused.status.success(), "{command}");
        assert!(
            said(&refused).contains("versioned 1.0.0 is not signed"),
            "{command}: {}",
            said(&refused)
        );
    }

    // Signed by a stranger: refused by the gateway at the push, which knows its keys;
    // stored by a push straight into the store, and then refused at activation.
    let two = versioned(files.path(), "versioned_two");
    let by_stranger = sign(&two, "stranger.pem");
    let through_admin = through_admin(&gateway);
    let stranger_push = [
        "push",
        two.to_str().unwrap(),
        "--signature",
        by_stranger.to_str().unwrap(),
    ];
    let refused = ruleset(&stranger_push, &through_admin);
    assert!(!refused.status.success());
    assert!(
        said(&refused).contains("is not one of a trusted key's"),
        "{}",
        said(&refused)
    );
    let stored = ruleset(&stranger_push, &on_the_store);
    assert!(stored.status.success(), "{}", said(&stored));
    let refused = ruleset(
        &[&["activate", "versioned", "2.0.0"][..], &trusted_flag[..]].concat(),
        &on_the_store,
    );
    assert!(!refused.status.success());
    assert!(
        said(&refused).contains("is not one of a trusted key's"),
        "{}",
        said(&refused)
    );
    assert_eq!(running(&gateway), None);

    // Signed by the operator (as a new version of the same name would be): in service.
    let three = files.path().join("three");
    std::fs::create_dir_all(&three).unwrap();
    let three = three.join("versioned.wasm");
    std::fs::copy(botgate_tests::guest("versioned_two"), &three).unwrap();
    let by_operator = sign(&three, "operator.pem");
    ruleset(&["remove", "versioned", "2.0.0"], &on_the_store);
    let pushed = ruleset(
        &[
            "push",
            three.to_str().unwrap(),
            "--signature",
            by_operator.to_str().unwrap(),
        ],
        &on_the_store,
    );
    assert!(pushed.status.success(), "{}", said(&pushed));
    let activated = ruleset(
        &[&["activate", "versioned", "2.0.0"][..], &trusted_flag[..]].concat(),
        &on_the_store,
    );
    assert!(activated.status.success(), "{}", said(&activated));
    until_running(&[&gateway], "2.0.0", "store");

    // Someone who writes the store without the keys activates the unsigned version:
    // the gateway refuses to load it and keeps what runs.
    let forced = ruleset(&["activate", "versioned", "1.0.0"], &on_the_store);
    assert!(forced.status.success(), "{}", said(&forced));
    wait_until(
        Duration::from_secs(10),
        || gateway.log().contains("a pushed rule set is refused"),
        || format!("the gateway never refused it; log:\n{}", gateway.log()),
    )
    .unwrap();
    assert_eq!(running(&gateway), Some(("2.0.0".into(), "store".into())));
    // ...and says so in /health, the status and the metrics until a loadable version is
    // active again.
    until_health(&gateway, "versioned not in service", |health| {
        health["components_not_in_service"][0]["name"] == "versioned"
    });
    let admin = Client::new(&format!("http://{}", gateway.admin), None);
    let held = admin.get("/health").unwrap().json()["components_not_in_service"].clone();
    assert_eq!(held.as_array().map(Vec::len), Some(1), "{held}");
    assert_eq!(held[0]["origin"], "store: versioned 1.0.0", "{held}");
    let reason = held[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("not signed"), "{held}");
    let status = status_said(&through_admin);
    assert!(
        status.contains(&format!(
            "component NOT IN SERVICE here: versioned (store: versioned 1.0.0): {reason}"
        )),
        "{status}"
    );
    let metrics = admin.get("/metrics").unwrap().text;
    assert!(
        metrics.contains("botgate_components_not_in_service 1"),
        "{metrics}"
    );
    let back = ruleset(
        &[&["activate", "versioned", "2.0.0"][..], &trusted_flag[..]].concat(),
        &on_the_store,
    );
    assert!(back.status.success(), "{}", said(&back));
    until_health(&gateway, "every component in service", |health| {
        health["components_not_in_service"] == json!([])
    });
}

#[test]
fn a_version_in_shadow_is_compared_never_acted_on_and_the_diff_says_where() {
    let (_origin, gateways) =
        visited_website(GatewayStore::Embedded, 1, json!({"wordpress": true}));
    let gateway = gateways.into_iter().next().unwrap();
    let target = through_admin(&gateway);
    // A new wordpress that calls everything a scraper, in shadow on every request the
    // running wordpress (from the directory) judges.
    let files = tempfile::tempdir().unwrap();
    let folder = files.path().join("new");
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("wordpress.wasm");
    std::fs::copy(botgate_tests::guest("shadow_wordpress"), &file).unwrap();
    let pushed = ruleset(&["push", file.to_str().unwrap()], &target);
    assert!(pushed.status.success(), "{}", said(&pushed));
    let wrong = ruleset(&["shadow", "wordpress", "9.0.0", "--percent", "0"], &target);
    assert!(!wrong.status.success());
    let shadowed = ruleset(
        &["shadow", "wordpress", "9.0.0", "--percent", "100"],
        &target,
    );
    assert!(shadowed.status.success(), "{}", said(&shadowed));
    wait_until(
        Duration::from_secs(10),
        || gateway.log().contains("versions in shadow"),
        || format!("the shadow never loaded; log:\n{}", gateway.log()),
    )
    .unwrap();

    // Browsers on WordPress's pages: the running version lets them in; the shadow's
    // opinion (a scraper, which the policy denies) is never acted on.
    let admin = Client::new(&format!("http://{}", gateway.admin), None);
    let active_calls = || -> u64 {
        let metrics = admin.get("/metrics").unwrap().text;
        let line = metrics
            .lines()
            .find(|l| l.starts_with("botgate_component_calls_total{component=\"wordpress\""));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no calls of wordpress: {metrics}"))
    };
    let before = active_calls();
    let visits = 12;
    for _ in 0..visits {
        let status =
            super::visit_path(&gateway, "visited.example", "/wp-json/wp/v2/posts").unwrap();
        assert_eq!(status, 200);
    }
    // The active version judged each request once: the shadow is compared with that.
    assert_eq!(active_calls() - before, visits);
    // Outside WordPress's scope the shadow is not asked.
    super::visit_path(&gateway, "visited.example", "/about").unwrap();
    let diff = || ruleset(&["diff", "wordpress"], &target);
    wait_until(
        Duration::from_secs(10),
        || {
            String::from_utf8_lossy(&diff().stdout).contains(&format!(
                "{visits} requests compared, {visits} with another category"
            ))
        },
        || format!("the diff never counted every visit: {}", said(&diff())),
    )
    .unwrap();
    // A flush later, the request outside the scope has still not been compared.
    std::thread::sleep(Duration::from_millis(1500));
    let out = said(&diff());
    assert!(
        out.contains(&format!("{visits} requests compared")),
        "{out}"
    );
    assert!(
        out.contains("* abstain -> content_scrapers")
            || out.contains("* humans -> content_scrapers"),
        "{out}"
    );
    assert!(
        out.contains("visited.example GET /wp-json/wp/v2/posts"),
        "{out}"
    );
    assert!(out.contains("content_scrapers (shadow.scraper)"), "{out}");
    assert!(
        gateway
            .log()
            .contains("shadow_version=9.0.0 shadow=content_scrapers (shadow.scraper)"),
        "the shadow's opinion is logged beside the active one's"
    );

    // Dropped: no more comparisons; the versions stay as they were.
    let dropped = ruleset(&["unshadow", "wordpress"], &target);
    assert!(dropped.status.success(), "{}", said(&dropped));
    let again = ruleset(&["unshadow", "wordpress"], &target);
    assert!(!again.status.success());
    assert!(
        said(&again).contains("no version in shadow"),
        "{}",
        said(&again)
    );
    let listed = ruleset(&["diff", "wordpress", "--version", "9.0.0"], &target);
    assert!(
        said(&listed).contains(&format!("{visits} requests compared")),
        "{}",
        said(&listed)
    );
}

/// Where the scaffolded project builds: the guest workspace's target folder, whose
/// dependencies (the same versions: the project gets the workspace's lock file, and
/// the same release profile) the guests' build has already compiled.
fn scaffold_target() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rulesets/target")
}

/// `cargo ARGS` in `dir`, building into [`scaffold_target`].
fn cargo(dir: &Path, args: &[&str]) -> Output {
    let target = scaffold_target();
    std::process::Command::new(env!("CARGO"))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .output()
        .unwrap()
}

#[test]
fn a_rule_author_goes_from_the_template_to_a_component_in_service() {
    let projects = tempfile::tempdir().unwrap();
    let project = projects.path().join("my_cms");
    let scaffolded = ruleset(&["new", "my_cms", "--dir", project.to_str().unwrap()], &[]);
    assert!(scaffolded.status.success(), "{}", said(&scaffolded));
    for file in [
        "Cargo.toml",
        "src/lib.rs",
        "cases.jsonl",
        "wit/ruleset.wit",
        "botgate/sdk/src/lib.rs",
    ] {
        assert!(project.join(file).is_file(), "{file} was not written");
    }
    let again = ruleset(&["new", "my_cms", "--dir", project.to_str().unwrap()], &[]);
    assert!(!again.status.success());
    assert!(said(&again).contains("exists already"), "{}", said(&again));
    let bad = ruleset(
        &[
            "new",
            "My-CMS",
            "--dir",
            projects.path().join("x").to_str().unwrap(),
        ],
        &[],
    );
    assert!(!bad.status.success());

    // Tested natively, then built, outside this repository, against the SDK and the
    // contract written beside it.
    let tested = cargo(&project, &["test", "-q"]);
    assert!(tested.status.success(), "{}", said(&tested));
    let built = cargo(
        &project,
        &["build", "--release", "--target", "wasm32-wasip2"],
    );
    assert!(built.status.success(), "{}", said(&built));
    let wasm = scaffold_target().join("wasm32-wasip2/release/my_cms.wasm");
    let cases = project.join("cases.jsonl");
    let tested = ruleset(
        &[
            "test",
            wasm.to_str().unwrap(),
            "--cases",
            cases.to_str().unwrap(),
        ],
        &[],
    );
    assert!(tested.status.success(), "{}", said(&tested));
    assert!(
        said(&tested).contains("my_cms 0.1.0: 4 cases, 0 mismatches"),
        "{}",
        said(&tested)
    );
    // A case the rules do not meet is reported, and fails the command.
    let mut text = std::fs::read_to_string(&cases).unwrap();
    text.push_str(
        r#"{"name": "wrongly labelled", "url": "https://www.example.com/health", "headers": {"user-agent": "ExampleMonitor/1.0"}, "expect": "humans"}"#,
    );
    text.push('\n');
    std::fs::write(&cases, text).unwrap();
    let failed = ruleset(
        &[
            "test",
            wasm.to_str().unwrap(),
            "--cases",
            cases.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!failed.status.success());
    assert!(
        said(&failed).contains("wrongly labelled: category services_and_payments, not humans"),
        "{}",
        said(&failed)
    );

    // Pushed, then in service on a running gateway.
    let binary = Path::new(env!("CARGO_BIN_EXE_botgate"));
    let origin = Origin::start("origin", [127, 0, 0, 1].into(), 0).unwrap();
    let port = origin.address.port().to_string();
    let gateway = Gateway::start_protecting(
        binary,
        GatewayStore::Embedded,
        &["hoster"],
        &["--origin-http-port", &port],
    )
    .unwrap();
    let target = through_admin(&gateway);
    let pushed = ruleset(&["push", wasm.to_str().unwrap()], &target);
    assert!(pushed.status.success(), "{}", said(&pushed));
    // A website may enable it by name once it is pushed, before it runs anywhere.
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    super::create_owner(&partner);
    let created = partner
        .post_json(
            "/v1.0/website",
            &json!({"domain": "cms.example", "user_id": "owner", "ip": ["127.0.0.1"],
                    "settings": {"rulesets": {"my_cms": true}}}),
        )
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.text);
    let activated = ruleset(&["activate", "my_cms", "0.1.0"], &target);
    assert!(activated.status.success(), "{}", said(&activated));
    until_health(&gateway, "my_cms 0.1.0 from the store", |health| {
        health["components"]["my_cms"] == "0.1.0"
            && health["component_sources"]["my_cms"] == "store"
    });

    // Once active, its monitor rule (the template's) judges the website's requests.
    super::wait_served(&gateway, "cms.example");
    let monitor = send(
        gateway.http,
        &Visit::default(),
        Outgoing::get("cms.example", "/health")
            .header("user-agent", "ExampleMonitor/1.0")
            .header("accept", "*/*"),
    )
    .unwrap();
    assert_eq!(monitor.status, 200, "{monitor:?}");
    wait_until(
        Duration::from_secs(5),
        || {
            gateway.log().lines().any(|line| {
                line.contains("botgate::access")
                    && line.contains("target=/health ")
                    && line.contains("decider=\"my_cms\"")
            })
        },
        || {
            format!(
                "my_cms did not judge the website's request; log:\n{}",
                gateway.log()
            )
        },
    )
    .unwrap();

    // A new version: pushed, in shadow beside the running one, then active.
    let manifest = project.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("version = \"0.1.0\"", "version = \"0.2.0\""),
    )
    .unwrap();
    let built = cargo(
        &project,
        &["build", "--release", "--target", "wasm32-wasip2"],
    );
    assert!(built.status.success(), "{}", said(&built));
    let pushed = ruleset(&["push", wasm.to_str().unwrap()], &target);
    assert!(
        said(&pushed).contains("pushed my_cms 0.2.0"),
        "{}",
        said(&pushed)
    );
    let shadowed = ruleset(&["shadow", "my_cms", "0.2.0", "--percent", "10"], &target);
    assert!(shadowed.status.success(), "{}", said(&shadowed));
    wait_until(
        Duration::from_secs(10),
        || gateway.log().contains("my_cms 0.2.0 10%"),
        || format!("the shadow never loaded; log:\n{}", gateway.log()),
    )
    .unwrap();
    let diff = ruleset(&["diff", "my_cms"], &target);
    assert!(
        said(&diff).contains("my_cms 0.2.0 in shadow"),
        "{}",
        said(&diff)
    );
    let activated = ruleset(&["activate", "my_cms", "0.2.0"], &target);
    assert!(activated.status.success(), "{}", said(&activated));
    until_health(&gateway, "my_cms 0.2.0", |health| {
        health["components"]["my_cms"] == "0.2.0"
    });
    let listed = String::from_utf8_lossy(&ruleset(&["list"], &target).stdout).into_owned();
    assert!(
        !listed.contains("shadow"),
        "activating ends its shadow: {listed}"
    );
}
