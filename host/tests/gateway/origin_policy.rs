//! The origin address policy and loop protection: origins at loopback, link-local,
//! metadata or the gateway's own addresses are refused when the API writes them and
//! again before any connection; a request that comes back to the gateway that
//! forwarded it (its `Via`) is answered 508 at once.

use super::*;
use botgate_tests::servers::{RedisServer, free_port};

/// A gateway without components on the embedded store, with `extra` arguments.
fn bare_gateway(extra: &[&str]) -> Gateway {
    Gateway::start(binary(), GatewayStore::Embedded, &["hoster"], extra).expect("starting botgate")
}

fn create(partner: &Client, ip: &[&str]) -> Result<botgate_tests::http::Reply> {
    let _ = partner.post_form("/v1.0/user", &[("id", "owner")])?;
    partner.post_json(
        "/v1.0/website",
        &json!({"user_id": "owner", "domain": "site.example", "ip": ip,
                "status": "paused"}),
    )
}

#[test]
fn the_api_refuses_origins_the_policy_refuses() -> Result<()> {
    let gateway = bare_gateway(&[
        "--origin-allow-network",
        "198.51.100.0/24",
        "--origin-deny-network",
        "10.0.0.0/8",
        "--public-address",
        "203.0.113.9",
        "--no-acme",
    ]);
    let partner = partner(&gateway);
    for ip in [
        "169.254.169.254",
        "fe80::1",
        "fd00:ec2::254",
        "127.0.0.1",
        "::1",
        "::ffff:127.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "203.0.113.9",
        "10.1.2.3",
        "255.255.255.255",
    ] {
        let reply = create(&partner, &["192.0.2.10", ip])?;
        assert_eq!(reply.status, 422, "{ip}: {reply:?}");
        assert_eq!(reply.json()["field"], "ip", "{ip}: {reply:?}");
        assert!(
            reply.json()["message"].as_str().unwrap().contains(ip),
            "{reply:?}"
        );
    }
    assert_eq!(create(&partner, &["192.0.2.10", "172.16.0.5"])?.status, 201);
    let reply = partner.put_form("/v1.0/website/site.example", &[("ip", "169.254.169.254")])?;
    assert_eq!(reply.status, 422, "{reply:?}");
    assert_eq!(
        partner.get("/v1.0/website/site.example")?.json()["ip"],
        json!(["192.0.2.10", "172.16.0.5"]),
        "a refused update changes nothing"
    );
    // Other changes of a website go on.
    let reply = partner.put_form("/v1.0/website/site.example", &[("tag", "dc1")])?;
    assert_eq!(reply.status, 200, "{reply:?}");
    Ok(())
}

#[test]
fn an_origin_at_the_gateways_own_listener_is_never_connected_to() -> Result<()> {
    // Loopback is allowed (as the harness does), but the gateway's own listener never.
    let http: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let https: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let port = http.port().to_string();
    let gateway = Gateway::start_on(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &["--origin-http-port", &port],
        http,
        https,
    )?;
    let reply = create(&partner(&gateway), &["127.0.0.1"])?;
    assert_eq!(reply.status, 201, "{reply:?}");
    wait_served(&gateway, "site.example")?;
    let answer = get(gateway.http, "site.example", "/")?;
    assert_eq!(answer.status, 502, "{}", answer.text());
    assert!(
        answer.text().contains("Website origin refused"),
        "{}",
        answer.text()
    );
    let line = log_line(&gateway, |line| line.contains("origin failed"));
    assert!(line.contains("refused by the origin policy"), "{line}");
    // One request, one line in the access log: the gateway did not call itself. (The
    // access log is written in batches: its line for the request is waited for.)
    access_line(&gateway, "/");
    let log = gateway.log();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("botgate::access"))
            .count(),
        log.lines()
            .filter(|l| l.contains("botgate::access") && l.contains("target=/botgate-probe"))
            .count()
            + 1,
        "{log}"
    );
    Ok(())
}

#[test]
fn a_narrower_policy_holds_for_websites_written_before_it() -> Result<()> {
    // Two gateways on one store: the first allows loopback origins, the second (an
    // operator's narrower policy) does not; the website reaches its origin only
    // through the first.
    let redis = RedisServer::start()?;
    let origin = origin("loopback-origin");
    let port = origin.address.port().to_string();
    let permissive = Gateway::start(
        binary(),
        GatewayStore::Redis(&redis),
        &["hoster"],
        &["--origin-http-port", &port],
    )?;
    let strict = Gateway::start(
        binary(),
        GatewayStore::Redis(&redis),
        &[],
        &[
            "--origin-http-port",
            &port,
            "--origin-allow-network",
            "192.0.2.0/24",
        ],
    )?;
    assert_eq!(create(&partner(&permissive), &["127.0.0.1"])?.status, 201);
    wait_served(&permissive, "site.example")?;
    wait_served(&strict, "site.example")?;
    assert_eq!(get(permissive.http, "site.example", "/")?.status, 200);
    let served = origin.requests();
    let answer = get(strict.http, "site.example", "/")?;
    assert_eq!(answer.status, 502, "{}", answer.text());
    assert!(answer.text().contains("Website origin refused"));
    assert_eq!(
        origin.requests(),
        served,
        "no request reached the refused origin"
    );
    Ok(())
}

