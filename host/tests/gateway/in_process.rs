//! The gateway started in process through the library (`server::Server`), as tests and
//! benchmarks can start it: every listener on a free port, services mounted on the
//! HTTPS listener by host name, and a stop that drains and closes everything.

use super::*;
use botgate_host::gateway::GatewayConfig;
use botgate_host::gateway::access_log::AccessLog;
use botgate_host::gateway::upstream::OriginConfig;
use botgate_host::provisioning::ProvisioningConfig;
use botgate_host::server::{Server, ServerConfig};
use botgate_model::PartnerName;
use botgate_model::addresses::OriginPolicy;
use botgate_store::{AccountStore, PartnerRecord, StoreConfig, key_digest};
use std::sync::Arc;

const PARTNER_KEY: &str = "bgp_in_process_test_key_0123456789abcdef";

fn config(data: &Path, origin_port: u16, rulesets: &Path) -> ServerConfig {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mounted = axum::Router::new().route(
        "/who",
        axum::routing::get(
            |axum::extract::ConnectInfo(client): axum::extract::ConnectInfo<SocketAddr>| async move {
                format!("mounted service; client {}", client.ip())
            },
        ),
    );
    ServerConfig {
        store: StoreConfig::Embedded(data.to_owned()),
        http_listen: any,
        https_listen: any,
        api_listen: Some(any),
        api_hosts: Vec::new(),
        api_certificate_files: None,
        admin_listen: any,
        metrics_listen: Vec::new(),
        health_store_unreachable_after: Duration::from_secs(30),
        statistics_flush: Duration::from_secs(10),
        operator_token_file: None,
        threads: std::num::NonZeroUsize::new(2),
        http3: true,
        rulesets_dir: Some(rulesets.to_owned()),
        ruleset_trusted_keys: Default::default(),
        gateway: GatewayConfig {
            origins: OriginConfig {
                http_port: origin_port,
                https_port: origin_port,
                policy: OriginPolicy {
                    allow: vec!["127.0.0.0/8".parse().unwrap()],
                    ..OriginPolicy::default()
                },
                ..OriginConfig::default()
            },
            access_log: AccessLog::off(),
            ..GatewayConfig::default()
        },
        api: botgate_api::ApiConfig::default(),
        webhooks: botgate_webhooks::WebhookConfig::default(),
        provisioning: ProvisioningConfig::default(),
        acme: None,
        mounted: vec![("Console.In-Process.Test".to_owned(), Arc::new(mounted))],
    }
}

