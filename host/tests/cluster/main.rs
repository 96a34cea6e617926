//! The cluster deployment with the real programs: `botgate cluster render` writes each
//! server's files, and redis-server, redis-sentinel and haproxy run with them as they
//! are. Three servers share the machine on the loopback addresses 127.0.0.2–4; the
//! description moves the ports and places that one machine cannot share, and shortens
//! HAProxy's check (3 s in production) to 200 ms. `fleet` runs several gateways on one
//! store for the rule components they share.

use anyhow::{Context, Result, bail};
use botgate_host::cluster::Ports;
use botgate_tests::servers::{
    Resp, ServerGuard, check_haproxy, free_port, info_field, resp_at, wait_until,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod failover;
mod failover_script;
mod fleet;
mod runbook;
mod sentinel;
mod system;

fn botgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_botgate"))
}

/// Creates the user `owner` through a partner's API client.
fn create_owner(partner: &botgate_tests::http::Client) {
    let created = partner.post_form("/v1.0/user", &[("id", "owner")]).unwrap();
    assert_eq!(created.status, 201, "{}", created.text);
}

/// A visitor's GET of `host`'s `/`, as a browser, through `gateway`: its status.
fn visit_host(gateway: &botgate_tests::servers::Gateway, host: &str) -> Result<u16> {
    visit_path(gateway, host, "/")
}

/// A visitor's GET of `host`'s `path`, as a browser, through `gateway`: its status.
fn visit_path(gateway: &botgate_tests::servers::Gateway, host: &str, path: &str) -> Result<u16> {
    use botgate_tests::visitor::{Outgoing, Visit, send};
    let answer = send(
        gateway.http,
        &Visit::default(),
        Outgoing::get(host, path).browser(),
    )?;
    Ok(answer.status)
}

/// Waits until `gateway` serves `host` (200).
fn wait_served(gateway: &botgate_tests::servers::Gateway, host: &str) {
    wait_until(
        Duration::from_secs(10),
        || visit_host(gateway, host).is_ok_and(|status| status == 200),
        || format!("a gateway never served {host}; log:\n{}", gateway.log()),
    )
    .unwrap();
}

/// Visitors that GET `visited.example` through gateways, one thread each, until
/// stopped (or dropped); every answer but a 200 is a failure.
#[derive(Default)]
struct Visitors {
    running: std::sync::atomic::AtomicBool,
    failed: std::sync::Mutex<Vec<String>>,
    visits: std::sync::atomic::AtomicUsize,
}

impl Visitors {
    /// Starts one visitor on each of `gateways` in `scope`, `pause` between visits.
    fn start<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        gateways: &[&'env botgate_tests::servers::Gateway],
        pause: Duration,
    ) {
        use std::sync::atomic::Ordering::Relaxed;
        self.running.store(true, Relaxed);
        for gateway in gateways {
            let gateway: &'env botgate_tests::servers::Gateway = gateway;
            scope.spawn(move || {
                while self.running.load(Relaxed) {
                    match visit_host(gateway, "visited.example") {
                        Ok(200) => {}
                        other => self.failed.lock().unwrap().push(format!("{other:?}")),
                    }
                    self.visits.fetch_add(1, Relaxed);
                    std::thread::sleep(pause);
                }
            });
        }
    }

    fn stop(&self) {
        self.running
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    fn visits(&self) -> usize {
        self.visits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Asserts that more than `at_least` visits were made, and none failed.
    fn assert_none_failed(&self, at_least: usize) {
        let failed = self.failed.lock().unwrap();
        assert!(
            failed.is_empty(),
            "{} of {} visits failed: {:?}",
            failed.len(),
            self.visits(),
            &failed[..failed.len().min(10)]
        );
        assert!(self.visits() > at_least, "{} visits", self.visits());
    }
}

/// Stops the visitors when dropped: a failed check (a panic) stops the load with it.
struct StopOnDrop<'a>(&'a Visitors);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// A cluster description for servers `gw1`..`gwN` on 127.0.0.2.., with each server's
/// files under its own folder (`root(i)`), and each server's files rendered and put in
/// place there.
struct LoopbackCluster {
    dir: tempfile::TempDir,
    /// The `[provider]` table's keys.
    provider: String,
    /// The `[timers]` table's keys.
    timers: String,
    /// The `[gateway]` table's keys.
    gateway: String,
    /// The folder of the secrets' files, relative to the description (`""` or
    /// `"secrets/"`).
    secrets: String,
    ports: Ports,
    servers: usize,
    password: String,
    /// The addresses and ports of a real cluster (private IPs 10.0.0.11.., public IPs
    /// and the floating IP in 203.0.113.0/24, the specification's ports), for files run
    /// in a network namespace of their own; otherwise loopback addresses and free ports.
    production_addresses: bool,
}

impl LoopbackCluster {
    /// A cluster whose floating IP the provider described by `provider` (the keys of
    /// the `[provider]` table but the token file) moves.
    fn with_provider(servers: usize, provider: &str) -> Result<LoopbackCluster> {
        Ok(LoopbackCluster {
            provider: provider.to_owned(),
            ..LoopbackCluster::new(servers)?
        })
    }

