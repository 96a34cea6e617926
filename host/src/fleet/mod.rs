//! Rule components for a whole fleet: pushed once into the store, validated as the
//! directory source validates them, kept by version, and activated or rolled back with
//! one store record per name; every gateway follows those records ([`follow`]).
//!
//! The same operations serve the command line (on Redis, or on an embedded store no
//! gateway holds) and a running gateway's admin listener.

pub mod follow;
pub mod signing;

use crate::rules::{LoadError, Registry};
use botgate_store::rulesets::{
    FailurePolicy, MAX_COMPONENT_BYTES, PREVIOUS_KEPT, Pushed, PushedRuleset, RulesetState, Shadow,
    ShadowResults, StoredState,
};
use botgate_store::{RulesetStore, StoreError};
use signing::{SigningError, TrustedKeys};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use follow::{FleetSource, follow};

/// Why an operation on pushed components failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("{0}")]
    Invalid(String),
    #[error("the component is refused: {0}")]
    Refused(#[source] LoadError),
    #[error(
        "{name} {version} is stored with other content: a changed component needs a new version"
    )]
    VersionTaken { name: String, version: String },
    #[error("no pushed version {version} of {name} (see `botgate ruleset list`)")]
    NoSuchVersion { name: String, version: String },
    #[error("{0} has no earlier version to roll back to")]
    NothingToRollBack(String),
    #[error("{name} {version} is in service: activate another version first")]
    InService { name: String, version: String },
    #[error(transparent)]
    Signing(#[from] SigningError),
    #[error("{0} changed while this command changed it; run it again")]
    Concurrent(String),
    #[error("the store")]
    Store(#[source] StoreError),
}

impl From<StoreError> for FleetError {
    fn from(error: StoreError) -> FleetError {
        FleetError::Store(error)
    }
}

impl FleetError {
    /// Whether the operator asked for something impossible (rather than the store
    /// failing): the admin listener answers 4xx for these.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, FleetError::Store(_))
    }
}

/// Everything pushed, and every name's state.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listing {
    pub pushed: Vec<PushedRuleset>,
    pub states: BTreeMap<String, RulesetState>,
}

/// Validates `bytes` as the component `name` (as the directory source does: its world,
/// its `info`, smoke calls under the sandbox's limits) and stores it as pushed by
/// `pushed_by`. Pushing the same bytes again changes nothing. A signature that comes
/// with it must be a trusted key's (when keys are trusted); an unsigned component is
/// stored, and cannot be activated where signatures are needed.
pub async fn push<S: RulesetStore>(
    store: &S,
    registry: &Arc<Registry>,
    name: &str,
    bytes: Vec<u8>,
    pushed_by: &str,
    signature: Option<String>,
    trusted: &TrustedKeys,
) -> Result<(PushedRuleset, Pushed), FleetError> {
    if bytes.len() > MAX_COMPONENT_BYTES {
        return Err(FleetError::Invalid(format!(
            "the component is {} bytes; at most {MAX_COMPONENT_BYTES} are taken",
            bytes.len()
        )));
    }
    let (registry, checked_name) = (registry.clone(), name.to_owned());
    let (component, bytes) = tokio::task::spawn_blocking(move || {
        let origin = format!("pushed {checked_name}");
        let checked = registry.check(&checked_name, &bytes, &origin);
        (checked, bytes)
    })
    .await
    .map_err(|_| FleetError::Invalid("the validation stopped".into()))?;
    let component = component.map_err(FleetError::Refused)?;
    check_version(component.version())?;
    if signature.is_some() {
        trusted.check(
            component.name(),
            component.version(),
            &bytes,
            signature.as_deref(),
        )?;
    }
    let record = PushedRuleset {
        name: component.name().to_owned(),
        version: component.version().to_owned(),
        sha256: botgate_store::sha256_hex(&bytes),
        size: bytes.len() as u64,
        pushed_by: pushed_by.to_owned(),
        pushed_at_ms: botgate_store::now_ms(),
        signature,
    };
    match store.push_ruleset(&record, &bytes).await {
        Ok(outcome) => Ok((record, outcome)),
        Err(StoreError::Conflict(_)) => Err(FleetError::VersionTaken {
            name: record.name,
            version: record.version,
        }),
        Err(error) => Err(error.into()),
    }
}

