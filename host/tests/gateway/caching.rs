//! `cache_static_files` and `cache_dynamic_pages`: the response cache through real
//! sockets, against an origin that counts what reaches it.

use super::*;
use botgate_tests::origin::Origin;

/// The cache's verdict on an answer: `hit`, `miss`, or `-` when it was not asked.
fn verdict(answer: &Answer) -> &str {
    answer.header("x-botgate-cache").unwrap_or("-")
}

/// GETs `target` from `host` with extra headers and says what the cache did and
/// whether the origin was reached.
fn fetch(
    gateway: &Gateway,
    origin: &Origin,
    host: &str,
    target: &str,
    headers: &[(&'static str, &str)],
) -> (String, bool, Answer) {
    let before = origin.requests();
    let mut request = Outgoing::get(host, target);
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    let answer = send(gateway.http, request).unwrap();
    assert_eq!(answer.status, 200, "{target}: {}", answer.text());
    let reached = origin.requests() > before;
    (verdict(&answer).to_owned(), reached, answer)
}

#[test]
fn static_files_are_cached_by_their_cache_control() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "static.example", "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["cache_static_files"])}),
    )
    .unwrap();
    let host = "static.example";
    let fresh = "/theme/site.css?h=Cache-Control:max-age%3D60";
    let (first, reached, stored) = fetch(&gateway, &origin, host, fresh, &[]);
    assert_eq!((first.as_str(), reached), ("miss", true));
    let (second, reached, hit) = fetch(&gateway, &origin, host, fresh, &[]);
    assert_eq!((second.as_str(), reached), ("hit", false));
    assert_eq!(hit.body, stored.body);
    assert!(hit.header("age").is_some(), "a hit says its age");
    // HEAD is answered from the stored GET, without a body.
    let before = origin.requests();
    let head = send(
        gateway.http,
        Outgoing {
            method: "HEAD",
            ..Outgoing::get(host, fresh)
        },
    )
    .unwrap();
    assert_eq!((verdict(&head), head.body.len()), ("hit", 0));
    assert_eq!(origin.requests(), before);
    // A cookie on a static file does not keep it from the cache.
    let (with_cookie, reached, _) = fetch(&gateway, &origin, host, fresh, &[("cookie", "a=b")]);
    assert_eq!((with_cookie.as_str(), reached), ("hit", false));

    // What must not be stored reaches the origin every time.
    for refused in [
        "/no-store.js?h=Cache-Control:no-store,max-age%3D60",
        "/private.js?h=Cache-Control:private,max-age%3D60",
        "/cookie.js?h=Cache-Control:max-age%3D60&h=Set-Cookie:session%3D1",
        "/nothing-said.js",
    ] {
        for _ in 0..2 {
            let (said, reached, _) = fetch(&gateway, &origin, host, refused, &[]);
            assert_eq!((said.as_str(), reached), ("miss", true), "{refused}");
        }
    }
    // Web cache deception: a page behind a static-looking path is not stored (a
    // servlet container reads `/account;.css` as `/account`: no static file at all;
    // `/account.css` answered with HTML is looked up, never stored), and a static file
    // fetched with the website's cookies only when the origin says public.
    for (deceptive, verdict) in [
        (
            "/account;.css?h=Content-Type:text/html&h=Cache-Control:max-age%3D60",
            "-",
        ),
        (
            "/account.css?h=Content-Type:text/html&h=Cache-Control:max-age%3D60",
            "miss",
        ),
    ] {
        for _ in 0..2 {
            let (said, reached, _) = fetch(&gateway, &origin, host, deceptive, &[]);
            assert_eq!((said.as_str(), reached), (verdict, true), "{deceptive}");
        }
    }
    let session = [("cookie", "sid=42")];
    let private_asset = "/logo.png?h=Cache-Control:max-age%3D60";
    for _ in 0..2 {
        let (said, reached, _) = fetch(&gateway, &origin, host, private_asset, &session);
        assert_eq!((said.as_str(), reached), ("miss", true), "{private_asset}");
    }
    let public_asset = "/logo.png?h=Cache-Control:public,max-age%3D60";
    assert_eq!(
        fetch(&gateway, &origin, host, public_asset, &session).0,
        "miss"
    );
    assert_eq!(
        fetch(&gateway, &origin, host, public_asset, &session).0,
        "hit"
    );

    // A request's own no-cache goes to the origin.
    let (said, reached, _) = fetch(
        &gateway,
        &origin,
        host,
        fresh,
        &[("cache-control", "no-cache")],
    );
    assert_eq!((said.as_str(), reached), ("miss", true));

    // Pages are not static files: with only static caching on, the cache is not asked.
    let page = "/blog/post?h=Cache-Control:max-age%3D60";
    for _ in 0..2 {
        let (said, reached, _) = fetch(&gateway, &origin, host, page, &[]);
        assert_eq!((said.as_str(), reached), ("-", true));
    }
}