    /// A cluster whose floating IP the fake provider moves, as Hetzner Cloud (the IP's
    /// id 4711; server N's instance 1000 + N).
    fn with_fake_provider(
        servers: usize,
        provider: &botgate_tests::provider::FakeProvider,
    ) -> Result<LoopbackCluster> {
        LoopbackCluster::with_provider(
            servers,
            &format!(
                "kind = \"hetzner\"\nfloating-ip-id = \"4711\"\napi = \"{}\"\n",
                provider.url()
            ),
        )
    }

    fn new(servers: usize) -> Result<LoopbackCluster> {
        let dir = tempfile::tempdir()?;
        let password = format!("cluster-test-{}-{}", std::process::id(), free_port());
        std::fs::write(dir.path().join("redis-password"), format!("{password}\n"))?;
        std::fs::write(dir.path().join("provider-token"), "test-token-0123456789\n")?;
        let ports = Ports {
            redis: free_port(),
            sentinel: free_port(),
            store_proxy: free_port(),
            http: free_port(),
            https: free_port(),
            gateway_http: free_port(),
            gateway_https: free_port(),
            gateway_admin: free_port(),
        };
        Ok(LoopbackCluster {
            dir,
            provider:
                "kind = \"hetzner\"\nfloating-ip-id = \"4711\"\napi = \"http://127.0.0.1:9\"\n"
                    .into(),
            timers: "store-check-ms = 200\n".into(),
            gateway: String::new(),
            secrets: String::new(),
            ports,
            servers,
            password,
            production_addresses: false,
        })
    }

    /// A cluster with the addresses and ports of a real one (see
    /// `production_addresses`); its files only run in a network namespace.
    fn with_production_addresses(servers: usize) -> Result<LoopbackCluster> {
        Ok(LoopbackCluster {
            ports: Ports::default(),
            production_addresses: true,
            ..LoopbackCluster::new(servers)?
        })
    }

