//! A gateway following the store's rule-set records: it polls the one revision, and when
//! it moves, fetches the active versions' bytes it lacks and syncs the registry.
//!
//! [`FleetSource`] is the registry's one source: the store's active versions, then the
//! rule-set directory's components for names the store does not run. The store wins
//! when both name a component: a fleet runs what was activated for all of it, not a
//! file one server happens to hold.

use super::signing::TrustedKeys;
use crate::gateway::shadow::{Shadowed, Shadows};
use crate::rules::source::{Listing, RulesetBlob, RulesetSource, SourceError};
use crate::rules::{DirectorySource, LoadedComponent, NotInService, Registry};
use arc_swap::ArcSwap;
use botgate_store::RulesetStore;
use botgate_store::rulesets::{FailurePolicy, PushedRuleset};
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

/// A pushed version as the store holds it.
#[derive(Debug, Clone)]
pub struct Active {
    pub version: String,
    pub sha256: String,
    pub bytes: Arc<Vec<u8>>,
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
    /// The versions in shadow and their shares, by name.
    shadows: ArcSwap<BTreeMap<String, (Active, u8)>>,
    /// The active versions this gateway does not run, and why.
    held_back: ArcSwap<Vec<NotInService>>,
}

impl FleetSource {
    pub fn new(directory: Option<DirectorySource>, trusted: TrustedKeys) -> FleetSource {
        FleetSource {
            directory,
            trusted,
            pushed: ArcSwap::from_pointee(BTreeMap::new()),
            fail_closed: ArcSwap::from_pointee(BTreeSet::new()),
            shadows: ArcSwap::from_pointee(BTreeMap::new()),
            held_back: ArcSwap::from_pointee(Vec::new()),
        }
    }

    /// The active versions (and unreadable records) this gateway does not run, as last
    /// read: it keeps what it ran for those names, if anything.
    pub fn held_back(&self) -> Vec<NotInService> {
        (**self.held_back.load()).clone()
    }

    /// The names the operator made fail closed, as last read.
    pub fn fail_closed(&self) -> BTreeSet<String> {
        (**self.fail_closed.load()).clone()
    }

    /// The versions in shadow, as last read: name → (the version, its share).
    pub fn shadows(&self) -> BTreeMap<String, (Active, u8)> {
        (**self.shadows.load()).clone()
    }

    /// `record`'s version: `held` when it has the same bytes, else fetched from `store`
    /// and checked (its SHA-256, and its signature when keys are trusted). A version
    /// refused is `Ok(Err(why))` (and logged); a store that does not answer is an
    /// error, so the next poll tries again.
    async fn fetch<S: RulesetStore>(
        &self,
        store: &S,
        record: &PushedRuleset,
        held: Option<&Active>,
    ) -> Result<Result<Active, String>, String> {
        if let Some(kept) = held.filter(|k| k.sha256 == record.sha256) {
            return Ok(Ok(kept.clone()));
        }
        let (name, version) = (&record.name, &record.version);
        let why = match store.ruleset_bytes(&record.sha256).await {
            Ok(Some(bytes)) if botgate_store::sha256_hex(&bytes) != record.sha256 => {
                "the stored bytes do not match their SHA-256".to_owned()
            }
            Ok(Some(bytes)) => {
                let signature = record.signature.as_deref();
                match self.trusted.check(name, version, &bytes, signature) {
                    Ok(_) => {
                        return Ok(Ok(Active {
                            version: version.clone(),
                            sha256: record.sha256.clone(),
                            bytes: Arc::new(bytes),
                        }));
                    }
                    Err(refused) => refused.to_string(),
                }
            }
            Ok(None) => "its bytes are gone".to_owned(),
            Err(error) => return Err(crate::report::Report(&error).to_string()),
        };
        tracing::error!(component = %name, %version, reason = %why, "a pushed rule set is refused; keeping what runs");
        Ok(Err(why))
    }

