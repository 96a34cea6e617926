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
    #[arg(long, env = "BOTGATE_REDIS_URL", conflicts_with = "redis_sentinels")]
    pub redis_url: Option<String>,
    /// Use the Redis master these sentinels name instead of the embedded store (or of
    /// `--redis-url`): `host:port`, repeat or separate with commas; asked again at
    /// every reconnection, so a failover needs no HAProxy.
    #[arg(
        long = "redis-sentinel",
        env = "BOTGATE_REDIS_SENTINELS",
        value_delimiter = ',',
        value_name = "HOST:PORT"
    )]
    pub redis_sentinels: Vec<String>,
    /// The name the sentinels know the master by.
    #[arg(long, env = "BOTGATE_REDIS_MASTER", default_value = "mymaster")]
    pub redis_master: String,
    /// The sentinels' own password (their `requirepass`; in a rendered cluster, the
    /// store's password).
    #[arg(long, env = "BOTGATE_REDIS_SENTINEL_PASSWORD", hide_env_values = true)]
    pub redis_sentinel_password: Option<String>,
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
        let redis = match (&self.redis_url, self.redis_sentinels.is_empty()) {
            (None, true) => return StoreConfig::Embedded(self.data_dir.clone()),
            (Some(url), _) => RedisConfig::new(url.clone()),
            (None, false) => {
                let mut config =
                    RedisConfig::sentinels(self.redis_sentinels.clone(), self.redis_master.clone());
                if let Some(sentinel) = &mut config.sentinel {
                    sentinel.password = self.redis_sentinel_password.clone();
                }
                config
            }
        };
        StoreConfig::Redis(RedisConfig {
            password: self.redis_password.clone(),
            wait_replicas: self.redis_wait_replicas,
            wait_timeout: Duration::from_secs(1),
            ..redis
        })
    }

    /// That the options name one store: a `redis-url` from the configuration file
    /// under a `--redis-sentinel` given otherwise would win silently.
    pub fn check(&self) -> Result<()> {
        if self.redis_url.is_some() && !self.redis_sentinels.is_empty() {
            anyhow::bail!(
                "both --redis-url and --redis-sentinel name a store (one may come from the \
                 configuration file or the environment): give one"
            );
        }
        Ok(())
    }

    /// Opens the configured store.
    pub async fn open(&self) -> Result<AnyStore> {
        self.check()?;
        let config = self.config();
        AnyStore::open(&config)
            .await
            .with_context(|| format!("opening the store {config}"))
    }
}
