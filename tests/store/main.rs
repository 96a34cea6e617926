//! The store's backends against real servers: the Redis backend passes the same
//! conformance suite as the embedded one, against a real `redis-server` with a password.

use botgate_store::{
    AccountStore, RedisConfig, RedisStore, SharedState, StoreError, WebsiteStore, conformance,
};
use botgate_tests::servers::RedisServer;

mod failover;
mod retries;

fn config(server: &RedisServer) -> RedisConfig {
    RedisConfig {
        password: Some(server.password.clone()),
        ..RedisConfig::new(server.url())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_conforms() {
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    conformance::run(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_refused_at_connect() {
    let server = RedisServer::start().unwrap();
    let wrong = RedisConfig {
        password: Some("wrong".into()),
        ..RedisConfig::new(server.url())
    };
    let err = RedisStore::connect(wrong).await.err().expect("refused");
    // The context says what was being done; the cause is Redis's own refusal.
    let reported = botgate_model::report::Report(&err).to_string();
    assert!(
        matches!(err, StoreError::Backend { cause: Some(_), .. }),
        "{reported}"
    );
    assert!(reported.contains("connecting to Redis: "), "{reported}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_on_one_redis_see_each_others_changes() {
    let server = RedisServer::start().unwrap();
    let one = RedisStore::connect(config(&server)).await.unwrap();
    let two = RedisStore::connect(config(&server)).await.unwrap();
    let mut feed = two.subscribe();
    let partner = botgate_store::PartnerRecord {
        name: botgate_model::PartnerName::parse("acme").unwrap(),
        key_sha256: "0".repeat(64),
        webhook_secret: "whsec_x".into(),
        frame_origins: Vec::new(),
    };
    one.put_partner(&partner).await.unwrap();
    let change = tokio::time::timeout(std::time::Duration::from_secs(5), feed.recv())
        .await
        .expect("the other gateway hears of the change within 5 s")
        .unwrap();
    assert_eq!(change.version, 1);
    assert_eq!(two.partner(&partner.name).await.unwrap(), Some(partner));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_of_the_redis_store_sees_every_change() {
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    conformance::follow(std::sync::Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_not_held_behind_a_write_waiting_for_its_replicas() {
    // A lone server and a store that waits for a replica: each write's `WAIT` runs to
    // its timeout. Reads meanwhile go on, on the shared connection.
    let server = RedisServer::start().unwrap();
    let store = std::sync::Arc::new(
        RedisStore::connect(RedisConfig {
            wait_replicas: 1,
            wait_timeout: std::time::Duration::from_secs(3),
            ..config(&server)
        })
        .await
        .unwrap(),
    );
    let writer = store.clone();
    let write = tokio::spawn(async move { writer.shared_secret("slow", "x").await });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    for _ in 0..20 {
        store.version().await.unwrap();
    }
    assert!(
        !write.is_finished(),
        "the reads waited for the write's WAIT to end"
    );
    let unconfirmed = write.await.unwrap().unwrap_err();
    let reported = botgate_model::report::Report(&unconfirmed).to_string();
    assert!(reported.contains("not confirmed"), "{reported}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_website_record_is_left_out_and_the_index_keeps_what_it_had() {
    use botgate_store::Follower;
    use botgate_tests::servers::Resp;
    use std::time::Duration;
    let server = RedisServer::start().unwrap();
    let store = std::sync::Arc::new(RedisStore::connect(config(&server)).await.unwrap());
    let (acme, alice) = conformance::partner_and_user(store.as_ref(), "acme", "alice").await;
    let damaged = conformance::website("damaged.example", &alice);
    store
        .create_website(&acme.name, &conformance::website("kept.example", &alice))
        .await
        .unwrap();
    let damaged_at = store
        .create_website(&acme.name, &damaged)
        .await
        .unwrap()
        .revision;
    let follower = Follower::start(store.clone(), Duration::from_millis(200))
        .await
        .unwrap();
    let caught_up = |what: &'static str| {
        let (store, follower) = (store.clone(), &follower);
        async move {
            let version = store.version().await.unwrap();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while follower.index().version != version {
                assert!(tokio::time::Instant::now() < deadline, "no {what}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            follower.index()
        }
    };
    // A record as a later release might write it, announced on the change feed.
    let key = "botgate:website:damaged.example";
    let rewrite = "redis.call('HSET', KEYS[1], 'website', ARGV[1]) \
        local v = redis.call('INCR', KEYS[2]) \
        redis.call('PUBLISH', KEYS[3], '{\"version\":' .. v .. \
        ',\"what\":{\"kind\":\"website\",\"domain\":\"damaged.example\"}}')";
    let Resp::Bulk(Some(stored)) = server.command(&["HGET", key, "website"]).unwrap() else {
        panic!("no stored website");
    };
    let mut later: serde_json::Value = serde_json::from_str(&stored).unwrap();
    later["status"] = "archived".into();
    let later = later.to_string();
    server
        .command(&[
            "EVAL",
            rewrite,
            "3",
            key,
            "botgate:version",
            "botgate:changes",
            &later,
        ])
        .unwrap();
    // The gateway keeps the website's last readable settings and names it.
    let index = caught_up("change applied").await;
    assert_eq!(index.unreadable(), ["damaged.example"]);
    assert!(index.website("damaged.example").is_some());
    assert!(index.by_host("kept.example").is_some());
    let snapshot = store.snapshot().await.unwrap();
    conformance::assert_left_out(&snapshot, &["kept.example"], "damaged.example", key);
    conformance::assert_listing_leaves_out(
        store.as_ref(),
        &acme.name,
        "alice",
        &["kept.example"],
        "damaged.example",
    )
    .await;
    // A full reload (the resync finds another version) does the same.
    server.command(&["INCR", "botgate:version"]).unwrap();
    let index = caught_up("reload").await;
    assert_eq!(index.unreadable(), ["damaged.example"]);
    assert!(index.website("damaged.example").is_some());
    // A gateway starting now has every other website, and not that one.
    let starting = Follower::start(store.clone(), Duration::from_secs(60))
        .await
        .unwrap();
    assert!(starting.index().website("damaged.example").is_none());
    assert!(starting.index().website("kept.example").is_some());
    assert_eq!(starting.index().unreadable(), ["damaged.example"]);
    // Written again in a form this release reads, it is no longer reported.
    store.update_website(&damaged, damaged_at).await.unwrap();
    let index = caught_up("update applied").await;
    assert!(index.unreadable().is_empty());
    assert!(index.website("damaged.example").is_some());
}

/// A delivery removed by hand (not finished) leaves its id in the partner's set of
/// waiting webhooks; at the bound such ids are dropped before the partner is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partner_is_not_refused_for_deliveries_removed_by_hand() {
    use botgate_store::OutboxStore;
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    for id in ["msg_h1", "msg_h2"] {
        store
            .enqueue_delivery(&conformance::delivery("hoster", id, 1), 2)
            .await
            .unwrap();
    }
    server.command(&["DEL", "botgate:delivery:msg_h1"]).unwrap();
    let hoster = botgate_model::PartnerName::parse("hoster").unwrap();
    assert_eq!(
        store.waiting_deliveries(&hoster, 2).await.unwrap(),
        1,
        "counted without the removed one"
    );
    store
        .enqueue_delivery(&conformance::delivery("hoster", "msg_h3", 1), 2)
        .await
        .expect("the removed one's place is free");
    let refused = store
        .enqueue_delivery(&conformance::delivery("hoster", "msg_h4", 1), 2)
        .await;
    assert!(matches!(refused, Err(StoreError::Full(_))), "{refused:?}");
}

/// Deliveries a former release indexed (one `deliveries` sorted set, a `deliveries-of:`
/// set per partner), as gateways of that release leave them during an upgrade, are
/// claimed, bounded, listed and finished by this one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_a_former_release_indexed_are_taken_over() {
    use botgate_store::{ClaimShares, OutboxStore};
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    store
        .enqueue_delivery(&conformance::delivery("hoster", "msg_new", 30), 3)
        .await
        .unwrap();
    for (id, due) in [("msg_old1", 10), ("msg_old2", 20)] {
        let json = serde_json::to_string(&conformance::delivery("hoster", id, due)).unwrap();
        let key = format!("botgate:delivery:{id}");
        server.command(&["SET", &key, &json]).unwrap();
        let due = due.to_string();
        server
            .command(&["ZADD", "botgate:deliveries", &due, id])
            .unwrap();
        server
            .command(&["SADD", "botgate:deliveries-of:hoster", id])
            .unwrap();
    }
    let listed: Vec<String> = store
        .deliveries()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(listed, ["msg_new", "msg_old1", "msg_old2"], "listed before");
    // One the former release left unreadable does not stop the others.
    server
        .command(&["SET", "botgate:delivery:msg_bad", "{not json"])
        .unwrap();
    server
        .command(&["ZADD", "botgate:deliveries", "15", "msg_bad"])
        .unwrap();
    let claimed = store
        .claim_deliveries(100, 60_000, 2, &ClaimShares::unbounded())
        .await
        .unwrap();
    let ids: Vec<&str> = claimed.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["msg_old1", "msg_old2"], "oldest due first");
    for key in ["botgate:deliveries", "botgate:deliveries-of:hoster"] {
        let exists = server.command(&["EXISTS", key]).unwrap();
        assert!(
            matches!(exists, botgate_tests::servers::Resp::Integer(0)),
            "{key} is gone"
        );
    }
    // Counted against the partner's bound now.
    let refused = store
        .enqueue_delivery(&conformance::delivery("hoster", "msg_more", 1), 3)
        .await;
    assert!(matches!(refused, Err(StoreError::Full(_))), "{refused:?}");
    for id in ["msg_new", "msg_old1", "msg_old2"] {
        store.finish_delivery(id).await.unwrap();
    }
    server
        .command(&["DEL", "botgate:delivery:msg_bad"])
        .unwrap();
    assert_eq!(store.deliveries().await.unwrap(), vec![]);
}

/// A delivery whose record cannot be read (damaged, or a later release's) is skipped by
/// a claim; the others are still delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_delivery_does_not_stop_the_claims() {
    use botgate_store::OutboxStore;
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    for (id, due) in [("msg_bad", 1), ("msg_good", 2)] {
        store
            .enqueue_delivery(&conformance::delivery("hoster", id, due), 10)
            .await
            .unwrap();
    }
    server
        .command(&["SET", "botgate:delivery:msg_bad", "{\"id\":7}"])
        .unwrap();
    assert_eq!(
        conformance::claimed_ids(&store, 100, 10).await,
        ["msg_good"]
    );
}

/// A website a release without the index of held callbacks wrote (its callbacks
/// released, or the website deleted) leaves members behind in
/// `held-callbacks:{partner}`; they are told apart by the revision they name and do not
/// count once the partner reaches its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_callbacks_a_former_release_released_do_not_count() {
    use botgate_store::WebsiteLimits;
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    let (hoster, alice) = conformance::partner_and_user(&store, "hoster", "alice").await;
    let limits = WebsiteLimits {
        websites: usize::MAX,
        held_callbacks: 3,
    };
    let hooks = ["https://hooks.example/a", "https://hooks.example/b"];
    for domain in ["one.example", "two.example"] {
        let site = conformance::website_holding(domain, &alice, &hooks[..1]);
        store
            .create_website_within(&hoster.name, &site, limits)
            .await
            .unwrap();
    }
    let two = conformance::website_holding("three.example", &alice, &hooks);
    let refused = store
        .create_website_within(&hoster.name, &two, limits)
        .await;
    assert!(matches!(refused, Err(StoreError::Full(_))), "{refused:?}");
    // As a former release leaves it: one website rewritten (its callbacks sent),
    // the other deleted, neither member removed.
    server
        .command(&["HSET", "botgate:website:one.example", "revision", "999"])
        .unwrap();
    server
        .command(&["DEL", "botgate:website:two.example"])
        .unwrap();
    // The members are looked over at most once a minute a partner: the refusal above
    // did; as a minute later.
    server
        .command(&["DEL", "botgate:held-callbacks-checked:hoster"])
        .unwrap();
    store
        .create_website_within(&hoster.name, &two, limits)
        .await
        .expect("members of websites written since do not count");
    let members = server
        .command(&["ZCARD", "botgate:held-callbacks:hoster"])
        .unwrap();
    assert!(
        matches!(members, botgate_tests::servers::Resp::Integer(2)),
        "{members:?}"
    );
}

/// A user's websites are deleted a batch a script, so that Redis answers every other
/// client between them: a user of more websites than a batch takes several scripts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_websites_are_deleted_a_batch_a_script() {
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    let (hoster, many) = conformance::partner_and_user(&store, "hoster", "many").await;
    // Four batches: 50, 50, 50 and the last one with the user.
    let count = 3 * botgate_store::DELETED_PER_WRITE + 1;
    for n in 0..count {
        let site = conformance::website(&format!("site{n}.example"), &many);
        store.create_website(&hoster.name, &site).await.unwrap();
    }
    let scripts = || server.calls("evalsha");
    let before = scripts();
    let deleted = store.delete_user(&hoster.name, &many.id).await.unwrap();
    assert_eq!(deleted.len(), count);
    let ran = scripts() - before;
    assert!(ran >= 4, "{ran} scripts deleted {count} websites");
}

/// Redis keeps what a script wrote before it failed: a batch of a user's websites with
/// one record that cannot be read is refused whole, before its first write, and no
/// website is deleted without its change being published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_batch_with_an_unreadable_record_changes_nothing() {
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    let (hoster, owner) = conformance::partner_and_user(&store, "hoster", "owner").await;
    for name in ["a-first.example", "b-damaged.example", "c-last.example"] {
        let site = conformance::website(name, &owner);
        store.create_website(&hoster.name, &site).await.unwrap();
    }
    // Not JSON; JSON whose fields the deletion reads are of other types.
    for damaged in ["{not json", r#"{"domain": 5, "subdomain": "www"}"#] {
        server
            .command(&[
                "HSET",
                "botgate:website:b-damaged.example",
                "website",
                damaged,
            ])
            .unwrap();
        let version = store.version().await.unwrap();
        let refused = store.delete_user(&hoster.name, &owner.id).await;
        assert!(
            matches!(&refused, Err(StoreError::Corrupt { key, .. }) if key.contains("b-damaged.example")),
            "{damaged}: {refused:?}"
        );
        assert_eq!(store.version().await.unwrap(), version, "nothing changed");
        for name in ["a-first.example", "c-last.example"] {
            let domain = botgate_model::Domain::parse(name).unwrap();
            assert!(
                store.website(&domain).await.unwrap().is_some(),
                "{name} is kept"
            );
        }
        assert!(store.user(&hoster.name, &owner.id).await.unwrap().is_some());
    }
}

/// Creating a domain with many of its partner's websites under it reads two range
/// counts, not every website under it, but for one walk a minute that mends the
/// partner's tree (a release without these trees may have written since: a tree short
/// of a website, or holding one deleted); another partner's website under the domain
/// keeps it refused, however the partner's tree was left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_above_many_websites_is_checked_without_reading_them_all() {
    use botgate_store::HostClash;
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    let (acme, alice) = conformance::partner_and_user(&store, "acme", "alice").await;
    let (globex, gina) = conformance::partner_and_user(&store, "globex", "gina").await;
    for n in 0..200 {
        let site = conformance::website(&format!("s{n}.shop.example"), &alice);
        store.create_website(&acme.name, &site).await.unwrap();
    }
    let walks = || server.calls("zrangebylex");
    let a_new_minute = || {
        server
            .command(&["DEL", "botgate:domain-tree-walked:acme:example.shop"])
            .unwrap();
    };
    let parent = conformance::website("shop.example", &alice);
    let shop = botgate_model::Domain::parse("shop.example").unwrap();
    let create = || store.create_website(&acme.name, &parent);
    let delete = || store.delete_website(&shop, None);
    let refused_above = |result: &Result<botgate_store::WebsiteRecord, StoreError>| {
        matches!(
            result,
            Err(StoreError::HostTaken {
                clash: HostClash::Above,
                ..
            })
        )
    };
    let before = walks();
    for _ in 0..5 {
        create().await.unwrap();
        delete().await.unwrap();
    }
    assert!(
        walks() <= before + 2,
        "one walk a minute: {}",
        walks() - before
    );
    // A tree short of a website (created by a release without the trees): mended by
    // the first look in a minute.
    server
        .command(&["DEL", "botgate:domain-tree-of:acme"])
        .unwrap();
    a_new_minute();
    create().await.unwrap();
    delete().await.unwrap();
    // A tree holding a website deleted since (by such a release), and another
    // partner's website under the domain: refused all the same.
    server
        .command(&[
            "ZADD",
            "botgate:domain-tree-of:acme",
            "0",
            "example.shop.ghost",
        ])
        .unwrap();
    let site = conformance::website("zz.shop.example", &gina);
    store.create_website(&globex.name, &site).await.unwrap();
    a_new_minute();
    let walked = walks();
    for _ in 0..5 {
        let refused = create().await;
        assert!(refused_above(&refused), "{refused:?}");
    }
    assert!(
        walks() <= walked + 2,
        "one walk a minute: {}",
        walks() - walked
    );
}

/// Traffic counts are kept for the website's owner as its record's `user` field names
/// it, without the website's JSON (every gateway adds counts for every website it
/// served every few seconds); a record a former release wrote without the field is
/// read once and given it, and another user's counts are still not kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_counts_find_the_owner_without_reading_the_website() {
    use botgate_store::{Counts, Owner, Resolution, TrafficStore};
    use botgate_tests::servers::Resp;
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    let (acme, alice) = conformance::partner_and_user(&store, "acme", "alice").await;
    let bob = conformance::user(&acme, "bob");
    let site = botgate_model::Domain::parse("counted.example").unwrap();
    store
        .create_website(&acme.name, &conformance::website(site.as_str(), &alice))
        .await
        .unwrap();
    let key = "botgate:website:counted.example";
    let user_field = || server.command(&["HGET", key, "user"]).unwrap();
    assert_eq!(user_field(), Resp::Bulk(Some("alice".into())));
    let minute = 29_916_667;
    let add = |user| {
        let counts = Counts([("c:humans:grant".to_owned(), 1)].into_iter().collect());
        let store = &store;
        let partner = &acme.name;
        let site = &site;
        async move {
            let owner = Owner { partner, user };
            store
                .add_traffic(site, owner, minute, &counts, &[])
                .await
                .unwrap();
        }
    };
    let counted = || async {
        let buckets = store
            .traffic(&site, Resolution::Minute, minute, minute)
            .await
            .unwrap();
        buckets
            .iter()
            .map(|counts| counts.0.get("c:humans:grant").copied().unwrap_or(0))
            .sum::<u64>()
    };
    let hgets = || server.calls("hget");
    let before = hgets();
    add(&alice.id).await;
    assert_eq!(hgets(), before, "the website's JSON was not read");
    assert_eq!(counted().await, 1);
    // The JSON is not what names the owner: counted even when it cannot be read.
    let Resp::Bulk(Some(json)) = server.command(&["HGET", key, "website"]).unwrap() else {
        panic!("no website");
    };
    server
        .command(&["HSET", key, "website", "{not json"])
        .unwrap();
    add(&alice.id).await;
    assert_eq!(counted().await, 2);
    // As a former release wrote it: no `user`.
    server.command(&["HSET", key, "website", &json]).unwrap();
    server.command(&["HDEL", key, "user"]).unwrap();
    add(&alice.id).await;
    assert_eq!(counted().await, 3);
    assert_eq!(user_field(), Resp::Bulk(Some("alice".into())), "given back");
    add(&bob.id).await;
    assert_eq!(counted().await, 3, "another user's counts are not kept");
}
