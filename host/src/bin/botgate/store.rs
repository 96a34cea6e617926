//! The store options every command that touches the store shares, and opening it.

use anyhow::{Context, Result};
use botgate_store::{AnyStore, EmbeddedStore, RedisConfig, RedisStore};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Where the store is: the embedded file under `--data-dir` (the default), or Redis.
#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// The data directory; the embedded store is `botgate.redb` in it.
    #[arg(long, env = "BOTGATE_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// Use Redis at this address instead of the embedded store, `redis://host:port`
    /// (in a cluster: the floating IP and HAProxy's port 16379).
    #[arg(long, env = "BOTGATE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// The Redis password (`requirepass`).
    #[arg(long, env = "BOTGATE_REDIS_PASSWORD", hide_env_values = true)]
    pub redis_password: Option<String>,
    /// Replicas that must confirm a write (`WAIT`) before it counts; 0 on a lone server.
    #[arg(long, env = "BOTGATE_REDIS_WAIT_REPLICAS", default_value_t = 0)]
    pub redis_wait_replicas: u32,
}

impl StoreArgs {
    /// Opens the configured store.
    pub async fn open(&self) -> Result<AnyStore> {
        match &self.redis_url {
            None => {
                let dir = self.data_dir.clone();
                let store = tokio::task::spawn_blocking(move || EmbeddedStore::open(&dir))
                    .await?
                    .with_context(|| {
                        format!("opening the embedded store in {}", self.data_dir.display())
                    })?;
                Ok(AnyStore::Embedded(store))
            }
            Some(url) => {
                let config = RedisConfig {
                    password: self.redis_password.clone(),
                    wait_replicas: self.redis_wait_replicas,
                    wait_timeout: Duration::from_secs(1),
                    ..RedisConfig::new(url.clone())
                };
                let store = RedisStore::connect(config)
                    .await
                    .with_context(|| format!("connecting to Redis at {url}"))?;
                Ok(AnyStore::Redis(store))
            }
        }
    }

    /// Which store, for the log.
    pub fn describe(&self) -> String {
        match &self.redis_url {
            None => format!(
                "embedded ({})",
                self.data_dir.join("botgate.redb").display()
            ),
            Some(url) => format!("redis ({url})"),
        }
    }
}
