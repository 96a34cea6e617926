//! The data plane end to end: the `botgate` binary with every shipped rule component,
//! real origins started by the test, and visitors over real sockets (plain HTTP, TLS,
//! HTTP/2, PROXY protocol, a real HAProxy in front).

mod api_host;
mod caching;
mod custom_rules;
mod http1;
mod in_process;
mod listeners;
mod loadbalancer;
mod operator;
mod origin_policy;
mod origins;
mod protection;
mod proxying;

use anyhow::{Result, bail};
use botgate_tests::http::Client;
use botgate_tests::origin::Origin;
use botgate_tests::servers::{Gateway, GatewayStore};
use botgate_tests::visitor::{self, Answer, Outgoing, Visit};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// The binary under test.
fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_botgate"))
}

/// A gateway with every component, whose origins listen on `origin_port`.
fn gateway(origin_port: u16, extra: &[&str]) -> Gateway {
    let port = origin_port.to_string();
    let mut args = vec![
        "--origin-http-port",
        port.as_str(),
        "--origin-https-port",
        port.as_str(),
    ];
    args.extend_from_slice(extra);
    Gateway::start_protecting(binary(), GatewayStore::Embedded, &["hoster"], &args)
        .expect("starting botgate")
}

/// The partner's API client.
fn partner(gateway: &Gateway) -> Client {
    Client::new(&gateway.api, Some(&gateway.partner_keys[0]))
}

/// Changes the `settings` of the website `domain` through the API; answers its view.
fn update_settings(gateway: &Gateway, domain: &str, settings: Value) -> Value {
    let reply = partner(gateway)
        .put_json(
            &format!("/v1.0/website/{domain}"),
            &json!({ "settings": settings }),
        )
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.json()
}

/// Creates `website` (JSON, `user_id` filled in) and waits until the data plane serves
/// it. Answers the API's view.
fn add_website(gateway: &Gateway, website: Value) -> Result<Value> {
    let partner = partner(gateway);
    let _ = partner.post_form("/v1.0/user", &[("id", "owner")])?;
    let mut body = website;
    body["user_id"] = json!("owner");
    let reply = partner.post_json("/v1.0/website", &body)?;
    anyhow::ensure!(reply.status == 201, "creating the website: {reply:?}");
    let domain = body["domain"].as_str().unwrap_or_default().to_owned();
    wait_served(gateway, &domain)?;
    Ok(reply.json())
}

/// Waits (up to 5 s) until the gateway no longer answers "Website not found" for `host`.
fn wait_served(gateway: &Gateway, host: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = get(gateway.http, host, "/botgate-probe")?;
        if !answer.text().contains("Website not found") {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{host} was not served within 5 s; log:\n{}", gateway.log());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A connection to `listener` whose reads give up after 20 s (a hang fails the test).
fn connect(listener: SocketAddr) -> std::net::TcpStream {
    let stream = std::net::TcpStream::connect(listener).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// Whether reading to the end of a connection found its end (or a reset), rather than
/// the connection left open until the read timed out.
fn ended(read: &std::io::Result<usize>) -> bool {
    match read {
        Ok(_) => true,
        Err(err) => err.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// A plain-HTTP GET with a browser's headers.
fn get(listener: SocketAddr, host: &str, target: &str) -> Result<Answer> {
    visitor::send(
        listener,
        &Visit::default(),
        Outgoing::get(host, target).browser(),
    )
}

/// A plain-HTTP request.
fn send(listener: SocketAddr, request: Outgoing<'_>) -> Result<Answer> {
    visitor::send(listener, &Visit::default(), request)
}

/// An origin on 127.0.0.1 on a free port.
fn origin(name: &str) -> Origin {
    Origin::start(name, [127, 0, 0, 1].into(), 0).expect("starting an origin")
}

/// Settings with every protection off but what `on` names.
fn loadbalancer(on: &[&str]) -> Value {
    let mut lb = serde_json::Map::new();
    for key in botgate_model::settings::LOADBALANCER_FLAGS {
        lb.insert(key.into(), json!(on.contains(&key)));
    }
    json!({ "loadbalancer": lb })
}

/// The last log line that `matches`, waiting for it (the log is written in batches).
fn log_line(gateway: &Gateway, matches: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = gateway.log();
        if let Some(line) = log.lines().rev().find(|line| matches(line)) {
            return line.to_owned();
        }
        assert!(Instant::now() < deadline, "no such log line:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The access-log line of the request for `target`.
fn access_line(gateway: &Gateway, target: &str) -> String {
    let needle = format!("target={target} ");
    log_line(gateway, |line| {
        line.contains("botgate::access") && line.contains(&needle)
    })
}

/// A PROXY v2 header from `client`.
fn proxy_header(client: &str, to: SocketAddr) -> Vec<u8> {
    use ppp::v2::{Builder, Command, Protocol, Version};
    let from: SocketAddr = client.parse().unwrap();
    Builder::with_addresses(Version::Two | Command::Proxy, Protocol::Stream, (from, to))
        .build()
        .unwrap()
}
