//! Guards for the real servers the tests start (redis-server, redis-sentinel, haproxy,
//! dnsmasq; pebble and nginx as the issues that need them land): each runs on loopback on a free
//! port in its own temporary directory, stops when the guard drops, and prints its log
//! when the test that held it panicked.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound and released; the server binds it next). The
/// kernel may hand a released port out again, so this process never hands out one
/// port twice: two servers of one test cannot be given the same port.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("binding an ephemeral port on 127.0.0.1");
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

/// A server process that is stopped (and its directory removed) on drop.
pub struct ServerGuard {
    name: &'static str,
    child: Child,
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl ServerGuard {
    /// Starts `command` under a guard named `name`: stdin closed, stdout and stderr into
    /// a file in `dir`, which is also the log shown on failure unless the program keeps
    /// its own (`own_log`, as redis-server does with `logfile`).
    pub fn spawn(
        name: &'static str,
        command: &mut Command,
        dir: tempfile::TempDir,
        own_log: Option<PathBuf>,
    ) -> Result<ServerGuard> {
        let output = dir.path().join(format!("{name}.out"));
        let output_file = std::fs::File::create(&output)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(output_file.try_clone()?)
            .stderr(output_file)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(ServerGuard::new(
            name,
            child,
            dir,
            own_log.unwrap_or(output),
        ))
    }

    /// The log so far.
    pub fn log(&self) -> String {
        self.log_text()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A guard over a started `child` whose log goes to `log` in `dir`.
    pub(crate) fn new(
        name: &'static str,
        child: Child,
        dir: tempfile::TempDir,
        log: PathBuf,
    ) -> ServerGuard {
        ServerGuard {
            name,
            child,
            dir,
            log,
        }
    }

    /// The server's working directory.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "---- {} log ({}) ----\n{}\n---- end of {} log ----",
                self.name,
                self.log.display(),
                self.log_text(),
                self.name
            );
        }
    }
}

/// A `redis-server` with a password, no persistence, on a free loopback port.
pub struct RedisServer {
    pub port: u16,
    pub password: String,
    guard: ServerGuard,
}

impl RedisServer {
    /// Starts a lone master and waits until it answers `PING` (up to 10 s).
    pub fn start() -> Result<RedisServer> {
        let password = format!("test-{}-{}", free_port(), std::process::id());
        RedisServer::start_with(&password, &[])
    }

    /// A master and a replica of it that has finished its first sync.
    pub fn start_with_replica() -> Result<(RedisServer, RedisServer)> {
        let master = RedisServer::start()?;
        let replica = RedisServer::start_replica_of(&master)?;
        wait_until(
            Duration::from_secs(15),
            || master.online_replicas() == 1,
            || "the replica never finished its sync".into(),
        )?;
        Ok((master, replica))
    }

    /// Replicas of this node that finished their sync (`state=online`).
    pub fn online_replicas(&self) -> usize {
        self.command(&["INFO", "replication"])
            .ok()
            .and_then(|reply| info_field(&reply, "slave0").ok())
            .map_or(0, |replica| usize::from(replica.contains("state=online")))
    }

    /// Starts a replica of `master` (same password) and waits until it answers.
    pub fn start_replica_of(master: &RedisServer) -> Result<RedisServer> {
        let master_port = master.port.to_string();
        RedisServer::start_with(
            &master.password,
            &["--replicaof", "127.0.0.1", &master_port],
        )
    }