/// A runtime for a gateway started in process.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_gateway_started_in_process_serves_websites_and_mounted_services_then_stops() {
    let runtime = runtime();
    let data = tempfile::tempdir().unwrap();
    let rulesets = botgate_tests::shipped_dir();
    let origin = origin("in-process");
    let server = runtime
        .block_on(Server::start(
            config(data.path(), origin.address.port(), rulesets.path()),
            botgate_tests::registry(),
        ))
        .expect("starting the gateway in process");
    let addresses = server.addresses().clone();
    for bound in [
        addresses.http,
        addresses.https,
        addresses.api.expect("the API listener is on"),
        addresses.admin,
    ] {
        assert_ne!(bound.port(), 0, "{addresses:?}");
    }
    assert_eq!(
        addresses.http3.map(|a| a.port()),
        Some(addresses.https.port())
    );
    // The shipped components were loaded from the watched directory.
    let loaded = server.gateway().rulesets.current();
    assert!(loaded.get("classifier").is_some() && loaded.get("wordpress").is_some());
    drop(loaded);

    let store = server.store().clone();
    runtime
        .block_on(store.put_partner(&PartnerRecord {
            name: PartnerName::parse("hoster").unwrap(),
            key_sha256: key_digest(PARTNER_KEY),
            webhook_secret: "whsec_aW4tcHJvY2Vzcw==".into(),
            frame_origins: Vec::new(),
        }))
        .unwrap();
    let api = Client::new(
        &format!("http://{}", addresses.api.expect("the API listener")),
        Some(PARTNER_KEY),
    );
    assert_eq!(
        api.post_form("/v1.0/user", &[("id", "owner")])
            .unwrap()
            .status,
        201
    );
    let created = api
        .post_json(
            "/v1.0/website",
            &json!({"domain": "shop.in-process.test", "user_id": "owner", "ip": ["127.0.0.1"],
                    "settings": loadbalancer(&[])}),
        )
        .unwrap();
    assert_eq!(created.status, 201, "{created:?}");
    // No website may claim a mounted name, as its domain or as a subdomain.
    for (website, field) in [
        (json!({"domain": "console.in-process.test"}), "domain"),
        (
            json!({"domain": "in-process.test", "subdomain": ["console"]}),
            "subdomain",
        ),
    ] {
        let mut body = website;
        body["user_id"] = json!("owner");
        body["ip"] = json!(["127.0.0.1"]);
        let refused = api.post_json("/v1.0/website", &body).unwrap();
        assert_eq!(refused.status, 409, "{refused:?}");
        assert_eq!(refused.json()["field"], field, "{refused:?}");
    }
    let parent = json!({"domain": "in-process.test", "user_id": "owner", "ip": ["127.0.0.1"]});
    assert_eq!(api.post_json("/v1.0/website", &parent).unwrap().status, 201);
    let refused = api
        .put_json(
            "/v1.0/website/in-process.test",
            &json!({"subdomain": ["www", "console"]}),
        )
        .unwrap();
    assert_eq!(refused.status, 409, "{refused:?}");
    assert_eq!(refused.json()["field"], "subdomain", "{refused:?}");

    // The website through the data plane, on both listeners.
    let deadline = Instant::now() + Duration::from_secs(5);
    let answer = loop {
        let answer = get(addresses.http, "shop.in-process.test", "/page").unwrap();
        if answer.status == 200 || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["origin"], "in-process");
    let over_tls = Visit {
        tls_name: Some("shop.in-process.test".into()),
        ..Visit::default()
    };
    let answer = visitor::send(
        addresses.https,
        &over_tls,
        Outgoing::get("shop.in-process.test", "/page").browser(),
    )
    .unwrap();
    assert_eq!(answer.json()["origin"], "in-process", "{}", answer.text());

    // The mounted service answers its host name on the HTTPS listener, over HTTP/1.1,
    // HTTP/2 and HTTP/3, and sees the client's address.
    for (http2, http3) in [(false, false), (true, false), (false, true)] {
        let visit = Visit {
            tls_name: Some("console.in-process.test".into()),
            http2,
            http3,
            ..Visit::default()
        };
        let answer = visitor::send(
            addresses.https,
            &visit,
            Outgoing::get("console.in-process.test", "/who"),
        )
        .unwrap();
        let protocol = format!("HTTP/2 {http2}, HTTP/3 {http3}");
        assert_eq!(answer.status, 200, "{protocol}: {}", answer.text());
        assert_eq!(
            answer.text(),
            "mounted service; client 127.0.0.1",
            "{protocol}"
        );
    }
    // Plain HTTP sends the mounted name to HTTPS (301).
    let plain = get(addresses.http, "console.in-process.test", "/who?x=1").unwrap();
    assert_eq!(plain.status, 301, "{}", plain.text());
    assert_eq!(
        plain.header("location"),
        Some("https://console.in-process.test/who?x=1")
    );
    assert!(origin.requests() >= 2);

    let health = get(addresses.admin, "localhost", "/health").unwrap();
    assert_eq!(health.status, 200, "{}", health.text());

    // Stopping drains and closes every listener, and returns.
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), server.stop())
            .await
            .expect("the gateway stops")
    });
    for closed in [
        addresses.http,
        addresses.https,
        addresses.api.expect("the API listener is on"),
        addresses.admin,
    ] {
        assert!(
            std::net::TcpStream::connect_timeout(&closed, Duration::from_secs(2)).is_err(),
            "{closed} still accepts after the stop"
        );
    }
}

