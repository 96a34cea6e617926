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
    let run = |args: &[&str]| {
        Command::new(binary())
            .args(args)
            .env("BOTGATE_CONFIG", &file)
            .current_dir(dir.path())
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap()
    };
    assert_eq!(printed(&run(&["partner", "list"])), "hoster");
    let listed = printed(&run(&["ruleset", "list"]));
    assert!(
        listed.starts_with("no rule set pushed\nthis gateway runs:"),
        "{listed}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "no store was made where the file does not point"
    );
}

/// A listener that answers every request `200 {}` and keeps what it was sent.
fn impostor() -> (SocketAddr, std::sync::Arc<std::sync::Mutex<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let heard = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let kept = heard.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            use std::io::{Read, Write};
            let _ = stream.set_read_timeout(Some(Duration::from_millis(300)));
            let mut buffer = [0u8; 4096];
            let read = stream.read(&mut buffer).unwrap_or(0);
            kept.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buffer[..read]));
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                  content-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    (address, heard)
}

/// The commands send the operator token only to the admin listener of the gateway that
/// wrote it: to the address in the token file, not to `--admin-url`, and only once the
/// listener proved it holds the token (a process that took the port of a gateway no
/// longer running hears no token).
#[test]
fn the_commands_send_the_operator_token_only_to_the_gateway_that_holds_it() {
    let gateway = Gateway::start(binary(), GatewayStore::Embedded, &["hoster"], &[]).unwrap();
    let token_file = gateway.data_dir().join("operator.token");
    let written = std::fs::read_to_string(&token_file).unwrap();
    let token = written.lines().next().unwrap().to_owned();
    assert_eq!(
        written.lines().nth(1),
        Some(format!("http://{}", gateway.admin).as_str())
    );
    let (elsewhere, heard) = impostor();
    let output = Command::new(binary())
        .args(["partner", "list", "--data-dir"])
        .arg(gateway.data_dir())
        .args(["--admin-url", &format!("http://{elsewhere}")])
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    assert_eq!(printed(&output), "hoster");
    assert!(
        heard.lock().unwrap().is_empty(),
        "{}",
        heard.lock().unwrap()
    );

    // A token file naming a listener that cannot prove it holds the token.
    let dir = tempfile::tempdir().unwrap();
    let (squatter, heard) = impostor();
    std::fs::write(
        dir.path().join("operator.token"),
        format!("{token}\nhttp://{squatter}\n"),
    )
    .unwrap();
    let output = Command::new(binary())
        .args(["partner", "list", "--data-dir"])
        .arg(dir.path())
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    assert_eq!(printed(&output), "", "the store of that directory, empty");
    let heard = heard.lock().unwrap();
    assert!(heard.contains("/operator/proof?challenge="), "{heard}");
    assert!(!heard.contains(&token), "{heard}");
    assert!(
        !heard.to_ascii_lowercase().contains("authorization"),
        "{heard}"
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
    sighup(&gateway);
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

/// On Redis too, `botgate reload` reaches the gateway through its admin listener with
/// the token it wrote into its data directory.
#[test]
fn botgate_reload_reaches_a_gateway_on_redis() {
    let redis = botgate_tests::servers::RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("botgate.toml");
    std::fs::write(&file, "challenge-difficulty = 12\n").unwrap();
    let config = file.display().to_string();
    let gateway = Gateway::start(
        binary(),
        GatewayStore::Redis(&redis),
        &["hoster"],
        &["--config", &config],
    )
    .unwrap();
    std::fs::write(&file, "challenge-difficulty = 13\n").unwrap();
    let asked = botgate(&gateway, &["reload"]);
    assert!(asked.status.success(), "{asked:?}\n{}", gateway.log());
    let line = log_line(&gateway, |line| line.contains("configuration reloaded"));
    assert!(line.contains("challenge-difficulty"), "{line}");
}

/// Waits (up to 5 s) for a line of the file at `path` that `matches`.
fn file_line(path: &Path, matches: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(line) = text.lines().find(|line| matches(line)) {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no such line in {}:\n{text}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn sighup(gateway: &Gateway) {
    let hangup = Command::new("kill")
        .args(["-HUP", &gateway.pid().to_string()])
        .status()
        .unwrap();
    assert!(hangup.success());
}

/// Sends SIGHUP to `gateway` and waits for the `count`th "configuration reloaded" line
/// (or refusal); answers that line.
fn hang_up(gateway: &Gateway, count: usize) -> String {
    sighup(gateway);
    let done = |line: &str| {
        line.contains("configuration reloaded") || line.contains("configuration is refused")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = gateway.log();
        let lines: Vec<&str> = log.lines().filter(|line| done(line)).collect();
        if lines.len() >= count {
            return lines[count - 1].to_owned();
        }
        assert!(Instant::now() < deadline, "no reload:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A reload changes, on a running gateway and without a restart: the challenge's
/// difficulty, the `ddos_protection` limits, the crawler lists, where the access log
/// goes (a file is opened again, as after `logrotate`), the log level, and the API's
/// host names with their certificate; a file whose API certificate cannot serve the
/// names is refused whole.
#[test]
fn a_reload_changes_challenges_limits_crawlers_logs_and_the_api_names() {
    use super::protection::{GOOGLEBOT, challenging_humans, loopback_crawlers};
    use botgate_tests::ca::TestCa;
    let origin = origin("site");
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let file = dir.path().join("botgate.toml");
    let api_name = "api.reload.test";
    let ca = TestCa::new("botgate test: reload").unwrap();
    let (certificate, key) = ca.issue(&[api_name]).unwrap();
    std::fs::write(path("api.pem"), certificate).unwrap();
    std::fs::write(path("api.key"), key).unwrap();
    let (other, other_key) = ca.issue(&["other.reload.test"]).unwrap();
    std::fs::write(path("other.pem"), other).unwrap();
    std::fs::write(path("other.key"), other_key).unwrap();
    let crawlers = loopback_crawlers(dir.path());
    std::fs::write(
        &file,
        format!(
            "challenge-difficulty = 12\naccess-log = {:?}\n",
            path("first.log")
        ),
    )
    .unwrap();
    let config = file.display().to_string();
    let gateway = gateway(origin.address.port(), &["--config", &config]);
    let mut settings = challenging_humans();
    settings["loadbalancer"]["ddos_protection"] = json!(true);
    add_website(
        &gateway,
        json!({"domain": "reload.example", "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    let from = |last: u8, request: Outgoing<'_>| {
        let visit = Visit {
            source: Some(std::net::IpAddr::from([127, 0, 0, last])),
            ..Visit::default()
        };
        visitor::send(gateway.http, &visit, request).unwrap()
    };
    let page = |target: &str| from(1, Outgoing::get("reload.example", target).browser());
    let api_over_https = || {
        let visit = Visit {
            tls_name: Some(api_name.to_owned()),
            trusted_roots: Some(vec![ca.root_der().to_vec()]),
            ..Visit::default()
        };
        visitor::send(
            gateway.https,
            &visit,
            Outgoing::get(api_name, "/v1.0/user").header(
                "authorization",
                format!("Bearer {}", gateway.partner_keys[0]),
            ),
        )
    };

    // Before: difficulty 12, lines into first.log, Googlebot from loopback unverified,
    // no API name, a client's many requests all answered.
    // A challenge of `bits`, and its access line in the file `log`.
    let challenged = |target: &str, bits: u8, log: &str| {
        let answer = page(target);
        let difficulty = format!("data-difficulty=\"{bits}\"");
        assert!(answer.text().contains(&difficulty), "{}", answer.text());
        let needle = format!("target={target} ");
        file_line(dir.path().join(log).as_path(), |line| {
            line.contains(&needle)
        });
    };
    challenged("/before", 12, "first.log");
    let fake = from(
        2,
        Outgoing::get("reload.example", "/crawl-1").header("user-agent", GOOGLEBOT),
    );
    assert_ne!(fake.status, 200);
    assert!(!api_over_https().is_ok_and(|answer| answer.status == 200));
    // Eight requests of one client, one after another: their statuses.
    let burst = || -> Vec<u16> {
        (0..8)
            .map(|_| from(3, Outgoing::get("reload.example", "/many").browser()).status)
            .collect()
    };
    let answered = burst();
    assert!(!answered.contains(&429), "{answered:?}");

    std::fs::write(
        &file,
        format!(
            "challenge-difficulty = 14\naccess-log = {:?}\nddos-client-rate = 1\n\
             ddos-client-burst = 3\ncrawler-list = [{crawlers:?}]\n\
             api-host = [{api_name:?}, \"API.Reload.Test.\"]\n\
             api-cert = {:?}\napi-key = {:?}\nlog-level = \"info,botgate=debug\"\n",
            path("second.log"),
            path("api.pem"),
            path("api.key"),
        ),
    )
    .unwrap();
    let reloaded = hang_up(&gateway, 1);
    assert!(
        reloaded.contains("configuration reloaded"),
        "{reloaded}\n{}",
        gateway.log()
    );
    for option in [
        "challenge-difficulty",
        "ddos-client-burst",
        "crawler-list",
        "api-host",
        "log-level",
        "access-log",
    ] {
        assert!(reloaded.contains(option), "{option}: {reloaded}");
    }
    assert!(
        !gateway.log().contains("not applied until a restart"),
        "{}",
        gateway.log()
    );

    challenged("/after", 14, "second.log");
    let first = std::fs::read_to_string(dir.path().join("first.log")).unwrap();
    assert!(!first.contains("target=/after "), "{first}");
    let verified = from(
        2,
        Outgoing::get("reload.example", "/crawl-2").header("user-agent", GOOGLEBOT),
    );
    assert_eq!(verified.status, 200, "{}", verified.text());
    let answered = burst();
    assert!(answered.contains(&429), "{answered:?}");
    let api = api_over_https().unwrap();
    assert_eq!(api.status, 200, "{}\n{}", api.text(), gateway.log());
    let redirect = send(gateway.http, Outgoing::get(api_name, "/v1.0/user")).unwrap();
    assert_eq!(redirect.status, 301);
    // No website may take the API's name now.
    let taken = partner(&gateway)
        .post_json(
            "/v1.0/website",
            &json!({"domain": api_name, "user_id": "owner", "ip": ["127.0.0.1"]}),
        )
        .unwrap();
    assert_eq!(taken.status, 409, "{taken:?}");
    // Debug lines are on.
    log_line(&gateway, |line| line.contains("the options in force"));

    // A certificate that does not cover the API's name: the whole file is refused,
    // and the API, the difficulty and the limits stay.
    let refused_file = std::fs::read_to_string(&file)
        .unwrap()
        .replace("challenge-difficulty = 14", "challenge-difficulty = 16")
        .replace(&path("api.pem"), &path("other.pem"))
        .replace(&path("api.key"), &path("other.key"));
    std::fs::write(&file, refused_file).unwrap();
    let refused = hang_up(&gateway, 2);
    assert!(refused.contains("configuration is refused"), "{refused}");
    assert!(refused.contains("other.pem"), "{refused}");
    assert!(page("/refused").text().contains("data-difficulty=\"14\""));
    assert_eq!(api_over_https().unwrap().status, 200);

    // The name dropped: a website's again, the API no longer answers on it.
    std::fs::write(&file, "challenge-difficulty = 14\nlog-level = \"warn\"\n").unwrap();
    let warned = {
        sighup(&gateway);
        // At `warn`, the reload's own info line is no longer written.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if !api_over_https().is_ok_and(|answer| answer.status == 200) {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(warned, "the API name is still served\n{}", gateway.log());
    let plain = send(gateway.http, Outgoing::get(api_name, "/v1.0/user")).unwrap();
    assert_ne!(plain.status, 301, "{}", plain.text());
    let claimed = partner(&gateway)
        .post_json(
            "/v1.0/website",
            &json!({"domain": api_name, "user_id": "owner", "ip": ["127.0.0.1"]}),
        )
        .unwrap();
    assert_eq!(claimed.status, 201, "{claimed:?}");
    std::thread::sleep(Duration::from_millis(300));
    let reloads = gateway
        .log()
        .lines()
        .filter(|line| line.contains("configuration reloaded"))
        .count();
    assert_eq!(reloads, 1, "{}", gateway.log());
}

/// A metrics listener (a cluster's private network) serves `/health` and `/metrics`,
/// the same as the admin listener, and never the operator's commands, even with the
/// right token.
#[test]
fn a_metrics_listener_serves_health_and_metrics_and_no_operator_commands() {
    let metrics = SocketAddr::from(([127, 0, 0, 1], botgate_tests::servers::free_port()));
    let listen = metrics.to_string();
    let gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &["--metrics-listen", &listen],
    )
    .unwrap();
    let token = std::fs::read_to_string(gateway.data_dir().join("operator.token")).unwrap();
    let token = token.lines().next().unwrap();
    let admin = Client::new(&format!("http://{}", gateway.admin), Some(token));
    let network = Client::new(&format!("http://{metrics}"), Some(token));
    assert_eq!(admin.get("/operator/partners").unwrap().status, 200);
    for path in ["/operator/partners", "/operator/status"] {
        assert_eq!(network.get(path).unwrap().status, 404, "{path}");
    }
    let created = network
        .post_form("/operator/partners/eve/create", &[])
        .unwrap();
    assert_eq!(created.status, 404);
    assert_eq!(network.get("/metrics").unwrap().status, 200);
    // A page whose name was pointed at this machine (DNS rebinding) gets nothing from the
    // loopback admin listener; the metrics listener is scraped by any name.
    let status_for = |listener: SocketAddr, host: &str, path: &str| {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(listener).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.split(' ').nth(1).unwrap_or_default().to_owned()
    };
    let admin_port = gateway.admin.port();
    for path in [
        "/metrics",
        "/health",
        "/operator/proof?challenge=0123456789abcdef",
    ] {
        assert_eq!(
            status_for(
                gateway.admin,
                &format!("rebound.example:{admin_port}"),
                path
            ),
            "421"
        );
        assert_eq!(status_for(gateway.admin, "a b", path), "421");
    }
    for host in [
        format!("localhost:{admin_port}"),
        format!("127.0.0.1:{admin_port}"),
    ] {
        assert_eq!(
            status_for(gateway.admin, &host, "/metrics"),
            "200",
            "{host}"
        );
    }
    assert_eq!(status_for(metrics, "gateway-1.internal", "/metrics"), "200");

    // Both say which domains the gateway lists, with their statuses, as one digest.
    let digest = |client: &Client| {
        // 503 without components: the body says the same.
        let health = client.get("/health").unwrap();
        health.json()["snapshot"]["domains_digest"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let empty = digest(&network);
    assert_eq!(empty, digest(&admin));
    let partner = partner(&gateway);
    let _ = partner.post_form("/v1.0/user", &[("id", "owner")]).unwrap();
    let created = partner
        .post_json(
            "/v1.0/website",
            &json!({"user_id": "owner", "domain": "listed.example", "ip": ["192.0.2.1"]}),
        )
        .unwrap();
    assert_eq!(created.status, 201, "{created:?}");
    wait_served(&gateway, "listed.example").unwrap();
    let one = digest(&network);
    assert_ne!(one, empty);
    let paused = partner
        .put_json("/v1.0/website/listed.example", &json!({"status": "paused"}))
        .unwrap();
    assert_eq!(paused.status, 200, "{paused:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while digest(&network) == one {
        assert!(
            Instant::now() < deadline,
            "a new status left the digest as it was"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
