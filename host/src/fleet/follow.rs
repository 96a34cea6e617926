//! A gateway following the store's rule-set records: it polls the one revision, and when
//! it moves, fetches the active versions' bytes it lacks and syncs the registry.
//!
//! [`FleetSource`] is the registry's one source: the store's active versions, then the
//! rule-set directory's components for names the store does not run. The store wins
//! when both name a component: a fleet runs what was activated for all of it, not a
//! file one server happens to hold.

use super::signing::TrustedKeys;
use crate::rules::source::{Listing, RulesetBlob, RulesetSource, SourceError};
use crate::rules::{DirectorySource, Registry};
use arc_swap::ArcSwap;
use botgate_store::RulesetStore;
use botgate_store::rulesets::FailurePolicy;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How often a gateway asks the store whether rule sets changed: a change is in service
/// on every gateway within about this, plus the time to compile it.
pub const POLL_EVERY: Duration = Duration::from_millis(250);

/// How a pushed component's origin starts (`store: wordpress 1.2.0`).
const PUSHED_ORIGIN: &str = "store: ";

/// Where a loaded component came from, by its origin: `store` or `directory`.
pub fn source_of(origin: &str) -> &'static str {
    match origin.starts_with(PUSHED_ORIGIN) {
        true => "store",
        false => "directory",
    }
}

/// An active version as the store holds it.
#[derive(Debug, Clone)]
struct Active {
    version: String,
    sha256: String,
    bytes: Arc<Vec<u8>>,
}

/// The registry's source: the store's active versions, then the directory's files.
pub struct FleetSource {
    directory: Option<DirectorySource>,
    /// With keys, a pushed version loads only with a trusted key's signature.
    trusted: TrustedKeys,
    /// The active version of each name the store runs.
    pushed: ArcSwap<BTreeMap<String, Active>>,
    /// The names the operator made fail closed.
    fail_closed: ArcSwap<BTreeSet<String>>,
}

impl FleetSource {
    pub fn new(directory: Option<DirectorySource>, trusted: TrustedKeys) -> FleetSource {
        FleetSource {
            directory,
            trusted,
            pushed: ArcSwap::from_pointee(BTreeMap::new()),
            fail_closed: ArcSwap::from_pointee(BTreeSet::new()),
        }
    }

    /// The names the operator made fail closed, as last read.
    pub fn fail_closed(&self) -> BTreeSet<String> {
        (**self.fail_closed.load()).clone()
    }

