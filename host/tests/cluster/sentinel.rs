//! `botgate serve --redis-sentinel`: a gateway that asks the sentinels for the master
//! (no HAProxy in front of Redis) keeps taking API writes and serving every website
//! through a failover.

use botgate_tests::http::Client;
use botgate_tests::servers::{Gateway, GatewayStore, RedisServer, Sentinel, wait_until};
use botgate_tests::visitor::{self, Outgoing, Visit};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

#[test]
fn a_gateway_that_asks_the_sentinels_follows_a_failover() {
    let (master, replica) = RedisServer::start_with_replica().unwrap();
    let sentinel = Sentinel::start(&master).unwrap();
    let gateway = Gateway::start(
        Path::new(env!("CARGO_BIN_EXE_botgate")),
        GatewayStore::Sentinel {
            port: sentinel.port,
            password: &master.password,
        },
        &["hoster"],
        &[],
    )
    .unwrap();
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    let create = |domain: &str| {
        partner.post_json(
            "/v1.0/website",
            &json!({"user_id": "owner", "domain": domain, "ip": ["127.0.0.1"]}),
        )
    };
    super::create_owner(&partner);
    assert_eq!(create("before.example").unwrap().status, 201);
    let served = |domain: &str| {
        // A website's unknown origin answers 502; an unknown name 404.
        visitor::send(gateway.http, &Visit::default(), Outgoing::get(domain, "/"))
            .is_ok_and(|answer| answer.status != 404)
    };
    wait_until(
        Duration::from_secs(10),
        || served("before.example"),
        || format!("the website was never served; log:\n{}", gateway.log()),
    )
    .unwrap();

    sentinel.fail_over_to(&replica).unwrap();
    // The next writes find the new master through the sentinels.
    wait_until(
        Duration::from_secs(30),
        || create("after.example").is_ok_and(|reply| reply.status == 201),
        || format!("no write reached the new master; log:\n{}", gateway.log()),
    )
    .unwrap();
    wait_until(
        Duration::from_secs(10),
        || served("after.example") && served("before.example"),
        || {
            format!(
                "the gateway's index missed a website; log:\n{}",
                gateway.log()
            )
        },
    )
    .unwrap();
    // (Started without rule components: `/health` answers 503 for that alone.)
    let health = Client::new(&format!("http://{}", gateway.admin), None)
        .get("/health")
        .unwrap()
        .json();
    assert_eq!(health["store"]["reachable"], true, "{health}");
    assert!(
        health["store"]["address"]
            .as_str()
            .is_some_and(|a| a.contains("`mymaster` of the sentinels")),
        "{health}"
    );
}
