//! The embedded backend passes the conformance suite and keeps its data across a restart.

use botgate_model::{Domain, PartnerName};
use botgate_store::{
    AccountStore, EmbeddedStore, StoreError, WebsiteLimits, WebsiteStore, conformance,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    conformance::run(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (version, snapshot, shop_revision) = {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        conformance::run(&store).await;
        let shop = Domain::parse("shop.example").unwrap();
        (
            store.version().await.unwrap(),
            store.snapshot().await.unwrap(),
            store.website(&shop).await.unwrap().unwrap().revision,
        )
    };
    let reopened = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(reopened.version().await.unwrap(), version);
    assert_eq!(reopened.snapshot().await.unwrap(), snapshot);
    let acme = PartnerName::parse("acme").unwrap();
    assert!(reopened.partner(&acme).await.unwrap().is_some());
    let shop = Domain::parse("shop.example").unwrap();
    assert_eq!(
        reopened.website(&shop).await.unwrap().unwrap().revision,
        shop_revision
    );
    // Revisions go on from where they were: a website written now is above them all.
    let owner = conformance::user(
        &reopened.partner(&acme).await.unwrap().unwrap(),
        "reopened-owner",
    );
    reopened.create_user(&owner).await.unwrap();
    let later = reopened
        .create_website(&acme, &conformance::website("later.example", &owner))
        .await
        .unwrap();
    assert!(later.revision > shop_revision);
}

#[test]
fn a_file_that_is_not_a_store_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("botgate.redb"), b"not a database").unwrap();
    let err = EmbeddedStore::open(dir.path()).err().expect("refused");
    assert!(!err.to_string().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_of_the_embedded_store_sees_every_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    conformance::follow(store).await;
}

