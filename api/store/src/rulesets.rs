//! Rule components pushed for a whole cluster: each version's bytes, content-addressed
//! by SHA-256, with its record (who pushed it, when, its signature); and one record per
//! component name saying which version runs, which one runs in shadow, and how its
//! failures are treated. Every change to those records bumps one revision, which the
//! gateways poll.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;

use crate::StoreError;

/// The largest component a push stores.
pub const MAX_COMPONENT_BYTES: usize = 32 << 20;
/// The versions kept per name for `rollback`, most recent last.
pub const PREVIOUS_KEPT: usize = 20;

/// One pushed version of a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushedRuleset {
    /// The component's name (its `info().name`).
    pub name: String,
    /// Its version (`info().version`): a name and version hold one content for ever.
    pub version: String,
    /// SHA-256 of its bytes, lower-case hex: where the bytes are kept.
    pub sha256: String,
    pub size: u64,
    /// Who pushed it (the operator's user and host, as the command saw them).
    pub pushed_by: String,
    pub pushed_at_ms: u64,
    /// A detached ed25519 signature of the bytes, base64, when one came with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl PushedRuleset {
    /// The key of this version among every pushed one.
    pub fn key(&self) -> String {
        version_key(&self.name, &self.version)
    }
}

/// `name@version`, a pushed version's key.
pub fn version_key(name: &str, version: &str) -> String {
    format!("{name}@{version}")
}

/// What a failing component (a trap, its deadline, switched off) means for a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// The request is decided without it (the component abstains).
    #[default]
    Open,
    /// The request is refused: a component an operator marks critical must judge it.
    Closed,
}

impl FailurePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
        }
    }
}

impl std::str::FromStr for FailurePolicy {
    type Err = String;

    fn from_str(word: &str) -> Result<FailurePolicy, String> {
        match word {
            "open" => Ok(FailurePolicy::Open),
            "closed" => Ok(FailurePolicy::Closed),
            _ => Err(format!(
                "`{word}`: the failure policies are open and closed"
            )),
        }
    }
}

/// A version evaluated beside the active one on a share of the traffic, never acted on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shadow {
    pub version: String,
    /// The share of the requests the component judges that the shadow judges too, 1 to 100.
    pub percent: u8,
}

/// What runs of one component name, cluster-wide.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesetState {
    /// The version in service; none: the name runs from no pushed version.
    #[serde(default)]
    pub active: Option<String>,
    /// Versions active before, most recent last (at most [`PREVIOUS_KEPT`]).
    #[serde(default)]
    pub previous: Vec<String>,
    #[serde(default)]
    pub shadow: Option<Shadow>,
    #[serde(default)]
    pub failure: FailurePolicy,
    pub changed_by: String,
    pub changed_at_ms: u64,
}

/// A listing's records, and those it could not decode (written by a later release, or
/// damaged), each named: a reader acts on the rest and keeps what it had for those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listed<T> {
    pub records: T,
    pub unreadable: Vec<Unreadable>,
}

/// A record a listing could not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The component it belongs to.
    pub name: String,
    /// Where it is stored.
    pub key: String,
    pub reason: String,
}

/// `error`, a decoding error of one of `name`'s records, as a listing reports it.
pub(crate) fn unreadable(name: &str, error: StoreError) -> Unreadable {
    let (key, reason) = match error {
        StoreError::Corrupt { key, reason } => (key, reason),
        other => (name.to_owned(), other.to_string()),
    };
    Unreadable {
        name: name.to_owned(),
        key,
        reason,
    }
}

impl Unreadable {
    pub fn to_error(&self) -> StoreError {
        StoreError::Corrupt {
            key: self.key.clone(),
            reason: self.reason.clone(),
        }
    }
}

impl<T> Listed<T> {
    /// The records, or the first unreadable one as an error (a listing shown whole).
    pub fn whole(self) -> Result<T, StoreError> {
        match self.unreadable.first() {
            Some(unreadable) => Err(unreadable.to_error()),
            None => Ok(self.records),
        }
    }

