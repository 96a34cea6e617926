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
use crate::recent::PerThread;
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
    /// The compound marker (its index in `compounds`) each part belongs to.
    compound_of_part: Vec<u32>,
    /// How many parts the compound markers have together.
    parts: usize,
    /// Each thread's recent user-agent scans: what the user-agent automaton found in
    /// each (the slots and the compound parts), since most requests come from a few
    /// user agents.
    user_agent_scans: PerThread<(SlotSet, SlotSet)>,
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
        // builds faster than a DFA (every hot swap rebuilds the index; see benches/README.md).
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

/// A set of component slots (or of compound-marker parts); up to 512 without
/// allocating, so matching a request allocates nothing in any realistic deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotSet {
    words: SmallVec<[u64; 8]>,
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

    /// An empty set over as many slots.
    fn cleared(&self) -> SlotSet {
        SlotSet {
            words: smallvec::smallvec![0; self.words.len()],
        }
    }

    /// Adds every member of `other` (a set over as many slots).
    fn extend(&mut self, other: &SlotSet) {
        for (word, more) in self.words.iter_mut().zip(&other.words) {
            *word |= more;
        }
    }

    /// Whether `slot` is in the set.
    pub fn contains(&self, slot: usize) -> bool {
        self.words
            .get(slot / 64)
            .is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }

    /// The slots in the set, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    i * 64 + bit
                })
            })
        })
    }
}