    fn private_ip(&self, server: usize) -> IpAddr {
        match self.production_addresses {
            true => IpAddr::V4(Ipv4Addr::new(10, 0, 0, 10 + server as u8)),
            false => IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1 + server as u8)),
        }
    }

    fn public_ip(&self, server: usize) -> IpAddr {
        match self.production_addresses {
            true => IpAddr::V4(Ipv4Addr::new(203, 0, 113, 10 + server as u8)),
            false => IpAddr::V4(Ipv4Addr::new(127, 0, 1, 1 + server as u8)),
        }
    }

    fn floating_ip(&self) -> IpAddr {
        match self.production_addresses {
            true => IpAddr::V4(Ipv4Addr::new(203, 0, 113, 100)),
            false => IpAddr::V4(Ipv4Addr::new(127, 0, 0, 100)),
        }
    }

    /// Server `server`'s file system root.
    fn root(&self, server: usize) -> PathBuf {
        self.dir.path().join(format!("gw{server}"))
    }

    /// The description as server `server`'s operator renders it (only `[paths]` differ
    /// from one server to the next).
    fn description(&self, server: usize) -> String {
        let mut text = format!(
            "floating-ip = \"{}\"\n\
             redis-password-file = \"{secrets}redis-password\"\n\
             [provider]\n\
             token-file = \"{secrets}provider-token\"\n{}",
            self.floating_ip(),
            self.provider,
            secrets = self.secrets
        );
        for i in 1..=self.servers {
            text += &format!(
                "[[server]]\nname = \"gw{i}\"\npublic-ip = \"{}\"\n\
                 private-ip = \"{}\"\ninstance-id = \"{}\"\n",
                self.public_ip(i),
                self.private_ip(i),
                1000 + i
            );
        }
        let p = &self.ports;
        text += &format!(
            "[ports]\nredis = {}\nsentinel = {}\nstore-proxy = {}\nhttp = {}\nhttps = {}\n\
             gateway-http = {}\ngateway-https = {}\ngateway-admin = {}\n[timers]\n{}",
            p.redis,
            p.sentinel,
            p.store_proxy,
            p.http,
            p.https,
            p.gateway_http,
            p.gateway_https,
            p.gateway_admin,
            self.timers
        );
        text += &format!("[gateway]\n{}", self.gateway);
        let root = self.root(server);
        text += "[paths]\n";
        for (key, place) in [
            ("redis-data", "var/lib/redis"),
            ("redis-logs", "var/log/redis"),
            ("redis-run", "run/redis"),
            ("sentinel-run", "run/sentinel"),
            ("redis-config", "etc/redis"),
            ("haproxy-config", "etc/haproxy"),
            ("botgate-config", "etc/botgate"),
            ("botgate-data", "var/lib/botgate"),
            ("botgate-logs", "var/log/botgate"),
            ("botgate-cache", "var/cache/botgate"),
            ("botgate-binary", "usr/local/bin/botgate"),
            ("failover-script", "usr/local/bin/fip-switch.sh"),
            ("systemd", "etc/systemd/system"),
            ("sysctl", "etc/sysctl.d"),
        ] {
            text += &format!("{key} = \"{}\"\n", root.join(place).display());
        }
        text
    }

    /// Renders server `server`'s files with `botgate cluster render` and puts them in
    /// place under its root as `install.sh` would (without owners: the test is one user).
    fn render_and_install(&self, server: usize) -> Result<()> {
        let out = self.render(server)?;
        copy_into_place(&out, &out)?;
        self.make_store_folders(server)
    }

    /// The folders Debian's redis-server and redis-sentinel packages make.
    fn make_store_folders(&self, server: usize) -> Result<()> {
        for place in [
            "var/lib/redis",
            "var/log/redis",
            "run/redis",
            "run/sentinel",
        ] {
            std::fs::create_dir_all(self.root(server).join(place))?;
        }
        Ok(())
    }

    /// Writes server `server`'s description and renders its files with `botgate
    /// cluster render`: the folder they are in.
    fn render(&self, server: usize) -> Result<PathBuf> {
        let description = self.description_file(server);
        std::fs::write(&description, self.description(server))?;
        let out = self.dir.path().join(format!("out-gw{server}"));
        let rendered = botgate()
            .args(["cluster", "render"])
            .arg(&description)
            .args(["--server", &format!("gw{server}"), "--out"])
            .arg(&out)
            .output()?;
        if !rendered.status.success() {
            bail!(
                "cluster render failed: {}",
                String::from_utf8_lossy(&rendered.stderr)
            );
        }
        Ok(out)
    }

    /// Renders server `server`'s files and installs them with the rendered `install.sh`,
    /// as the runbook does: as root, it creates the `botgate` user and gives every file
    /// its owner and mode. `args` go to `install.sh`.
    fn render_and_run_install(&self, server: usize, args: &[&str]) -> Result<String> {
        let out = self.render(server)?;
        let installed = Command::new(out.join("install.sh")).args(args).output()?;
        if !installed.status.success() {
            bail!(
                "install.sh failed: {}{}",
                String::from_utf8_lossy(&installed.stdout),
                String::from_utf8_lossy(&installed.stderr)
            );
        }
        self.make_store_folders(server)?;
        Ok(String::from_utf8_lossy(&installed.stdout).into_owned())
    }

    /// Where server `server`'s description is written.
    fn description_file(&self, server: usize) -> PathBuf {
        self.dir.path().join(format!("cluster-gw{server}.toml"))
    }

    fn file(&self, server: usize, path: &str) -> PathBuf {
        self.root(server).join(path)
    }

    fn redis_address(&self, server: usize) -> SocketAddr {
        SocketAddr::new(self.private_ip(server), self.ports.redis)
    }

    fn redis(&self, server: usize, args: &[&str]) -> Result<Resp> {
        resp_at(self.redis_address(server), Some(&self.password), args)
    }

    fn sentinel(&self, server: usize, args: &[&str]) -> Result<Resp> {
        resp_at(
            SocketAddr::new(self.private_ip(server), self.ports.sentinel),
            Some(&self.password),
            args,
        )
    }

    /// redis-server with server `server`'s rendered redis.conf, answering `PING`.
    fn start_redis(&self, server: usize) -> Result<ServerGuard> {
        let guard = ServerGuard::spawn(
            "redis-server",
            Command::new("redis-server").arg(self.file(server, "etc/redis/redis.conf")),
            tempfile::tempdir()?,
            Some(self.file(server, "var/log/redis/redis-server.log")),
        )?;
        wait_until(
            Duration::from_secs(10),
            || matches!(self.redis(server, &["PING"]), Ok(Resp::Simple(s)) if s == "PONG"),
            || {
                format!(
                    "gw{server}'s redis-server never answered; log:\n{}",
                    guard.log()
                )
            },
        )?;
        Ok(guard)
    }

    /// redis-sentinel with server `server`'s rendered sentinel.conf.
    fn start_sentinel(&self, server: usize) -> Result<ServerGuard> {
        let guard = ServerGuard::spawn(
            "redis-sentinel",
            Command::new("redis-sentinel")
                .arg(self.file(server, "etc/redis/sentinel.conf"))
                // Where its failover script finds this server's settings.
                .env(
                    "FIP_SWITCH_CONFIG",
                    self.file(server, "etc/botgate/fip-switch.conf"),
                ),
            tempfile::tempdir()?,
            Some(self.file(server, "var/log/redis/redis-sentinel.log")),
        )?;
        wait_until(
            Duration::from_secs(10),
            || matches!(self.sentinel(server, &["PING"]), Ok(Resp::Simple(s)) if s == "PONG"),
            || {
                format!(
                    "gw{server}'s redis-sentinel never answered; log:\n{}",
                    guard.log()
                )
            },
        )?;
        Ok(guard)
    }

    /// haproxy with server `server`'s rendered haproxy.cfg, after `haproxy -c`.
    fn start_haproxy(&self, server: usize) -> Result<ServerGuard> {
        let config = self.file(server, "etc/haproxy/haproxy.cfg");
        check_haproxy(&config)?;
        let guard = ServerGuard::spawn(
            "haproxy",
            Command::new("haproxy").arg("-db").arg("-f").arg(&config),
            tempfile::tempdir()?,
            None,
        )?;
        let store = SocketAddr::from((Ipv4Addr::LOCALHOST, self.ports.store_proxy));
        wait_until(
            Duration::from_secs(10),
            || std::net::TcpStream::connect(store).is_ok(),
            || format!("haproxy never listened; log:\n{}", guard.log()),
        )?;
        Ok(guard)
    }

    /// The run id of the node a connection through HAProxy's store port reaches.
    fn through_proxy(&self) -> Result<String> {
        let store = SocketAddr::from((Ipv4Addr::LOCALHOST, self.ports.store_proxy));
        info_field(
            &resp_at(store, Some(&self.password), &["INFO", "server"])?,
            "run_id",
        )
    }

    /// Every server's sentinel, once each sees the other two and the quorum.
    fn start_sentinels(&self) -> Result<Vec<ServerGuard>> {
        let sentinels = (1..=self.servers)
            .map(|server| self.start_sentinel(server))
            .collect::<Result<Vec<_>>>()?;
        let usable = format!("{} usable Sentinels", self.servers);
        for server in 1..=self.servers {
            let ckquorum = || self.sentinel(server, &["SENTINEL", "ckquorum", "mymaster"]);
            wait_until(
                Duration::from_secs(30),
                || matches!(ckquorum(), Ok(Resp::Simple(s)) if s.contains(&usable)),
                || {
                    format!(
                        "gw{server}'s sentinel never saw the others: {:?}",
                        ckquorum()
                    )
                },
            )?;
        }
        Ok(sentinels)
    }

    /// Waits until `server`'s node takes writes (once its replicas' first
    /// acknowledgements arrive: until then it counts no good replica, and refuses).
    fn wait_writable(&self, server: usize) -> Result<()> {
        let set = || self.redis(server, &["SET", "cluster-test", "1"]);
        wait_until(
            Duration::from_secs(10),
            || matches!(set(), Ok(Resp::Simple(s)) if s == "OK"),
            || format!("gw{server}'s node never took a write: {:?}", set()),
        )
    }

    /// Waits until every connection through HAProxy's store port reaches the node
    /// whose run id is `node`.
    /// Whether HAProxy's store port reaches `node` five times in a row.
    fn routes_to(&self, node: &str) -> bool {
        (0..5).all(|_| self.through_proxy().ok().as_deref() == Some(node))
    }

    fn wait_routed_to(&self, node: &str, haproxy: &ServerGuard) -> Result<()> {
        wait_until(
            Duration::from_secs(15),
            || self.routes_to(node),
            || {
                format!(
                    "haproxy never routed to {node} alone; log:\n{}",
                    haproxy.log()
                )
            },
        )
    }

    /// `INFO replication`'s `role` of `server`'s node (`master` or `slave`).
    fn role(&self, server: usize) -> Option<String> {
        let reply = self.redis(server, &["INFO", "replication"]).ok()?;
        info_field(&reply, "role").ok()
    }

    /// Every server's store node and sentinel, and server 1's HAProxy (one serves every
    /// server's ports here: each binds `*:port`, which servers sharing one machine
    /// cannot all do), once server 1's node is the master HAProxy routes to.
    fn start_store(&self) -> Result<Store> {
        let nodes = (1..=self.servers)
            .map(|s| self.start_redis(s).map(Some))
            .collect::<Result<Vec<_>>>()?;
        let replicas = (self.servers - 1).to_string();
        wait_until(
            Duration::from_secs(20),
            || connected_replicas(self, 1).as_deref() == Some(replicas.as_str()),
            || "the replicas never connected".into(),
        )?;
        self.wait_writable(1)?;
        let sentinels = self.start_sentinels()?;
        let haproxy = self.start_haproxy(1)?;
        self.wait_routed_to(&self.run_id(1)?, &haproxy)?;
        Ok(Store {
            nodes,
            _sentinels: sentinels,
            haproxy,
        })
    }

    /// Checks server `server`'s installed botgate.toml with `botgate config check`.
    fn config_check(&self, server: usize) -> Result<()> {
        let checked = botgate()
            .args(["config", "check"])
            .arg(self.file(server, "etc/botgate/botgate.toml"))
            .output()?;
        if !checked.status.success() {
            bail!(
                "gw{server}'s botgate.toml: {}",
                String::from_utf8_lossy(&checked.stderr)
            );
        }
        Ok(())
    }

    fn run_id(&self, server: usize) -> Result<String> {
        info_field(&self.redis(server, &["INFO", "server"])?, "run_id")
    }
}