    /// The records, or an error when one of `name`'s could not be read (an operation on
    /// that name).
    pub fn readable_for(self, name: &str) -> Result<T, StoreError> {
        match self.unreadable.iter().find(|u| u.name == name) {
            Some(unreadable) => Err(unreadable.to_error()),
            None => Ok(self.records),
        }
    }
}

/// A state as stored, with the revision a compare-and-set names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredState {
    pub state: RulesetState,
    /// The store's rule-set revision when this state was written.
    pub revision: u64,
}

/// The disagreements kept per shadowed version, the latest.
pub const SHADOW_SAMPLES_KEPT: usize = 50;

/// One request on which a shadowed version and the active one disagreed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowSample {
    pub at_ms: u64,
    pub website: String,
    pub method: String,
    /// The path and query, cut to 256 bytes.
    pub target: String,
    /// Each side's opinion: `category (reason)`, `abstain` or `failed`.
    pub active: String,
    pub shadow: String,
}

/// What a shadowed version did beside the active one, summed over every gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowResults {
    /// Requests by `active category -> shadow category` (`abstain`, `failed` too).
    pub counts: BTreeMap<String, u64>,
    /// The latest disagreements, newest first (at most [`SHADOW_SAMPLES_KEPT`]).
    pub samples: Vec<ShadowSample>,
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    Stored,
    /// The same name, version and bytes were stored already: nothing changed.
    AlreadyStored,
}

/// The pushed components and which of them run.
pub trait RulesetStore: Send + Sync + 'static {
    /// Stores `bytes` under `record`. [`StoreError::Conflict`] when the name and
    /// version are stored with other bytes (a version is never replaced).
    fn push_ruleset(
        &self,
        record: &PushedRuleset,
        bytes: &[u8],
    ) -> impl Future<Output = Result<Pushed, StoreError>> + Send;

    /// Every pushed version, by name then push time (and the records it could not read).
    fn pushed_rulesets(
        &self,
    ) -> impl Future<Output = Result<Listed<Vec<PushedRuleset>>, StoreError>> + Send;

    /// The bytes stored under `sha256`.
    fn ruleset_bytes(
        &self,
        sha256: &str,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;

    /// Every name's state (and the names whose state it could not read).
    fn ruleset_states(
        &self,
    ) -> impl Future<Output = Result<Listed<BTreeMap<String, StoredState>>, StoreError>> + Send;

    /// Replaces `name`'s state if it is still at `expected` (0: no state yet); the new
    /// revision. [`StoreError::Stale`] when another change came first.
    fn put_ruleset_state(
        &self,
        name: &str,
        expected: u64,
        state: &RulesetState,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// The revision of all rule-set states: it grows with every change of one.
    fn rulesets_revision(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Adds a gateway's shadow results for `name`'s `version`: counts added, samples
    /// kept newest first up to [`SHADOW_SAMPLES_KEPT`].
    fn add_shadow_results(
        &self,
        name: &str,
        version: &str,
        results: &ShadowResults,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The shadow results of `name`'s `version` so far.
    fn shadow_results(
        &self,
        name: &str,
        version: &str,
    ) -> impl Future<Output = Result<ShadowResults, StoreError>> + Send;

    /// Forgets `name`'s `version` (and its bytes, when no other version has them);
    /// false when it was not stored. [`StoreError::Conflict`] while the state runs it
    /// (active or in shadow).
    fn remove_ruleset(
        &self,
        name: &str,
        version: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

/// Whether `state` runs `version` (active or in shadow).
pub fn runs(state: &RulesetState, version: &str) -> bool {
    state.active.as_deref() == Some(version)
        || state.shadow.as_ref().is_some_and(|s| s.version == version)
}

/// Sorts pushed versions by name, then push time (then version, for equal times).
pub fn sort_pushed(pushed: &mut [PushedRuleset]) {
    pushed.sort_by(|a, b| {
        (a.name.as_str(), a.pushed_at_ms, a.version.as_str()).cmp(&(
            b.name.as_str(),
            b.pushed_at_ms,
            b.version.as_str(),
        ))
    });
}
