//! Rule-set scopes: which components a request concerns, found with one automaton over
//! the markers of every loaded component.
//!
//! A component declares its scope in `info` as markers over the normalised path and
//! query, or (`ua:…`) over the lower-cased user agent (see `wit/ruleset.wit`). For each
//! request the host normalises the target once with [`botgate_normalise`], the same
//! code the guest SDK reads it with, and scans the path, the query and, when some
//! component needs it, the user agent once each; a component none of whose markers
//! occurs is not called. A compound marker (`/upload/&.ph`) puts each of its parts in
//! the automata and holds the request when the scan found all of them; `method:` parts
//! are compared with the method instead. The SDK makes a component abstain outside its scope, so
//! skipping it changes no decision: it saves the call.

use super::component::LoadedComponent;
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use botgate_normalise::{MARKER_JOIN, METHOD_MARKER, USER_AGENT_MARKER};
use smallvec::SmallVec;
use std::sync::Arc;

/// The scopes of one [`super::RulesetSet`]: slot `i` is the set's `i`-th component.
pub struct ScopeIndex {
    /// Markers (and parts of compound markers) over the path and query.
    target: Option<Markers>,
    /// Markers and parts over the user agent (without `ua:`).
    user_agent: Option<Markers>,
    /// Markers and parts naming a method (without `method:`).
    methods: Vec<(Box<str>, Hit)>,
    /// Slots whose component has an empty scope: in scope for every request.
    unscoped: SlotSet,
    /// The compound markers: a slot, and the parts that must all be found.
    compounds: Vec<(u32, SmallVec<[u32; 4]>)>,
    /// How many parts the compound markers have together.
    parts: usize,
}

/// What finding one pattern of an automaton means.
#[derive(Clone, Copy)]
enum Hit {
    /// A whole marker of this slot's component: the slot is in scope.
    Slot(u32),
    /// This part of a compound marker occurs.
    Part(u32),
}

/// One automaton over some markers or parts, and what each means.
struct Markers {
    automaton: AhoCorasick,
    hit_of: Vec<Hit>,
}

impl Markers {
    /// `None` when there are no markers, or (never for bounded scopes) when the
    /// automaton cannot be built; then every slot that had markers is left unscoped.
    fn build(
        markers: Vec<(&str, Hit, u32)>,
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
            .build(markers.iter().map(|(m, _, _)| m));
        match built {
            Ok(automaton) => Some(Markers {
                automaton,
                hit_of: markers.iter().map(|(_, hit, _)| *hit).collect(),
            }),
            Err(err) => {
                // Slower, never wrong: those components are called for every request.
                tracing::warn!(%err, "cannot index rule-set scopes; calling those rule sets for every request");
                for (_, _, slot) in markers {
                    unscoped.insert(slot as usize);
                }
                None
            }
        }
    }

    fn scan(&self, haystack: &str, found: &mut SlotSet, parts: &mut SlotSet) {
        for m in self.automaton.find_overlapping_iter(haystack) {
            self.hit_of[m.pattern().as_usize()].record(found, parts);
        }
    }
}

impl Hit {
    fn record(self, found: &mut SlotSet, parts: &mut SlotSet) {
        match self {
            Hit::Slot(slot) => found.insert(slot as usize),
            Hit::Part(part) => parts.insert(part as usize),
        }
    }
}

/// A set of component slots (or of compound-marker parts); up to 128 without
/// allocating, so matching a request allocates nothing in any realistic deployment.
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
        let (mut target, mut user_agent, mut methods) = (Vec::new(), Vec::new(), Vec::new());
        let mut compounds = Vec::new();
        let mut parts = 0u32;
        for (slot, component) in components.enumerate() {
            let slot = slot as u32;
            if component.scope().is_empty() {
                unscoped.insert(slot as usize);
            }
            for marker in component.scope() {
                let mut route = |text: &'a str, hit: Hit| {
                    if let Some(ua) = text.strip_prefix(USER_AGENT_MARKER) {
                        user_agent.push((ua, hit, slot));
                    } else if let Some(method) = text.strip_prefix(METHOD_MARKER) {
                        methods.push((method.into(), hit));
                    } else {
                        target.push((text, hit, slot));
                    }
                };
                if !marker.contains(MARKER_JOIN) {
                    route(marker, Hit::Slot(slot));
                    continue;
                }
                let mut ids = SmallVec::new();
                for part in marker.split(MARKER_JOIN) {
                    route(part, Hit::Part(parts));
                    ids.push(parts);
                    parts += 1;
                }
                compounds.push((slot, ids));
            }
        }
        ScopeIndex {
            target: Markers::build(target, false, &mut unscoped),
            // Lower-case markers matched ignoring ASCII case: the user agent lower-cased
            // without copying it.
            user_agent: Markers::build(user_agent, true, &mut unscoped),
            methods,
            unscoped,
            compounds,
            parts: parts as usize,
        }
    }

    /// The slots in scope for a request with this `method`, `target` (`path?query`) and
    /// header block, as in its facts.
    pub fn matching(&self, method: &str, target: &str, headers: &str) -> SlotSet {
        let mut found = self.unscoped.clone();
        let mut parts = SlotSet::with_slots(self.parts);
        for (name, hit) in &self.methods {
            if method.eq_ignore_ascii_case(name) {
                hit.record(&mut found, &mut parts);
            }
        }
        if let Some(markers) = &self.target {
            let (path, query) = botgate_normalise::split_target(target);
            markers.scan(&botgate_normalise::path(path), &mut found, &mut parts);
            markers.scan(&botgate_normalise::query(query), &mut found, &mut parts);
        }
        if let Some(markers) = &self.user_agent
            && let Some(ua) = botgate_normalise::header(headers, "user-agent")
        {
            markers.scan(ua, &mut found, &mut parts);
        }
        for (slot, needed) in &self.compounds {
            if !found.contains(*slot as usize) && needed.iter().all(|&p| parts.contains(p as usize))
            {
                found.insert(*slot as usize);
            }
        }
        found
    }
}