/// A running store: every server's node (`None` once a test stops it) and sentinel,
/// and the HAProxy in front.
struct Store {
    nodes: Vec<Option<ServerGuard>>,
    _sentinels: Vec<ServerGuard>,
    haproxy: ServerGuard,
}

/// Copies every file under `out` (except `install.sh`) to the absolute path it stands
/// for: `out/tmp/x/etc/redis/redis.conf` goes to `/tmp/x/etc/redis/redis.conf`.
fn copy_into_place(out: &Path, folder: &Path) -> Result<()> {
    for entry in std::fs::read_dir(folder)? {
        let path = entry?.path();
        if path.is_dir() {
            copy_into_place(out, &path)?;
        } else if path != out.join("install.sh") {
            let target = Path::new("/").join(path.strip_prefix(out)?);
            std::fs::create_dir_all(target.parent().context("a folder")?)?;
            std::fs::copy(&path, &target)
                .with_context(|| format!("copying to {}", target.display()))?;
        }
    }
    Ok(())
}

fn connected_replicas(cluster: &LoopbackCluster, server: usize) -> Option<String> {
    let reply = cluster.redis(server, &["INFO", "replication"]).ok()?;
    info_field(&reply, "connected_slaves").ok()
}

/// `cluster render` leaves what it writes (the Redis password and the provider's token
/// among it) to the operator alone until `install.sh` gives each file its owner, group
/// and mode on the server.
#[test]
fn rendered_files_are_the_operators_alone_until_installed() {
    use std::os::unix::fs::PermissionsExt;
    fn walk(path: &Path, seen: &mut Vec<(PathBuf, u32)>) {
        for entry in std::fs::read_dir(path).unwrap() {
            let path = entry.unwrap().path();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            seen.push((path.clone(), mode));
            if path.is_dir() {
                walk(&path, seen);
            }
        }
    }
    let cluster = LoopbackCluster::new(3).unwrap();
    let out = cluster.render(1).unwrap();
    let mut seen = vec![(
        out.clone(),
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
    )];
    walk(&out, &mut seen);
    assert!(seen.len() > 10, "{seen:?}");
    for (path, mode) in &seen {
        if path != &out.join("install.sh") {
            assert_eq!(mode & 0o077, 0, "{} is {mode:o}", path.display());
        }
    }
}

