//! The website owners' dashboard in a real browser: Debian's headless Chromium, driven
//! by Playwright for Python (`tests/browser/dashboard.py`, installed by the test
//! command into `target/playwright`), against a real `botgate serve` with the shipped
//! rule components, a real origin, and a partner panel on another origin that frames
//! the dashboard `credentialless`. Screenshots of every page in both languages are
//! written to `target/dashboard-screenshots/`.

use anyhow::{Context, Result, bail};
use botgate_tests::http::Client;
use botgate_tests::origin::Origin;
use botgate_tests::servers::{Gateway, GatewayStore, wait_until};
use botgate_tests::visitor::{Outgoing, Visit, send};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_botgate"))
}

fn screenshots() -> PathBuf {
    let dir = botgate_tests::repo_root()
        .join("target")
        .join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).expect("creating target/dashboard-screenshots");
    dir
}

/// Runs one command of the browser driver; what it printed.
fn browser(arguments: &[&str]) -> Result<Value> {
    let root = botgate_tests::repo_root();
    let python = root.join("target/playwright/bin/python");
    if !python.exists() {
        bail!(
            "{} is missing: the test command (scripts/test.sh) installs Playwright there",
            python.display()
        );
    }
    let output = Command::new(&python)
        .arg(root.join("tests/browser/dashboard.py"))
        .args(arguments)
        .output()
        .context("running the browser driver")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "the browser driver failed ({}): {stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_str(stdout.trim()).with_context(|| format!("the driver printed {stdout}"))
}

