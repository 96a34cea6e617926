//! deploy/README.md's runbook on one machine, three servers on loopback addresses:
//! secrets from `openssl rand`, each server's files rendered and installed by its
//! `install.sh` (for real: as root, it creates the `botgate` user and gives every file
//! its owner and mode), checked with `haproxy -c` and `botgate config check`, the
//! services started on the installed files as their units start them (systemd does not
//! run here), a partner and a website, and `botgate cluster check` passing; then, with a
//! gateway down and the floating IP on the wrong instance, failing and naming them.
//!
//! One HAProxy (server 1's) serves every server's public and store ports: each binds
//! `*:port`, which servers sharing one machine cannot all do. Server 1's gateway runs on
//! its botgate.toml as rendered; servers 2 and 3 move their loopback listeners, which
//! would collide with server 1's here.

use super::LoopbackCluster;
use anyhow::{Context, Result};
use botgate_tests::ca::TestCa;
use botgate_tests::http::Client;
use botgate_tests::origin::Origin;
use botgate_tests::provider::FakeProvider;
use botgate_tests::servers::{ServerGuard, free_port, wait_until};
use botgate_tests::visitor::{Outgoing, Visit, send};
use serde_json::json;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn the_runbook_ends_in_a_checked_cluster_and_the_check_names_what_breaks() {
    let provider = FakeProvider::start("test-token-0123456789", Some("1001")).unwrap();
    let mut cluster = LoopbackCluster::with_fake_provider(3, &provider).unwrap();

    // The secrets as the runbook makes them (deploy/README.md, step 1).
    let made = Command::new("sh")
        .arg("-c")
        .arg(
            "mkdir -p secrets && chmod 700 secrets\n\
             openssl rand -hex 32 > secrets/redis-password\n\
             read -r PROVIDER_TOKEN && printf '%s\\n' \"$PROVIDER_TOKEN\" > secrets/provider-token",
        )
        .current_dir(cluster.dir.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut shell| {
            use std::io::Write;
            shell
                .stdin
                .take()
                .expect("a pipe")
                .write_all(format!("{}\n", provider.token()).as_bytes())?;
            shell.wait()
        })
        .unwrap();
    assert!(made.success());
    let secret = |name: &str| {
        std::fs::read_to_string(cluster.dir.path().join("secrets").join(name))
            .unwrap()
            .trim()
            .to_owned()
    };
    cluster.password = secret("redis-password");
    assert_eq!(cluster.password.len(), 64);
    assert_eq!(secret("provider-token"), provider.token());
    cluster.secrets = "secrets/".into();
    let origin = Origin::start("origin", [127, 0, 0, 1].into(), 0).unwrap();
    let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
    cluster.gateway = format!(
        "api-listen = \"{api}\"\norigin-http-port = {}\norigin-allow-network = [\"127.0.0.0/8\"]\n\
         component-deadline-ms = 2000\n",
        origin.address.port(),
    );

    // Render and install every server's files; check them as the runbook does.
    for server in 1..=3 {
        let said = cluster.render_and_run_install(server, &[]).unwrap();
        assert!(said.contains("systemd is not running"), "{said}");
        botgate_tests::servers::check_haproxy(&cluster.file(server, "etc/haproxy/haproxy.cfg"))
            .unwrap();
        cluster.config_check(server).unwrap();
    }
    for (path, owner, group, mode) in [
        ("etc/redis/redis.conf", "redis", "redis", 0o640),
        ("etc/botgate/provider-token", "root", "redis", 0o640),
        ("etc/botgate/botgate.toml", "root", "botgate", 0o640),
        ("etc/haproxy/haproxy.cfg", "root", "haproxy", 0o640),
        ("var/lib/botgate", "botgate", "botgate", 0o750),
    ] {
        assert_installed(&cluster.file(2, path), owner, group, mode);
    }
    // Installing again keeps what Sentinel wrote into its file; --reset-store does not.
    let sentinel_conf = cluster.file(2, "etc/redis/sentinel.conf");
    let rendered = std::fs::read_to_string(&sentinel_conf).unwrap();
    std::fs::write(
        &sentinel_conf,
        format!("{rendered}# rewritten by Sentinel\n"),
    )
    .unwrap();
    let said = cluster.render_and_run_install(2, &[]).unwrap();
    assert!(said.contains("kept"), "{said}");
    assert!(
        std::fs::read_to_string(&sentinel_conf)
            .unwrap()
            .contains("by Sentinel")
    );
    cluster
        .render_and_run_install(2, &["--reset-store"])
        .unwrap();
    assert_eq!(std::fs::read_to_string(&sentinel_conf).unwrap(), rendered);

    // The services, on the installed files.
    let mut store = cluster.start_store().unwrap();
    let haproxy = &store.haproxy;
    let config = |server| cluster.file(server, "etc/botgate/botgate.toml");
    let created = super::botgate()
        .args(["partner", "create", "hoster", "--config"])
        .arg(config(1))
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let partner_key = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    let moved = [
        "--http-listen",
        "127.0.0.1:0",
        "--https-listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--api-listen",
        "127.0.0.1:0",
    ];
    let one = start_gateway(&cluster, 1, &[]).unwrap();
    let two = start_gateway(&cluster, 2, &moved).unwrap();
    let three = start_gateway(&cluster, 3, &moved).unwrap();
    let logs = || {
        format!(
            "gateway logs:\n{}\n{}\n{}\nhaproxy:\n{}",
            one.log(),
            two.log(),
            three.log(),
            haproxy.log()
        )
    };

    // A protected website with a certificate from the test's own CA.
    let ca = TestCa::new("cluster check CA").unwrap();
    let ca_file = cluster.dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.root_pem()).unwrap();
    let (public, private) = ca.issue(&["checked.example"]).unwrap();
    let partner = Client::new(&format!("http://{api}"), Some(&partner_key));
    super::create_owner(&partner);
    let created = partner
        .post_json(
            "/v1.0/website",
            &json!({"domain": "checked.example", "user_id": "owner", "ip": ["127.0.0.1"],
                    "certificate": {"public": public, "private": private}}),
        )
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.json()["status"], "online", "{}", created.text);

    // HAProxy checks the gateway every 2 s: the HTTP and HTTPS backends, down while the
    // gateway was not yet started, come up on the next checks (each on its own).
    for (port, tls_name) in [
        (cluster.ports.http, None),
        (cluster.ports.https, Some("checked.example".to_owned())),
    ] {
        let public = SocketAddr::new(cluster.public_ip(1), port);
        let visit = Visit {
            tls_name,
            ..Visit::default()
        };
        wait_until(
            Duration::from_secs(15),
            || send(public, &visit, Outgoing::get("checked.example", "/")).is_ok(),
            || format!("haproxy never forwarded {public}; {}", logs()),
        )
        .unwrap();
    }

    let check = || {
        let output = super::botgate()
            .args(["cluster", "check"])
            .arg(cluster.description_file(1))
            .arg("--ca-file")
            .arg(&ca_file)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, out, err) = check();
    assert_eq!(code, Some(0), "{out}\n{err}\n{}", logs());
    for number in 1..=6 {
        assert!(out.contains(&format!("PASS {number}.")), "{out}");
    }
    assert!(out.contains("all 6 checks passed"), "{out}");
    assert!(
        out.contains("1 websites, the same domains and statuses"),
        "{out}"
    );
    // Traffic through each server's HTTP and HTTPS: a monitor (a service, granted by
    // default) gets the origin's answer, a scanner the gateway's 403.
    assert_eq!(
        out.matches("https://checked.example via").count(),
        3,
        "{out}"
    );
    assert_eq!(
        out.matches("http://checked.example via").count(),
        3,
        "{out}"
    );
    assert_eq!(
        out.matches("monitor 200 from the origin (the origin's answer wanted")
            .count(),
        6,
        "{out}"
    );
    assert_eq!(
        out.matches(
            "scanner 403 from the gateway (the gateway's 403 wanted: security_issues is deny)"
        )
        .count(),
        6,
        "{out}"
    );

    // A gateway down, and the floating IP moved to a replica's instance by hand.
    let metrics3 = SocketAddr::new(cluster.private_ip(3), cluster.ports.gateway_admin);
    drop(three);
    provider.assign("1002");
    let (code, out, err) = check();
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains("checks 1, 2, 6 failed"), "{out}\n{err}");
    assert!(out.contains("FAIL 1.") && out.contains("FAIL 2."), "{out}");
    assert!(
        out.contains(&format!("gw3: no gateway answers at http://{metrics3}")),
        "{out}"
    );
    assert!(
        out.contains("assigned to gw2 (instance 1002); the master is gw1 (instance 1001)"),
        "{out}"
    );
    for number in [3, 4, 5] {
        assert!(out.contains(&format!("PASS {number}.")), "{out}");
    }

    // The floating IP back on the master, and a replica's store node down.
    provider.assign("1001");
    store.nodes[2] = None;
    let (code, out, err) = check();
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(err.contains("checks 1, 2, 4, 5 failed"), "{out}\n{err}");
    assert!(
        out.contains("FAIL gw1: the master has 1 connected replicas of 2"),
        "{out}"
    );
    let replication = out.split("FAIL 5.").nth(1).unwrap_or_default();
    assert!(replication.contains("ok   gw1: role:master"), "{out}");
    assert!(
        replication.contains("ok   gw2: role:slave, replica of gw1"),
        "{out}"
    );
    assert!(replication.contains("FAIL gw3: "), "{out}");
    for number in [3, 6] {
        assert!(out.contains(&format!("PASS {number}.")), "{out}");
    }
}