    /// Reads the store's active versions, fetching the bytes of those it does not hold
    /// yet. Whether anything changed. A name whose bytes cannot be read keeps what it
    /// ran (and the error is logged); a store that does not answer is an error.
    pub async fn refresh<S: RulesetStore>(&self, store: &S) -> Result<bool, String> {
        let states = store
            .ruleset_states()
            .await
            .map_err(|e| crate::report::Report(&e).to_string())?;
        let pushed = store
            .pushed_rulesets()
            .await
            .map_err(|e| crate::report::Report(&e).to_string())?;
        let closed = states
            .iter()
            .filter(|(_, stored)| stored.state.failure == FailurePolicy::Closed)
            .map(|(name, _)| name.clone())
            .collect();
        self.fail_closed.store(Arc::new(closed));
        let held = self.pushed.load_full();
        let mut next = BTreeMap::new();
        for (name, stored) in states {
            let Some(version) = stored.state.active else {
                continue;
            };
            let record = pushed
                .iter()
                .find(|p| p.name == name && p.version == version);
            let Some(record) = record else {
                tracing::error!(component = %name, %version, "the active rule-set version is not stored; keeping what runs");
                if let Some(kept) = held.get(&name) {
                    next.insert(name, kept.clone());
                }
                continue;
            };
            if let Some(kept) = held.get(&name).filter(|k| k.sha256 == record.sha256) {
                next.insert(name, kept.clone());
                continue;
            }
            let fetched = store.ruleset_bytes(&record.sha256).await;
            let signed = |bytes: &[u8]| {
                let signature = record.signature.as_deref();
                self.trusted.check(&name, &version, bytes, signature)
            };
            match fetched {
                Ok(Some(bytes)) if botgate_store::sha256_hex(&bytes) != record.sha256 => {
                    tracing::error!(component = %name, %version, "the stored bytes do not match their SHA-256; keeping what runs");
                    if let Some(kept) = held.get(&name) {
                        next.insert(name, kept.clone());
                    }
                }
                Ok(Some(bytes)) if signed(&bytes).is_err() => {
                    let why = signed(&bytes)
                        .err()
                        .map(|e| e.to_string())
                        .unwrap_or_default();
                    tracing::error!(component = %name, %version, reason = %why, "a pushed rule set is refused; keeping what runs");
                    if let Some(kept) = held.get(&name) {
                        next.insert(name, kept.clone());
                    }
                }
                Ok(Some(bytes)) => {
                    next.insert(
                        name,
                        Active {
                            version,
                            sha256: record.sha256.clone(),
                            bytes: Arc::new(bytes),
                        },
                    );
                }
                outcome => {
                    let why = match outcome {
                        Ok(_) => "its bytes are gone".to_owned(),
                        Err(error) => crate::report::Report(&error).to_string(),
                    };
                    tracing::error!(component = %name, %version, reason = %why, "cannot read a pushed rule set; keeping what runs");
                    if let Some(kept) = held.get(&name) {
                        next.insert(name, kept.clone());
                    }
                }
            }
        }
        let changed = next.len() != held.len()
            || next
                .iter()
                .zip(held.iter())
                .any(|((a, x), (b, y))| a != b || x.sha256 != y.sha256);
        if changed {
            self.pushed.store(Arc::new(next));
        }
        Ok(changed)
    }
}

impl RulesetSource for FleetSource {
    fn list(&self) -> Result<Listing, SourceError> {
        let pushed = self.pushed.load();
        let mut listing = match &self.directory {
            Some(directory) => directory.list()?,
            None => Listing::default(),
        };
        let shadowed = |name: Option<&str>| name.is_some_and(|n| pushed.contains_key(n));
        listing.blobs.retain(|blob| !shadowed(Some(&blob.name)));
        listing
            .errors
            .retain(|error| !shadowed(error.name.as_deref()));
        listing
            .blobs
            .extend(pushed.iter().map(|(name, active)| RulesetBlob {
                name: name.clone(),
                bytes: active.bytes.to_vec(),
                origin: format!("{PUSHED_ORIGIN}{name} {}", active.version),
            }));
        Ok(listing)
    }

    fn describe(&self) -> String {
        match &self.directory {
            Some(directory) => format!("the store, then {}", directory.describe()),
            None => "the store".to_owned(),
        }
    }
}

/// Polls `store` every [`POLL_EVERY`] and syncs `registry` with `source` when the
/// rule-set revision moves from `seen` (`None`: not read yet); until `stopped`.
pub async fn follow<S: RulesetStore>(
    store: Arc<S>,
    registry: Arc<Registry>,
    source: Arc<FleetSource>,
    mut seen: Option<u64>,
    stopped: impl std::future::Future<Output = ()>,
) {
    let mut failing = false;
    let mut stopped = std::pin::pin!(stopped);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(POLL_EVERY) => {}
            _ = &mut stopped => return,
        }
        let revision = match store.rulesets_revision().await {
            Ok(revision) => revision,
            Err(error) => {
                if !failing {
                    tracing::warn!(error = %crate::report::Report(&error), "cannot read the rule sets' revision; keeping what runs");
                }
                failing = true;
                continue;
            }
        };
        if seen == Some(revision) {
            continue;
        }
        match source.refresh(store.as_ref()).await {
            Ok(changed) => {
                failing = false;
                seen = Some(revision);
                registry.set_fail_closed(source.fail_closed());
                if changed {
                    let (registry, source) = (registry.clone(), source.clone());
                    let _ =
                        tokio::task::spawn_blocking(move || registry.sync(source.as_ref())).await;
                }
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, "cannot read the pushed rule sets; keeping what runs");
                }
                failing = true;
            }
        }
    }
}