/// A partner's control panel on its own origin: `/{lang}/{page}` is a page that frames
/// the dashboard's `page` in `lang` for `domain`, credentialless, with `key`.
struct Panel {
    address: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Panel {
    fn start(dashboard: &str, domain: &str, key: &str) -> Result<Panel> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let (dashboard, domain, key) = (dashboard.to_owned(), domain.to_owned(), key.to_owned());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((mut stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split(' ').nth(1).unwrap_or("/");
                let mut parts = path.trim_matches('/').split('/');
                let lang = parts.next().filter(|l| !l.is_empty()).unwrap_or("en");
                let page = parts.next().unwrap_or("edit");
                // `/{lang}/{page}/plain`: a frame as browsers without the attribute make it.
                let attribute = if parts.next() == Some("plain") {
                    ""
                } else {
                    "credentialless "
                };
                // A panel made without a key frames the dashboard without one.
                let query = if key.is_empty() {
                    String::new()
                } else {
                    format!("?api-key={key}")
                };
                let html = format!(
                    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Hoster panel</title></head>\
                     <body><h1>Hoster panel</h1><iframe {attribute}\
                     src=\"{dashboard}/{lang}/website/{domain}/{page}{query}\" width=\"1150\" \
                     height=\"2200\" title=\"Website protection\"></iframe></body></html>"
                );
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{html}",
                    html.len()
                );
            }
        });
        Ok(Panel { address, stop })
    }

    /// The panel page that frames `page` in `lang` without `credentialless`.
    fn plain_url(&self, lang: &str, page: &str) -> String {
        format!("http://{}/{lang}/{page}/plain", self.address)
    }

    /// The panel page that frames `page` in `lang`.
    fn url(&self, lang: &str, page: &str) -> String {
        format!("http://{}/{lang}/{page}", self.address)
    }

    fn origin(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for Panel {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Makes the partner's user `ann` and her `website` (its fields but `user_id`); her
/// key.
fn ann_with_website(partner: &Client, mut website: Value) -> String {
    let created = partner.post_form("/v1.0/user", &[("id", "ann")]).unwrap();
    assert_eq!(created.status, 201, "{created:?}");
    website["user_id"] = json!("ann");
    let made = partner.post_json("/v1.0/website", &website).unwrap();
    assert_eq!(made.status, 201, "{made:?}");
    created.json()["api_key"].as_str().unwrap().to_owned()
}

/// A visitor with a current browser's headers: the status it gets from `shop.example`.
fn visit(gateway: &Gateway) -> Result<u16> {
    let answer = send(
        gateway.http,
        &Visit::default(),
        Outgoing::get("shop.example", "/").browser(),
    )?;
    Ok(answer.status)
}

#[test]
fn a_partner_panel_frames_the_editor_and_a_rule_changed_there_changes_what_visitors_get() {
    let origin = Origin::start("origin", [127, 0, 0, 1].into(), 0).unwrap();
    let port = origin.address.port().to_string();
    let gateway = Gateway::start_protecting(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &[
            "--origin-http-port",
            &port,
            "--origin-allow-network",
            "127.0.0.0/8",
            "--statistics-flush-ms",
            "200",
        ],
    )
    .unwrap();
    let logs = || gateway.log();
    // An operator's own rule component (the template), which the website enables.
    gateway.load_guest("template").unwrap();
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    let key = ann_with_website(
        &partner,
        json!({"domain": "shop.example", "ip": ["127.0.0.1"],
               "settings": {"rulesets": {"template": true}}}),
    );
    // The data plane learns of the website from the change feed, just after the API.
    wait_until(
        Duration::from_secs(10),
        || visit(&gateway).is_ok_and(|status| status == 200),
        || format!("shop.example never served its origin; {}", logs()),
    )
    .unwrap();

    let editor = |lang: &str, page: &str, key: &str| {
        format!(
            "{}/{lang}/website/shop.example/{page}?api-key={key}",
            gateway.api
        )
    };
    let panel = Panel::start(&gateway.api, "shop.example", &key).unwrap();
    let listed = partner
        .put_json(
            "/v1.0/dashboard",
            &json!({"frame_origins": [panel.origin()]}),
        )
        .unwrap();
    assert_eq!(listed.status, 200, "{listed:?}");

    // The editor in the panel's frame: the key gone from its address, every control
    // labelled and reached by Tab; a category blocked and a rule set switched on.
    let shots = screenshots();
    let seen = browser(&[
        "edit",
        &panel.url("en", "edit"),
        shots.join("panel-edit-en.png").to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("{e:#}\n{}", logs()));
    let frame_url = seen["frame_url"].as_str().unwrap();
    assert!(
        frame_url.ends_with("/en/website/shop.example/edit"),
        "{frame_url}"
    );
    assert!(!frame_url.contains("api-key"), "{frame_url}");
    assert_eq!(seen["unlabelled"], json!([]), "{seen}");
    assert_eq!(seen["unreachable"], json!([]), "{seen}");
    assert!(
        seen["after_rule"].as_str().unwrap().starts_with("Saved"),
        "{seen}"
    );
    assert_eq!(seen["wordpress_checked"], true, "{seen}");
    // An operator's own rule set the website enabled: shown by its name.
    assert_eq!(seen["own_ruleset_checked"], true, "{seen}");
    assert_eq!(seen["own_ruleset_label"], "template", "{seen}");
    assert!(
        seen["own_ruleset_help"]
            .as_str()
            .unwrap()
            .contains("operator's own"),
        "{seen}"
    );
    // A refused change: the API's reason beside the control, the old value back.
    assert!(
        seen["refusal"].as_str().unwrap().contains("certificate"),
        "{seen}"
    );
    assert_eq!(seen["refused_value"], "acme", "{seen}");

    let stored = partner.get("/v1.0/website/shop.example").unwrap().json();
    assert_eq!(stored["settings"]["rules"]["humans"], "deny", "{stored}");
    assert_eq!(
        stored["settings"]["rulesets"]["wordpress"], true,
        "{stored}"
    );
    assert_eq!(
        stored["settings"]["loadbalancer"]["certs_issuer"], "acme",
        "{stored}"
    );
    wait_until(
        Duration::from_secs(5),
        || visit(&gateway).is_ok_and(|status| status == 403),
        || {
            format!(
                "a visitor still gets through after `humans: deny`; {}",
                logs()
            )
        },
    )
    .unwrap();

    // Framed by a page of an origin the partner did not list: the browser refuses.
    let stranger = Panel::start(&gateway.api, "shop.example", &key).unwrap();
    let refused = browser(&["refused", &stranger.url("en", "edit")]).unwrap();
    assert_eq!(refused["drawn"], false, "{refused}");
    assert!(
        refused["console"]
            .as_array()
            .unwrap()
            .iter()
            .any(|line| line.as_str().is_some_and(|l| l.contains("frame-ancestors"))),
        "{refused}"
    );

    // A wrong key, and a revoked one: a page that says what to do.
    let wrong = browser(&["problem", &editor("en", "edit", "bgu_not-a-key")]).unwrap();
    assert_eq!(
        wrong["heading"], "This link does not open the dashboard",
        "{wrong}"
    );
    assert_eq!(wrong["role"], "alert");
    assert!(
        !wrong["url"].as_str().unwrap().contains("api-key"),
        "{wrong}"
    );
    let russian = browser(&["problem", &editor("ru", "edit", "bgu_not-a-key")]).unwrap();
    assert_eq!(
        russian["heading"], "Эта ссылка не открывает панель",
        "{russian}"
    );

    // The statistics and the latest requests count the visitors above, in the frame.
    wait_until(
        Duration::from_secs(10),
        || {
            partner
                .get("/v1.0/website/shop.example/events?action=deny")
                .is_ok_and(|reply| {
                    reply.json()["items"]
                        .as_array()
                        .is_some_and(|i| !i.is_empty())
                })
        },
        || format!("no denied request reached the store; {}", logs()),
    )
    .unwrap();
    let stats = partner
        .get("/v1.0/website/shop.example/statistics")
        .unwrap()
        .json();
    let granted: u64 = stats["by_category"]["humans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(granted >= 2, "{stats}");
    assert_eq!(stats["top"]["paths"][0]["value"], "/", "{stats}");
    let shown = browser(&[
        "statistics",
        &panel.url("en", "statistics"),
        shots.join("panel-statistics-en.png").to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("{e:#}\n{}", logs()));
    assert_eq!(shown["charts"], 2, "{shown}");
    assert_eq!(shown["unlabelled"], json!([]), "{shown}");
    assert_eq!(shown["unreachable"], json!([]), "{shown}");
    let total: u64 = shown["summary"][0]
        .as_str()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap();
    assert!(total >= 2, "{shown}");
    assert!(
        shown["tables"][0]
            .as_str()
            .unwrap()
            .lines()
            .any(|line| line.trim() == "/"),
        "the top paths list `/`: {shown}"
    );
    let listed = browser(&[
        "events",
        &panel.url("en", "events"),
        shots.join("panel-events-en.png").to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("{e:#}\n{}", logs()));
    assert_eq!(listed["unlabelled"], json!([]), "{listed}");
    assert_eq!(listed["unreachable"], json!([]), "{listed}");
    let rows = listed["rows"].as_array().unwrap();
    assert!(
        rows.iter().any(|r| r.as_str().unwrap().contains("Allowed")),
        "{listed}"
    );
    assert!(
        listed["denied_outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o == "Blocked"),
        "{listed}"
    );

    // A frame without `credentialless` (a browser that ignores it) works the same.
    let plain = browser(&[
        "drawn",
        &panel.plain_url("ru", "events"),
        shots.join("panel-events-ru-plain.png").to_str().unwrap(),
    ])
    .unwrap_or_else(|e| panic!("{e:#}\n{}", logs()));
    assert!(
        plain["frame_url"]
            .as_str()
            .unwrap()
            .ends_with("/ru/website/shop.example/events"),
        "{plain}"
    );
    assert!(
        plain["text"]
            .as_str()
            .unwrap()
            .contains("Последние запросы к shop.example"),
        "{plain}"
    );

    // Every page in both languages, for review.
    for lang in ["en", "ru"] {
        for page in ["edit", "statistics", "events"] {
            let path = shots.join(format!("{page}-{lang}.png"));
            let shown = browser(&[
                "screenshot",
                &editor(lang, page, &key),
                path.to_str().unwrap(),
            ])
            .unwrap_or_else(|e| panic!("{e:#}\n{}", logs()));
            assert!(
                !shown["url"].as_str().unwrap().contains("api-key"),
                "{shown}"
            );
            assert!(path.exists());
        }
    }

    // A key in a visitor's address is written redacted, in the log and in the events.
    let secret = "bgu_visitor-secret";
    let visited = send(
        gateway.http,
        &Visit::default(),
        Outgoing::get("shop.example", &format!("/?api-key={secret}")).browser(),
    )
    .unwrap();
    assert_eq!(visited.status, 403);
    wait_until(
        Duration::from_secs(10),
        || {
            partner
                .get("/v1.0/website/shop.example/events?limit=1")
                .is_ok_and(|reply| reply.json()["items"][0]["path"] == "/?api-key=redacted")
        },
        || format!("the keyed request never reached the events; {}", logs()),
    )
    .unwrap();
    assert!(logs().contains("target=/?api-key=redacted "), "{}", logs());
    assert!(!logs().contains(secret), "{}", logs());

    // The dashboard never shows in the visitors' access log, nor does a key anywhere.
    let log = logs();
    assert!(!log.contains(&key), "the key was logged:\n{log}");
    // (The wait for the data plane to learn of the website may log a 404 first.)
    for line in log.lines().filter(|line| line.contains("botgate::access")) {
        let dashboard = [
            "target=/en/",
            "target=/ru/",
            "target=/dashboard/",
            "target=/v1.0",
        ]
        .iter()
        .any(|page| line.contains(page));
        assert!(!dashboard, "a dashboard request in the access log: {line}");
    }
    drop(panel);
}

/// Counted on every gateway, added up in the store: two gateways on one Redis, each
/// visited, and the statistics and latest requests hold both gateways' visitors.
#[test]
fn statistics_add_up_across_gateways_that_share_redis() {
    let redis = botgate_tests::servers::RedisServer::start().unwrap();
    let origin = Origin::start("origin", [127, 0, 0, 1].into(), 0).unwrap();
    let port = origin.address.port().to_string();
    let arguments = [
        "--origin-http-port",
        &port,
        "--origin-allow-network",
        "127.0.0.0/8",
        "--statistics-flush-ms",
        "200",
    ];
    let one = Gateway::start_protecting(
        binary(),
        GatewayStore::Redis(&redis),
        &["hoster", "rival"],
        &arguments,
    )
    .unwrap();
    let two =
        Gateway::start_protecting(binary(), GatewayStore::Redis(&redis), &[], &arguments).unwrap();
    let partner = Client::new(&one.api, Some(&one.partner_keys[0]));
    let key = ann_with_website(
        &partner,
        json!({"domain": "shop.example", "ip": ["127.0.0.1"],
               "settings": {"rulesets": {"template": true}}}),
    );
    // Both gateways know the website (the change feed), then each gets visitors.
    for gateway in [&one, &two] {
        wait_until(
            Duration::from_secs(10),
            || visit(gateway).is_ok_and(|status| status == 200),
            || format!("{} never served shop.example", gateway.api),
        )
        .unwrap();
    }
    for _ in 0..4 {
        assert_eq!(visit(&one).unwrap(), 200);
    }
    for _ in 0..2 {
        assert_eq!(visit(&two).unwrap(), 200);
    }
    // Read through the second gateway's API with the user's key: 1 + 4 + 1 + 2.
    let owner = Client::new(&two.api, Some(&key));
    let humans = || -> u64 {
        owner
            .get("/v1.0/website/shop.example/statistics")
            .map(|reply| {
                reply.json()["by_category"]["humans"]
                    .as_array()
                    .map_or(0, |series| series.iter().filter_map(Value::as_u64).sum())
            })
            .unwrap_or(0)
    };
    wait_until(
        Duration::from_secs(10),
        || humans() == 8,
        || format!("the statistics count {} of 8 requests", humans()),
    )
    .unwrap();
    let events = owner
        .get("/v1.0/website/shop.example/events")
        .unwrap()
        .json();
    assert_eq!(events["items"].as_array().unwrap().len(), 8, "{events}");
    let week = owner
        .get("/v1.0/website/shop.example/statistics?range=week")
        .unwrap()
        .json();
    assert_eq!(week["times"].as_array().unwrap().len(), 7 * 24, "{week}");
    assert_eq!(week["step_seconds"], 3600);
    assert_eq!(
        week["top"]["paths"],
        json!([{"value": "/", "count": 8}]),
        "{week}"
    );
    // Another partner's key, a bad range and an unknown parameter: refused by name.
    let rival = Client::new(&two.api, Some(&one.partner_keys[1]));
    for path in ["statistics", "events"] {
        let hidden = rival
            .get(&format!("/v1.0/website/shop.example/{path}"))
            .unwrap();
        assert_eq!(hidden.status, 404, "{hidden:?}");
    }
    let bad = owner
        .get("/v1.0/website/shop.example/statistics?range=year")
        .unwrap();
    assert_eq!(
        (bad.status, bad.json()["field"].clone()),
        (400, json!("range"))
    );
    let bad = owner
        .get("/v1.0/website/shop.example/events?sort=asc")
        .unwrap();
    assert_eq!(
        (bad.status, bad.json()["field"].clone()),
        (400, json!("sort"))
    );
    let bad = owner
        .get("/v1.0/website/shop.example/events?category=robots")
        .unwrap();
    assert_eq!(
        (bad.status, bad.json()["field"].clone()),
        (400, json!("category"))
    );
    let filtered = owner
        .get("/v1.0/website/shop.example/events?action=deny&limit=5")
        .unwrap()
        .json();
    assert_eq!(filtered["items"], json!([]), "{filtered}");
    let count = |query: &str| {
        owner
            .get(&format!("/v1.0/website/shop.example/events?{query}"))
            .unwrap()
            .json()["items"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert_eq!(count("action=grant"), 8);
    assert_eq!(count("action=grant&category=humans&limit=3"), 3);
    assert_eq!(count("category=search_engines"), 0);
}

/// The page a frame loads, which anyone may ask for, reads only who owns the website
/// (for its partner's panel origins): not the website's record, which custom rules and
/// certificates make up to hundreds of KiB.
#[test]
fn the_framed_page_reads_only_the_websites_owner() {
    let redis = botgate_tests::servers::RedisServer::start().unwrap();
    let gateway = Gateway::start(binary(), GatewayStore::Redis(&redis), &["hoster"], &[]).unwrap();
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    let rules: Vec<Value> = (0..25)
        .map(|n| {
            json!({"action": "deny", "conditions": [
                {"field": "path", "operator": "starts_with", "value": format!("/{n}{}", "p".repeat(1000))}]})
        })
        .collect();
    ann_with_website(
        &partner,
        json!({"domain": "big.example", "ip": ["192.0.2.10"], "status": "paused",
               "settings": {"custom_rules": rules}}),
    );
    let framed = partner
        .put_json(
            "/v1.0/dashboard",
            &json!({"frame_origins": ["https://panel.example"]}),
        )
        .unwrap();
    assert_eq!(framed.status, 200, "{framed:?}");
    let anyone = Client::new(&gateway.api, None);
    let before = redis.output_bytes();
    for _ in 0..20 {
        let page = anyone.get("/en/website/big.example/edit").unwrap();
        assert_eq!(page.status, 200);
        let policy = page.header("content-security-policy").unwrap_or_default();
        assert!(
            policy.contains("frame-ancestors https://panel.example"),
            "{policy}"
        );
    }
    let sent = redis.output_bytes() - before;
    assert!(sent < 20 * 2048, "{sent} bytes read for 20 pages");
}

/// A session opened in a frame is taken up again only under the page that framed it:
/// another page of the same site (a customer's page under a wildcard panel origin)
/// that frames the dashboard without a key in the same tab gets no session, though the
/// browser shares the frame's storage between them.
#[test]
fn a_session_is_not_taken_up_by_another_page_of_the_same_site() {
    let gateway = Gateway::start(binary(), GatewayStore::Embedded, &["hoster"], &[]).unwrap();
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    let key = ann_with_website(
        &partner,
        json!({"domain": "shop.example", "ip": ["192.0.2.10"], "status": "paused"}),
    );
    let panel = Panel::start(&gateway.api, "shop.example", &key).unwrap();
    let lure = Panel::start(&gateway.api, "shop.example", "").unwrap();
    let framed = partner
        .put_json(
            "/v1.0/dashboard",
            &json!({"frame_origins": [panel.origin(), lure.origin()]}),
        )
        .unwrap();
    assert_eq!(framed.status, 200, "{framed:?}");
    let seen = browser(&[
        "reused",
        &panel.plain_url("en", "edit"),
        &lure.plain_url("en", "edit"),
    ])
    .unwrap();
    assert_eq!(
        seen["problem"], "The dashboard needs to be opened from your control panel",
        "{seen}"
    );
    assert_eq!(seen["rules_shown"], false, "{seen}");
}
