//! Rule-set scopes: which components a request concerns, found with one automaton over
//! the markers of every loaded component.
//!
//! A component declares its scope in `info` as markers over the normalised path and
//! query, or (`ua:…`) over the lower-cased user agent (see `wit/ruleset.wit`). For each
//! request the host normalises the target once with [`botgate_normalise`], the same
//! code the guest SDK reads it with, and scans the path, the query and, when some
//! component needs it, the user agent once each; a component none of whose markers
//! occurs is not called. The SDK makes a component abstain outside its scope, so
//! skipping it changes no decision: it saves the call.

use super::component::LoadedComponent;
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use botgate_normalise::USER_AGENT_MARKER;
use smallvec::SmallVec;
use std::sync::Arc;

/// The scopes of one [`super::RulesetSet`]: slot `i` is the set's `i`-th component.
pub struct ScopeIndex {
    /// Markers over the path and query, and the slot of each.
    target: Option<Markers>,
    /// Markers over the user agent (without `ua:`), and the slot of each.
    user_agent: Option<Markers>,
    /// Slots whose component has an empty scope: in scope for every request.
    unscoped: SlotSet,
}

/// One automaton over some markers, and the slot each marker belongs to.
struct Markers {
    automaton: AhoCorasick,
    slot_of: Vec<u32>,
}

impl Markers {
    /// `None` when there are no markers, or (never for bounded scopes) when the
    /// automaton cannot be built; then every slot that had markers is left unscoped.
    fn build(
        markers: Vec<(&str, u32)>,
        ascii_case_insensitive: bool,
        unscoped: &mut SlotSet,
    ) -> Option<Markers> {
        if markers.is_empty() {
            return None;
        }
        // Standard semantics (not leftmost): overlapping search then reports every
        // marker that occurs, including those inside a longer one.
        // A contiguous NFA without a prefilter: paths, queries and user agents are
        // short, where a prefilter's start-up costs more than it skips, and the NFA
        // builds faster than a DFA (every hot swap rebuilds the index; see README).
        let built = AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .prefilter(false)
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(ascii_case_insensitive)
            .build(markers.iter().map(|(m, _)| m));
        match built {
            Ok(automaton) => Some(Markers {
                automaton,
                slot_of: markers.iter().map(|(_, slot)| *slot).collect(),
            }),
            Err(err) => {
                // Slower, never wrong: those components are called for every request.
                tracing::warn!(%err, "cannot index rule-set scopes; calling those rule sets for every request");
                for (_, slot) in markers {
                    unscoped.insert(slot as usize);
                }
                None
            }
        }
    }

    fn scan(&self, haystack: &str, found: &mut SlotSet) {
        for m in self.automaton.find_overlapping_iter(haystack) {
            found.insert(self.slot_of[m.pattern().as_usize()] as usize);
        }
    }
}

/// A set of component slots; up to 128 without allocating, so matching a request
/// allocates nothing in any realistic deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotSet {
    words: SmallVec<[u64; 2]>,
}

impl SlotSet {
    fn with_slots(slots: usize) -> SlotSet {
        SlotSet {
            words: smallvec::smallvec![0; slots.div_ceil(64)],
        }
    }

    fn insert(&mut self, slot: usize) {
        self.words[slot / 64] |= 1 << (slot % 64);
    }

    /// Whether `slot` is in the set.
    pub fn contains(&self, slot: usize) -> bool {
        self.words
            .get(slot / 64)
            .is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }
}

impl ScopeIndex {
    /// Indexes the scopes of `components`, the `i`-th taking slot `i`.
    pub fn new<'a>(components: impl ExactSizeIterator<Item = &'a Arc<LoadedComponent>>) -> Self {
        let mut unscoped = SlotSet::with_slots(components.len());
        let (mut target, mut user_agent) = (Vec::new(), Vec::new());
        for (slot, component) in components.enumerate() {
            let slot = slot as u32;
            if component.scope().is_empty() {
                unscoped.insert(slot as usize);
            }
            for marker in component.scope() {
                match marker.strip_prefix(USER_AGENT_MARKER) {
                    Some(ua) => user_agent.push((ua, slot)),
                    None => target.push((&**marker, slot)),
                }
            }
        }
        ScopeIndex {
            target: Markers::build(target, false, &mut unscoped),
            // Lower-case markers matched ignoring ASCII case: the user agent lower-cased
            // without copying it.
            user_agent: Markers::build(user_agent, true, &mut unscoped),
            unscoped,
        }
    }

    /// The slots in scope for a request with this `target` (`path?query`) and header
    /// block, as in its facts.
    pub fn matching(&self, target: &str, headers: &str) -> SlotSet {
        let mut found = self.unscoped.clone();
        if let Some(markers) = &self.target {
            let (path, query) = botgate_normalise::split_target(target);
            markers.scan(&botgate_normalise::path(path), &mut found);
            markers.scan(&botgate_normalise::query(query), &mut found);
        }
        if let Some(markers) = &self.user_agent
            && let Some(ua) = botgate_normalise::header(headers, "user-agent")
        {
            markers.scan(ua, &mut found);
        }
        found
    }
}