/// Writes queued together commit together (one transaction per group); a refused write
/// in a group changes nothing and does not hold back the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_commits_and_refusals_stay_apart() {
    use botgate_model::{Website, WebsiteInput};
    use botgate_store::StoreError;
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let (acme, _alice) = conformance::partner_and_user(&store, "acme", "alice").await;
    let mut tasks = Vec::new();
    for i in 0..200 {
        let (store, partner) = (store.clone(), acme.name.clone());
        // Every domain is asked for twice: one create wins, the other is refused.
        let website = Website::create(WebsiteInput {
            domain: Some(format!("site-{}.example", i / 2)),
            user_id: Some("alice".into()),
            ip: Some(vec!["192.0.2.1".into()]),
            ..WebsiteInput::default()
        })
        .unwrap();
        tasks.push(tokio::spawn(async move {
            store.create_website(&partner, &website).await
        }));
    }
    let (mut created, mut refused) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => created += 1,
            Err(StoreError::Conflict(_)) => refused += 1,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!((created, refused), (100, 100));
    let snapshot = store.snapshot().await.unwrap();
    assert_eq!(snapshot.websites.len(), 100);
    // partner + user + one version per created website, no gaps, nothing for refusals.
    assert_eq!(snapshot.version, 2 + 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_website_record_is_reported_and_the_others_still_read() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let (acme, alice) = conformance::partner_and_user(&store, "acme", "alice").await;
        // The pages after the unreadable one are reached only through a cursor taken
        // past it.
        for domain in ["kept.example", "later.example", "more.example"] {
            let site = conformance::website(domain, &alice);
            store.create_website(&acme.name, &site).await.unwrap();
        }
    }
    // A record as a later release might write it.
    {
        let db = redb::Database::open(dir.path().join("botgate.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let websites = redb::TableDefinition::<&str, &[u8]>::new("websites");
            let mut table = txn.open_table(websites).unwrap();
            let record =
                br#"{"partner":"acme","revision":1,"website":{"domain":7,"user_id":"alice"}}"#;
            table.insert("later.example", &record[..]).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = std::sync::Arc::new(EmbeddedStore::open(dir.path()).unwrap());
    let snapshot = store.snapshot().await.unwrap();
    conformance::assert_left_out(
        &snapshot,
        &["kept.example", "more.example"],
        "later.example",
        "later.example",
    );
    let acme = botgate_model::PartnerName::parse("acme").unwrap();
    conformance::assert_listing_leaves_out(
        store.as_ref(),
        &acme,
        "alice",
        &["kept.example", "more.example"],
        "later.example",
    )
    .await;
    // A gateway starts on it, with every website it can read.
    let follower = botgate_store::Follower::start(store, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert!(follower.index().website("kept.example").is_some());
    assert!(follower.index().website("later.example").is_none());
    assert_eq!(follower.index().unreadable(), ["later.example"]);
}

/// A store whose counts of partners' holdings are missing or wrong (written before
/// them, or by an earlier release after a rollback) counts them again when it opens,
/// so the quotas hold from the first creation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holdings_are_counted_again_when_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    let acme = {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let (acme, alice) = conformance::partner_and_user(&store, "acme", "alice").await;
        for domain in ["one.example", "two.example"] {
            let site = conformance::website_holding(domain, &alice, &["https://hooks.example/a"]);
            store.create_website(&acme.name, &site).await.unwrap();
        }
        acme
    };
    // As an earlier release might leave it: counts that no longer hold.
    {
        let db = redb::Database::open(dir.path().join("botgate.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        let mut holdings = txn
            .open_table(redb::TableDefinition::<&str, u64>::new("holdings"))
            .unwrap();
        for key in ["acme\nusers", "acme\nwebsites", "acme\nheld callbacks"] {
            holdings.insert(key, 0).unwrap();
        }
        drop(holdings);
        txn.commit().unwrap();
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let bob = conformance::user(&acme, "bob");
    let refused = store.create_user_within(&bob, 1).await;
    assert!(
        matches!(refused, Err(StoreError::AtLimit(_))),
        "{refused:?}"
    );
    store.create_user_within(&bob, 2).await.unwrap();
    let three = conformance::website_holding("three.example", &bob, &["https://hooks.example/b"]);
    let limits = |websites, held_callbacks| WebsiteLimits {
        websites,
        held_callbacks,
    };
    let refused = store
        .create_website_within(&acme.name, &three, limits(2, 3))
        .await;
    assert!(
        matches!(refused, Err(StoreError::AtLimit(_))),
        "{refused:?}"
    );
    let refused = store
        .create_website_within(&acme.name, &three, limits(3, 2))
        .await;
    assert!(matches!(refused, Err(StoreError::Full(_))), "{refused:?}");
    store
        .create_website_within(&acme.name, &three, limits(3, 3))
        .await
        .unwrap();
}

/// A store a release that indexed the outbox by due time alone (one `deliveries_due`
/// table, one `deliveries_of_partner`) wrote to, after this one (a downgrade), is
/// indexed by partner afresh when it opens: every delivery is claimed, bounded and
/// finished, the one only the former release indexed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbox_of_a_former_release_is_indexed_by_partner_when_the_store_opens() {
    use botgate_store::{ClaimShares, OutboxStore};
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        for (id, due) in [("msg_b", 20), ("msg_a", 10), ("msg_c", 30)] {
            store
                .enqueue_delivery(&conformance::delivery("hoster", id, due), 3)
                .await
                .unwrap();
        }
    }
    // As the former release leaves it: its indexes of every delivery, and one it
    // queued itself, which this release's indexes do not know.
    {
        let db = redb::Database::open(dir.path().join("botgate.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        let old = conformance::delivery("hoster", "msg_old", 5);
        txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("deliveries"))
            .unwrap()
            .insert("msg_old", serde_json::to_vec(&old).unwrap().as_slice())
            .unwrap();
        let mut due = txn
            .open_table(redb::TableDefinition::<&str, ()>::new("deliveries_due"))
            .unwrap();
        let mut of_partner = txn
            .open_table(redb::TableDefinition::<&str, ()>::new(
                "deliveries_of_partner",
            ))
            .unwrap();
        for (id, at) in [("msg_old", 5), ("msg_a", 10), ("msg_b", 20), ("msg_c", 30)] {
            due.insert(format!("{at:020}:{id}").as_str(), ()).unwrap();
            of_partner
                .insert(format!("hoster\n{id}").as_str(), ())
                .unwrap();
        }
        drop((due, of_partner));
        txn.commit().unwrap();
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let claimed = store
        .claim_deliveries(25, 60_000, 10, &ClaimShares::unbounded())
        .await
        .unwrap();
    let ids: Vec<&str> = claimed.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        ["msg_old", "msg_a", "msg_b"],
        "the due ones, oldest due first"
    );
    let refused = store
        .enqueue_delivery(&conformance::delivery("hoster", "msg_d", 1), 4)
        .await;
    assert!(matches!(refused, Err(StoreError::Full(_))), "{refused:?}");
    for id in ["msg_old", "msg_a", "msg_b", "msg_c"] {
        store.finish_delivery(id).await.unwrap();
    }
    assert_eq!(store.deliveries().await.unwrap(), vec![]);
    drop(store);
    let db = redb::Database::open(dir.path().join("botgate.redb")).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let former = txn.open_table(redb::TableDefinition::<&str, ()>::new("deliveries_due"));
    assert!(
        matches!(former, Err(redb::TableError::TableDoesNotExist(_))),
        "the former index is removed"
    );
}

/// A delivery whose record cannot be read (damaged, or a later release's) is skipped by
/// a claim; the others are still delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_delivery_does_not_stop_the_claims() {
    use botgate_store::OutboxStore;
    let dir = tempfile::tempdir().unwrap();
    {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        for (id, due) in [("msg_bad", 1), ("msg_good", 2)] {
            store
                .enqueue_delivery(&conformance::delivery("hoster", id, due), 10)
                .await
                .unwrap();
        }
    }
    {
        let db = redb::Database::open(dir.path().join("botgate.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("deliveries"))
            .unwrap()
            .insert("msg_bad", br#"{"id":7}"#.as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(
        conformance::claimed_ids(&store, 100, 10).await,
        ["msg_good"]
    );
}

/// Whether a domain has another partner's websites under it is read from each
/// partner's counts under it, counted again when the store opens: a store whose counts
/// are gone (written by a release without them) still refuses a domain above another
/// partner's website, and lets a partner create one above its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_websites_under_a_domain_are_counted_again_when_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    let (acme, globex) = {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let (acme, alice) = conformance::partner_and_user(&store, "acme", "alice").await;
        let (globex, gina) = conformance::partner_and_user(&store, "globex", "gina").await;
        for domain in ["a.shop.example", "b.shop.example", "deep.c.own.example"] {
            let site = conformance::website(domain, &alice);
            store.create_website(&acme.name, &site).await.unwrap();
        }
        let site = conformance::website("z.shop.example", &gina);
        store.create_website(&globex.name, &site).await.unwrap();
        (acme, globex)
    };
    {
        let db = redb::Database::open(dir.path().join("botgate.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        txn.delete_table(redb::TableDefinition::<&str, u64>::new("domain_tree_below"))
            .unwrap();
        txn.commit().unwrap();
    }
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let alice = conformance::user(&acme, "alice");
    let refused = store
        .create_website(&acme.name, &conformance::website("shop.example", &alice))
        .await;
    assert!(
        matches!(
            &refused,
            Err(StoreError::HostTaken {
                clash: botgate_store::HostClash::Above,
                ..
            })
        ),
        "{refused:?}"
    );
    for domain in ["own.example", "c.own.example"] {
        store
            .create_website(&acme.name, &conformance::website(domain, &alice))
            .await
            .unwrap();
    }
    // Once globex's website is gone, nothing under `shop.example` is another's.
    let z = botgate_model::Domain::parse("z.shop.example").unwrap();
    let revision = store.website(&z).await.unwrap().unwrap().revision;
    store.delete_website(&z, Some(revision)).await.unwrap();
    drop(globex);
    store
        .create_website(&acme.name, &conformance::website("shop.example", &alice))
        .await
        .unwrap();
}
