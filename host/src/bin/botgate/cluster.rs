//! `botgate cluster`: a cluster description rendered into one server's files.

use anyhow::{Context, Result};
use botgate_host::cluster::{Description, render::install_script};
use clap::Subcommand;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
}

pub fn run(command: ClusterCommand) -> Result<()> {
    match command {
        ClusterCommand::Render {
            description,
            server,
            out,
        } => render(&description, &server, &out),
    }
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
    for file in &files {
        let target = out.join(file.path.strip_prefix("/").unwrap_or(&file.path));
        if let Some(folder) = target.parent() {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("creating {}", folder.display()))?;
        }
        write_file(&target, &file.contents, file.mode)?;
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
