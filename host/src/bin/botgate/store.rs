//! The store options every command that touches the store shares, and opening it.

use anyhow::{Context, Result};
use botgate_store::{AnyStore, RedisConfig, StoreConfig};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// The operator token's file in the data directory, written by `serve`.
pub const OPERATOR_TOKEN_FILE: &str = "operator.token";

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
    /// The store these options name.
    pub fn config(&self) -> StoreConfig {
        match &self.redis_url {
            None => StoreConfig::Embedded(self.data_dir.clone()),
            Some(url) => StoreConfig::Redis(RedisConfig {
                password: self.redis_password.clone(),
                wait_replicas: self.redis_wait_replicas,
                wait_timeout: Duration::from_secs(1),
                ..RedisConfig::new(url.clone())
            }),
        }
    }

    /// Opens the configured store.
    pub async fn open(&self) -> Result<AnyStore> {
        let config = self.config();
        AnyStore::open(&config)
            .await
            .with_context(|| format!("opening the store {config}"))
    }
}