    fn start_with(password: &str, extra: &[&str]) -> Result<RedisServer> {
        let dir = tempfile::tempdir().context("temporary directory for redis-server")?;
        let port = free_port();
        let log = dir.path().join("redis.log");
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--requirepass",
                password,
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            // Every node may become a replica after a failover: it needs the password.
            .args(["--masterauth", password])
            // Start a replica's full sync at once, not after the default 5 s.
            .args(["--repl-diskless-sync-delay", "0"])
            .args(extra)
            .arg("--dir")
            .arg(dir.path())
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context(
                "starting redis-server (Debian package redis-server; scripts/test.sh installs it)",
            )?;
        let server = RedisServer {
            port,
            password: password.to_owned(),
            guard: ServerGuard {
                name: "redis-server",
                child,
                dir,
                log,
            },
        };
        wait_until(
            Duration::from_secs(10),
            || server.ping(),
            || {
                format!(
                    "redis-server on port {} did not answer PING; log:\n{}",
                    server.port,
                    server.guard.log_text()
                )
            },
        )?;
        Ok(server)
    }

    /// `redis://127.0.0.1:PORT` (the password is given separately).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's working directory.
    pub fn dir(&self) -> &std::path::Path {
        self.guard.dir()
    }

    /// Runs one command, authenticated, and returns its reply.
    pub fn command(&self, args: &[&str]) -> Result<Resp> {
        resp_command(self.port, Some(&self.password), args)
    }

    /// `INFO replication`'s `role` (`master` or `slave`).
    pub fn role(&self) -> Result<String> {
        info_field(&self.command(&["INFO", "replication"])?, "role")
    }

    /// `INFO server`'s `run_id`.
    pub fn run_id(&self) -> Result<String> {
        info_field(&self.command(&["INFO", "server"])?, "run_id")
    }

    /// How many times `command` (lower case, `evalsha`) has run since the server
    /// started, scripts' calls included (`INFO commandstats`); 0 before the first.
    pub fn calls(&self, command: &str) -> u64 {
        let info = format!("{:?}", self.command(&["INFO", "commandstats"]).unwrap());
        info.split(&format!("cmdstat_{command}:calls="))
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0)
    }

    /// The bytes the server has sent to its clients since it started.
    pub fn output_bytes(&self) -> u64 {
        let info = format!("{:?}", self.command(&["INFO", "stats"]).unwrap());
        info.split("total_net_output_bytes:")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|bytes| bytes.parse().ok())
            .unwrap_or(0)
    }

    fn ping(&self) -> bool {
        matches!(self.command(&["PING"]), Ok(Resp::Simple(s)) if s == "PONG")
    }
}

/// A field of an `INFO` reply.
pub fn info_field(reply: &Resp, field: &str) -> Result<String> {
    let Resp::Bulk(Some(text)) = reply else {
        bail!("INFO answered {reply:?}");
    };
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_owned())
        .with_context(|| format!("no `{field}` in INFO"))
}

