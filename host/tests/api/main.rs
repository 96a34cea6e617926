//! The management API over real HTTP against the running `botgate` binary, on both
//! store backends: the specification's flows in both content types, tenant isolation,
//! every error class, and an OpenAPI-driven fuzz run.

mod acme;
mod dashboard;
mod errors;
mod fuzz;
mod gatekeeper;
mod provisioning;
mod seed_flows;
mod tenants;
mod webhooks;

use anyhow::Result;
use botgate_tests::http::Client;
use botgate_tests::servers::{Dnsmasq, Gateway, GatewayStore, RedisServer};
use serde_json::{Value, json};
use std::path::Path;

/// The binary under test.
fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_botgate"))
}

/// Runs `test` against a gateway on the embedded store, then against one on Redis;
/// each gateway has partners `hoster` and `rival` and the `extra` serve arguments.
fn on_both_backends(extra: &[&str], test: impl Fn(&Gateway) -> Result<()>) {
    let embedded = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster", "rival"],
        extra,
    )
    .expect("starting botgate on the embedded store");
    test(&embedded).expect("on the embedded store");
    let redis = RedisServer::start().expect("starting redis-server");
    let clustered = Gateway::start(
        binary(),
        GatewayStore::Redis(&redis),
        &["hoster", "rival"],
        extra,
    )
    .expect("starting botgate on Redis");
    test(&clustered).expect("on Redis");
}

/// A gateway on the embedded store with partner `hoster` that checks DNS against `dns`
/// (its public address is 127.0.0.1) every 100 ms, without ACME, with `extra` serve
/// arguments.
fn dns_checking_gateway(dns: &Dnsmasq, extra: &[&str]) -> Result<Gateway> {
    let dns_server = dns.address.to_string();
    let mut arguments = vec![
        "--public-address",
        "127.0.0.1",
        "--dns-server",
        &dns_server,
        "--setup-check-ms",
        "100",
        "--no-acme",
        ALLOW_LOOPBACK[0],
        ALLOW_LOOPBACK[1],
    ];
    arguments.extend_from_slice(extra);
    Gateway::start(binary(), GatewayStore::Embedded, &["hoster"], &arguments)
}

/// Clients of the two partners.
fn partners(gateway: &Gateway) -> (Client, Client) {
    (
        Client::new(&gateway.api, Some(&gateway.partner_keys[0])),
        Client::new(&gateway.api, Some(&gateway.partner_keys[1])),
    )
}

/// Creates a user and returns its key.
fn create_user(partner: &Client, id: &str) -> Result<String> {
    let reply = partner.post_form("/v1.0/user", &[("id", id)])?;
    anyhow::ensure!(reply.status == 201, "creating user {id}: {reply:?}");
    Ok(reply.json()["api_key"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// Creates a website of `user` with one origin.
fn create_website(partner: &Client, user: &str, domain: &str) -> Result<Value> {
    post_website(
        partner,
        &json!({"user_id": user, "domain": domain, "ip": ["192.0.2.10"]}),
    )
}

/// Creates the website `body` describes; answers the API's view of it.
fn post_website(partner: &Client, body: &Value) -> Result<Value> {
    let reply = partner.post_json("/v1.0/website", body)?;
    anyhow::ensure!(
        reply.status == 201,
        "creating website {}: {reply:?}",
        body["domain"]
    );
    Ok(reply.json())
}

/// Lets webhooks go to the tests' receivers on loopback.
const ALLOW_LOOPBACK: [&str; 2] = ["--webhook-allow-network", "127.0.0.0/8"];

/// Polls the website until its status is `status` (up to 90 s); panics otherwise (so
/// the guards print their logs), with `more` (another server's log, say).
fn wait_for_status(
    partner: &Client,
    domain: &str,
    status: &str,
    more: &dyn Fn() -> String,
) -> Result<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let website = partner.get(&format!("/v1.0/website/{domain}"))?.json();
        if website["status"] == status {
            return Ok(website);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{domain} is not `{status}` after 90 s: {website}\n{}",
            more()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Asserts the reply is the API's error body with `status` and `field`.
#[track_caller]
fn assert_error(reply: &botgate_tests::http::Reply, status: u16, field: Option<&str>) {
    let body = reply.json();
    assert_eq!(reply.status, status, "{reply:?}");
    assert_eq!(body["status"], "error", "{reply:?}");
    assert_eq!(body["code"], status, "{reply:?}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{reply:?}"
    );
    assert_eq!(body["field"].as_str(), field, "{reply:?}");
    assert!(
        reply
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{reply:?}"
    );
}