    /// Reads the store's active versions and those in shadow, fetching the bytes of
    /// those it does not hold yet. Whether the active ones changed. A name whose bytes
    /// or records cannot be read keeps what it ran; a store that does not answer is an
    /// error.
    pub async fn refresh<S: RulesetStore>(&self, store: &S) -> Result<bool, String> {
        let states = store
            .ruleset_states()
            .await
            .map_err(|e| crate::report::Report(&e).to_string())?;
        let pushed = store
            .pushed_rulesets()
            .await
            .map_err(|e| crate::report::Report(&e).to_string())?;
        for record in states.unreadable.iter().chain(&pushed.unreadable) {
            tracing::error!(component = %record.name, key = %record.key, reason = %record.reason, "a rule-set record is unreadable; keeping what runs for that name");
        }
        // Names whose state cannot be read keep their version, shadow and policy.
        let unreadable: BTreeSet<&str> =
            states.unreadable.iter().map(|u| u.name.as_str()).collect();
        let mut held_back: Vec<NotInService> = states
            .unreadable
            .iter()
            .map(|record| NotInService {
                name: record.name.clone(),
                origin: format!("store record {}", record.key),
                reason: format!("unreadable: {}", record.reason),
            })
            .collect();
        let (states, unreadable_versions, pushed) =
            (states.records, pushed.unreadable, pushed.records);
        let was_closed = self.fail_closed.load_full();
        let closed = states
            .iter()
            .filter(|(_, stored)| stored.state.failure == FailurePolicy::Closed)
            .map(|(name, _)| name.clone())
            .chain(
                was_closed
                    .iter()
                    .filter(|n| unreadable.contains(n.as_str()))
                    .cloned(),
            )
            .collect();
        self.fail_closed.store(Arc::new(closed));
        let record_of = |name: &str, version: &str| {
            let record = pushed
                .iter()
                .find(|p| p.name == name && p.version == version);
            if record.is_none() {
                tracing::error!(component = %name, %version, "a pushed version in service is not stored; keeping what runs");
            }
            record.ok_or_else(|| {
                // Its record may be one of the name's unreadable ones.
                let unreadable: Vec<String> = unreadable_versions
                    .iter()
                    .filter(|u| u.name == name)
                    .map(|u| format!("{}: {}", u.key, u.reason))
                    .collect();
                match unreadable.is_empty() {
                    true => "the version is not stored".to_owned(),
                    false => format!(
                        "the version is not among its readable records; unreadable: {}",
                        unreadable.join("; ")
                    ),
                }
            })
        };
        let (held, held_shadows) = (self.pushed.load_full(), self.shadows.load_full());
        let (mut next, mut shadows) = (BTreeMap::new(), BTreeMap::new());
        for name in &unreadable {
            if let Some(active) = held.get(*name) {
                next.insert((*name).to_owned(), active.clone());
            }
            if let Some(shadow) = held_shadows.get(*name) {
                shadows.insert((*name).to_owned(), shadow.clone());
            }
        }
        for (name, stored) in &states {
            if let Some(version) = &stored.state.active {
                let kept = held.get(name);
                let active = match record_of(name, version) {
                    Ok(record) => self.fetch(store, record, kept).await?,
                    Err(why) => Err(why),
                };
                match active {
                    Ok(active) => {
                        next.insert(name.clone(), active);
                    }
                    Err(reason) => {
                        held_back.push(NotInService {
                            name: name.clone(),
                            origin: format!("{PUSHED_ORIGIN}{name} {version}"),
                            reason,
                        });
                        if let Some(kept) = kept {
                            next.insert(name.clone(), kept.clone());
                        }
                    }
                }
            }
            if let Some(shadow) = &stored.state.shadow {
                let kept = held_shadows.get(name).map(|(active, _)| active);
                let fetched = match record_of(name, &shadow.version) {
                    Ok(record) => self.fetch(store, record, kept).await?.ok(),
                    Err(_) => None,
                };
                if let Some(fetched) = fetched.or_else(|| kept.cloned()) {
                    shadows.insert(name.clone(), (fetched, shadow.percent));
                }
            }
        }
        self.shadows.store(Arc::new(shadows));
        self.held_back.store(Arc::new(held_back));
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

/// Loads the versions in shadow that `shadows` does not run yet (validated as any
/// component is) and installs them all.
async fn install_shadows(registry: &Arc<Registry>, source: &FleetSource, shadows: &Shadows) {
    let wanted = source.shadows();
    let running = shadows.running();
    let mut next = BTreeMap::new();
    for (name, (version, percent)) in wanted {
        let kept = running
            .get(&name)
            .filter(|s| s.component.hash() == version.sha256);
        let component = match kept {
            Some(kept) => kept.component.clone(),
            None => {
                let (registry, checked, bytes) =
                    (registry.clone(), name.clone(), version.bytes.clone());
                let origin = format!("{PUSHED_ORIGIN}{name} {} (shadow)", version.version);
                // Evaluated on the data-plane threads: readied for each of them.
                let loaded = tokio::task::spawn_blocking(move || {
                    registry
                        .check(&checked, &bytes, &origin)
                        .map(Arc::new)
                        .inspect(LoadedComponent::make_spares)
                })
                .await;
                match loaded {
                    Ok(Ok(component)) => component,
                    Ok(Err(refused)) => {
                        tracing::error!(component = %name, version = %version.version, reason = %refused, "a version in shadow is refused");
                        continue;
                    }
                    Err(_) => continue,
                }
            }
        };
        next.insert(name, Shadowed { component, percent });
    }
    if next.keys().ne(running.keys())
        || next.iter().zip(running.iter()).any(|((_, a), (_, b))| {
            a.component.hash() != b.component.hash() || a.percent != b.percent
        })
    {
        tracing::info!(shadows = ?next.iter().map(|(n, s)| format!("{n} {} {}%", s.component.version(), s.percent)).collect::<Vec<_>>(), "versions in shadow");
        shadows.install(next);
    }
}

/// Polls `store` every [`POLL_EVERY`] and syncs `registry` with `source` when the
/// rule-set revision moves from `seen` (`None`: not read yet); until `stopped`.
pub async fn follow<S: RulesetStore>(
    store: Arc<S>,
    registry: Arc<Registry>,
    source: Arc<FleetSource>,
    shadows: Arc<Shadows>,
    mut seen: Option<u64>,
    stopped: impl std::future::Future<Output = ()>,
) {
    let mut failing = false;
    let mut stopped = std::pin::pin!(stopped);
    install_shadows(&registry, &source, &shadows).await;
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
                // Both wait for a sync in progress (a directory's, say): off this thread.
                let (closed, fail_closed) = (registry.clone(), source.fail_closed());
                let _ =
                    tokio::task::spawn_blocking(move || closed.set_fail_closed(fail_closed)).await;
                registry.set_held_back(source.held_back());
                install_shadows(&registry, &source, &shadows).await;
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