/// Polls `ready` every 50 ms until it holds, or fails after `limit` with `why()`.
pub fn wait_until(
    limit: Duration,
    mut ready: impl FnMut() -> bool,
    why: impl FnOnce() -> String,
) -> Result<()> {
    let deadline = Instant::now() + limit;
    while !ready() {
        if Instant::now() > deadline {
            bail!("after {limit:?}: {}", why());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// A RESP reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resp {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<String>),
    Array(Vec<Resp>),
}

/// Sends one command (after `AUTH` when a password is given) to a Redis or Sentinel
/// on loopback and reads its reply.
pub fn resp_command(port: u16, password: Option<&str>, args: &[&str]) -> Result<Resp> {
    resp_at(
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        password,
        args,
    )
}

/// As [`resp_command`], to a server at `addr`.
pub fn resp_at(addr: SocketAddr, password: Option<&str>, args: &[&str]) -> Result<Resp> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = std::io::BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut send = |args: &[&str]| -> Result<()> {
        let mut out = format!("*{}\r\n", args.len());
        for arg in args {
            out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        writer.write_all(out.as_bytes())?;
        Ok(())
    };
    if let Some(password) = password {
        send(&["AUTH", password])?;
        if let Resp::Error(e) = read_resp(&mut reader)? {
            bail!("AUTH refused: {e}");
        }
    }
    send(args)?;
    read_resp(&mut reader)
}

fn read_resp(reader: &mut impl std::io::BufRead) -> Result<Resp> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        bail!("the connection closed");
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(1.min(line.len()));
    Ok(match kind {
        "+" => Resp::Simple(rest.to_owned()),
        "-" => Resp::Error(rest.to_owned()),
        ":" => Resp::Integer(rest.parse()?),
        "$" => {
            let len: i64 = rest.parse()?;
            if len < 0 {
                Resp::Bulk(None)
            } else {
                let mut bytes = vec![0u8; len as usize + 2];
                reader.read_exact(&mut bytes)?;
                bytes.truncate(len as usize);
                Resp::Bulk(Some(String::from_utf8_lossy(&bytes).into_owned()))
            }
        }
        "*" => {
            let count: i64 = rest.parse()?;
            let mut items = Vec::new();
            for _ in 0..count.max(0) {
                items.push(read_resp(reader)?);
            }
            Resp::Array(items)
        }
        _ => bail!("not a RESP reply: {line:?}"),
    })
}

/// A `redis-sentinel` watching one master as `mymaster`, with quorum 1 and short
/// timeouts (1 s down-after, 5 s failover timeout) so tests fail over quickly; it takes
/// commands with the master's password only, as a cluster's sentinels do.
pub struct Sentinel {
    pub port: u16,
    pub password: String,
    guard: ServerGuard,
}

impl Sentinel {
    pub fn start(master: &RedisServer) -> Result<Sentinel> {
        let dir = tempfile::tempdir().context("temporary directory for redis-sentinel")?;
        let port = free_port();
        let log = dir.path().join("sentinel.log");
        let config = dir.path().join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\nrequirepass {password}\ndir {dir}\nlogfile {log}\n\
                 sentinel monitor mymaster 127.0.0.1 {master} 1\n\
                 sentinel auth-pass mymaster {password}\n\
                 sentinel down-after-milliseconds mymaster 1000\n\
                 sentinel failover-timeout mymaster 5000\n\
                 sentinel parallel-syncs mymaster 1\n",
                dir = dir.path().display(),
                log = log.display(),
                master = master.port,
                password = master.password,
            ),
        )?;
        let child = Command::new("redis-sentinel")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-sentinel (Debian package redis-sentinel; scripts/test.sh installs it)")?;
        let sentinel = Sentinel {
            port,
            password: master.password.clone(),
            guard: ServerGuard {
                name: "redis-sentinel",
                child,
                dir,
                log,
            },
        };
        wait_until(
            Duration::from_secs(10),
            || matches!(sentinel.command(&["PING"]), Ok(Resp::Simple(s)) if s == "PONG"),
            || {
                format!(
                    "redis-sentinel did not answer; log:\n{}",
                    sentinel.guard.log_text()
                )
            },
        )?;
        Ok(sentinel)
    }

    pub fn command(&self, args: &[&str]) -> Result<Resp> {
        resp_command(self.port, Some(&self.password), args)
    }

    /// Has the sentinel fail `mymaster` over, and waits until `replica` is the master.
    pub fn fail_over_to(&self, replica: &RedisServer) -> Result<()> {
        wait_until(
            Duration::from_secs(30),
            || {
                matches!(
                    self.command(&["SENTINEL", "FAILOVER", "mymaster"]),
                    Ok(Resp::Simple(_))
                )
            },
            || format!("sentinel would not fail over; log:\n{}", self.log()),
        )?;
        wait_until(
            Duration::from_secs(30),
            || replica.role().is_ok_and(|r| r == "master"),
            || {
                format!(
                    "the replica was never promoted; sentinel log:\n{}",
                    self.log()
                )
            },
        )
    }

    /// The sentinel's log so far.
    pub fn log(&self) -> String {
        self.guard.log_text()
    }
}

/// `haproxy` in front of Redis nodes as the specification's cluster has it: a TCP
/// listener forwarding to whichever node passes the health check (AUTH, PING,
/// `info replication` says `role:master`, QUIT), checked every 200 ms here (3 s in
/// production).
pub struct HaproxyForRedis {
    pub port: u16,
    guard: ServerGuard,
}

