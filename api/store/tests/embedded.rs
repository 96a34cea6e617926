//! The embedded backend passes the conformance suite and keeps its data across a restart.

use botgate_model::{Domain, PartnerName};
use botgate_store::{EmbeddedStore, Store, conformance};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    conformance::run(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_store_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (version, snapshot) = {
        let store = EmbeddedStore::open(dir.path()).unwrap();
        conformance::run(&store).await;
        (
            store.version().await.unwrap(),
            store.snapshot().await.unwrap(),
        )
    };
    let reopened = EmbeddedStore::open(dir.path()).unwrap();
    assert_eq!(reopened.version().await.unwrap(), version);
    assert_eq!(reopened.snapshot().await.unwrap(), snapshot);
    let acme = PartnerName::parse("acme").unwrap();
    assert!(reopened.partner(&acme).await.unwrap().is_some());
    let shop = Domain::parse("shop.example").unwrap();
    assert_eq!(reopened.website(&shop).await.unwrap().unwrap().revision, 2);
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