#[test]
fn rendered_files_run_with_redis_sentinel_and_haproxy() {
    let cluster = LoopbackCluster::new(3).unwrap();
    for server in 1..=3 {
        cluster.render_and_install(server).unwrap();
        check_haproxy(&cluster.file(server, "etc/haproxy/haproxy.cfg")).unwrap();
        cluster.config_check(server).unwrap();
    }

    // The store: gw1 the master, gw2 and gw3 its replicas, as rendered.
    let redis1 = cluster.start_redis(1).unwrap();
    let mut replicas = vec![
        cluster.start_redis(2).unwrap(),
        cluster.start_redis(3).unwrap(),
    ];
    wait_until(
        Duration::from_secs(20),
        || connected_replicas(&cluster, 1).as_deref() == Some("2"),
        || {
            format!(
                "the replicas never connected; master's log:\n{}",
                redis1.log()
            )
        },
    )
    .unwrap();
    for server in 2..=3 {
        let reply = cluster.redis(server, &["INFO", "replication"]).unwrap();
        assert_eq!(info_field(&reply, "role").unwrap(), "slave");
        assert_eq!(
            info_field(&reply, "master_host").unwrap(),
            cluster.private_ip(1).to_string()
        );
    }
    // Append-only persistence, and writes confirmed by a replica.
    let appendonly = cluster.redis(1, &["CONFIG", "GET", "appendonly"]).unwrap();
    assert_eq!(
        appendonly,
        Resp::Array(vec![
            Resp::Bulk(Some("appendonly".into())),
            Resp::Bulk(Some("yes".into()))
        ])
    );
    cluster.wait_writable(1).unwrap();

    // The coordinators: three sentinels that find each other and can reach the quorum.
    let _sentinels = cluster.start_sentinels().unwrap();
    // Without the store's password a sentinel takes no command (one on the private
    // network could otherwise change the quorum, or fail the store over at will).
    let sentinel = SocketAddr::new(cluster.private_ip(1), cluster.ports.sentinel);
    for command in [
        &["SENTINEL", "SET", "mymaster", "quorum", "9"][..],
        &["SENTINEL", "FAILOVER", "mymaster"][..],
    ] {
        let refused = resp_at(sentinel, None, command);
        assert!(
            matches!(&refused, Ok(Resp::Error(e)) if e.starts_with("NOAUTH")),
            "{refused:?}"
        );
    }

    // The TCP proxy: the store port reaches the master only.
    let haproxy = cluster.start_haproxy(2).unwrap();
    let master = cluster.run_id(1).unwrap();
    cluster.wait_routed_to(&master, &haproxy).unwrap();

    // The guard: a master with no replica gets no traffic (as an old master restarted
    // after a failover), and takes no writes (`min-replicas-to-write 1`).
    replicas.clear();
    wait_until(
        Duration::from_secs(10),
        || cluster.through_proxy().is_err(),
        || {
            format!(
                "haproxy still routes to a master with no replica; log:\n{}",
                haproxy.log()
            )
        },
    )
    .unwrap();
    wait_until(
        Duration::from_secs(20),
        || matches!(cluster.redis(1, &["SET", "cluster-test", "2"]), Ok(Resp::Error(e)) if e.starts_with("NOREPLICAS")),
        || "the master went on taking writes with no replica".into(),
    )
    .unwrap();
}
