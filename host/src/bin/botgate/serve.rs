//! `botgate serve`: the management API on the configured store, and the rule engine on
//! a hot-reloaded directory of components; stops gracefully on SIGINT or SIGTERM.

use crate::store::StoreArgs;
use anyhow::{Context, Result};
use botgate_api::{Api, ApiConfig};
use botgate_host::rules::{DirectorySource, Registry, RulesetSource, Watcher};
use clap::Args;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Where the management API listens.
    #[arg(long, env = "BOTGATE_API_LISTEN", default_value = "127.0.0.1:8280")]
    api_listen: SocketAddr,
    /// The directory of rule components, hot-reloaded.
    #[arg(long, env = "BOTGATE_RULESETS_DIR", default_value = "data/rulesets")]
    rulesets_dir: PathBuf,
    /// API requests a second per key, sustained.
    #[arg(long, env = "BOTGATE_API_RATE", default_value = "50")]
    api_rate: NonZeroU32,
    /// API requests per key at once.
    #[arg(long, env = "BOTGATE_API_BURST", default_value = "100")]
    api_burst: NonZeroU32,
}

pub fn run(args: ServeArgs, registry: Arc<Registry>) -> Result<()> {
    let source = DirectorySource::new(&args.rulesets_dir);
    tracing::info!(source = %source.describe(), "loading rule components");
    let _watcher = Watcher::start(registry, source)
        .with_context(|| format!("watching {}", args.rulesets_dir.display()))?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(serve(args))
}

async fn serve(args: ServeArgs) -> Result<()> {
    let store = Arc::new(args.store.open().await?);
    let api = Api::new(
        store,
        ApiConfig {
            rate_per_second: args.api_rate,
            rate_burst: args.api_burst,
            ..ApiConfig::default()
        },
    );
    let listener = tokio::net::TcpListener::bind(args.api_listen)
        .await
        .with_context(|| format!("binding the API to {}", args.api_listen))?;
    tracing::info!(
        address = %listener.local_addr()?,
        store = %args.store.describe(),
        "management API listening"
    );
    axum::serve(listener, botgate_api::router(api))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving the API")?;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => return interrupt.await.unwrap_or(()),
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await.unwrap_or(());
}
