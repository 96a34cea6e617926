//! `fip-switch.sh`, as `cluster render` installs it with its settings, against a fake
//! provider API: Sentinel's calls and the specification's, idempotence when every
//! sentinel calls it, an unknown master, transient and permanent provider errors, and
//! each provider's request.

use super::LoopbackCluster;
use botgate_tests::provider::FakeProvider;
use std::process::{Command, Output};

const TOKEN: &str = "test-token-0123456789";

/// Server 1 of a rendered three-server cluster whose provider (`kind` and its keys,
/// with `api` or `url` pointing at `provider`) moves the floating IP.
fn rendered(provider: &FakeProvider, keys: &str) -> LoopbackCluster {
    let keys = keys.replace("{fake}", &provider.url());
    let cluster = LoopbackCluster::with_provider(3, &keys).unwrap();
    cluster.render_and_install(1).unwrap();
    cluster
}

/// Runs the installed script as Sentinel would, with `role` and `state`, the master
/// moving from server 1 to the node at `to_ip`.
fn call(cluster: &LoopbackCluster, role: &str, state: &str, to_ip: &str) -> Output {
    let settings = cluster.file(1, "etc/botgate/fip-switch.conf");
    // Nothing listens on the settings' Sentinel port here: the script cannot ask
    // whether the new master is still the master, and goes on.
    let from = cluster.private_ip(1).to_string();
    Command::new(cluster.file(1, "usr/local/bin/fip-switch.sh"))
        .args(["mymaster", role, state, &from, "6379", to_ip, "6379"])
        .env("FIP_SWITCH_CONFIG", settings)
        .output()
        .unwrap()
}

fn log_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const HETZNER: &str = "kind = \"hetzner\"\nfloating-ip-id = \"4711\"\napi = \"{fake}\"\n";

