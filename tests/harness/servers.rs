//! Guards for the real servers the tests start (redis-server now; sentinel, haproxy,
//! pebble and nginx as the issues that need them land): each runs on loopback on a free
//! port in its own temporary directory, stops when the guard drops, and prints its log
//! when the test that held it panicked.

use anyhow::{Context, Result, bail};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound and released; the server binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral port on 127.0.0.1")
}

/// A server process that is stopped (and its directory removed) on drop.
pub struct ServerGuard {
    name: &'static str,
    child: Child,
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl ServerGuard {
    /// The server's working directory.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    fn log_text(&self) -> String {
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
    /// Starts one and waits until it answers `PING` (up to 10 s).
    pub fn start() -> Result<RedisServer> {
        let dir = tempfile::tempdir().context("temporary directory for redis-server")?;
        let port = free_port();
        let password = format!("test-{port}-{}", std::process::id());
        let log = dir.path().join("redis.log");
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--requirepass",
                &password,
                "--save",
                "",
                "--appendonly",
                "no",
            ])
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
            password,
            guard: ServerGuard {
                name: "redis-server",
                child,
                dir,
                log,
            },
        };
        server.wait_ready(Duration::from_secs(10))?;
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

    fn wait_ready(&self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if self.ping().unwrap_or(false) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "redis-server on port {} did not answer PING within {limit:?}; log:\n{}",
                    self.port,
                    self.guard.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Authenticates and sends `PING` over a raw connection.
    fn ping(&self) -> Result<bool> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200))?;
        stream.set_read_timeout(Some(Duration::from_millis(500)))?;
        write!(stream, "AUTH {}\r\nPING\r\n", self.password)?;
        let mut reply = Vec::new();
        let mut buf = [0u8; 64];
        while !reply.ends_with(b"+PONG\r\n") && reply.len() < 256 {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buf[..n]);
        }
        Ok(reply.ends_with(b"+PONG\r\n"))
    }
}

/// Where a [`Gateway`] keeps its data.
pub enum GatewayStore<'a> {
    /// The embedded store, in the gateway's own temporary directory.
    Embedded,
    /// A shared Redis server.
    Redis(&'a RedisServer),
}

impl GatewayStore<'_> {
    fn args(&self, data_dir: &std::path::Path) -> Vec<String> {
        let mut args = vec!["--data-dir".to_owned(), data_dir.display().to_string()];
        if let GatewayStore::Redis(redis) = self {
            args.extend([
                "--redis-url".to_owned(),
                redis.url(),
                "--redis-password".to_owned(),
                redis.password.clone(),
            ]);
        }
        args
    }
}

/// A running `botgate serve` (the binary under test) with partners created by
/// `botgate partner create` before it started, its API on a free loopback port.
pub struct Gateway {
    /// `http://127.0.0.1:PORT`.
    pub api: String,
    /// The partners' keys, in the order they were asked for.
    pub partner_keys: Vec<String>,
    guard: ServerGuard,
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
        let dir = tempfile::tempdir().context("temporary directory for botgate")?;
        let data_dir = dir.path().join("data");
        let rulesets = dir.path().join("rulesets");
        std::fs::create_dir_all(&rulesets)?;
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
        let log = dir.path().join("botgate.log");
        let log_file = std::fs::File::create(&log)?;
        let child = Command::new(binary)
            .arg("serve")
            .args(&store_args)
            .args(["--api-listen", &format!("127.0.0.1:{port}")])
            .arg("--rulesets-dir")
            .arg(&rulesets)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .context("starting botgate serve")?;
        let gateway = Gateway {
            api: format!("http://127.0.0.1:{port}"),
            partner_keys,
            guard: ServerGuard {
                name: "botgate",
                child,
                dir,
                log,
            },
        };
        gateway.wait_ready(port, Duration::from_secs(30))?;
        Ok(gateway)
    }

    fn wait_ready(&self, port: u16, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
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
}
