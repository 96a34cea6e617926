//! The operators' compiled forms: each pattern's DFA (built by build.rs), or a lazy DFA
//! where the DFA would be too large, behind the bytes every match needs; a PikeVM for
//! the groups a chained condition reads; each phrase list's Aho-Corasick automaton.
//! Each is made on first use and kept for the instance's life.

use crate::generated::{PHRASE_LIST_COUNT, PHRASE_LISTS, REGEX_COUNT, REGEXES};
use aho_corasick::AhoCorasick;
use regex_automata::Input;
use regex_automata::dfa::Automaton;
use regex_automata::hybrid::dfa::DFA as LazyDfa;
use regex_automata::nfa::thompson::pikevm::PikeVM;
use regex_automata::util::captures::Captures;
use std::sync::OnceLock;

/// Bytes with the 4-byte alignment a serialised DFA needs.
#[repr(C)]
pub(crate) struct Aligned<B: ?Sized> {
    pub(crate) _align: [u32; 0],
    pub(crate) bytes: B,
}

/// How a pattern is searched.
pub(crate) enum Matcher {
    Dense(&'static Aligned<[u8]>),
    Sparse(&'static Aligned<[u8]>),
    /// Compiled on first use: a pattern whose DFA would be too large (a lazy DFA), or
    /// whose groups a chained condition reads (a lazy DFA, then a PikeVM on a match).
    Pattern(&'static str),
}

/// One pattern of the rules.
pub(crate) struct Regex {
    /// A match holds at least one of these bytes (`None`: no such set is known).
    pub(crate) required: Option<[u64; 4]>,
    pub(crate) matcher: Matcher,
}

/// The set of bytes a value holds.
#[derive(Clone, Copy, Default)]
pub(crate) struct ByteSet([u64; 4]);

impl ByteSet {
    pub(crate) fn of(value: &[u8]) -> ByteSet {
        let mut set = [0u64; 4];
        for &b in value {
            set[usize::from(b >> 6)] |= 1 << (b & 63);
        }
        ByteSet(set)
    }

    fn meets(&self, other: &[u64; 4]) -> bool {
        self.0.iter().zip(other).any(|(a, b)| a & b != 0)
    }

    /// Whether the value holds `b`.
    pub(crate) fn has(&self, b: u8) -> bool {
        self.0[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }

    /// Whether the value holds any of `bytes`.
    pub(crate) fn has_any(&self, bytes: &[u8]) -> bool {
        bytes.iter().any(|&b| self.has(b))
    }

    /// Whether the value holds an upper-case ASCII letter.
    pub(crate) fn has_upper(&self) -> bool {
        // `A` to `Z` are bits 1 to 26 of the second word.
        self.0[1] & (0x3ff_ffff << 1) != 0
    }

    /// Whether the value holds a byte that is not ASCII.
    pub(crate) fn has_non_ascii(&self) -> bool {
        self.0[2] | self.0[3] != 0
    }
}

enum Compiled {
    Dense(regex_automata::dfa::dense::DFA<&'static [u32]>),
    Sparse(regex_automata::dfa::sparse::DFA<&'static [u8]>),
    Lazy(Box<(LazyDfa, PikeVM)>),
    /// Did not deserialise or compile: matches nothing (build.rs's tests catch this).
    Broken,
}

fn compiled(slot: usize) -> &'static Compiled {
    static CACHE: [OnceLock<Compiled>; REGEX_COUNT] = [const { OnceLock::new() }; REGEX_COUNT];
    CACHE[slot].get_or_init(|| match REGEXES[slot].matcher {
        Matcher::Dense(aligned) => regex_automata::dfa::dense::DFA::from_bytes(&aligned.bytes)
            .map_or(Compiled::Broken, |(dfa, _)| Compiled::Dense(dfa)),
        Matcher::Sparse(aligned) => regex_automata::dfa::sparse::DFA::from_bytes(&aligned.bytes)
            .map_or(Compiled::Broken, |(dfa, _)| Compiled::Sparse(dfa)),
        Matcher::Pattern(pattern) => {
            lazy(pattern).map_or(Compiled::Broken, |both| Compiled::Lazy(Box::new(both)))
        }
    })
}

/// The most memory one lazy DFA's cache of states may take.
const LAZY_CACHE_BYTES: usize = 64 << 10;

/// A pattern's lazy DFA and PikeVM.
fn lazy(pattern: &str) -> Option<(LazyDfa, PikeVM)> {
    let syntax = regex_automata::util::syntax::Config::new()
        .unicode(false)
        .utf8(false);
    let thompson = regex_automata::nfa::thompson::Config::new().utf8(false);
    let nfa = regex_automata::nfa::thompson::NFA::compiler()
        .syntax(syntax)
        .configure(thompson)
        .build(pattern)
        .ok()?;
    let dfa = LazyDfa::builder()
        .configure(
            LazyDfa::config()
                .cache_capacity(LAZY_CACHE_BYTES)
                .skip_cache_capacity_check(true),
        )
        .build_from_nfa(nfa.clone())
        .ok()?;
    let vm = PikeVM::builder().build_from_nfa(nfa).ok()?;
    Some((dfa, vm))
}

std::thread_local! {
    /// The lazy DFAs' caches, by slot.
    static LAZY_CACHES: std::cell::RefCell<Vec<Option<regex_automata::hybrid::dfa::Cache>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Builds every matcher now: each pattern's automaton and each phrase list's. Called
/// once per instance before its first request (from `info`, under the gateway's
/// warm-up deadline), so that no request pays for a table it is the first to need.
pub(crate) fn prepare_all() {
    for slot in 0..REGEX_COUNT {
        compiled(slot);
    }
    for slot in 0..PHRASE_LIST_COUNT {
        phrase_list(slot);
    }
}

/// Whether the pattern in `slot` compiled (for the tests).
#[cfg(test)]
pub(crate) fn regex_compiles(slot: usize) -> bool {
    !matches!(compiled(slot), Compiled::Broken)
}

/// Whether the pattern in `slot` matches `value` (whose bytes are `bytes`); with
/// `groups`, also the text of each capture group of the first match.
pub(crate) fn regex_matches(
    slot: usize,
    value: &[u8],
    bytes: &ByteSet,
    groups: Option<&mut Vec<Vec<u8>>>,
) -> bool {
    let regex = &REGEXES[slot];
    if regex
        .required
        .is_some_and(|required| !bytes.meets(&required))
    {
        return false;
    }
    let input = Input::new(value).earliest(groups.is_none());
    match compiled(slot) {
        Compiled::Dense(dfa) => matches!(dfa.try_search_fwd(&input), Ok(Some(_))),
        Compiled::Sparse(dfa) => matches!(dfa.try_search_fwd(&input), Ok(Some(_))),
        Compiled::Lazy(both) => {
            let (dfa, vm) = &**both;
            let found = LAZY_CACHES.with(|caches| {
                let mut caches = caches.borrow_mut();
                if caches.len() <= slot {
                    caches.resize_with(REGEX_COUNT, || None);
                }
                let cache = caches[slot].get_or_insert_with(|| dfa.create_cache());
                dfa.try_search_fwd(cache, &input)
            });
            match (found, groups) {
                (Ok(None), _) => false,
                (Ok(Some(_)), None) => true,
                // The lazy DFA gave up (its cache too small for this value), or the
                // groups are wanted: the PikeVM.
                (Err(_), groups) | (Ok(Some(_)), groups) => pike(vm, value, groups),
            }
        }
        Compiled::Broken => false,
    }
}

/// The PikeVM's search, keeping the capture groups of the first match in `groups`.
fn pike(vm: &PikeVM, value: &[u8], groups: Option<&mut Vec<Vec<u8>>>) -> bool {
    let mut cache = vm.create_cache();
    let input = Input::new(value);
    let Some(groups) = groups else {
        return vm.is_match(&mut cache, input);
    };
    let mut caps: Captures = vm.create_captures();
    vm.search(&mut cache, &input, &mut caps);
    if !caps.is_match() {
        return false;
    }
    groups.clear();
    for i in 0..caps.group_len() {
        let text = caps.get_group(i).map(|span| value[span.range()].to_vec());
        groups.push(text.unwrap_or_default());
    }
    true
}

/// Whether any phrase of list `slot` occurs in `value`, case-insensitively.
pub(crate) fn phrases_match(slot: usize, value: &[u8]) -> bool {
    phrase_list(slot)
        .as_ref()
        .is_some_and(|ac| ac.is_match(value))
}

/// The automaton of phrase list `slot`, built on first use.
fn phrase_list(slot: usize) -> &'static Option<AhoCorasick> {
    static CACHE: [OnceLock<Option<AhoCorasick>>; PHRASE_LIST_COUNT] =
        [const { OnceLock::new() }; PHRASE_LIST_COUNT];
    CACHE[slot].get_or_init(|| {
        // A contiguous NFA: the lists are long (PHP's function names), and a DFA of
        // them would take megabytes of the instance's memory.
        AhoCorasick::builder()
            .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
            .ascii_case_insensitive(true)
            .build(PHRASE_LISTS[slot])
            .ok()
    })
}
