//! The Redis backend through a failover, as the specification's cluster runs it: a
//! master, a replica, a sentinel, and haproxy forwarding to whichever node is master.
//! Writes confirmed by `WAIT` survive the failover; the store reconnects by itself
//! (the old connection meets `READONLY` or is closed) and the change feed goes on.

use botgate_model::{Domain, User};
use botgate_store::conformance::{partner_and_user, website};
use botgate_store::{Follower, PartnerRecord, RedisConfig, RedisStore, StoreError, WebsiteStore};
use botgate_tests::servers::{HaproxyForRedis, RedisServer, Resp, Sentinel, wait_until};
use std::sync::Arc;
use std::time::Duration;

/// Whether a connection through the proxy reaches `node`.
fn routes_to(proxy: &HaproxyForRedis, node: &RedisServer) -> bool {
    let Ok(id) = node.run_id() else { return false };
    botgate_tests::servers::resp_command(proxy.port, Some(&node.password), &["INFO", "server"])
        .ok()
        .and_then(|r| botgate_tests::servers::info_field(&r, "run_id").ok())
        .is_some_and(|through| through == id)
}

/// A master and its replica, a sentinel watching them, and haproxy in front, settled
/// on the master.
struct Pair {
    master: RedisServer,
    replica: RedisServer,
    sentinel: Sentinel,
    proxy: HaproxyForRedis,
}

impl Pair {
    fn start() -> Pair {
        let (master, replica) = RedisServer::start_with_replica().unwrap();
        let sentinel = Sentinel::start(&master).unwrap();
        let proxy = HaproxyForRedis::start(&[&master, &replica]).unwrap();
        // Until its first checks ran, haproxy may forward to either node.
        wait_until(
            Duration::from_secs(15),
            || (0..5).all(|_| routes_to(&proxy, &master)),
            || format!("haproxy never settled on the master; log:\n{}", proxy.log()),
        )
        .unwrap();
        Pair {
            master,
            replica,
            sentinel,
            proxy,
        }
    }
}

/// Has `sentinel` fail over to `replica`, and waits until haproxy forwards to it.
fn fail_over(sentinel: &Sentinel, replica: &RedisServer, proxy: &HaproxyForRedis) {
    sentinel.fail_over_to(replica).unwrap();
    wait_until(
        Duration::from_secs(15),
        || (0..5).all(|_| routes_to(proxy, replica)),
        || {
            format!(
                "haproxy never forwarded to the new master; log:\n{}",
                proxy.log()
            )
        },
    )
    .unwrap();
}

/// Creates website `domain` (for `alice`) and waits until `replica` has it.
async fn create_replicated(
    store: &RedisStore,
    replica: &RedisServer,
    (acme, alice): (&PartnerRecord, &User),
    domain: &str,
) {
    store
        .create_website(&acme.name, &website(domain, alice))
        .await
        .unwrap();
    let key = format!("botgate:website:{domain}");
    wait_until(
        Duration::from_secs(10),
        || {
            replica
                .command(&["EXISTS", &key])
                .is_ok_and(|r| r == Resp::Integer(1))
        },
        || {
            format!(
                "the replica never got {domain}; its INFO: {:?}",
                replica.command(&["INFO", "replication"])
            )
        },
    )
    .unwrap();
}

