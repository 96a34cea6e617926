//! `botgate cluster`: a cluster description rendered into one server's files, and the
//! post-configuration checks run against a running cluster.

use anyhow::{Context, Result, bail};
use botgate_host::cluster::check::CheckOptions;
use botgate_host::cluster::{Description, render::install_script};
use botgate_store::{AnyStore, RedisConfig, StoreConfig, WebsiteStore};
use clap::Subcommand;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Write one server's files (redis.conf, sentinel.conf, haproxy.cfg, the failover
    /// script and its settings, systemd units and drop-ins, sysctl, botgate.toml) under
    /// DIR as they go on the server, with an `install.sh` that puts them in place.
    Render {
        /// The cluster description (TOML).
        description: PathBuf,
        /// The server to render, by its name in the description.
        #[arg(long)]
        server: String,
        /// Where to write the files (created when missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// Run the post-configuration checks against every server of the cluster (from a
    /// server on its private network): the same websites on every gateway, the
    /// central store on each, protected traffic through each server's HTTP and HTTPS,
    /// failover readiness, replication roles, the floating IP on the master's
    /// instance. Exits 0 only when every check passes.
    Check {
        /// The cluster description (TOML), as rendered.
        description: PathBuf,
        /// The website to send traffic to (default: the first online one).
        #[arg(long)]
        domain: Option<String>,
        /// More root certificates (PEM) to trust for the websites' certificates.
        #[arg(long, value_name = "FILE")]
        ca_file: Vec<PathBuf>,
        /// Seconds one connection or answer may take.
        #[arg(long, default_value = "5")]
        timeout_seconds: u64,
    },
}

pub fn run(command: ClusterCommand) -> Result<()> {
    match command {
        ClusterCommand::Render {
            description,
            server,
            out,
        } => render(&description, &server, &out),
        ClusterCommand::Check {
            description,
            domain,
            ca_file,
            timeout_seconds,
        } => check(&description, domain, &ca_file, timeout_seconds),
    }
}

fn check(
    path: &Path,
    domain: Option<String>,
    ca_files: &[PathBuf],
    timeout_seconds: u64,
) -> Result<()> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let (description, secrets) = Description::load(path).map_err(report)?;
    let mut extra_roots = Vec::new();
    for file in ca_files {
        let pem = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let roots = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{}: not PEM certificates", file.display()))?;
        if roots.is_empty() {
            bail!("{}: holds no certificate", file.display());
        }
        extra_roots.extend(roots);
    }
    let timeout = Duration::from_secs(timeout_seconds.max(1));
    let options = CheckOptions {
        domain,
        extra_roots,
        timeout,
        ..CheckOptions::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = open_store(&runtime, &description, &secrets, timeout);
    let read_store = || match &store {
        Ok(store) => runtime.block_on(async {
            match tokio::time::timeout(timeout, store.snapshot()).await {
                Ok(Ok(snapshot)) => Ok(snapshot),
                Ok(Err(error)) => Err(botgate_host::report::Report(&error).to_string()),
                Err(_) => Err(format!("no answer within {} s", timeout.as_secs())),
            }
        }),
        Err(problem) => Err(problem.clone()),
    };
    let results = botgate_host::cluster::check::run(&description, &secrets, &options, &read_store);
    for result in &results {
        print!("{result}");
    }
    let failed: Vec<String> = results
        .iter()
        .filter(|result| !result.passed())
        .map(|result| result.number.to_string())
        .collect();
    if failed.is_empty() {
        println!("all {} checks passed", results.len());
        Ok(())
    } else {
        bail!("checks {} failed", failed.join(", "))
    }
}

/// The store through the floating IP and HAProxy's store port, as the gateways reach
/// it.
fn open_store(
    runtime: &tokio::runtime::Runtime,
    description: &Description,
    secrets: &botgate_host::cluster::Secrets,
    timeout: Duration,
) -> Result<AnyStore, String> {
    let address = SocketAddr::new(description.floating_ip, description.ports.store_proxy);
    let config = StoreConfig::Redis(RedisConfig {
        password: Some(secrets.redis_password.clone()),
        ..RedisConfig::new(format!("redis://{address}"))
    });
    runtime.block_on(async {
        match tokio::time::timeout(timeout, AnyStore::open(&config)).await {
            Ok(Ok(store)) => Ok(store),
            Ok(Err(error)) => Err(format!(
                "at {address}: {}",
                botgate_host::report::Report(&error)
            )),
            Err(_) => Err(format!(
                "at {address}: no answer within {} s",
                timeout.as_secs()
            )),
        }
    })
}

fn render(path: &Path, server: &str, out: &Path) -> Result<()> {
    let (description, secrets) = Description::load(path).map_err(report)?;
    let files = botgate_host::cluster::render(&description, &secrets, server).map_err(report)?;
    if description.servers.len() == 2 {
        eprintln!(
            "warning: with 2 servers, Sentinel's quorum of 2 needs both: when one server \
             is down there is no failover (3 or more servers are recommended)"
        );
    }
    // Here, on the operator's machine, every file is the operator's alone (secrets
    // among them); `install.sh` gives each its owner, group and mode on the server.
    for file in &files {
        let target = out.join(file.path.strip_prefix("/").unwrap_or(&file.path));
        if let Some(folder) = target.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(folder)
                .with_context(|| format!("creating {}", folder.display()))?;
        }
        write_file(&target, &file.contents, file.mode & 0o700)?;
    }
    let config = files
        .iter()
        .find(|file| file.kind == botgate_host::cluster::render::FileKind::GatewayConfig)
        .context("the gateway's configuration is rendered")?;
    let written = out.join(config.path.strip_prefix("/").unwrap_or(&config.path));
    crate::check_config_file(&written)
        .with_context(|| format!("the rendered {} is refused", written.display()))?;
    write_file(
        &out.join("install.sh"),
        &install_script(&description, server, &files),
        0o755,
    )?;
    println!(
        "{}: {} files for server `{server}`; on the server, run {}/install.sh as root",
        out.display(),
        files.len(),
        out.display()
    );
    Ok(())
}

/// Writes `contents` to `path` with `mode` (set before the contents go in, so a secret
/// is never readable by others even for a moment).
fn write_file(path: &Path, contents: &str, mode: u32) -> Result<()> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        // Owner and group bits only at first; `set_permissions` gives the exact mode.
        .mode(mode & 0o770)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    file.write_all(contents.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

fn report(error: impl std::error::Error + 'static) -> anyhow::Error {
    anyhow::anyhow!("{}", botgate_host::report::Report(&error))
}
