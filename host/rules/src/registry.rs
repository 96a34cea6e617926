//! The registry of loaded rule components: an atomically swapped, immutable set.
//!
//! Readers take a snapshot (`Arc<RulesetSet>`) and keep it for a whole evaluation, so
//! in-flight requests finish on the versions they started with. A sync with a source
//! builds a new set beside the old one and swaps it in one store; a component that
//! fails validation is refused and its previous version, if any, stays.

use super::cache::{ComponentCache, content_hash};
use super::component::{LoadError, LoadedComponent};
use super::sandbox::Sandbox;
use super::scope::ScopeIndex;
use super::source::RulesetSource;
use arc_swap::ArcSwap;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The names of the components whose failure refuses the request (fail-closed), shared
/// by the registry and every set it made: the operator changes it without a new set.
pub type FailClosed = Arc<ArcSwap<BTreeSet<String>>>;

/// One immutable generation of loaded components, keyed by name, with their scopes
/// indexed.
pub struct RulesetSet {
    generation: u64,
    /// The components in name order; a component's position is its slot in `scopes`.
    components: Vec<Arc<LoadedComponent>>,
    scopes: ScopeIndex,
    fail_closed: FailClosed,
    /// The names that fail closed with no component loaded (as the set was made; a
    /// change of the names makes a new set).
    missing_fail_closed: Box<[Arc<str>]>,
}

impl Default for RulesetSet {
    fn default() -> Self {
        RulesetSet::new(0, BTreeMap::new(), FailClosed::default())
    }
}

impl RulesetSet {
    fn new(
        generation: u64,
        components: BTreeMap<String, Arc<LoadedComponent>>,
        fail_closed: FailClosed,
    ) -> Self {
        let scopes = ScopeIndex::new(components.values());
        let missing_fail_closed = fail_closed
            .load()
            .iter()
            .filter(|name| !components.contains_key(*name))
            .map(|name| Arc::from(name.as_str()))
            .collect::<Box<[Arc<str>]>>();
        if !missing_fail_closed.is_empty() {
            tracing::warn!(components = ?missing_fail_closed, "components that fail closed are not loaded: the requests they would judge are refused");
        }
        RulesetSet {
            generation,
            components: components.into_values().collect(),
            scopes,
            fail_closed,
            missing_fail_closed,
        }
    }

    /// The names that fail closed but have no component loaded: a request one of them
    /// should judge is refused.
    pub fn missing_fail_closed(&self) -> &[Arc<str>] {
        &self.missing_fail_closed
    }

    /// Whether a failure of the component `name` refuses the request it was called
    /// for (fail-closed) rather than leaving it to the others (fail-open).
    pub fn fails_closed(&self, name: &str) -> bool {
        self.fail_closed.load().contains(name)
    }

    /// The components by name, to build the next generation from.
    fn to_map(&self) -> BTreeMap<String, Arc<LoadedComponent>> {
        self.components
            .iter()
            .map(|c| (c.name().to_owned(), c.clone()))
            .collect()
    }

    /// The component called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<LoadedComponent>> {
        self.get_with_slot(name).map(|(_, c)| c)
    }

    /// The component called `name` and its slot in [`RulesetSet::scopes`].
    pub fn get_with_slot(&self, name: &str) -> Option<(usize, &Arc<LoadedComponent>)> {
        let slot = self
            .components
            .binary_search_by(|c| c.name().cmp(name))
            .ok()?;
        Some((slot, &self.components[slot]))
    }

    /// The component in `slot` of [`RulesetSet::scopes`].
    pub fn by_slot(&self, slot: usize) -> Option<&Arc<LoadedComponent>> {
        self.components.get(slot)
    }

    /// The scopes of the components, by slot.
    pub fn scopes(&self) -> &ScopeIndex {
        &self.scopes
    }

    /// Every component, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<LoadedComponent>> {
        self.components.iter()
    }

    pub fn len(&self) -> usize {
        self.components.len()
    }

    pub fn is_empty(&self) -> bool {
        self.components.is_empty()
    }

    /// Increases by one with every swap that changed something.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// What one sync did.
#[derive(Debug, Default)]
pub struct SyncReport {
    /// Components added or replaced: (name, version).
    pub loaded: Vec<(String, String)>,
    /// Components removed because the source no longer holds them.
    pub removed: Vec<String>,
    /// Entries refused: (origin, reason). The previous version of each stays.
    pub refused: Vec<(String, String)>,
    /// The source could not be read at all; nothing changed.
    pub source_error: Option<String>,
    /// The generation in service after the sync.
    pub generation: u64,
}