#[test]
fn sentinel_s_call_moves_the_floating_ip_once_however_many_sentinels_call() {
    let provider = FakeProvider::start(TOKEN, Some("1001")).unwrap();
    let cluster = rendered(&provider, HETZNER);
    let gw2 = cluster.private_ip(2).to_string();

    // The leader's call, as real Sentinel (7.0) makes it: read, then assign.
    let leader = call(&cluster, "leader", "start", &gw2);
    assert_eq!(leader.status.code(), Some(0), "{}", log_of(&leader));
    assert_eq!(provider.assigned().as_deref(), Some("1002"));
    let assignments = provider.assignments();
    assert_eq!(assignments.len(), 1);
    assert_eq!(assignments[0].path, "/v1/floating_ips/4711/actions/assign");
    assert_eq!(assignments[0].body, r#"{"server":1002}"#);
    assert_eq!(
        assignments[0]
            .headers
            .get("content-type")
            .map(String::as_str),
        Some("application/json")
    );
    assert!(
        log_of(&leader).contains("assigned: HTTP 201"),
        "{}",
        log_of(&leader)
    );
    let logged = std::fs::read_to_string(cluster.file(1, "var/log/redis/fip-switch.log")).unwrap();
    assert!(logged.contains("assigning it to instance 1002"), "{logged}");

    // The observers' calls find it done.
    for _ in 0..2 {
        let observer = call(&cluster, "observer", "start", &gw2);
        assert_eq!(observer.status.code(), Some(0), "{}", log_of(&observer));
        assert!(log_of(&observer).contains("nothing to do"));
    }
    assert_eq!(provider.assignments().len(), 1);

    // The specification's reading of the arguments acts too.
    let gw3 = cluster.private_ip(3).to_string();
    let spec = call(&cluster, "master", "switch", &gw3);
    assert_eq!(spec.status.code(), Some(0), "{}", log_of(&spec));
    assert_eq!(provider.assigned().as_deref(), Some("1003"));

    // Other roles and states do nothing.
    let calls = provider.calls().len();
    let other = call(&cluster, "leader", "reconf", &gw2);
    assert_eq!(other.status.code(), Some(0));
    assert_eq!(provider.calls().len(), calls);
}

#[test]
fn an_unknown_master_and_provider_errors_end_with_their_status() {
    let provider = FakeProvider::start(TOKEN, Some("1001")).unwrap();
    let cluster = rendered(&provider, HETZNER);
    let gw2 = cluster.private_ip(2).to_string();

    // A master with no instance id: logged, status 1, no call.
    let unknown = call(&cluster, "leader", "failover", "10.9.9.9");
    assert_eq!(unknown.status.code(), Some(1));
    assert!(log_of(&unknown).contains("no instance id for the new master's IP 10.9.9.9"));
    assert!(provider.calls().is_empty());

    // Transient errors are retried.
    provider.unavailable_for(2);
    let retried = call(&cluster, "leader", "failover", &gw2);
    assert_eq!(retried.status.code(), Some(0), "{}", log_of(&retried));
    assert_eq!(provider.assigned().as_deref(), Some("1002"));
    assert!(log_of(&retried).contains("HTTP 503"));

    // So is a floating IP another action holds (Hetzner's 423, a 409 elsewhere).
    for status in [423, 409] {
        provider.assign("1001");
        provider.busy_for(status, 1);
        let busy = call(&cluster, "leader", "failover", &gw2);
        assert_eq!(busy.status.code(), Some(0), "{}", log_of(&busy));
        assert!(log_of(&busy).contains(&format!("HTTP {status}")));
        assert_eq!(provider.assigned().as_deref(), Some("1002"));
    }

    // A refusal is permanent: status 2, the answer logged.
    provider.refuse_with(403);
    let gw3 = cluster.private_ip(3).to_string();
    let refused = call(&cluster, "leader", "failover", &gw3);
    assert_eq!(refused.status.code(), Some(2), "{}", log_of(&refused));
    assert!(log_of(&refused).contains("HTTP 403"));
    assert_eq!(provider.assigned().as_deref(), Some("1002"));
}

/// Hetzner carries an assignment out as an action: the script waits for its end, and
/// an action that fails is no assignment (status 1: Sentinel calls again).
#[test]
fn a_hetzner_assignment_counts_once_its_action_succeeded() {
    let provider = FakeProvider::start(TOKEN, Some("1001")).unwrap();
    let cluster = rendered(&provider, HETZNER);
    let gw2 = cluster.private_ip(2).to_string();
    provider.fail_actions();
    let failed = call(&cluster, "leader", "failover", &gw2);
    assert_eq!(failed.status.code(), Some(1), "{}", log_of(&failed));
    assert!(
        log_of(&failed).contains("the provider's action 7000 failed"),
        "{}",
        log_of(&failed)
    );
    assert_eq!(provider.assigned().as_deref(), Some("1001"));
    let polls = provider
        .calls()
        .into_iter()
        .filter(|call| call.path == "/v1/floating_ips/actions/7000")
        .count();
    assert_eq!(polls, 2, "{:?}", provider.calls());
}

#[test]
fn each_provider_gets_its_own_request() {
    for (keys, path, body) in [
        (
            "kind = \"digitalocean\"\napi = \"{fake}\"\n",
            "/v2/reserved_ips/127.0.0.100/actions",
            r#"{"type":"assign","droplet_id":1002}"#,
        ),
        (
            "kind = \"vultr\"\nreserved-ip-id = \"r-1\"\napi = \"{fake}\"\n",
            "/v2/reserved-ips/r-1/attach",
            r#"{"instance_id":"1002"}"#,
        ),
        (
            "kind = \"generic\"\nurl = \"{fake}/generic/{floating_ip}/{instance_id}\"\n\
             body = '{\"ip\": \"{floating_ip}\"}'\n",
            "/generic/127.0.0.100/1002",
            r#"{"ip": "127.0.0.100"}"#,
        ),
    ] {
        let provider = FakeProvider::start(TOKEN, Some("1001")).unwrap();
        let cluster = rendered(&provider, keys);
        let moved = call(
            &cluster,
            "leader",
            "failover",
            &cluster.private_ip(2).to_string(),
        );
        assert_eq!(moved.status.code(), Some(0), "{keys}: {}", log_of(&moved));
        let assignments = provider.assignments();
        assert_eq!(assignments.len(), 1, "{keys}");
        assert_eq!(assignments[0].path, path);
        assert_eq!(assignments[0].body, body);
        assert_eq!(provider.assigned().as_deref(), Some("1002"), "{keys}");
        assert_eq!(
            assignments[0]
                .headers
                .get("authorization")
                .map(String::as_str),
            Some(format!("Bearer {}", provider.token()).as_str())
        );
        // A 409: another action under way at the providers known to say so (retried),
        // anything at a generic API (which may mean it is so already).
        provider.assign("1001");
        provider.busy_for(409, 1);
        let busy = call(
            &cluster,
            "leader",
            "failover",
            &cluster.private_ip(3).to_string(),
        );
        let generic = keys.contains("generic");
        assert_eq!(
            busy.status.code(),
            Some(if generic { 2 } else { 0 }),
            "{keys}"
        );
    }
}

/// Every provider that can tell the assignment (the generic one given
/// `assignment-url` and `assignment-field`) is read first: the calls of the other
/// sentinels find the work done.
#[test]
fn every_provider_that_can_tell_the_assignment_is_moved_once() {
    for keys in [
        "kind = \"digitalocean\"\napi = \"{fake}\"\n",
        "kind = \"vultr\"\nreserved-ip-id = \"r-1\"\napi = \"{fake}\"\n",
        "kind = \"generic\"\nurl = \"{fake}/generic/{floating_ip}/{instance_id}\"\n\
         body = '{\"ip\": \"{floating_ip}\"}'\nmethod = \"PUT\"\n\
         assignment-url = \"{fake}/generic/{floating_ip}\"\n\
         assignment-field = \"/target/instance\"\n",
    ] {
        let provider = FakeProvider::start(TOKEN, Some("1001")).unwrap();
        let cluster = rendered(&provider, keys);
        let gw2 = cluster.private_ip(2).to_string();
        for role in ["leader", "observer", "observer"] {
            let called = call(&cluster, role, "failover", &gw2);
            assert_eq!(called.status.code(), Some(0), "{keys}: {}", log_of(&called));
        }
        let assignments = provider.assignments();
        assert_eq!(assignments.len(), 1, "{keys}: {:?}", provider.calls());
        assert_eq!(provider.assigned().as_deref(), Some("1002"), "{keys}");
        if keys.contains("generic") {
            assert_eq!(assignments[0].method, "PUT", "the configured method");
        }
    }
}

/// A late call from an earlier failover (the local Sentinel names another master by
/// now) must not move the floating IP back; the call for the master Sentinel names
/// moves it.
#[test]
fn a_call_for_a_master_the_local_sentinel_no_longer_names_does_nothing() {
    use botgate_tests::servers::{RedisServer, Sentinel};
    let provider = FakeProvider::start(TOKEN, Some("1001")).unwrap();
    let cluster = rendered(&provider, HETZNER);
    // A real Sentinel on loopback whose master `mymaster` is 127.0.0.1, which takes
    // commands with its password only; the settings point the script at it and at its
    // password, and map 127.0.0.1 to instance 1009.
    let master = RedisServer::start().unwrap();
    let sentinel = Sentinel::start(&master).unwrap();
    let installed = cluster.file(1, "etc/botgate/fip-switch.conf");
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("store-password");
    std::fs::write(&password, format!("{}\n", sentinel.password)).unwrap();
    let settings: String = std::fs::read_to_string(&installed)
        .unwrap()
        .lines()
        .map(|line| {
            if line.starts_with("sentinel_port=") {
                format!("sentinel_port={}\n", sentinel.port)
            } else if line.starts_with("sentinel_password_file=") {
                format!("sentinel_password_file={}\n", password.display())
            } else {
                format!("{line}\n")
            }
        })
        .chain(["instance 127.0.0.1 1009\n".to_owned()])
        .collect();
    let config = dir.path().join("fip-switch.conf");
    std::fs::write(&config, settings).unwrap();
    let run = |to_ip: &str| {
        Command::new(cluster.file(1, "usr/local/bin/fip-switch.sh"))
            .args([
                "mymaster",
                "leader",
                "failover",
                "127.0.0.2",
                "6379",
                to_ip,
                "6379",
            ])
            .env("FIP_SWITCH_CONFIG", &config)
            .output()
            .unwrap()
    };
    let late = run(&cluster.private_ip(2).to_string());
    assert_eq!(late.status.code(), Some(0), "{}", log_of(&late));
    assert!(
        log_of(&late).contains("the local Sentinel's master is now 127.0.0.1"),
        "{}",
        log_of(&late)
    );
    assert!(provider.calls().is_empty(), "{:?}", provider.calls());

    // A password the Sentinel refuses: no answer to go by, so nothing moves until
    // Sentinel calls again.
    std::fs::write(&password, "not-the-password\n").unwrap();
    let refused = run("127.0.0.1");
    assert_eq!(refused.status.code(), Some(1), "{}", log_of(&refused));
    assert!(
        log_of(&refused).contains("did not say which node is the master"),
        "{}",
        log_of(&refused)
    );
    assert!(provider.calls().is_empty(), "{:?}", provider.calls());
    std::fs::write(&password, format!("{}\n", sentinel.password)).unwrap();
    let current = run("127.0.0.1");
    assert_eq!(current.status.code(), Some(0), "{}", log_of(&current));
    assert_eq!(provider.assigned().as_deref(), Some("1009"));
}

#[test]
fn a_provider_that_never_answers_costs_no_more_than_the_deadline() {
    // A provider that accepts connections and never answers: every call hangs.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api = format!("http://{}", silent.local_addr().unwrap());
    let cluster = LoopbackCluster::with_provider(
        3,
        &format!("kind = \"hetzner\"\nfloating-ip-id = \"4711\"\napi = \"{api}\"\n"),
    )
    .unwrap();
    cluster.render_and_install(1).unwrap();
    let installed = cluster.file(1, "etc/botgate/fip-switch.conf");
    let rendered = std::fs::read_to_string(&installed).unwrap();
    assert!(!rendered.contains("deadline_seconds"), "{rendered}");
    let gw2 = cluster.private_ip(2).to_string();

    // Shortened from the default 50 s (10 s under Sentinel's 60 s limit), which a call
    // that hangs for curl's 10 s just before it would overrun without the cut.
    std::fs::write(&installed, format!("{rendered}deadline_seconds=3\n")).unwrap();
    let started = std::time::Instant::now();
    let hung = call(&cluster, "leader", "failover", &gw2);
    let took = started.elapsed();
    assert_eq!(hung.status.code(), Some(1), "{}", log_of(&hung));
    assert!(
        log_of(&hung).contains("giving up for now"),
        "{}",
        log_of(&hung)
    );
    assert!(took < std::time::Duration::from_secs(8), "took {took:?}");

    // Out of range: refused before any call.
    for bad in ["0", "56", "ten"] {
        std::fs::write(&installed, format!("{rendered}deadline_seconds={bad}\n")).unwrap();
        let refused = call(&cluster, "leader", "failover", &gw2);
        assert_eq!(refused.status.code(), Some(2), "{}", log_of(&refused));
        assert!(
            log_of(&refused).contains("deadline_seconds must be 1 to 55"),
            "{}",
            log_of(&refused)
        );
    }
}
