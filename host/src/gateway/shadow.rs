//! Shadow rollouts on the data plane: a pushed version of a component evaluated beside
//! the active one on a share of the requests the active one judges, its opinion logged
//! beside the active one's and counted, never acted on. Each gateway sums what it saw
//! and adds it into the store every second (`botgate ruleset diff` reads it there).

use crate::rules::{LoadedComponent, Outcome, RequestFacts};
use arc_swap::ArcSwap;
use botgate_model::Category;
use botgate_store::rulesets::{SHADOW_SAMPLES_KEPT, ShadowResults, ShadowSample};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

/// A version in shadow.
pub struct Shadowed {
    pub component: Arc<LoadedComponent>,
    /// The share of the active component's requests it judges too, 1 to 100.
    pub percent: u8,
}

/// The versions in shadow on this gateway, by component name, and what they did since
/// the last flush.
#[derive(Default)]
pub struct Shadows {
    running: ArcSwap<BTreeMap<String, Shadowed>>,
    /// Whether any version is in shadow: the one load the request path pays otherwise.
    any: AtomicBool,
    /// By (name, version).
    results: Mutex<BTreeMap<(String, String), ShadowResults>>,
}

thread_local! {
    /// Requests seen by this thread, for the shares.
    static SEEN: Cell<u32> = const { Cell::new(0) };
}

/// An outcome as the results name it: the category (and reason), `abstain` or `failed`.
fn describe(outcome: &Outcome) -> (String, String) {
    match outcome {
        Outcome::Opinion(opinion) => {
            let category = Category::from(opinion.category).as_str().to_owned();
            let detail = format!("{category} ({})", opinion.reason);
            (category, detail)
        }
        Outcome::Abstain | Outcome::OutOfScope => ("abstain".into(), "abstain".into()),
        Outcome::Failed(_) | Outcome::Disabled => ("failed".into(), "failed".into()),
    }
}

impl Shadows {
    /// Replaces the versions in shadow.
    pub fn install(&self, running: BTreeMap<String, Shadowed>) {
        self.any.store(!running.is_empty(), Relaxed);
        self.running.store(Arc::new(running));
    }

    /// The versions in shadow now.
    pub fn running(&self) -> Arc<BTreeMap<String, Shadowed>> {
        self.running.load_full()
    }

    /// The versions in shadow now: name → version.
    pub fn versions(&self) -> BTreeMap<String, String> {
        self.running
            .load()
            .iter()
            .map(|(name, s)| (name.clone(), s.component.version().to_owned()))
            .collect()
    }

    /// Whether any version is in shadow (the one load the request path pays otherwise).
    pub fn any(&self) -> bool {
        self.any.load(Relaxed)
    }

    /// Counts a request on this thread: its number, for [`Shadows::wants`].
    pub fn count_request(&self) -> u32 {
        SEEN.with(|seen| {
            let n = seen.get().wrapping_add(1);
            seen.set(n);
            n
        })
    }

    /// Whether the request numbered `seen` falls in the share of `name`'s version in
    /// shadow (false when none is).
    pub fn wants(&self, name: &str, seen: u32) -> bool {
        self.running
            .load()
            .get(name)
            .is_some_and(|shadow| seen % 100 < u32::from(shadow.percent))
    }

    /// Evaluates the versions in shadow of the active components in `judged` (those a
    /// decision called, on their shadows' share) and compares them with what those said.
    pub fn observe(
        &self,
        judged: &[(&LoadedComponent, Outcome)],
        facts: &RequestFacts,
        website: &str,
        method: &str,
    ) {
        let running = self.running.load();
        for (active, active_outcome) in judged {
            let name = active.name();
            let Some(shadow) = running.get(name) else {
                continue;
            };
            let (active_category, active_said) = describe(active_outcome);
            let (shadow_category, shadow_said) = describe(&shadow.component.evaluate(facts));
            let agree = active_said == shadow_said;
            tracing::info!(
                target: "botgate::shadow",
                component = %name,
                active_version = %active.version(),
                active = %active_said,
                shadow_version = %shadow.component.version(),
                shadow = %shadow_said,
                agree,
                %website,
                target = %facts.target,
                "shadow"
            );
            let mut results = self.results.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (name.to_owned(), shadow.component.version().to_owned());
            let entry = results.entry(key).or_default();
            *entry
                .counts
                .entry(format!("{active_category} -> {shadow_category}"))
                .or_default() += 1;
            if !agree && entry.samples.len() < SHADOW_SAMPLES_KEPT {
                let mut target = facts.target.clone();
                target.truncate(target.floor_char_boundary(256));
                entry.samples.push(ShadowSample {
                    at_ms: botgate_store::now_ms(),
                    website: website.to_owned(),
                    method: method.to_owned(),
                    target,
                    active: active_said,
                    shadow: shadow_said,
                });
            }
        }
    }

    /// What was seen since the last call, by (name, version).
    pub fn take(&self) -> BTreeMap<(String, String), ShadowResults> {
        std::mem::take(&mut *self.results.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Adds what `shadows` saw into `store` every second, until `stopped`; what a failed
/// write held is dropped (the counts are a sample).
pub async fn flush_every<S: botgate_store::RulesetStore>(
    shadows: Arc<Shadows>,
    store: Arc<S>,
    stopped: impl std::future::Future<Output = ()>,
) {
    let mut stopped = std::pin::pin!(stopped);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            _ = &mut stopped => return,
        }
        for ((name, version), results) in shadows.take() {
            if let Err(error) = store.add_shadow_results(&name, &version, &results).await {
                tracing::warn!(component = %name, %version, error = %crate::report::Report(&error), "shadow results not stored");
            }
        }
    }
}
