//! A failover under load: three store nodes and three sentinels as rendered, HAProxy as
//! rendered for the store, two real `botgate serve` processes sharing the store through
//! the floating IP, visitors on both gateways and a partner writing through the API,
//! and the fake provider. The master is killed (`kill -9`) or stopped (`SIGSTOP`).
//! Timers shortened here: Sentinel's down-after 1000 ms (5000 in production), its
//! failover timeout 3000 ms (10000), HAProxy's check every 200 ms (3 s).

use super::LoopbackCluster;
use botgate_tests::http::Client;
use botgate_tests::origin::Origin;
use botgate_tests::provider::FakeProvider;
use botgate_tests::servers::{Gateway, GatewayStore, wait_until};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Failure {
    /// `kill -9`.
    Killed,
    /// `SIGSTOP`: the process holds its connections and answers nothing.
    Stopped,
}

#[test]
fn a_killed_master_is_replaced_under_load() {
    failover_under_load(Failure::Killed);
}

#[test]
fn a_stopped_master_is_replaced_under_load() {
    failover_under_load(Failure::Stopped);
}

/// Settings with every protection off: the visitors' requests only need the index.
fn plain_settings() -> serde_json::Value {
    let mut lb = serde_json::Map::new();
    for key in botgate_model::settings::LOADBALANCER_FLAGS {
        lb.insert(key.into(), json!(false));
    }
    json!({ "loadbalancer": lb })
}