impl HaproxyForRedis {
    pub fn start(nodes: &[&RedisServer]) -> Result<HaproxyForRedis> {
        let dir = tempfile::tempdir().context("temporary directory for haproxy")?;
        let port = free_port();
        let log = dir.path().join("haproxy.log");
        let password = &nodes.first().context("at least one node")?.password;
        let servers: String = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                format!(
                    "    server store{i} 127.0.0.1:{} check inter 200ms fall 1 rise 1 maxconn 4096 on-marked-down shutdown-sessions\n",
                    node.port
                )
            })
            .collect();
        let config = dir.path().join("haproxy.cfg");
        std::fs::write(
            &config,
            format!(
                "global\n    maxconn 200\n\
                 defaults\n    mode tcp\n    retries 2\n    timeout connect 5000\n    timeout client 50000\n    timeout server 50000\n\
                 frontend store\n    bind 127.0.0.1:{port}\n    default_backend redis\n\
                 backend redis\n    option tcp-check\n    tcp-check connect\n\
                 \x20   tcp-check send AUTH\\ {password}\\r\\n\n    tcp-check expect string +OK\n\
                 \x20   tcp-check send PING\\r\\n\n    tcp-check expect string +PONG\n\
                 \x20   tcp-check send info\\ replication\\r\\n\n    tcp-check expect string role:master\n\
                 \x20   tcp-check send QUIT\\r\\n\n    tcp-check expect string +OK\n{servers}"
            ),
        )?;
        let guard = run_haproxy(dir, log, &config)?;
        let proxy = HaproxyForRedis { port, guard };
        wait_listening(port, &proxy.guard)?;
        Ok(proxy)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The proxy's log so far.
    pub fn log(&self) -> String {
        self.guard.log_text()
    }
}

/// Where a [`Gateway`] keeps its data.
#[derive(Clone, Copy)]
pub enum GatewayStore<'a> {
    /// The embedded store, in the gateway's own temporary directory.
    Embedded,
    /// A shared Redis server.
    Redis(&'a RedisServer),
    /// Redis at a URL (a cluster's floating IP and HAProxy's port), with its password
    /// and the replicas a write waits for.
    RedisAt {
        url: &'a str,
        password: &'a str,
        wait_replicas: u32,
    },
    /// The Redis master the sentinel at this port names `mymaster`, with its password.
    Sentinel { port: u16, password: &'a str },
}

impl GatewayStore<'_> {
    fn args(&self, data_dir: &std::path::Path) -> Vec<String> {
        let mut args = vec!["--data-dir".to_owned(), data_dir.display().to_string()];
        match self {
            GatewayStore::Embedded => {}
            GatewayStore::Redis(redis) => args.extend([
                "--redis-url".to_owned(),
                redis.url(),
                "--redis-password".to_owned(),
                redis.password.clone(),
            ]),
            GatewayStore::RedisAt {
                url,
                password,
                wait_replicas,
            } => args.extend([
                "--redis-url".to_owned(),
                url.to_string(),
                "--redis-password".to_owned(),
                password.to_string(),
                "--redis-wait-replicas".to_owned(),
                wait_replicas.to_string(),
            ]),
            GatewayStore::Sentinel { port, password } => args.extend([
                "--redis-sentinel".to_owned(),
                format!("127.0.0.1:{port}"),
                "--redis-password".to_owned(),
                password.to_string(),
                "--redis-sentinel-password".to_owned(),
                password.to_string(),
            ]),
        }
        args
    }
}