/// Asserts `path`'s owner, group and mode as `install.sh` sets them.
fn assert_installed(path: &Path, owner: &str, group: &str, mode: u32) {
    let meta = std::fs::metadata(path).unwrap();
    let name = |database: &str, id: u32| {
        let entry = Command::new("getent")
            .args([database, &id.to_string()])
            .output()
            .unwrap();
        let entry = String::from_utf8_lossy(&entry.stdout).into_owned();
        entry.split(':').next().unwrap_or_default().to_owned()
    };
    assert_eq!(name("passwd", meta.uid()), owner, "{}", path.display());
    assert_eq!(name("group", meta.gid()), group, "{}", path.display());
    assert_eq!(meta.mode() & 0o7777, mode, "{}", path.display());
}

/// `botgate serve --config` server `server`'s installed botgate.toml (and `args`), with
/// the shipped rule components in its rulesets folder, once its metrics listener
/// reports it healthy.
fn start_gateway(cluster: &LoopbackCluster, server: usize, args: &[&str]) -> Result<ServerGuard> {
    let rulesets = cluster.file(server, "var/lib/botgate/rulesets");
    for name in botgate_tests::shipped() {
        let component = botgate_tests::guest(name);
        std::fs::copy(&component, rulesets.join(format!("{name}.wasm")))?;
    }
    let guard = ServerGuard::spawn(
        "botgate",
        super::botgate()
            .arg("serve")
            .arg("--config")
            .arg(cluster.file(server, "etc/botgate/botgate.toml"))
            .args(args)
            // The compiled components every test shares.
            .env("BOTGATE_CACHE_DIR", botgate_tests::cache_dir()),
        tempfile::tempdir()?,
        None,
    )?;
    let health = format!(
        "http://{}",
        SocketAddr::new(cluster.private_ip(server), cluster.ports.gateway_admin)
    );
    let healthy = || {
        Client::new(&health, None)
            .get("/health")
            .is_ok_and(|reply| reply.status == 200)
    };
    wait_until(Duration::from_secs(60), healthy, || {
        format!(
            "gw{server}'s gateway never became healthy; log:\n{}",
            guard.log()
        )
    })
    .context("starting a gateway")?;
    Ok(guard)
}