/// Refuses a version a pushed component may not have: 1 to 64 letters, digits and
/// `.`, `_`, `+`, `-` (it travels in the admin listener's paths and the command line).
pub fn check_version(version: &str) -> Result<(), FleetError> {
    let fine = (1..=64).contains(&version.len())
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
    match fine {
        true => Ok(()),
        false => Err(FleetError::Invalid(format!(
            "version {version:?}: a pushed component's version is 1 to 64 letters, digits, `.`, `_`, `+` and `-`"
        ))),
    }
}

/// Every pushed version and every name's state.
pub async fn list<S: RulesetStore>(store: &S) -> Result<Listing, FleetError> {
    let pushed = store.pushed_rulesets().await?.whole()?;
    let states = store
        .ruleset_states()
        .await?
        .whole()?
        .into_iter()
        .map(|(name, stored)| (name, stored.state))
        .collect();
    Ok(Listing { pushed, states })
}

/// Puts `version` of `name` in service on every gateway; the version it replaces
/// becomes the one `rollback` returns to. With trusted keys, only a version signed by
/// one of them.
pub async fn activate<S: RulesetStore>(
    store: &S,
    name: &str,
    version: &str,
    by: &str,
    trusted: &TrustedKeys,
) -> Result<RulesetState, FleetError> {
    let record = pushed_version(store, name, version).await?;
    if trusted.required() {
        let bytes = store.ruleset_bytes(&record.sha256).await?.ok_or_else(|| {
            FleetError::NoSuchVersion {
                name: name.to_owned(),
                version: version.to_owned(),
            }
        })?;
        trusted.check(name, version, &bytes, record.signature.as_deref())?;
    }
    change_state(store, name, by, |state| {
        if state.active.as_deref() != Some(version) {
            if let Some(replaced) = state.active.replace(version.to_owned()) {
                state.previous.retain(|v| *v != replaced);
                state.previous.push(replaced);
            }
            state.previous.retain(|v| v != version);
            let excess = state.previous.len().saturating_sub(PREVIOUS_KEPT);
            state.previous.drain(..excess);
        }
        if state.shadow.as_ref().is_some_and(|s| s.version == version) {
            state.shadow = None;
        }
        Ok(())
    })
    .await
}

/// Puts back the version that was in service before the active one (skipping versions
/// removed since), signed by a trusted key when keys are trusted.
pub async fn rollback<S: RulesetStore>(
    store: &S,
    name: &str,
    by: &str,
    trusted: &TrustedKeys,
) -> Result<RulesetState, FleetError> {
    let stored: Vec<PushedRuleset> = store
        .pushed_rulesets()
        .await?
        .readable_for(name)?
        .into_iter()
        .filter(|p| p.name == name)
        .collect();
    let back_to = store
        .ruleset_states()
        .await?
        .readable_for(name)?
        .remove(name)
        .and_then(|s| {
            let previous = s.state.previous;
            previous
                .into_iter()
                .rev()
                .find(|v| stored.iter().any(|p| p.version == *v))
        })
        .ok_or_else(|| FleetError::NothingToRollBack(name.to_owned()))?;
    if trusted.required() {
        let record = pushed_version(store, name, &back_to).await?;
        let bytes = store
            .ruleset_bytes(&record.sha256)
            .await?
            .unwrap_or_default();
        trusted.check(name, &back_to, &bytes, record.signature.as_deref())?;
    }
    change_state(store, name, by, |state| {
        while let Some(earlier) = state.previous.pop() {
            if earlier == back_to {
                state.active = Some(earlier);
                if state.shadow.as_ref().is_some_and(|s| s.version == back_to) {
                    state.shadow = None;
                }
                return Ok(());
            }
        }
        Err(FleetError::Concurrent(name.to_owned()))
    })
    .await
}