/// A running `botgate serve` (the binary under test) with partners created by
/// `botgate partner create` before it started, its API on a free loopback port.
pub struct Gateway {
    /// `http://127.0.0.1:PORT`.
    pub api: String,
    /// The visitors' plain HTTP listener.
    pub http: SocketAddr,
    /// The visitors' HTTPS listener.
    pub https: SocketAddr,
    /// The admin listener (`/metrics`, `/health`).
    pub admin: SocketAddr,
    /// The partners' keys, in the order they were asked for.
    pub partner_keys: Vec<String>,
    guard: ServerGuard,
    /// How it was started: the binary and `serve`'s arguments, for [`Gateway::restart`].
    command: (PathBuf, Vec<std::ffi::OsString>),
}

impl Gateway {
    /// Creates `partners` with `binary partner create`, then starts `binary serve`
    /// with `extra` arguments and waits until the API answers (up to 30 s).
    pub fn start(
        binary: &std::path::Path,
        store: GatewayStore<'_>,
        partners: &[&str],
        extra: &[&str],
    ) -> Result<Gateway> {
        Gateway::launch(binary, store, partners, extra, &[], None)
    }

    /// [`Gateway::start`] with every shipped rule component loaded (waits until the
    /// health check says the classifier is in, up to 60 s) and a component deadline
    /// long enough for a busy test machine.
    pub fn start_protecting(
        binary: &std::path::Path,
        store: GatewayStore<'_>,
        partners: &[&str],
        extra: &[&str],
    ) -> Result<Gateway> {
        Gateway::protecting(binary, store, partners, extra, None)
    }

    /// [`Gateway::start_protecting`] with the visitors' HTTP and HTTPS listeners on the
    /// given addresses (where a proxy in front forwards to).
    pub fn start_protecting_on(
        binary: &std::path::Path,
        store: GatewayStore<'_>,
        partners: &[&str],
        extra: &[&str],
        http: SocketAddr,
        https: SocketAddr,
    ) -> Result<Gateway> {
        Gateway::protecting(binary, store, partners, extra, Some((http, https)))
    }