/// Creates website `domain` (for `alice`) after a failover: it succeeds on the
/// new master, `replica`, and `follower` sees it.
async fn write_reaches(
    (store, follower): (&RedisStore, &Follower),
    replica: &RedisServer,
    (acme, alice): (&PartnerRecord, &User),
    domain: &str,
) {
    let created = store
        .create_website(&acme.name, &website(domain, alice))
        .await
        .expect("the first write after the failover succeeds on the new master");
    botgate_store::conformance::assert_as_stored(store, &created).await;
    assert_eq!(
        replica
            .command(&["EXISTS", &format!("botgate:website:{domain}")])
            .unwrap(),
        Resp::Integer(1)
    );
    wait_until(
        Duration::from_secs(15),
        || follower.index().website(domain).is_some(),
        || format!("the follower never saw {domain}, written after the failover"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_writes_survive_a_failover_and_the_store_reconnects_by_itself() {
    let Pair {
        master,
        replica,
        sentinel,
        proxy,
    } = Pair::start();

    let config = RedisConfig {
        password: Some(master.password.clone()),
        wait_replicas: 1,
        wait_timeout: Duration::from_secs(2),
        ..RedisConfig::new(proxy.url())
    };
    let store = Arc::new(RedisStore::connect(config.clone()).await.unwrap());
    let follower = Follower::start(store.clone(), Duration::from_millis(250))
        .await
        .unwrap();

    // Before: every write is confirmed by the replica.
    let (acme, alice) = partner_and_user(store.as_ref(), "acme", "alice").await;
    store
        .create_website(&acme.name, &website("before.example", &alice))
        .await
        .unwrap();

    // A write that asks for more replicas than exist is applied but reported unconfirmed,
    // and not retried (a retry would wrongly answer "exists").
    let greedy = RedisStore::connect(RedisConfig {
        wait_replicas: 2,
        ..config.clone()
    })
    .await
    .unwrap();
    let unconfirmed = greedy
        .create_website(&acme.name, &website("unconfirmed.example", &alice))
        .await
        .unwrap_err();
    let reported = botgate_model::report::Report(&unconfirmed).to_string();
    assert!(
        matches!(&unconfirmed, StoreError::Backend { cause: Some(_), .. })
            && reported.contains("not confirmed")
            && reported.contains("1 of 2"),
        "{reported}"
    );

    // The failover: sentinel promotes the replica; haproxy follows the master role.
    assert!(matches!(
        sentinel.command(&["SENTINEL", "REPLICAS", "mymaster"]),
        Ok(Resp::Array(_))
    ));
    fail_over(&sentinel, &replica, &proxy);
    wait_until(
        Duration::from_secs(30),
        || master.role().is_ok_and(|r| r == "slave"),
        || {
            format!(
                "the old master never became a replica; sentinel log:\n{}",
                sentinel.log()
            )
        },
    )
    .unwrap();
    // The demoted master now replicates the new one, so WAIT 1 can be satisfied again.
    wait_until(
        Duration::from_secs(30),
        || replica.online_replicas() == 1,
        || "the old master never rejoined as a replica".into(),
    )
    .unwrap();

    // After: the same store object, no restart. Its open connection points at the
    // demoted master; the first write reconnects through haproxy and succeeds.
    let before = store
        .website(&Domain::parse("before.example").unwrap())
        .await
        .unwrap();
    assert!(before.is_some(), "a confirmed write survived the failover");
    // The follower hears of it (live, or by its resync).
    write_reaches(
        (&store, &follower),
        &replica,
        (&acme, &alice),
        "after.example",
    )
    .await;
    assert!(follower.index().website("before.example").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_sees_through_a_promoted_replica_that_reuses_version_numbers() {
    let Pair {
        master,
        replica,
        sentinel,
        proxy,
    } = Pair::start();
    let config = RedisConfig {
        password: Some(master.password.clone()),
        ..RedisConfig::new(proxy.url())
    };
    let store = Arc::new(RedisStore::connect(config).await.unwrap());
    // The production resync period: only a follower that knows the store's history
    // notices what follows.
    let follower = Follower::start(store.clone(), Duration::from_secs(5))
        .await
        .unwrap();
    let (acme, alice) = partner_and_user(store.as_ref(), "acme", "alice").await;
    create_replicated(&store, &replica, (&acme, &alice), "kept.example").await;

    // The replica loses its link (it cannot authenticate any more), and the master
    // takes two writes the replica never gets; the follower applies them.
    replica
        .command(&["CONFIG", "SET", "masterauth", "not-the-password"])
        .unwrap();
    replica
        .command(&["CLIENT", "KILL", "TYPE", "master"])
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        || master.online_replicas() == 0,
        || "the replica stayed connected".into(),
    )
    .unwrap();
    for lost in ["lost-one.example", "lost-two.example"] {
        store
            .create_website(&acme.name, &website(lost, &alice))
            .await
            .unwrap();
    }
    wait_until(
        Duration::from_secs(10),
        || follower.index().website("lost-two.example").is_some(),
        || "the follower never applied the unreplicated writes".into(),
    )
    .unwrap();
    let applied = follower.index().version;

    // The replica is promoted without them; its next two changes take the same
    // version numbers for other websites.
    fail_over(&sentinel, &replica, &proxy);
    for new in ["new-one.example", "new-two.example"] {
        store
            .create_website(&acme.name, &website(new, &alice))
            .await
            .unwrap();
    }
    assert_eq!(
        store.version().await.unwrap(),
        applied,
        "the numbers repeat"
    );

    // The follower ends with the new master's websites, and not the lost ones.
    wait_until(
        Duration::from_secs(20),
        || {
            let index = follower.index();
            index.website("new-one.example").is_some()
                && index.website("new-two.example").is_some()
                && index.website("lost-one.example").is_none()
                && index.website("lost-two.example").is_none()
                && index.website("kept.example").is_some()
        },
        || {
            let index = follower.index();
            format!(
                "the follower kept another history: new {} {}, lost {} {}",
                index.website("new-one.example").is_some(),
                index.website("new-two.example").is_some(),
                index.website("lost-one.example").is_some(),
                index.website("lost-two.example").is_some(),
            )
        },
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_asks_the_sentinels_follows_the_master_without_haproxy() {
    let Pair {
        master,
        replica,
        sentinel,
        proxy,
    } = Pair::start();
    let mut config = RedisConfig {
        password: Some(replica.password.clone()),
        ..RedisConfig::sentinels(vec![format!("127.0.0.1:{}", sentinel.port)], "mymaster")
    };
    if let Some(sentinels) = &mut config.sentinel {
        sentinels.password = Some(sentinel.password.clone());
    }
    assert!(config.location().contains("`mymaster`"));
    let store = Arc::new(RedisStore::connect(config).await.unwrap());
    let follower = Follower::start(store.clone(), Duration::from_millis(250))
        .await
        .unwrap();
    let (acme, alice) = partner_and_user(store.as_ref(), "acme", "alice").await;
    // (Not confirmed by `WAIT`: the failover waits until the replica has it.)
    create_replicated(&store, &replica, (&acme, &alice), "first.example").await;
    fail_over(&sentinel, &replica, &proxy);
    // The first write after it meets the demoted master (READONLY), asks the
    // sentinels again and goes to the new one. (Until Sentinel has turned the old
    // master into a replica, it takes writes that the failover loses: the rendered
    // cluster's `min-replicas-to-write` refuses them there.)
    wait_until(
        Duration::from_secs(30),
        || master.role().is_ok_and(|r| r == "slave") && replica.online_replicas() == 1,
        || "the old master never rejoined as a replica".into(),
    )
    .unwrap();
    write_reaches(
        (&store, &follower),
        &replica,
        (&acme, &alice),
        "second.example",
    )
    .await;
}

/// A Redis server, a store reading it (for a follower) and one writing.
async fn reader_and_writer() -> (RedisServer, Arc<RedisStore>, RedisStore) {
    let server = RedisServer::start().unwrap();
    let config = RedisConfig {
        password: Some(server.password.clone()),
        ..RedisConfig::new(server.url())
    };
    let reader = Arc::new(RedisStore::connect(config.clone()).await.unwrap());
    let writer = RedisStore::connect(config).await.unwrap();
    (server, reader, writer)
}

/// A follower on one server, reading with `resync_every`, misses the message of a
/// write made while its feed reconnects; it must have the website within 10 s.
async fn missed_change_is_healed(resync_every: Duration, why: &str) {
    let (server, reader, writer) = reader_and_writer().await;
    let follower = Follower::start(reader, resync_every).await.unwrap();
    let (acme, alice) = partner_and_user(&writer, "acme", "alice").await;
    // Cut every subscriber off, then write at once: the reader's relay is still
    // reconnecting, so the message of this write never reaches it.
    server
        .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .unwrap();
    writer
        .create_website(&acme.name, &website("missed.example", &alice))
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(10),
        || follower.index().website("missed.example").is_some(),
        || format!("the follower never healed the missed change ({why})"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_heals_a_missed_change_message_by_its_periodic_resync() {
    // (Its feed's return reloads it too; the resync alone would.)
    missed_change_is_healed(Duration::from_millis(300), "periodic resync").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_reloads_as_soon_as_its_change_feed_is_back() {
    // A resync period far longer than the test: only the feed coming back can heal.
    missed_change_is_healed(Duration::from_secs(600), "its feed came back").await;
}

/// Under steady writes a change is usually published and not yet applied when the
/// follower's resync looks: that alone is no reason to read every website again. Only
/// an index still short of the version the store had a tick earlier is reloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_writes_do_not_make_every_resync_a_full_reload() {
    let (_server, reader, writer) = reader_and_writer().await;
    let (acme, alice) = partner_and_user(&writer, "acme", "alice").await;
    let resync_every = Duration::from_millis(100);
    let follower = Follower::start(reader, resync_every).await.unwrap();
    let writing = std::time::Instant::now();
    let mut written = 0;
    while writing.elapsed() < Duration::from_secs(3) {
        let domain = format!("steady{written}.example");
        writer
            .create_website(&acme.name, &website(&domain, &alice))
            .await
            .unwrap();
        written += 1;
    }
    let last = format!("steady{}.example", written - 1);
    wait_until(
        Duration::from_secs(10),
        || follower.index().website(&last).is_some(),
        || "the follower never caught up".to_owned(),
    )
    .unwrap();
    // About thirty ticks looked while the writes went on.
    let reloads = follower.freshness().reloads;
    assert!(
        reloads <= 3,
        "{reloads} full reloads for {written} writes in 3 s with a resync every {resync_every:?}"
    );
}
