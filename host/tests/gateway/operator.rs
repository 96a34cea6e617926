//! The operator's commands against a gateway that runs on the embedded store (which one
//! process holds at a time): `botgate partner create|list|rotate|revoke` and `botgate
//! status` go through its admin listener with the token it wrote into the data
//! directory.

use super::*;
use std::process::Command;

/// Runs `botgate ARGS` against `gateway`'s data directory and admin listener.
fn botgate(gateway: &Gateway, args: &[&str]) -> std::process::Output {
    let data_dir = gateway.data_dir();
    Command::new(binary())
        .args(args)
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--admin-url", &format!("http://{}", gateway.admin)])
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("running botgate")
}

fn printed(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A self-signed certificate for `name` that expires in `days`.
fn expiring_in(name: &str, days: i64) -> (String, String) {
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(days);
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = params.self_signed(&key).unwrap();
    (certificate.pem(), key.serialize_pem())
}

#[test]
fn partners_and_status_work_while_the_gateway_holds_the_embedded_store() {
    let gateway =
        Gateway::start_protecting(binary(), GatewayStore::Embedded, &["hoster"], &[]).unwrap();
    let api = |key: &str| {
        Client::new(&gateway.api, Some(key))
            .get("/v1.0/user")
            .unwrap()
    };

    // Without the token from the data directory the admin listener refuses.
    let admin = Client::new(&format!("http://{}", gateway.admin), Some("not-the-token"));
    assert_eq!(admin.get("/operator/partners").unwrap().status, 401);
    let anonymous = Client::new(&format!("http://{}", gateway.admin), None);
    assert_eq!(
        anonymous
            .post_form("/operator/partners/eve/create", &[])
            .unwrap()
            .status,
        401
    );
    let key = printed(&botgate(&gateway, &["partner", "create", "carol"]));
    assert!(key.starts_with("bgp_"), "{key}");
    assert_eq!(api(&key).status, 200);
    let listed = printed(&botgate(&gateway, &["partner", "list"]));
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["carol", "hoster"]);
    let again = botgate(&gateway, &["partner", "create", "carol"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("partner `carol` exists"));

    let rotated = printed(&botgate(&gateway, &["partner", "rotate", "carol"]));
    assert_ne!(rotated, key);
    assert_eq!(api(&key).status, 401, "the old key stops working");
    assert_eq!(api(&rotated).status, 200);
    printed(&botgate(&gateway, &["partner", "revoke", "carol"]));
    assert_eq!(api(&rotated).status, 401, "a revoked key stops working");
    let missing = botgate(&gateway, &["partner", "rotate", "nobody"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no partner `nobody`"));

    // A website whose own certificate expires in five days shows in the status.
    let (public, private) = expiring_in("soon.example", 5);
    let partner = partner(&gateway);
    let _ = partner.post_form("/v1.0/user", &[("id", "owner")]).unwrap();
    let created = partner
        .post_json(
            "/v1.0/website",
            &json!({"user_id": "owner", "domain": "soon.example", "ip": ["192.0.2.1"],
                    "certificate": {"public": public, "private": private}}),
        )
        .unwrap();
    assert_eq!(created.status, 201, "{created:?}");
    wait_served(&gateway, "soon.example").unwrap();
    let status = printed(&botgate(&gateway, &["status"]));
    assert!(status.contains("store: embedded ("), "{status}");
    assert!(status.contains(", reachable"), "{status}");
    assert!(status.contains("classifier 2.0.0"), "{status}");
    assert!(
        status.contains("certificate of soon.example expires in 4 days")
            || status.contains("certificate of soon.example expires in 5 days"),
        "{status}"
    );
}

#[test]
fn on_redis_the_commands_go_to_the_store_while_gateways_run() {
    use botgate_tests::servers::RedisServer;
    let redis = RedisServer::start().unwrap();
    let gateway =
        Gateway::start_protecting(binary(), GatewayStore::Redis(&redis), &["hoster"], &[]).unwrap();
    let store = [
        "--redis-url",
        &redis.url(),
        "--redis-password",
        &redis.password,
    ];
    let run = |args: &[&str]| {
        Command::new(binary())
            .args(args)
            .args(store)
            .args(["--admin-url", &format!("http://{}", gateway.admin)])
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("running botgate")
    };
    let key = printed(&run(&["partner", "create", "dave"]));
    assert_eq!(
        Client::new(&gateway.api, Some(&key))
            .get("/v1.0/user")
            .unwrap()
            .status,
        200
    );
    let listed = printed(&run(&["partner", "list"]));
    assert!(listed.lines().any(|name| name == "dave"), "{listed}");
    let status = printed(&run(&["status"]));
    assert!(status.contains("store: redis (127.0.0.1:"), "{status}");
    assert!(!status.contains(&redis.password), "{status}");
    assert!(status.contains("classifier 2.0.0"), "{status}");
}

/// The operator's commands take the store and the admin listener from the configuration
/// file `serve` runs with.
#[test]
fn the_commands_read_the_configuration_file_of_the_gateway() {
    let gateway = Gateway::start(binary(), GatewayStore::Embedded, &["hoster"], &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("botgate.toml");
    std::fs::write(
        &file,
        format!(
            "data-dir = \"{}\"\nadmin-listen = \"{}\"\nhttp-listen = \"127.0.0.1:1\"\n",
            gateway.data_dir().display(),
            gateway.admin
        ),
    )
    .unwrap();
    let output = Command::new(binary())
        .args(["partner", "list"])
        .env("BOTGATE_CONFIG", &file)
        .current_dir(dir.path())
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    assert_eq!(printed(&output), "hoster");
    assert!(
        !dir.path().join("data").exists(),
        "no store was made where the file does not point"
    );
}

/// A reload (SIGHUP, or `botgate reload`) applies the limits the file now says to new
/// connections, names what needs a restart, and refuses a bad file, which changes
/// nothing.
#[test]
fn a_reload_applies_the_live_settings_and_refuses_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("botgate.toml");
    std::fs::write(&file, "max-header-bytes = 65536\n").unwrap();
    let config = file.display().to_string();
    let gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &["--config", &config],
    )
    .unwrap();
    let big = || {
        send(
            gateway.http,
            Outgoing::get("nobody.example", "/").header("x-big", "b".repeat(20_000)),
        )
        .map(|answer| answer.status)
    };
    assert_ne!(big().unwrap(), 431);
    std::fs::write(
        &file,
        "max-header-bytes = 16384\ncache-memory-bytes = 1000000\n",
    )
    .unwrap();
    let hangup = Command::new("kill")
        .args(["-HUP", &gateway.pid().to_string()])
        .status()
        .unwrap();
    assert!(hangup.success());
    let line = log_line(&gateway, |line| line.contains("configuration reloaded"));
    assert!(line.contains("max-header-bytes"), "{line}");
    let restart = log_line(&gateway, |line| {
        line.contains("not applied until a restart")
    });
    assert!(restart.contains("cache-memory-bytes"), "{restart}");
    assert_eq!(big().unwrap(), 431, "{}", gateway.log());

    // A file that no longer parses is refused whole; the running limits stay.
    std::fs::write(&file, "max-header-bytes = \"big\"\n").unwrap();
    let asked = botgate(&gateway, &["reload"]);
    assert!(asked.status.success(), "{asked:?}");
    let refused = log_line(&gateway, |line| line.contains("configuration is refused"));
    assert!(refused.contains("max-header-bytes"), "{refused}");
    assert_eq!(big().unwrap(), 431);
    assert_eq!(
        get(gateway.http, "nobody.example", "/").unwrap().status,
        404,
        "still serving"
    );
}