    fn protecting(
        binary: &std::path::Path,
        store: GatewayStore<'_>,
        partners: &[&str],
        extra: &[&str],
        listeners: Option<(SocketAddr, SocketAddr)>,
    ) -> Result<Gateway> {
        let components: Vec<PathBuf> = crate::shipped().into_iter().map(crate::guest).collect();
        let mut args = vec!["--component-deadline-ms", "2000"];
        args.extend_from_slice(extra);
        let gateway = Gateway::launch(binary, store, partners, &args, &components, listeners)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let health =
                crate::http::Client::new(&format!("http://{}", gateway.admin), None).get("/health");
            if let Ok(reply) = health
                && reply.json()["components"]
                    .as_object()
                    .map(|loaded| loaded.len())
                    == Some(components.len())
            {
                return Ok(gateway);
            }
            if Instant::now() > deadline {
                bail!(
                    "botgate did not load its components in 60 s; log:\n{}",
                    gateway.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The rule-set directory it watches.
    pub fn rulesets_dir(&self) -> PathBuf {
        self.guard.dir().join("rulesets")
    }

    /// Hot-loads the built guest `name` through the rule-set directory and waits (up to
    /// 60 s) until `/health` lists it.
    pub fn load_guest(&self, name: &str) -> Result<()> {
        std::fs::copy(
            crate::guest(name),
            self.rulesets_dir().join(format!("{name}.wasm")),
        )?;
        let admin = crate::http::Client::new(&format!("http://{}", self.admin), None);
        wait_until(
            Duration::from_secs(60),
            || {
                admin
                    .get("/health")
                    .is_ok_and(|health| health.json()["components"][name].is_string())
            },
            || format!("{name} was not loaded; log:\n{}", self.log()),
        )
    }

    /// The data directory (the embedded store and the operator token are there).
    pub fn data_dir(&self) -> PathBuf {
        self.guard.dir().join("data")
    }

    /// [`Gateway::start`] with the visitors' HTTP and HTTPS listeners on the given
    /// addresses (for a CA that must be told where to check challenges).
    pub fn start_on(
        binary: &std::path::Path,
        store: GatewayStore<'_>,
        partners: &[&str],
        extra: &[&str],
        http: SocketAddr,
        https: SocketAddr,
    ) -> Result<Gateway> {
        Gateway::launch(binary, store, partners, extra, &[], Some((http, https)))
    }

    /// Starts a gateway on free ports; on the embedded store (a new one each time, so
    /// its partners can be created again) starts it again on fresh ports, twice at
    /// most, when one of them was taken between [`free_port`] and botgate's bind (an
    /// outgoing connection can take a free ephemeral port in that moment).
    fn launch(
        binary: &std::path::Path,
        store: GatewayStore<'_>,
        partners: &[&str],
        extra: &[&str],
        components: &[PathBuf],
        listeners: Option<(SocketAddr, SocketAddr)>,
    ) -> Result<Gateway> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            match Gateway::launch_once(binary, store, partners, extra, components, listeners) {
                Err(err)
                    if attempts < 3
                        && matches!(store, GatewayStore::Embedded)
                        && err.to_string().contains("Address already in use") =>
                {
                    eprintln!("botgate's port was taken before it could bind; again: {err:#}");
                }
                started => return started,
            }
        }
    }

    fn launch_once(
        binary: &std::path::Path,
        store: GatewayStore<'_>,
        partners: &[&str],
        extra: &[&str],
        components: &[PathBuf],
        listeners: Option<(SocketAddr, SocketAddr)>,
    ) -> Result<Gateway> {
        let dir = tempfile::tempdir().context("temporary directory for botgate")?;
        let data_dir = dir.path().join("data");
        let rulesets = dir.path().join("rulesets");
        std::fs::create_dir_all(&rulesets)?;
        for component in components {
            let name = component.file_name().context("a component file name")?;
            std::fs::copy(component, rulesets.join(name))?;
        }
        let store_args = store.args(&data_dir);
        let mut partner_keys = Vec::new();
        for partner in partners {
            let output = Command::new(binary)
                .args(["partner", "create", partner])
                .args(&store_args)
                .output()
                .context("running botgate partner create")?;
            if !output.status.success() {
                bail!(
                    "botgate partner create {partner} failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            partner_keys.push(String::from_utf8(output.stdout)?.trim().to_owned());
        }
        let port = free_port();
        let local = |port| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let (http, https) = listeners.unwrap_or_else(|| (local(free_port()), local(free_port())));
        let admin = local(free_port());
        let log = dir.path().join("botgate.log");
        let mut serve_args: Vec<std::ffi::OsString> = vec!["serve".into()];
        serve_args.extend(store_args.iter().map(Into::into));
        for (flag, value) in [
            ("--api-listen", format!("127.0.0.1:{port}")),
            ("--http-listen", http.to_string()),
            ("--https-listen", https.to_string()),
            ("--admin-listen", admin.to_string()),
        ] {
            serve_args.extend([flag.into(), value.into()]);
        }
        serve_args.extend(["--cache-dir".into(), crate::cache_dir().into_os_string()]);
        serve_args.extend(["--rulesets-dir".into(), rulesets.clone().into_os_string()]);
        // The tests' origins are on loopback, which the origin policy refuses unless
        // the operator allows it; a test of the policy passes its own networks.
        if !extra.contains(&"--origin-allow-network") {
            serve_args.extend([
                "--origin-allow-network".into(),
                "127.0.0.0/8,::1/128".into(),
            ]);
        }
        serve_args.extend(extra.iter().map(Into::into));
        let child = spawn_serve(binary, &serve_args, &log)?;
        let mut gateway = Gateway {
            api: format!("http://127.0.0.1:{port}"),
            http,
            https,
            admin,
            partner_keys,
            guard: ServerGuard {
                name: "botgate",
                child,
                dir,
                log,
            },
            command: (binary.to_owned(), serve_args),
        };
        gateway.wait_ready(port, Duration::from_secs(30))?;
        gateway.wait_ready(admin.port(), Duration::from_secs(30))?;
        // A bound port accepts connections before botgate serves them: the admin
        // listener answering means the start finished (its operator token written).
        let admin_client = crate::http::Client::new(&format!("http://{admin}"), None);
        if let Err(err) = admin_client.get("/health") {
            bail!(
                "botgate's admin listener did not answer: {err:#}; log:\n{}",
                gateway.guard.log_text()
            );
        }
        Ok(gateway)
    }

    /// Kills the gateway at once (SIGKILL: no drain, as in a crash) and starts it again
    /// with the same store, ports and arguments; waits until it answers. Its log goes
    /// on in the same file.
    pub fn restart(&mut self) -> Result<()> {
        let _ = self.guard.child.kill();
        let _ = self.guard.child.wait();
        let (binary, args) = &self.command;
        self.guard.child = spawn_serve(binary, args, &self.guard.log)?;
        let api_port = self
            .api
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .context("the API's port")?;
        self.wait_ready(api_port, Duration::from_secs(30))?;
        self.wait_ready(self.admin.port(), Duration::from_secs(30))
    }

    /// Waits until `port` accepts; fails at once, with the log, when botgate exited.
    fn wait_ready(&mut self, port: u16, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Some(status) = self.guard.child.try_wait()? {
                bail!(
                    "botgate exited ({status}) before its port {port} accepted; log:\n{}",
                    self.guard.log_text()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "botgate's API on port {port} did not accept within {limit:?}; log:\n{}",
                    self.guard.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The gateway's log so far.
    pub fn log(&self) -> String {
        self.guard.log_text()
    }

    /// The process id (to send it signals).
    pub fn pid(&self) -> u32 {
        self.guard.child.id()
    }

    /// Waits for the process to exit (after a signal), up to `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Result<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.guard.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                bail!("botgate did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `haproxy -c`: whether haproxy accepts `config`.
pub fn check_haproxy(config: &std::path::Path) -> Result<()> {
    let check = Command::new("haproxy")
        .arg("-c")
        .arg("-f")
        .arg(config)
        .output()
        .context("running haproxy -c (Debian package haproxy; scripts/test.sh installs it)")?;
    if !check.status.success() {
        bail!(
            "haproxy refused {}:\n{}\n{}",
            config.display(),
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
    Ok(())
}

/// Checks `config` with `haproxy -c`, then starts haproxy on it.
fn run_haproxy(
    dir: tempfile::TempDir,
    log: PathBuf,
    config: &std::path::Path,
) -> Result<ServerGuard> {
    check_haproxy(config)?;
    let log_file = std::fs::File::create(&log)?;
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .context("starting haproxy")?;
    Ok(ServerGuard {
        name: "haproxy",
        child,
        dir,
        log,
    })
}

/// Waits until something accepts on `port` (10 s at most).
fn wait_listening(port: u16, guard: &ServerGuard) -> Result<()> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    wait_until(
        Duration::from_secs(10),
        || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok(),
        || format!("{} did not listen; log:\n{}", guard.name, guard.log_text()),
    )
}

/// HAProxy in front of a gateway as the specification's cluster has it: TCP mode, the
/// HTTP port forwarded with PROXY protocol v2, the HTTPS port with PROXY v2 carrying
/// the SSL facts and a TLS health check without certificate verification.
pub struct HaproxyForGateway {
    pub http_port: u16,
    pub https_port: u16,
    guard: ServerGuard,
}

impl HaproxyForGateway {
    pub fn start(http: SocketAddr, https: SocketAddr) -> Result<HaproxyForGateway> {
        let dir = tempfile::tempdir().context("temporary directory for haproxy")?;
        let (http_port, https_port) = (free_port(), free_port());
        let log = dir.path().join("haproxy.log");
        let config = dir.path().join("haproxy.cfg");
        std::fs::write(
            &config,
            format!(
                "global\n    maxconn 200\n\
                 defaults\n    mode tcp\n    timeout connect 5000\n    timeout client 50000\n    timeout server 50000\n\
                 frontend http\n    bind 127.0.0.1:{http_port}\n    default_backend gateway_http\n\
                 frontend https\n    bind 127.0.0.1:{https_port}\n    default_backend gateway_https\n\
                 backend gateway_http\n    server gateway {http} send-proxy-v2 check check-send-proxy inter 500ms\n\
                 backend gateway_https\n    server gateway {https} send-proxy-v2-ssl check check-send-proxy check-ssl verify none inter 500ms\n"
            ),
        )?;
        let guard = run_haproxy(dir, log, &config)?;
        wait_listening(http_port, &guard)?;
        Ok(HaproxyForGateway {
            http_port,
            https_port,
            guard,
        })
    }

    /// haproxy's log so far.
    pub fn log(&self) -> String {
        self.guard.log_text()
    }
}

/// `dnsmasq` (Debian package `dnsmasq-base`) on 127.0.0.1, a free port, answering only
/// the records it is given: a resolver for the gateway's reverse-DNS checks.
pub struct Dnsmasq {
    guard: ServerGuard,
    pub address: SocketAddr,
}

impl Dnsmasq {
    /// `hosts`: a name's A or AAAA record, with the matching PTR record. `pointers`:
    /// a PTR record alone (address → name), as a spoofer's own reverse zone would say.
    pub fn start(
        hosts: &[(&str, std::net::IpAddr)],
        pointers: &[(std::net::IpAddr, &str)],
    ) -> Result<Dnsmasq> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("dnsmasq.log");
        let port = free_port();
        // Debian installs it in /usr/sbin, which a user's PATH may lack.
        let program = if std::path::Path::new("/usr/sbin/dnsmasq").exists() {
            "/usr/sbin/dnsmasq"
        } else {
            "dnsmasq"
        };
        let mut command = Command::new(program);
        command.args([
            "--keep-in-foreground",
            "--no-resolv",
            "--no-hosts",
            "--no-poll",
            "--bind-interfaces",
            "--listen-address=127.0.0.1",
            "--log-queries",
            "--log-facility=-",
        ]);
        command.arg(format!("--port={port}"));
        command.arg(format!(
            "--pid-file={}",
            dir.path().join("dnsmasq.pid").display()
        ));
        for (name, address) in hosts {
            command.arg(format!("--host-record={name},{address}"));
        }
        for (address, name) in pointers {
            let reverse = match address {
                std::net::IpAddr::V4(v4) => {
                    let [a, b, c, d] = v4.octets();
                    format!("{d}.{c}.{b}.{a}.in-addr.arpa")
                }
                std::net::IpAddr::V6(v6) => {
                    let mut labels: Vec<String> = v6
                        .octets()
                        .iter()
                        .flat_map(|byte| [byte >> 4, byte & 0xf])
                        .map(|nibble| format!("{nibble:x}"))
                        .collect();
                    labels.reverse();
                    format!("{}.ip6.arpa", labels.join("."))
                }
            };
            command.arg(format!("--ptr-record={reverse},{name}"));
        }
        let log_file = std::fs::File::create(&log)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .context(
                "starting dnsmasq (Debian package dnsmasq-base; scripts/test.sh installs it)",
            )?;
        let guard = ServerGuard {
            name: "dnsmasq",
            child,
            dir,
            log,
        };
        wait_until(
            Duration::from_secs(10),
            || guard.log_text().contains("started, version"),
            || format!("dnsmasq did not start:\n{}", guard.log_text()),
        )?;
        Ok(Dnsmasq {
            guard,
            address: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        })
    }

    /// What dnsmasq logged (every query).
    pub fn log(&self) -> String {
        self.guard.log_text()
    }
}

/// Starts `binary` with `args`, its output appended to `log`.
fn spawn_serve(
    binary: &std::path::Path,
    args: &[std::ffi::OsString],
    log: &std::path::Path,
) -> Result<Child> {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    Command::new(binary)
        .args(args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .context("starting botgate serve")
}