/// A website deleted and taken by another partner between two flushes of the
/// statistics: what the gateway counted for the last owner is not the new owner's.
#[test]
fn statistics_counted_before_a_website_changes_hands_stay_with_its_last_owner() {
    use botgate_store::TrafficStore;
    const RIVAL_KEY: &str = "bgp_in_process_rival_key_0123456789abcdef";
    let runtime = runtime();
    let data = tempfile::tempdir().unwrap();
    let origin = origin("last-owner");
    let server = runtime
        .block_on(Server::start(
            ServerConfig {
                // Nothing is flushed before the stop.
                statistics_flush: Duration::from_secs(3600),
                rulesets_dir: None,
                ..config(data.path(), origin.address.port(), data.path())
            },
            botgate_tests::registry(),
        ))
        .expect("starting the gateway in process");
    let addresses = server.addresses().clone();
    let store = server.store().clone();
    let mut clients = Vec::new();
    for (name, key) in [("hoster", PARTNER_KEY), ("rival", RIVAL_KEY)] {
        runtime
            .block_on(store.put_partner(&PartnerRecord {
                name: PartnerName::parse(name).unwrap(),
                key_sha256: key_digest(key),
                webhook_secret: "whsec_aW4tcHJvY2Vzcw==".into(),
                frame_origins: Vec::new(),
            }))
            .unwrap();
        let api = Client::new(
            &format!("http://{}", addresses.api.expect("the API listener")),
            Some(key),
        );
        let user = api.post_form("/v1.0/user", &[("id", "owner")]).unwrap();
        assert_eq!(user.status, 201, "{user:?}");
        clients.push(api);
    }
    let (hoster, rival) = (&clients[0], &clients[1]);
    let domain = "taken.in-process.test";
    // The rival's origin address answers nothing: its website's requests end in 502,
    // which says that the gateway serves the new owner's record.
    let website = |ip: &str| json!({"domain": domain, "user_id": "owner", "ip": [ip]});
    let until = |status: u16, target: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = get(addresses.http, domain, target).unwrap();
            if answer.status == status || Instant::now() > deadline {
                break answer;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let created = hoster
        .post_json("/v1.0/website", &website("127.0.0.1"))
        .unwrap();
    assert_eq!(created.status, 201, "{created:?}");
    let served = until(200, "/last-owners-page");
    assert_eq!(served.status, 200, "{}", served.text());
    assert_eq!(
        hoster
            .delete(&format!("/v1.0/website/{domain}"))
            .unwrap()
            .status,
        200
    );
    let created = rival
        .post_json("/v1.0/website", &website("127.0.0.2"))
        .unwrap();
    assert_eq!(created.status, 201, "{created:?}");
    let refused = until(502, "/new-owners-page");
    assert_eq!(refused.status, 502, "{}", refused.text());

    // The stop flushes what was counted.
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), server.stop())
            .await
            .expect("the gateway stops")
    });
    let domain = botgate_model::Domain::parse(domain).unwrap();
    let events = runtime.block_on(store.events(&domain, 100)).unwrap();
    let paths: std::collections::BTreeSet<&str> = events.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["/new-owners-page"].into(), "{events:?}");
    let hour = botgate_store::now_ms() / 3_600_000;
    let counts = runtime
        .block_on(store.traffic(&domain, botgate_store::Resolution::Hour, hour - 1, hour))
        .unwrap();
    let counted: Vec<&String> = counts.iter().flat_map(|c| c.0.keys()).collect();
    assert!(
        counted
            .iter()
            .all(|field| !field.contains("last-owners-page")),
        "{counted:?}"
    );
    assert!(
        counted
            .iter()
            .any(|field| field.contains("new-owners-page")),
        "{counted:?}"
    );
}

/// Without the loopback listener the API answers on its host name only, over HTTPS
/// with the operator's certificate; a mounted name that a website could not have is
/// refused at start with the reason.
#[test]
fn the_api_can_answer_on_its_host_name_only() {
    let runtime = runtime();
    let data = tempfile::tempdir().unwrap();
    let ca = botgate_tests::ca::TestCa::new("botgate test: in-process API").unwrap();
    let (certificate, key) = ca.issue(&["api.in-process.test"]).unwrap();
    let files = tempfile::tempdir().unwrap();
    let (certificate_path, key_path) = (files.path().join("c.pem"), files.path().join("k.pem"));
    std::fs::write(&certificate_path, certificate).unwrap();
    std::fs::write(&key_path, key).unwrap();
    let configured = || ServerConfig {
        api_listen: None,
        api_hosts: vec!["api.in-process.test".to_owned()],
        api_certificate_files: Some((certificate_path.clone(), key_path.clone())),
        rulesets_dir: None,
        ruleset_trusted_keys: Default::default(),
        ..config(data.path(), 9, data.path())
    };
    let registry = || botgate_tests::registry();
    let server = runtime
        .block_on(Server::start(configured(), registry()))
        .expect("starting the gateway in process");
    assert!(server.addresses().api.is_none());
    let visit = Visit {
        tls_name: Some("api.in-process.test".to_owned()),
        trusted_roots: Some(vec![ca.root_der().to_vec()]),
        ..Visit::default()
    };
    let answer = visitor::send(
        server.addresses().https,
        &visit,
        Outgoing::get("api.in-process.test", "/v1.0/user"),
    )
    .unwrap();
    assert_eq!(answer.status, 401, "{}", answer.text());
    assert_eq!(answer.json()["field"], "Authorization");
    runtime.block_on(server.stop());

    // On a data directory of its own: the stopped gateway's last tasks may still be
    // letting its store go.
    let elsewhere = tempfile::tempdir().unwrap();
    let refused = runtime.block_on(Server::start(
        ServerConfig {
            api_hosts: vec!["not a name".to_owned()],
            ..config(elsewhere.path(), 9, elsewhere.path())
        },
        registry(),
    ));
    let error = refused.err().expect("a bad API host name is refused");
    assert!(
        botgate_model::report::Report(&error)
            .to_string()
            .contains("`not a name` is not a host name"),
        "{}",
        botgate_model::report::Report(&error)
    );
}
