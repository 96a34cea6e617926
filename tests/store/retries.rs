//! A write whose reply is lost with its connection is retried on a new one; the retry
//! gets the first run's answer instead of running again (no "already exists" for a
//! website it created itself, no version bumped twice).

use super::config;
use botgate_store::conformance::{partner_and_user, website};
use botgate_store::{RedisConfig, RedisStore, StoreError, WebsiteStore};
use botgate_tests::servers::RedisServer;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP proxy in front of Redis that, once armed, forwards the next script call
/// (`EVALSHA`) to Redis and then closes the connection without its reply.
struct ReplyDropper {
    address: std::net::SocketAddr,
    armed: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

impl ReplyDropper {
    async fn start(redis_port: u16) -> ReplyDropper {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let armed = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicBool::new(false));
        let (arm, drop_flag) = (armed.clone(), dropped.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(("127.0.0.1", redis_port)).await.unwrap();
                tokio::spawn(pump(client, server, arm.clone(), drop_flag.clone()));
            }
        });
        ReplyDropper {
            address,
            armed,
            dropped,
        }
    }

    fn url(&self) -> String {
        format!("redis://{}", self.address)
    }
}

async fn pump(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Set before the script call reaches Redis, so its reply is never passed on.
    let cut = Arc::new(AtomicBool::new(false));
    let cut_here = cut.clone();
    let upstream = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let call = buffer[..n].windows(7).any(|w| w == b"EVALSHA");
            if call && armed.swap(false, Ordering::SeqCst) {
                cut_here.store(true, Ordering::SeqCst);
            }
            if server_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    let downstream = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if cut.load(Ordering::SeqCst) {
                dropped.store(true, Ordering::SeqCst);
                return;
            }
            if client_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    // Either side ending closes both.
    tokio::select! {
        _ = upstream => {}
        _ = downstream => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_retried_after_its_reply_was_lost_is_not_answered_as_a_conflict() {
    let server = RedisServer::start().unwrap();
    let proxy = ReplyDropper::start(server.port).await;
    let store = RedisStore::connect(RedisConfig {
        url: proxy.url(),
        ..config(&server)
    })
    .await
    .unwrap();
    let direct = RedisStore::connect(config(&server)).await.unwrap();
    let (acme, alice) = partner_and_user(&store, "acme", "alice").await;
    // A first website loads the script: the next create is an EVALSHA that runs.
    store
        .create_website(&acme.name, &website("first.example", &alice))
        .await
        .unwrap();
    let before = direct.version().await.unwrap();

    proxy.armed.store(true, Ordering::SeqCst);
    let created = store
        .create_website(&acme.name, &website("retried.example", &alice))
        .await
        .expect("the retried create answers as the first run did");
    assert!(proxy.dropped.load(Ordering::SeqCst), "no reply was dropped");
    botgate_store::conformance::assert_as_stored(&direct, &created).await;
    // Applied once: one change, one version.
    assert_eq!(direct.version().await.unwrap(), before + 1);
    // A real second create is still refused, and says what exists.
    let again = store
        .create_website(&acme.name, &website("retried.example", &alice))
        .await
        .unwrap_err();
    assert!(
        matches!(&again, StoreError::Conflict(what) if what == "website retried.example"),
        "{again:?}"
    );
    assert!(
        direct
            .website(&botgate_model::Domain::parse("retried.example").unwrap())
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_lived_values_keep_no_reply_per_write() {
    use botgate_store::SharedState;
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    let until = botgate_store::now_ms() + 60_000;
    // As a flood of challenge answers counts them: no key is left behind per call.
    for _ in 0..50 {
        store.count("answers:203.0.113.7", until).await.unwrap();
    }
    store
        .lease("issue:a.example", "gw-1", 0, until)
        .await
        .unwrap();
    let kept = server.command(&["KEYS", "botgate:op:*"]).unwrap();
    assert_eq!(kept, botgate_tests::servers::Resp::Array(vec![]));
}

/// Traffic counts are added every few seconds for every website a gateway served: the
/// reply each flush keeps for a retry lives a minute, not the ten minutes a record
/// change's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traffic_flush_keeps_its_reply_briefly() {
    use botgate_store::{Owner, TrafficStore};
    let server = RedisServer::start().unwrap();
    let store = RedisStore::connect(config(&server)).await.unwrap();
    let (acme, alice) = partner_and_user(&store, "acme", "alice").await;
    store
        .create_website(&acme.name, &website("counted.example", &alice))
        .await
        .unwrap();
    let op_keys = || match server.command(&["KEYS", "botgate:op:*"]).unwrap() {
        botgate_tests::servers::Resp::Array(keys) => keys
            .into_iter()
            .map(|key| match key {
                botgate_tests::servers::Resp::Bulk(Some(key)) => key,
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    let before = op_keys();
    let counts = botgate_store::Counts([("c:humans:grant".to_owned(), 3)].into_iter().collect());
    let owner = Owner {
        partner: &acme.name,
        user: &alice.id,
    };
    let site = botgate_model::Domain::parse("counted.example").unwrap();
    store
        .add_traffic(&site, owner, 29_916_667, &counts, &[])
        .await
        .unwrap();
    let flushed: Vec<String> = op_keys()
        .into_iter()
        .filter(|key| !before.contains(key))
        .collect();
    assert_eq!(flushed.len(), 1, "{flushed:?}");
    let ttl = server.command(&["PTTL", &flushed[0]]).unwrap();
    assert!(
        matches!(ttl, botgate_tests::servers::Resp::Integer(ms) if ms > 0 && ms <= 60_000),
        "{ttl:?}"
    );
    for key in before {
        let ttl = server.command(&["PTTL", &key]).unwrap();
        assert!(
            matches!(ttl, botgate_tests::servers::Resp::Integer(ms) if ms > 60_000),
            "a record change keeps its reply longer: {ttl:?}"
        );
    }
}
