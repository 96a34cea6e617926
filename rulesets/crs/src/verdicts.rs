//! Which value-local rules fire on one value, remembered across requests.
//!
//! Most rules read each value on its own (one condition, no count, no chain): whether
//! they fire on a header, a cookie or an argument depends on its kind, name and text
//! alone. Browsers send the same user agent, `Accept` lines and cookies request after
//! request, so the answer for each such value is kept in a small table (one per
//! instance, so per thread): four ways per set, found by a hash and checked against the
//! whole key. A value an attacker sends can only evict an entry, which costs a
//! recomputation.

use std::cell::RefCell;

/// The table's sets, and the entries of each.
const SETS: usize = 128;
const WAYS: usize = 4;
/// Values longer than this are not kept (they are rare, and would make the table large).
const MAX_KEPT_BYTES: usize = 512;

/// A set of rules by their index in the rule table.
pub(crate) type RuleSet = u128;

struct Entry {
    kind: u8,
    name: Box<str>,
    text: Box<[u8]>,
    fired: RuleSet,
}

/// One set: its entries, and the way the next new entry replaces.
#[derive(Default)]
struct Set {
    ways: [Option<Entry>; WAYS],
    next: usize,
}

std::thread_local! {
    static TABLE: RefCell<Vec<Set>> = const { RefCell::new(Vec::new()) };
}

/// A hash of the key, eight bytes at a time (not keyed: an entry is only used after
/// its whole key compares equal).
fn hash(kind: u8, name: &str, text: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = u64::from(kind);
    for part in [name.as_bytes(), text] {
        let mut chunks = part.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            h = (h.rotate_left(5) ^ word).wrapping_mul(K);
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        h = (h.rotate_left(5) ^ u64::from_le_bytes(last) ^ part.len() as u64).wrapping_mul(K);
    }
    h ^ h >> 29
}

/// The rules that fire on the value `(kind, name, text)`: remembered, or worked out by
/// `compute` and remembered.
pub(crate) fn fired(
    (kind, name, text): (u8, &str, &[u8]),
    compute: impl FnOnce() -> RuleSet,
) -> RuleSet {
    if text.len() > MAX_KEPT_BYTES {
        return compute();
    }
    let set = (hash(kind, name, text) % SETS as u64) as usize;
    let known = TABLE.with(|table| {
        let table = table.borrow();
        table.get(set)?.ways.iter().flatten().find_map(|e| {
            (e.kind == kind && *e.name == *name && *e.text == *text).then_some(e.fired)
        })
    });
    if let Some(fired) = known {
        return fired;
    }
    let fired = compute();
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        if table.len() < SETS {
            table.resize_with(SETS, Set::default);
        }
        let set = &mut table[set];
        let way = set.next;
        set.next = (way + 1) % WAYS;
        set.ways[way] = Some(Entry {
            kind,
            name: name.into(),
            text: text.into(),
            fired,
        });
    });
    fired
}