/// Runs `version` of `name` in shadow on `percent` of the requests the active version
/// judges, on every gateway (it replaces a version in shadow before).
pub async fn shadow<S: RulesetStore>(
    store: &S,
    name: &str,
    version: &str,
    percent: u8,
    by: &str,
    trusted: &TrustedKeys,
) -> Result<RulesetState, FleetError> {
    if !(1..=100).contains(&percent) {
        return Err(FleetError::Invalid(format!(
            "a shadow share is 1 to 100 percent, not {percent}"
        )));
    }
    let record = pushed_version(store, name, version).await?;
    if trusted.required() {
        let bytes = store
            .ruleset_bytes(&record.sha256)
            .await?
            .unwrap_or_default();
        trusted.check(name, version, &bytes, record.signature.as_deref())?;
    }
    change_state(store, name, by, |state| {
        if state.active.as_deref() == Some(version) {
            return Err(FleetError::Invalid(format!(
                "{name} {version} is the active version; shadow another one"
            )));
        }
        state.shadow = Some(Shadow {
            version: version.to_owned(),
            percent,
        });
        Ok(())
    })
    .await
}

/// Stops `name`'s shadow rollout.
pub async fn unshadow<S: RulesetStore>(
    store: &S,
    name: &str,
    by: &str,
) -> Result<RulesetState, FleetError> {
    change_state(store, name, by, |state| match state.shadow.take() {
        Some(_) => Ok(()),
        None => Err(FleetError::Invalid(format!(
            "{name} has no version in shadow"
        ))),
    })
    .await
}

/// What the version of `name` in shadow (or `version`) did beside the active one.
pub async fn diff<S: RulesetStore>(
    store: &S,
    name: &str,
    version: Option<&str>,
) -> Result<(String, ShadowResults), FleetError> {
    let version = match version {
        Some(version) => version.to_owned(),
        None => store
            .ruleset_states()
            .await?
            .readable_for(name)?
            .remove(name)
            .and_then(|stored| stored.state.shadow)
            .map(|shadow| shadow.version)
            .ok_or_else(|| {
                FleetError::Invalid(format!(
                    "{name} has no version in shadow (name one with --version)"
                ))
            })?,
    };
    let results = store.shadow_results(name, &version).await?;
    Ok((version, results))
}

/// Makes `name` fail open (its failure leaves the request to the others) or closed (its
/// failure refuses the request), on every gateway.
pub async fn set_failure_policy<S: RulesetStore>(
    store: &S,
    name: &str,
    policy: FailurePolicy,
    by: &str,
) -> Result<RulesetState, FleetError> {
    name.parse::<botgate_model::rulesets::RulesetName>()
        .map_err(|e| FleetError::Invalid(e.to_string()))?;
    change_state(store, name, by, |state| {
        state.failure = policy;
        Ok(())
    })
    .await
}

/// Forgets a version that is not in service.
pub async fn remove<S: RulesetStore>(
    store: &S,
    name: &str,
    version: &str,
) -> Result<(), FleetError> {
    match store.remove_ruleset(name, version).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(FleetError::NoSuchVersion {
            name: name.to_owned(),
            version: version.to_owned(),
        }),
        Err(StoreError::Conflict(_)) => Err(FleetError::InService {
            name: name.to_owned(),
            version: version.to_owned(),
        }),
        Err(error) => Err(error.into()),
    }
}

/// The record of `name`'s `version`, when pushed.
async fn pushed_version<S: RulesetStore>(
    store: &S,
    name: &str,
    version: &str,
) -> Result<PushedRuleset, FleetError> {
    store
        .pushed_rulesets()
        .await?
        .readable_for(name)?
        .into_iter()
        .find(|p| p.name == name && p.version == version)
        .ok_or_else(|| FleetError::NoSuchVersion {
            name: name.to_owned(),
            version: version.to_owned(),
        })
}

/// Changes `name`'s state with `change`, from the revision read (tried again a few
/// times when another change comes first).
async fn change_state<S: RulesetStore>(
    store: &S,
    name: &str,
    by: &str,
    change: impl Fn(&mut RulesetState) -> Result<(), FleetError>,
) -> Result<RulesetState, FleetError> {
    for _ in 0..5 {
        let stored = store
            .ruleset_states()
            .await?
            .readable_for(name)?
            .remove(name);
        let StoredState {
            mut state,
            revision,
        } = stored.unwrap_or(StoredState {
            state: RulesetState::default(),
            revision: 0,
        });
        change(&mut state)?;
        state.changed_by = by.to_owned();
        state.changed_at_ms = botgate_store::now_ms();
        match store.put_ruleset_state(name, revision, &state).await {
            Ok(_) => return Ok(state),
            Err(StoreError::Stale(_)) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(FleetError::Concurrent(name.to_owned()))
}