#[test]
fn dynamic_pages_follow_vary_expiry_and_skip_personal_requests() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "pages.example", "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["cache_dynamic_pages"])}),
    )
    .unwrap();
    let host = "pages.example";
    let page = "/news?h=Cache-Control:public,max-age%3D60&h=Vary:Accept-Language";
    let english = [("accept-language", "en")];
    let german = [("accept-language", "de")];
    let said = |headers: &[(&'static str, &str)]| {
        let (said, reached, _) = fetch(&gateway, &origin, host, page, headers);
        (said, reached)
    };
    assert_eq!(said(&english), ("miss".into(), true));
    assert_eq!(said(&english), ("hit".into(), false));
    // Another language is another variant: a miss, which then replaces the first.
    assert_eq!(said(&german), ("miss".into(), true));
    assert_eq!(said(&german), ("hit".into(), false));
    assert_eq!(said(&english), ("miss".into(), true));

    // Someone logged in (a cookie or credentials) never shares a page.
    for personal in [
        ("cookie", "wordpress_logged_in=1"),
        ("authorization", "Basic YTpi"),
    ] {
        let (said, reached, _) = fetch(&gateway, &origin, host, page, &[personal]);
        assert_eq!((said.as_str(), reached), ("-", true), "{personal:?}");
    }

    // An expired copy is fetched again.
    let short = "/short?h=Cache-Control:max-age%3D1";
    assert_eq!(fetch(&gateway, &origin, host, short, &[]).0, "miss");
    assert_eq!(fetch(&gateway, &origin, host, short, &[]).0, "hit");
    std::thread::sleep(Duration::from_millis(2100));
    let (said, reached, _) = fetch(&gateway, &origin, host, short, &[]);
    assert_eq!((said.as_str(), reached), ("miss", true));

    // Static files follow their own switch, which is off here.
    let css = "/site.css?h=Cache-Control:max-age%3D60";
    assert_eq!(fetch(&gateway, &origin, host, css, &[]).0, "-");
}

/// The cache shares only what the origin answers to the request as every visitor
/// sends it. A GET with a body (some frameworks read it as a form) is neither stored
/// nor answered from the cache; `Vary` matches the headers the origin was sent, not
/// those a `Connection` header took out on the way.
#[test]
fn a_request_the_origin_sees_otherwise_never_poisons_the_cache() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "shared.example", "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["cache_dynamic_pages"])}),
    )
    .unwrap();
    let host = "shared.example";
    let with_body = |target| {
        let mut request =
            Outgoing::get(host, target).header("content-type", "application/x-www-form-urlencoded");
        request.body = b"callback=evil".to_vec();
        let answer = send(gateway.http, request).unwrap();
        assert_eq!(answer.json()["body_len"], 13, "{}", answer.text());
        answer
    };
    let page = "/poison?h=Cache-Control:public,max-age%3D60";
    assert_eq!(verdict(&with_body(page)), "-");
    let (said, reached, answer) = fetch(&gateway, &origin, host, page, &[]);
    assert_eq!((said.as_str(), reached), ("miss", true));
    assert_eq!(answer.json()["body_len"], 0);
    // A stored copy is not the answer to a GET with a body either.
    assert_eq!(fetch(&gateway, &origin, host, page, &[]).0, "hit");
    assert_eq!(verdict(&with_body(page)), "-");

    let cors = "/cors?h=Cache-Control:public,max-age%3D60&h=Vary:Origin";
    let app = ("origin", "https://app.example");
    let (said, _, answer) = fetch(
        &gateway,
        &origin,
        host,
        cors,
        &[app, ("connection", "origin")],
    );
    assert_eq!(said, "miss");
    assert!(
        answer.json()["headers"].get("origin").is_none(),
        "{}",
        answer.text()
    );
    let (said, reached, answer) = fetch(&gateway, &origin, host, cors, &[app]);
    assert_eq!(
        (said.as_str(), reached),
        ("miss", true),
        "{}",
        answer.text()
    );
    assert_eq!(answer.json()["headers"]["origin"], "https://app.example");
    assert_eq!(fetch(&gateway, &origin, host, cors, &[app]).0, "hit");
}

/// A hit carries every field the origin sent, a name sent twice (two
/// `Content-Security-Policy` fields, each a policy of its own) twice.
#[test]
fn a_hit_keeps_every_field_of_a_repeated_header() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "fields.example", "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["cache_static_files"])}),
    )
    .unwrap();
    let css = "/s.css?h=Content-Security-Policy:frame-ancestors%20'none'\
               &h=Content-Security-Policy:script-src%20'self'&h=Link:%3C/a.css%3E\
               &h=Link:%3C/b.js%3E&h=Cache-Control:max-age%3D60";
    for expected in ["miss", "hit"] {
        let (said, _, answer) = fetch(&gateway, &origin, "fields.example", css, &[]);
        assert_eq!(said, expected);
        for (name, values) in [
            (
                "content-security-policy",
                ["frame-ancestors 'none'", "script-src 'self'"],
            ),
            ("link", ["</a.css>", "</b.js>"]),
        ] {
            let got: Vec<&str> = answer
                .headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            assert_eq!(got, values, "{expected}: {name}");
        }
    }
}

