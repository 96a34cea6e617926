//! The `settings.loadbalancer` keys, each through real sockets.

use super::*;
use botgate_tests::origin::Origin;
use std::net::IpAddr;

#[test]
fn force_https_redirects_plain_http() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "https.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["force_https"])}),
    )
    .unwrap();
    let answer = get(gateway.http, "https.example", "/cart?item=1").unwrap();
    assert_eq!(answer.status, 301);
    assert_eq!(
        answer.header("location"),
        Some("https://https.example/cart?item=1")
    );
    // Over HTTPS the request goes through.
    let visit = Visit {
        tls_name: Some("https.example".into()),
        http2: true,
        ..Visit::default()
    };
    let answer = visitor::send(
        gateway.https,
        &visit,
        Outgoing::get("https.example", "/cart"),
    )
    .unwrap();
    assert_eq!(answer.status, 200);
}

#[test]
fn force_subdomains_redirect_sends_subdomains_to_the_domain() {
    let origin = origin("site");
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "main.example", "subdomain": ["www", "shop"], "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["force_subdomains_redirect"])}),
    )
    .unwrap();
    let answer = get(gateway.http, "www.main.example", "/a?b=c").unwrap();
    assert_eq!(answer.status, 301);
    assert_eq!(answer.header("location"), Some("http://main.example/a?b=c"));
    assert_eq!(get(gateway.http, "main.example", "/a").unwrap().status, 200);
    // Off: subdomains are served as themselves.
    add_website(
        &gateway,
        json!({"domain": "keep.example", "subdomain": ["www"], "ip": ["127.0.0.1"],
               "settings": loadbalancer(&[])}),
    )
    .unwrap();
    assert_eq!(
        get(gateway.http, "www.keep.example", "/").unwrap().status,
        200
    );
}

#[test]
fn upstreams_use_https_reaches_the_origin_over_tls_with_sni() {
    let origin = Origin::start_tls("tls-origin", IpAddr::from([127, 0, 0, 1]), 0).unwrap();
    let gateway = gateway(origin.address.port(), &[]);
    add_website(
        &gateway,
        json!({"domain": "tls.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["upstreams_use_https"])}),
    )
    .unwrap();
    let echo = get(gateway.http, "tls.example", "/").unwrap().json();
    assert_eq!(echo["tls"], true, "{echo}");
    assert_eq!(echo["sni"], "tls.example");
    // The same origin spoken to in plain HTTP fails: the key is what made it TLS.
    add_website(
        &gateway,
        json!({"domain": "plain.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&[])}),
    )
    .unwrap();
    assert_eq!(get(gateway.http, "plain.example", "/").unwrap().status, 502);
}

#[test]
fn ddos_protection_limits_clients_and_advanced_is_stricter() {
    let origin = origin("site");
    let gateway = gateway(
        origin.address.port(),
        &[
            "--ddos-client-rate",
            "1",
            "--ddos-client-burst",
            "10",
            "--ddos-website-rate",
            "1",
            "--ddos-website-burst",
            "1000",
            "--ddos-strict-divisor",
            "5",
        ],
    );
    add_website(
        &gateway,
        json!({"domain": "limited.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["ddos_protection"])}),
    )
    .unwrap();
    let statuses = |host: &str, last: u8, n: usize| -> Vec<u16> {
        (0..n)
            .map(|_| get_from(&gateway, host, last).status)
            .collect()
    };
    let first = statuses("limited.example", 20, 14);
    assert_eq!(first.iter().filter(|s| **s == 200).count(), 10, "{first:?}");
    let limited = get_from(&gateway, "limited.example", 20);
    assert_eq!(limited.status, 429);
    assert!(limited.header("retry-after").is_some());
    // Another client is not affected.
    assert_eq!(get_from(&gateway, "limited.example", 21).status, 200);

    // Advanced: a client gets a fifth of the burst.
    add_website(
        &gateway,
        json!({"domain": "strict.example", "ip": ["127.0.0.1"], "settings": loadbalancer(&["ddos_protection_advanced"])}),
    )
    .unwrap();
    let strict = statuses("strict.example", 30, 5);
    assert_eq!(
        strict.iter().filter(|s| **s == 200).count(),
        2,
        "{strict:?}"
    );
}

#[test]
fn ddos_protection_advanced_challenges_new_clients_under_attack() {
    let origin = origin("site");
    let gateway = gateway(
        origin.address.port(),
        &[
            "--ddos-client-rate",
            "1",
            "--ddos-client-burst",
            "50",
            "--ddos-website-rate",
            "1",
            "--ddos-website-burst",
            "50",
            "--ddos-strict-divisor",
            "5",
        ],
    );
    add_website(
        &gateway,
        json!({"domain": "attacked.example", "ip": ["127.0.0.1"],
               "settings": loadbalancer(&["ddos_protection_advanced"])}),
    )
    .unwrap();
    // Many clients at once push the website over its strict rate (10 at once).
    let statuses: Vec<u16> = (40..60u8)
        .map(|last| get_from(&gateway, "attacked.example", last).status)
        .collect();
    assert!(statuses[..5].iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(*statuses.last().unwrap(), 403, "{statuses:?}");
    let newcomer = get_from(&gateway, "attacked.example", 99);
    assert_eq!(newcomer.status, 403);
    assert!(newcomer.text().contains("/.botgate/challenge"));
    // The work is harder (16 + 3 bits), and so is the wait without JavaScript (8 × 5 s).
    assert!(
        newcomer.text().contains("data-difficulty=\"19\""),
        "{}",
        newcomer.text()
    );
    assert!(newcomer.text().contains(">41</span> seconds"));
    // So is the next challenge of a refused answer.
    let mut garbage = Outgoing::get("attacked.example", "/.botgate/challenge")
        .browser()
        .header("content-type", "application/x-www-form-urlencoded");
    garbage.method = "POST";
    garbage.body = b"token=nonsense&counter=1".to_vec();
    let visit = Visit {
        source: Some(IpAddr::from([127, 0, 0, 99])),
        ..Visit::default()
    };
    let refused = visitor::send(gateway.http, &visit, garbage).unwrap();
    assert_eq!(refused.status, 403);
    assert!(
        refused.text().contains("data-difficulty=\"19\""),
        "{}",
        refused.text()
    );
}

/// A browser's GET of `host` from the loopback address `127.0.0.<last>`.
fn get_from(gateway: &Gateway, host: &str, last: u8) -> Answer {
    let visit = Visit {
        source: Some(IpAddr::from([127, 0, 0, last])),
        ..Visit::default()
    };
    visitor::send(gateway.http, &visit, Outgoing::get(host, "/").browser()).unwrap()
}