impl SyncReport {
    pub fn changed(&self) -> bool {
        !self.loaded.is_empty() || !self.removed.is_empty()
    }
}

/// A component a source holds that does not serve here: refused when it was loaded
/// (its previous version, if any, serves), or held back by the source (a fleet's
/// activated version this gateway cannot load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotInService {
    pub name: String,
    /// Where it comes from: a file's path, or `store: NAME VERSION`.
    pub origin: String,
    pub reason: String,
}

/// The registry: a sandbox, a compile cache and the current set.
pub struct Registry {
    sandbox: Arc<Sandbox>,
    cache: ComponentCache,
    current: ArcSwap<RulesetSet>,
    fail_closed: FailClosed,
    /// Serialises syncs; readers never take it.
    sync_lock: Mutex<()>,
    /// Components refused recently, by content hash, so an unchanged refused file is
    /// not validated again on every sync.
    refused: Mutex<HashMap<String, Refusal>>,
    /// What the last sync that read its source did not put in service.
    refused_at_sync: Mutex<Vec<NotInService>>,
    /// What the source itself holds back (see [`Registry::set_held_back`]).
    held_back: Mutex<Vec<NotInService>>,
    syncs: AtomicU64,
}

/// A refused component's reason, remembered for [`RETRY_REFUSED`].
struct Refusal {
    reason: String,
    at: Instant,
}

/// How long an unchanged refused component is not validated again. A refusal can be
/// transient (a smoke request that ran out of time on a busy machine), so it is retried
/// after a while.
const RETRY_REFUSED: Duration = Duration::from_secs(60);

impl Registry {
    /// An empty registry; compiled code is cached under `cache_dir` when given.
    pub fn new(sandbox: Arc<Sandbox>, cache_dir: Option<PathBuf>) -> Self {
        let cache = ComponentCache::new(sandbox.engine(), cache_dir);
        let fail_closed = FailClosed::default();
        Registry {
            sandbox,
            cache,
            current: ArcSwap::from_pointee(RulesetSet::new(
                0,
                BTreeMap::new(),
                fail_closed.clone(),
            )),
            fail_closed,
            sync_lock: Mutex::new(()),
            refused: Mutex::new(HashMap::new()),
            refused_at_sync: Mutex::new(Vec::new()),
            held_back: Mutex::new(Vec::new()),
            syncs: AtomicU64::new(0),
        }
    }

    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// Makes the components `names` fail closed, every other one fail open, at once.
    pub fn set_fail_closed(&self, names: BTreeSet<String>) {
        let _guard = self
            .sync_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if **self.fail_closed.load() != names {
            tracing::info!(components = ?names, "components that fail closed");
            self.fail_closed.store(Arc::new(names));
            // A new generation of the same components, which knows what is missing.
            let old = self.current.load();
            self.current.store(Arc::new(RulesetSet::new(
                old.generation + 1,
                old.to_map(),
                self.fail_closed.clone(),
            )));
        }
    }

    /// Notes what the source holds back from service (a fleet's activated versions this
    /// gateway refused), to be named with the components refused at a sync.
    pub fn set_held_back(&self, held_back: Vec<NotInService>) {
        *self
            .held_back
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = held_back;
    }