impl ScopeIndex {
    /// Indexes the scopes of `components`, the `i`-th taking slot `i`.
    pub fn new<'a>(components: impl ExactSizeIterator<Item = &'a Arc<LoadedComponent>>) -> Self {
        Self::from_scopes(components.map(|component| component.scope()))
    }

    /// Indexes `scopes`, the `i`-th taking slot `i`.
    fn from_scopes<'a>(scopes: impl ExactSizeIterator<Item = &'a [Box<str>]>) -> Self {
        let mut unscoped = SlotSet::with_slots(scopes.len());
        let (mut target, mut user_agent, mut methods) = (Vec::new(), Vec::new(), Vec::new());
        let mut compounds = Vec::new();
        let mut compound_of_part = Vec::new();
        let mut parts = 0u32;
        for (slot, scope) in scopes.enumerate() {
            let slot = slot as u32;
            if scope.is_empty() {
                unscoped.insert(slot as usize);
            }
            for marker in scope {
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
                    compound_of_part.push(compounds.len() as u32);
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
            compound_of_part,
            parts: parts as usize,
            user_agent_scans: PerThread::for_user_agents(),
        }
    }

    /// The slots in scope for a request with this `method`, `target` (`path?query`) and
    /// header block, as in its facts: under the path as sent, or under a servlet
    /// container's reading of it (`;` parameters dropped), as the SDK's `in_scope`.
    pub fn matching(&self, method: &str, target: &str, headers: &str) -> SlotSet {
        let (path, query) = botgate_normalise::split_target(target);
        let mut found = self.matching_reading(method, path, query, headers);
        if let Some(servlet) = botgate_normalise::without_parameters(path) {
            found.extend(&self.matching_reading(method, &servlet, query, headers));
        }
        found
    }

    fn matching_reading(&self, method: &str, path: &str, query: &str, headers: &str) -> SlotSet {
        let mut found = self.unscoped.clone();
        let mut parts = SlotSet::with_slots(self.parts);
        for (name, hit) in &self.methods {
            if method.eq_ignore_ascii_case(name) {
                hit.record(&mut found, &mut parts);
            }
        }
        if let Some(markers) = &self.target {
            markers.scan(&botgate_normalise::path(path), &mut found, &mut parts);
            markers.scan(&botgate_normalise::query(query), &mut found, &mut parts);
        }
        if let Some(markers) = &self.user_agent
            && let Some(ua) = botgate_normalise::user_agent(headers)
        {
            self.scan_user_agent(markers, ua, &mut found, &mut parts);
        }
        // Only the compounds of parts found can hold: most requests find none, and
        // skip the hundreds of compound markers the shipped rule sets declare.
        for part in parts.iter() {
            let (slot, needed) = &self.compounds[self.compound_of_part[part] as usize];
            if !found.contains(*slot as usize) && needed.iter().all(|&p| parts.contains(p as usize))
            {
                found.insert(*slot as usize);
            }
        }
        found
    }

    /// Adds what `markers` find in `user_agent` to `found` and `parts`, from this
    /// thread's recent scans when it scanned the same user agent lately.
    fn scan_user_agent(
        &self,
        markers: &Markers,
        user_agent: &str,
        found: &mut SlotSet,
        parts: &mut SlotSet,
    ) {
        let mut scans = self.user_agent_scans.here().borrow_mut();
        if let Some((found_in_ua, parts_in_ua)) = scans.get(user_agent) {
            found.extend(found_in_ua);
            parts.extend(parts_in_ua);
            return;
        }
        let (mut found_in_ua, mut parts_in_ua) = (found.cleared(), parts.cleared());
        markers.scan(user_agent, &mut found_in_ua, &mut parts_in_ua);
        found.extend(&found_in_ua);
        parts.extend(&parts_in_ua);
        scans.put(user_agent, (found_in_ua, parts_in_ua));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use botgate_normalise::{ScopeView, in_scope};

    /// The slots `index` holds a request in, as a `Vec` of booleans.
    fn slots(index: &ScopeIndex, scopes: usize, method: &str, target: &str, ua: &str) -> Vec<bool> {
        let headers = format!("host: a.example\nuser-agent: {ua}");
        let found = index.matching(method, target, &headers);
        (0..scopes).map(|slot| found.contains(slot)).collect()
    }

    #[test]
    fn a_slot_set_lists_its_slots_in_order() {
        let mut set = SlotSet::with_slots(200);
        assert_eq!(set.iter().count(), 0);
        for slot in [130, 0, 63, 64, 199, 5] {
            set.insert(slot);
        }
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 5, 63, 64, 130, 199]);
    }

    #[test]
    fn a_path_with_parameters_is_in_scope_under_a_servlet_containers_reading_too() {
        let scopes: Vec<Vec<Box<str>>> = [&["/manager/html"][..], &["/admin;"], &["/x/&.jsp"]]
            .iter()
            .map(|scope| scope.iter().map(|m| Box::from(*m)).collect())
            .collect();
        let index = ScopeIndex::from_scopes(scopes.iter().map(Vec::as_slice));
        let slots = |target: &str| -> Vec<usize> {
            index
                .matching("GET", target, "host: a.example")
                .iter()
                .collect()
        };
        assert_eq!(slots("/manager;jsessionid=1/html?x=1"), [0]);
        assert_eq!(slots("/Admin;x/panel"), [1], "as sent, too");
        assert_eq!(slots("/x;a/y.jsp;b"), [2]);
        assert_eq!(slots("/manager/htm"), Vec::<usize>::new());
    }

    #[test]
    fn remembered_user_agent_scans_answer_what_the_scopes_say() {
        let scopes: Vec<Vec<Box<str>>> = [
            &["/wp-", "ua:wordpress/"][..],
            &["/rest/&ua:bitrix", "ua:bitrix24"],
            &["ua:nextcloud", "/remote.php"],
            &[],
            &["/upload/&.ph", "ua:curl&method:post"],
        ]
        .iter()
        .map(|scope| scope.iter().map(|m| Box::from(*m)).collect())
        .collect();
        let index = ScopeIndex::from_scopes(scopes.iter().map(Vec::as_slice));
        let agents = [
            "WordPress/6.5; https://a.example",
            "Bitrix24/1.0",
            "Mozilla/5.0 (X11; Linux x86_64) Nextcloud-Android/3.28",
            "curl/8.5.0",
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/131.0.0.0",
            "",
        ];
        let requests = [
            ("GET", "/"),
            ("GET", "/rest/1"),
            ("POST", "/upload/a.php"),
            ("POST", "/x"),
        ];
        // Twice each way round, so later answers come from remembered scans, some of
        // them for another request with the same user agent.
        let order: Vec<_> = agents.iter().chain(agents.iter().rev()).collect();
        for ua in order.iter().chain(&order) {
            for (method, target) in requests {
                let (path, query) = botgate_normalise::split_target(target);
                let view = ScopeView {
                    method,
                    path,
                    query,
                    user_agent: &ua.to_ascii_lowercase(),
                };
                let expected: Vec<bool> =
                    scopes.iter().map(|scope| in_scope(scope, &view)).collect();
                assert_eq!(
                    slots(&index, scopes.len(), method, target, ua),
                    expected,
                    "{method} {target} by {ua:?}"
                );
            }
        }
        let scans = index
            .user_agent_scans
            .here_if_used()
            .expect("this thread scanned");
        assert!(
            scans.borrow().get("Bitrix24/1.0").is_some(),
            "the scan was remembered"
        );
    }
}