/// A reload that narrows the policy holds for the next request at once, even on an
/// origin connection kept alive from before it, and for the API's next website.
#[test]
fn a_reload_that_narrows_the_policy_leaves_no_pooled_connection_in_use() -> Result<()> {
    let origin = origin("narrowed");
    let port = origin.address.port().to_string();
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("botgate.toml");
    std::fs::write(&file, "")?;
    let config = file.display().to_string();
    let gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &["--origin-http-port", &port, "--config", &config],
    )?;
    assert_eq!(create(&partner(&gateway), &["127.0.0.1"])?.status, 201);
    wait_served(&gateway, "site.example")?;
    // Every data-plane thread keeps kept-alive connections to the origin.
    for _ in 0..8 {
        assert_eq!(get(gateway.http, "site.example", "/")?.status, 200);
    }
    let served = origin.requests();
    std::fs::write(&file, "origin-deny-network = [\"127.0.0.1/32\"]\n")?;
    super::operator::sighup(&gateway);
    let line = log_line(&gateway, |line| line.contains("configuration reloaded"));
    assert!(line.contains("origin-deny-network"), "{line}");
    for _ in 0..8 {
        let answer = get(gateway.http, "site.example", "/")?;
        assert_eq!(answer.status, 502, "{}", answer.text());
    }
    assert_eq!(
        origin.requests(),
        served,
        "no request reached the refused origin"
    );
    let update = json!({"ip": ["127.0.0.1", "192.0.2.10"]});
    let refused = partner(&gateway).put_json("/v1.0/website/site.example", &update)?;
    assert_eq!(refused.status, 422, "{}", refused.text);
    assert!(refused.text.contains("`127.0.0.1` cannot be an origin"));
    Ok(())
}

#[test]
fn a_request_that_comes_back_is_answered_508_at_once() -> Result<()> {
    // The cluster's gateways share one pseudonym: each origin leads to the other
    // gateway, a loop without end unless the second knows the first's `Via`.
    let redis = RedisServer::start()?;
    let local = |port| SocketAddr::from(([127, 0, 0, 1], port));
    let (a_http, b_http) = (local(free_port()), local(free_port()));
    let (a_port, b_port) = (a_http.port().to_string(), b_http.port().to_string());
    let a = Gateway::start_on(
        binary(),
        GatewayStore::Redis(&redis),
        &["hoster"],
        &["--origin-http-port", &b_port],
        a_http,
        local(free_port()),
    )?;
    let b = Gateway::start_on(
        binary(),
        GatewayStore::Redis(&redis),
        &[],
        &["--origin-http-port", &a_port],
        b_http,
        local(free_port()),
    )?;
    assert_eq!(create(&partner(&a), &["127.0.0.1"])?.status, 201);
    wait_served(&a, "site.example")?;
    wait_served(&b, "site.example")?;
    let answer = get(a.http, "site.example", "/looped")?;
    assert_eq!(answer.status, 508, "{}", answer.text());
    assert!(answer.text().contains("Loop detected"));
    assert!(access_line(&b, "/looped").contains("action=\"loop\""));
    access_line(&a, "/looped");
    // The request went round once: one access line for it on each gateway.
    let count = |g: &Gateway| {
        g.log()
            .lines()
            .filter(|l| l.contains("botgate::access") && l.contains("target=/looped "))
            .count()
    };
    assert_eq!((count(&a), count(&b)), (1, 1));
    Ok(())
}

#[test]
fn forwarded_requests_and_responses_carry_the_gateways_via() -> Result<()> {
    let origin = origin("echo");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "via.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )?;
    let sent = send(
        gateway.http,
        Outgoing::get("via.example", "/").header("via", "1.1 corporate-proxy"),
    )?;
    // The gateway's entry is the last (the echo shows the last line of a header).
    let ours = sent.json()["headers"]["via"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let via = &ours;
    let pseudonym = ours
        .strip_prefix("1.1 botgate-")
        .expect("the gateway's entry");
    assert_eq!(pseudonym.len(), 12, "{via}");
    // So does the origin's response, as the gateway forwards it.
    let answered: Vec<&str> = sent
        .headers
        .get_all("via")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect();
    assert_eq!(answered, [format!("1.1 botgate-{pseudonym}")]);
    // The same request sent back is a loop, whatever the case or the neighbours.
    let served = origin.requests();
    let looped = send(
        gateway.http,
        Outgoing::get("via.example", "/").header("via", format!("1.0 x, {}", ours.to_uppercase())),
    )?;
    assert_eq!(looped.status, 508);
    assert!(
        looped.headers.get("via").is_none(),
        "the gateway's own page"
    );
    assert_eq!(origin.requests(), served);
    Ok(())
}