#[test]
fn the_cache_stays_within_its_memory_bound() {
    let origin = origin("site");
    let bound: u64 = 200_000;
    let gateway = gateway(
        origin.address.port(),
        &["--cache-memory-bytes", &bound.to_string()],
    );
    add_website(
        &gateway,
        json!({"domain": "big.example", "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["cache_static_files"])}),
    )
    .unwrap();
    let target = |i: usize| format!("/file{i}.js?pad=20000&h=Cache-Control:max-age%3D600");
    for i in 0..40 {
        let (said, _, answer) = fetch(&gateway, &origin, "big.example", &target(i), &[]);
        assert_eq!((said.as_str(), answer.body.len()), ("miss", 20_000));
    }
    let metrics = Client::new(&format!("http://{}", gateway.admin), None)
        .get("/metrics")
        .unwrap()
        .text;
    let held: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("botgate_cache_bytes "))
        .expect("botgate_cache_bytes is exported")
        .trim()
        .parse()
        .unwrap();
    assert!(held > 0 && held <= bound, "holds {held} of {bound} bytes");
    // Ten 20 kB files fit at most; the rest were let go. (Newest first: a miss stores
    // its answer and lets an older one go.)
    let hits = (0..40)
        .rev()
        .filter(|&i| fetch(&gateway, &origin, "big.example", &target(i), &[]).0 == "hit")
        .count();
    assert!((1..=10).contains(&hits), "{hits} of 40 were still held");
    // Larger than an object may be (a quarter of the memory at most): passed, not held.
    let huge = "/huge.js?pad=120000&h=Cache-Control:max-age%3D600";
    for _ in 0..2 {
        let (said, reached, answer) = fetch(&gateway, &origin, "big.example", huge, &[]);
        assert_eq!(
            (said.as_str(), reached, answer.body.len()),
            ("miss", true, 120_000)
        );
    }
}

#[test]
fn a_website_created_again_for_another_owner_never_gets_the_last_owners_cached_answers() {
    let first = origin("first");
    let port = first.address.port();
    let second = Origin::start("second", [127, 0, 0, 2].into(), port).unwrap();
    let third = Origin::start("third", [127, 0, 0, 3].into(), port).unwrap();
    let gateway = Gateway::start_protecting(
        binary(),
        GatewayStore::Embedded,
        &["hoster", "rival"],
        &["--origin-http-port", &port.to_string()],
    )
    .unwrap();
    let host = "reused.example";
    let asset = "/assets/app.js?h=Cache-Control:public,max-age%3D3600";
    // Owner after owner: another partner, then another user of that partner.
    let owners = [
        (&gateway.partner_keys[0], "owner", "127.0.0.1", &first),
        (&gateway.partner_keys[1], "owner", "127.0.0.2", &second),
        (&gateway.partner_keys[1], "another", "127.0.0.3", &third),
    ];
    for (round, (key, user, ip, origin)) in owners.into_iter().enumerate() {
        let client = Client::new(&gateway.api, Some(key));
        let _ = client.post_form("/v1.0/user", &[("id", user)]).unwrap();
        let created = client
            .post_json(
                "/v1.0/website",
                &json!({"domain": host, "user_id": user, "ip": [ip],
                        "settings": loadbalancer(&["cache_static_files"])}),
            )
            .unwrap();
        assert_eq!(created.status, 201, "{created:?}");
        wait_served(&gateway, host).unwrap();
        // The first answer comes from this owner's origin, not from the cache the last
        // owner's origin filled (a year's `public` script under the same address).
        let (said, reached, answer) = fetch(&gateway, origin, host, asset, &[]);
        assert_eq!(
            (said.as_str(), reached, answer.json()["origin"].as_str()),
            ("miss", true, Some(origin.name.as_str())),
            "owner {round}"
        );
        let (said, reached, _) = fetch(&gateway, origin, host, asset, &[]);
        assert_eq!((said.as_str(), reached), ("hit", false), "owner {round}");
        let deleted = client.delete(&format!("/v1.0/website/{host}")).unwrap();
        assert_eq!(deleted.status, 200, "{deleted:?}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !get(gateway.http, host, "/botgate-probe")
            .unwrap()
            .text()
            .contains("Website not found")
        {
            assert!(
                Instant::now() < deadline,
                "{host} still served after deletion"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