    /// The components the source holds that do not serve here, by name: refused at the
    /// last sync, or held back by the source.
    pub fn not_in_service(&self) -> Vec<NotInService> {
        let mut all = self
            .held_back
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        all.extend(
            self.refused_at_sync
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        all.sort_by(|a, b| (&a.name, &a.origin).cmp(&(&b.name, &b.origin)));
        all.dedup();
        all
    }

    /// The set in service now. Hold it for the whole of one evaluation.
    pub fn snapshot(&self) -> Arc<RulesetSet> {
        self.current.load_full()
    }

    /// The rule sets in service, for a decision that does not await: unlike
    /// [`Registry::snapshot`] it does not write the set's reference count, a line every
    /// data-plane core would otherwise write on every request. In-flight calls still
    /// finish on the set they started with.
    pub fn current(&self) -> arc_swap::Guard<Arc<RulesetSet>> {
        self.current.load()
    }

    /// Validates one component without putting it in service (with one warm instance:
    /// [`LoadedComponent::make_spares`] readies the rest for serving).
    pub fn check(
        &self,
        name: &str,
        bytes: &[u8],
        origin: &str,
    ) -> Result<LoadedComponent, LoadError> {
        LoadedComponent::load(&self.sandbox, &self.cache, name, bytes, origin)
    }

    /// Puts an already loaded component in service (replacing one of the same name) with
    /// one atomic swap; returns the new generation. This is the whole cost of a hot
    /// swap once a component is compiled and validated.
    pub fn install(&self, component: Arc<LoadedComponent>) -> u64 {
        component.make_spares();
        let _guard = self
            .sync_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let old = self.current.load();
        let mut components = old.to_map();
        components.insert(component.name().to_owned(), component);
        let generation = old.generation + 1;
        self.current.store(Arc::new(RulesetSet::new(
            generation,
            components,
            self.fail_closed.clone(),
        )));
        generation
    }

    /// Makes the set equal what `source` holds: new and changed components are loaded
    /// and validated beside the running ones, removed ones are dropped, refused ones
    /// keep their previous version; then the new set is swapped in at once.
    pub fn sync(&self, source: &dyn RulesetSource) -> SyncReport {
        let _guard = self
            .sync_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.syncs.fetch_add(1, Relaxed);
        let old = self.current.load_full();
        let mut report = SyncReport {
            generation: old.generation,
            ..SyncReport::default()
        };
        let listing = match source.list() {
            Ok(listing) => listing,
            Err(error) => {
                tracing::error!(source = %source.describe(), reason = %error.message, "rule-set source unreadable; keeping every rule set in service");
                report.source_error = Some(error.message);
                return report;
            }
        };
        let mut next = BTreeMap::new();
        let mut not_in_service = Vec::new();
        for error in listing.errors {
            tracing::error!(origin = %error.origin, reason = %error.message, "rule set not read; the previous version stays in service");
            if let Some(previous) = error.name.as_deref().and_then(|n| old.get(n)) {
                next.insert(previous.name().to_owned(), previous.clone());
            }
            report
                .refused
                .push((error.origin.clone(), error.message.clone()));
            not_in_service.push(NotInService {
                name: error.name.unwrap_or_else(|| error.origin.clone()),
                origin: error.origin,
                reason: error.message,
            });
        }
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        refused.retain(|_, r| r.at.elapsed() < RETRY_REFUSED);
        for blob in listing.blobs {
            let hash = content_hash(&blob.bytes);
            let previous = old.get(&blob.name);
            if let Some(previous) = previous.filter(|p| p.hash() == hash) {
                next.insert(blob.name, previous.clone());
                continue;
            }
            let outcome = match refused.get(&hash) {
                // Refused recently: do not pay for validation again until it changes.
                Some(earlier) => Err(earlier.reason.clone()),
                None => LoadedComponent::load(
                    &self.sandbox,
                    &self.cache,
                    &blob.name,
                    &blob.bytes,
                    &blob.origin,
                )
                .map(Arc::new)
                .inspect(LoadedComponent::make_spares)
                .map_err(|err| {
                    let kept = previous.map(|p| p.version().to_owned());
                    tracing::error!(
                        origin = %blob.origin,
                        reason = %err,
                        kept_version = kept.as_deref().unwrap_or("none"),
                        "rule set refused; the previous version stays in service"
                    );
                    refused.insert(
                        hash.clone(),
                        Refusal {
                            reason: err.to_string(),
                            at: Instant::now(),
                        },
                    );
                    err.to_string()
                }),
            };
            match outcome {
                Ok(component) => {
                    tracing::info!(
                        component = %component.name(),
                        version = %component.version(),
                        origin = %blob.origin,
                        hash = %&hash[..12],
                        replaced = previous.map(|p| p.version()),
                        "rule set loaded"
                    );
                    report
                        .loaded
                        .push((blob.name.clone(), component.version().to_owned()));
                    next.insert(blob.name, component);
                }
                Err(reason) => {
                    not_in_service.push(NotInService {
                        name: blob.name.clone(),
                        origin: blob.origin.clone(),
                        reason: reason.clone(),
                    });
                    report.refused.push((blob.origin, reason));
                    if let Some(previous) = previous {
                        next.insert(blob.name, previous.clone());
                    }
                }
            }
        }
        drop(refused);
        *self
            .refused_at_sync
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = not_in_service;
        for name in old.iter().map(|c| c.name()) {
            if !next.contains_key(name) {
                tracing::info!(component = %name, "rule set removed");
                report.removed.push(name.to_owned());
            }
        }
        if report.changed() {
            let generation = old.generation + 1;
            let keep: Vec<&str> = next.values().map(|c| c.hash()).collect();
            self.cache.retain(&keep);
            self.current.store(Arc::new(RulesetSet::new(
                generation,
                next,
                self.fail_closed.clone(),
            )));
            report.generation = generation;
        }
        report
    }

    /// How many syncs ran since the registry was created.
    pub fn sync_count(&self) -> u64 {
        self.syncs.load(Relaxed)
    }
}