fn failover_under_load(failure: Failure) {
    let provider = FakeProvider::start("test-token-0123456789", Some("1001")).unwrap();
    let mut cluster = LoopbackCluster::with_fake_provider(3, &provider).unwrap();
    cluster.timers =
        "store-check-ms = 200\ndown-after-ms = 1000\nfailover-timeout-ms = 3000\n".into();
    for server in 1..=3 {
        cluster.render_and_install(server).unwrap();
    }
    let super::Store {
        mut nodes,
        _sentinels,
        haproxy,
    } = cluster.start_store().unwrap();

    // Two gateways on the store through the floating IP, as botgate.toml has it.
    let origin = Origin::start("origin", [127, 0, 0, 1].into(), 0).unwrap();
    let store_url = format!("redis://127.0.0.100:{}", cluster.ports.store_proxy);
    let store = GatewayStore::RedisAt {
        url: &store_url,
        password: &cluster.password,
        wait_replicas: 1,
    };
    let port = origin.address.port().to_string();
    let args = [
        "--origin-http-port",
        port.as_str(),
        "--origin-allow-network",
        "127.0.0.0/8",
    ];
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_botgate"));
    let one = Gateway::start(binary, store, &["hoster"], &args).unwrap();
    let two = Gateway::start(binary, store, &[], &args).unwrap();
    let partner = Client::new(&one.api, Some(&one.partner_keys[0]));
    super::create_owner(&partner);
    let create = |domain: &str| {
        partner.post_json(
            "/v1.0/website",
            &json!({"domain": domain, "user_id": "owner", "ip": ["127.0.0.1"],
                    "settings": plain_settings()}),
        )
    };
    assert_eq!(create("visited.example").unwrap().status, 201);
    for gateway in [&one, &two] {
        super::wait_served(gateway, "visited.example");
    }

    // Load: visitors on both gateways, and a partner creating websites.
    let visitors = super::Visitors::default();
    let running = Arc::new(AtomicBool::new(true));
    // Each confirmed write: its domain, when it was sent and when it was answered.
    let confirmed = Arc::new(Mutex::new(Vec::<(String, Instant, Instant)>::new()));
    let refused = Arc::new(Mutex::new(Vec::<(Instant, String)>::new()));
    // Server 1 is the master until the failure.
    let old_run_id = cluster.run_id(1).unwrap();
    std::thread::scope(|scope| {
        visitors.start(scope, &[&one, &two], Duration::from_millis(10));
        {
            let (running, confirmed, refused) =
                (running.clone(), confirmed.clone(), refused.clone());
            let create = &create;
            scope.spawn(move || {
                let mut n = 0;
                while running.load(Ordering::Relaxed) {
                    n += 1;
                    let domain = format!("w{n}.example");
                    let sent = Instant::now();
                    match create(&domain) {
                        Ok(reply) if reply.status == 201 => {
                            confirmed
                                .lock()
                                .unwrap()
                                .push((domain, sent, Instant::now()))
                        }
                        Ok(reply) => refused
                            .lock()
                            .unwrap()
                            .push((Instant::now(), format!("{}: {}", reply.status, reply.text))),
                        Err(err) => refused
                            .lock()
                            .unwrap()
                            .push((Instant::now(), err.to_string())),
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
        // However this ends (a failed check panics), the load stops with it.
        let _stop = StopWritesOnDrop(running.clone());
        let _stop_visitors = super::StopOnDrop(&visitors);
        std::thread::sleep(Duration::from_secs(2));

        // The failure.
        let failed_at = Instant::now();
        let old_master = nodes[0].as_ref().unwrap().pid();
        match failure {
            Failure::Killed => drop(nodes[0].take()),
            Failure::Stopped => {
                let stopped = std::process::Command::new("kill")
                    .args(["-STOP", &old_master.to_string()])
                    .status()
                    .unwrap();
                assert!(stopped.success());
            }
        }
        // A replica is promoted, the floating IP follows it, HAProxy routes to it.
        let mut promoted = None;
        wait_until(
            Duration::from_secs(30),
            || {
                promoted = (2..=3).find(|&s| cluster.role(s).as_deref() == Some("master"));
                promoted.is_some()
            },
            || "no replica was promoted".into(),
        )
        .unwrap();
        // The floating IP and HAProxy follow the master the failover ends with. Under
        // load Sentinel may start over and promote the other replica, so the three are
        // read together until they agree.
        wait_until(
            Duration::from_secs(30),
            || {
                (2..=3).any(|s| {
                    cluster.role(s).as_deref() == Some("master")
                        && provider.assigned() == Some((1000 + s).to_string())
                        && cluster.run_id(s).is_ok_and(|id| cluster.routes_to(&id))
                })
            },
            || {
                let logs: Vec<String> = (1..=3)
                    .map(|s| {
                        std::fs::read_to_string(cluster.file(s, "var/log/redis/fip-switch.log"))
                            .unwrap_or_default()
                    })
                    .collect();
                format!(
                    "no replica became the master both the floating IP and HAProxy follow \
                     (first promoted: {:?}; roles now: {:?}); the provider's calls: {:?}; \
                     the scripts' logs:\n{}\nhaproxy's log:\n{}",
                    promoted,
                    (1..=3).map(|s| cluster.role(s)).collect::<Vec<_>>(),
                    provider.calls(),
                    logs.join("\n"),
                    haproxy.log()
                )
            },
        )
        .unwrap();
        // API writes succeed again within 15 s of the failure.
        let written_again = confirmed.lock().unwrap().len();
        wait_until(
            Duration::from_secs(20),
            || confirmed.lock().unwrap().len() > written_again + 2,
            || {
                format!(
                    "no API write succeeded after the failover: {:?}",
                    refused.lock().unwrap().last()
                )
            },
        )
        .unwrap();
        // The first write sent after the failure was answered within 15 s of it (a
        // write that hangs on the stopped master counts too).
        let first_after = confirmed
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, sent, _)| *sent > failed_at)
            .map(|(_, _, answered)| *answered)
            .min()
            .unwrap();
        assert!(
            first_after.duration_since(failed_at) < Duration::from_secs(15),
            "the first write after the failure was answered {:?} after it",
            first_after.duration_since(failed_at)
        );
        let last_refusal = refused.lock().unwrap().last().map(|(at, _)| *at);
        if let Some(at) = last_refusal {
            assert!(
                at.duration_since(failed_at) < Duration::from_secs(15),
                "API writes were refused {:?} after the failure: {:?}",
                at.duration_since(failed_at),
                refused.lock().unwrap()
            );
        }
        std::thread::sleep(Duration::from_secs(1));
        running.store(false, Ordering::Relaxed);
        visitors.stop();
    });

    // Not one visitor request failed, on either gateway.
    visitors.assert_none_failed(100);
    // Every confirmed write is in the store, and both gateways serve it.
    let confirmed = confirmed.lock().unwrap().clone();
    assert!(!confirmed.is_empty());
    for (domain, ..) in &confirmed {
        let reply = partner.get(&format!("/v1.0/website/{domain}")).unwrap();
        assert_eq!(reply.status, 200, "{domain} was confirmed and is gone");
    }
    for gateway in [&one, &two] {
        wait_until(
            Duration::from_secs(10),
            || {
                confirmed.iter().all(|(domain, ..)| {
                    super::visit_host(gateway, domain).is_ok_and(|status| status == 200)
                })
            },
            || {
                format!(
                    "a gateway's index lacks confirmed websites; log:\n{}",
                    gateway.log()
                )
            },
        )
        .unwrap();
    }
    // Each gateway's index lists the store's domains with the store's statuses.
    // Read through HAProxy, which may still be settling on the new master (one try may
    // take the 10 s a store connection waits to subscribe).
    let read = std::cell::RefCell::new(Err(anyhow::anyhow!("not read yet")));
    wait_until(
        Duration::from_secs(30),
        || {
            *read.borrow_mut() = store_digest(&store_url, &cluster.password);
            read.borrow().is_ok()
        },
        || {
            format!(
                "the store never answered through HAProxy: {:#}",
                read.borrow().as_ref().unwrap_err()
            )
        },
    )
    .unwrap();
    let stored = read.into_inner().unwrap();
    for gateway in [&one, &two] {
        let admin = Client::new(&format!("http://{}", gateway.admin), None);
        let digest = || {
            admin.get("/health").ok()?.json()["snapshot"]["domains_digest"]
                .as_str()
                .map(str::to_owned)
        };
        wait_until(
            Duration::from_secs(10),
            || digest().as_deref() == Some(stored.as_str()),
            || {
                format!(
                    "a gateway's index differs from the store's; log:\n{}",
                    gateway.log()
                )
            },
        )
        .unwrap();
    }

    // The old master comes back (killed: started again; stopped: resumed, still
    // believing itself the master) and rejoins as a replica; HAProxy never sends it a
    // command meanwhile, and it takes no write (it has no replica).
    match failure {
        Failure::Killed => nodes[0] = Some(cluster.start_redis(1).unwrap()),
        Failure::Stopped => {
            let resumed = std::process::Command::new("kill")
                .args(["-CONT", &nodes[0].as_ref().unwrap().pid().to_string()])
                .status()
                .unwrap();
            assert!(resumed.success());
        }
    }
    wait_until(
        Duration::from_secs(30),
        || {
            if let Ok(routed) = cluster.through_proxy() {
                assert_ne!(routed, old_run_id, "HAProxy routed to the old master");
            }
            cluster.role(1).as_deref() == Some("slave")
        },
        || "the old master never rejoined as a replica".into(),
    )
    .unwrap();
    for (domain, ..) in &confirmed {
        let reply = partner.get(&format!("/v1.0/website/{domain}")).unwrap();
        assert_eq!(
            reply.status, 200,
            "{domain} was lost when the old master came back"
        );
    }
    let promoted = (2..=3)
        .find(|&s| cluster.role(s).as_deref() == Some("master"))
        .expect("a master among the replicas");
    let new_master = cluster.run_id(promoted).unwrap();
    for _ in 0..10 {
        assert_eq!(cluster.through_proxy().unwrap(), new_master);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The digest of the store's domains and statuses, as a gateway's `/health` has it.
fn store_digest(url: &str, password: &str) -> anyhow::Result<String> {
    use botgate_store::{AnyStore, RedisConfig, StoreConfig, WebsiteStore};
    let config = StoreConfig::Redis(RedisConfig {
        password: Some(password.to_owned()),
        ..RedisConfig::new(url)
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let snapshot = runtime.block_on(async { AnyStore::open(&config).await?.snapshot().await })?;
    Ok(botgate_host::gateway::admin::domains_digest(
        snapshot.websites.iter(),
    ))
}

/// Clears its flag when dropped: the load threads stop even when a check panics.
struct StopWritesOnDrop(Arc<AtomicBool>);

impl Drop for StopWritesOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}
