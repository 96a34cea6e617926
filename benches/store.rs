//! The store's load benchmark (issue 3's targets): website creates per second with
//! concurrent writers, website get latency (p50/p99), and loading a snapshot of
//! 100,000 websites into the in-memory index (time and resident memory), on the
//! embedded store and on Redis (a real `redis-server` started on a free port).
//!
//! Run: `cargo bench -p botgate-benches --bench store` (add `-- embedded` or
//! `-- redis` for one backend). Prints one table; not run by CI.

use anyhow::Result;
use botgate_model::{Domain, PartnerName, User, Website, WebsiteInput};
use botgate_store::{
    AccountStore, AnyStore, EmbeddedStore, Follower, PartnerRecord, RedisConfig, RedisStore,
    WebsiteStore,
};
use botgate_tests::servers::RedisServer;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Websites created in the throughput run.
const CREATES: usize = 20_000;
/// Writers at once (API requests in flight).
const WRITERS: usize = 64;
/// Gets timed one by one for the latency percentiles.
const GETS: usize = 20_000;
/// Websites in the snapshot the index loads.
const SNAPSHOT: usize = 100_000;

fn website(i: usize, user: &User) -> Website {
    Website::create(WebsiteInput {
        domain: Some(format!("site-{i:07}.example")),
        user_id: Some(user.id.as_str().into()),
        subdomain: Some(vec!["www".into()]),
        ip: Some(vec!["192.0.2.10".into(), "2001:db8::10".into()]),
        tag: Some(vec!["dc-east".into()]),
        ..WebsiteInput::default()
    })
    .expect("a valid website")
}

fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

async fn setup(store: &AnyStore) -> Result<(PartnerName, User)> {
    let partner = PartnerRecord {
        name: PartnerName::parse("bench")?,
        key_sha256: "0".repeat(64),
        webhook_secret: "whsec_bench".into(),
        frame_origins: Vec::new(),
    };
    store.put_partner(&partner).await?;
    let user = User::create("owner", partner.name.clone(), "bgu_bench".into(), vec![])?;
    store.create_user(&user).await?;
    Ok((partner.name, user))
}

/// Creates websites `from..to` with `WRITERS` concurrent tasks; the elapsed time.
async fn create_range(
    store: &Arc<AnyStore>,
    partner: &PartnerName,
    user: &User,
    from: usize,
    to: usize,
) -> Result<Duration> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(from));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let (store, next, partner, user) =
            (store.clone(), next.clone(), partner.clone(), user.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= to {
                    return Ok::<_, anyhow::Error>(());
                }
                store.create_website(&partner, &website(i, &user)).await?;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(started.elapsed())
}

async fn run(name: &str, store: AnyStore) -> Result<()> {
    let store = Arc::new(store);
    let (partner, user) = setup(&store).await?;

    let elapsed = create_range(&store, &partner, &user, 0, CREATES).await?;
    let creates_per_s = CREATES as f64 / elapsed.as_secs_f64();

    let mut latencies = Vec::with_capacity(GETS);
    for i in 0..GETS {
        let domain = Domain::parse(&format!("site-{:07}.example", (i * 7919) % CREATES))?;
        let started = Instant::now();
        let found = store.website(&domain).await?;
        latencies.push(started.elapsed());
        assert!(found.is_some());
    }
    latencies.sort();
    let p50 = latencies[GETS / 2];
    let p99 = latencies[GETS * 99 / 100];

    create_range(&store, &partner, &user, CREATES, SNAPSHOT).await?;
    let before = resident_kib();
    let started = Instant::now();
    let follower = Follower::start(store.clone(), Duration::from_secs(3600)).await?;
    let load = started.elapsed();
    let index = follower.index();
    assert_eq!(index.len(), SNAPSHOT);
    assert!(index.by_host("www.site-0099999.example").is_some());
    let grown_mib = resident_kib().saturating_sub(before) as f64 / 1024.0;

    println!(
        "| {name:<8} | {creates_per_s:>10.0} | {:>8.1} | {:>8.1} | {:>10.2} | {grown_mib:>10.0} |",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        load.as_secs_f64(),
    );
    Ok(())
}

fn main() -> Result<()> {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "{CREATES} creates with {WRITERS} writers, {GETS} gets, a {SNAPSHOT}-website snapshot\n"
    );
    println!("| store    | creates/s  | get p50 µs | get p99 µs | snapshot s | index MiB |");
    println!("|----------|-----------:|---------:|---------:|-----------:|-----------:|");
    if wanted("embedded") {
        let dir = tempfile::tempdir()?;
        runtime.block_on(run(
            "embedded",
            AnyStore::Embedded(EmbeddedStore::open(dir.path())?),
        ))?;
    }
    if wanted("redis") {
        let server = RedisServer::start()?;
        let config = RedisConfig {
            password: Some(server.password.clone()),
            ..RedisConfig::new(server.url())
        };
        runtime.block_on(async {
            run("redis", AnyStore::Redis(RedisStore::connect(config).await?)).await
        })?;
    }
    Ok(())
}
