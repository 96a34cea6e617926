//! Which value-local rules fire on one value, and on all the values of a header block
//! or of a request line, remembered across requests.
//!
//! Most rules read each value on its own (one condition, no count, no chain): whether
//! they fire on a header, a cookie or an argument depends on its kind, name and text
//! alone. Browsers send the same user agent, `Accept` lines and cookies request after
//! request, and the same header block for every asset of a page, so the answer for
//! each is kept in a small table (one per instance, so per thread): four ways per set,
//! found by a hash and checked against the whole key. A key an attacker sends can only
//! evict an entry, which costs a recomputation.

use std::cell::RefCell;

/// The table's sets, and the entries of each.
const SETS: usize = 128;
const WAYS: usize = 4;
/// Values longer than this are not kept (they are rare, and would make the table large).
const MAX_VALUE_BYTES: usize = 512;
/// Nor header blocks or request lines longer than this.
const MAX_BLOCK_BYTES: usize = 4096;

/// A set of rules by their index in the rule table.
pub(crate) type RuleSet = u128;

/// What an answer is remembered for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Key<'k> {
    /// One value: its kind, name and text.
    Value(u8, &'k str, &'k [u8]),
    /// A whole header block (`name: value` lines): the values read from it.
    Headers(&'k str),
    /// A request line (method, target, protocol): the values read from it.
    Line(&'k str, &'k str, &'k str),
}

impl<'k> Key<'k> {
    /// A tag apart from every value kind, and the key's parts.
    fn parts(self) -> (u8, [&'k [u8]; 3]) {
        match self {
            Key::Value(kind, name, text) => (kind, [name.as_bytes(), text, &[]]),
            Key::Headers(block) => (u8::MAX, [block.as_bytes(), &[], &[]]),
            Key::Line(method, target, protocol) => (
                u8::MAX - 1,
                [method.as_bytes(), target.as_bytes(), protocol.as_bytes()],
            ),
        }
    }

    fn kept(self) -> bool {
        let (_, parts) = self.parts();
        let len: usize = parts.iter().map(|p| p.len()).sum();
        len <= match self {
            Key::Value(..) => MAX_VALUE_BYTES,
            Key::Headers(_) | Key::Line(..) => MAX_BLOCK_BYTES,
        }
    }
}

struct Entry {
    hash: u64,
    tag: u8,
    /// The parts, one after the other.
    bytes: Box<[u8]>,
    lens: [u32; 3],
    fired: RuleSet,
}

impl Entry {
    fn is(&self, hash: u64, tag: u8, parts: &[&[u8]; 3]) -> bool {
        if self.hash != hash || self.tag != tag {
            return false;
        }
        let mut at = 0;
        for (part, &len) in parts.iter().zip(&self.lens) {
            let len = len as usize;
            if part.len() != len || !same(&self.bytes[at..at + len], part) {
                return false;
            }
            at += len;
        }
        true
    }
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
fn hash(tag: u8, parts: &[&[u8]; 3]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = u64::from(tag);
    for part in parts {
        let mut chunks = part.chunks_exact(8);
        for chunk in &mut chunks {
            h = (h.rotate_left(5) ^ word(chunk)).wrapping_mul(K);
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        h = (h.rotate_left(5) ^ u64::from_le_bytes(last) ^ part.len() as u64).wrapping_mul(K);
    }
    h ^ h >> 29
}

/// Eight bytes as one word.
fn word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().unwrap_or_default())
}

/// Whether `a` and `b` are equal, compared sixteen bytes at a time (WebAssembly's
/// `memcmp` compares one byte at a time).
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let ((left, x), (right, y)) = (a.as_chunks::<16>(), b.as_chunks::<16>());
    if !left.iter().zip(right).all(|(l, r)| same_16(l, r)) {
        return false;
    }
    if x.len() >= 8 {
        // Two words that overlap where fewer than 16 bytes are left.
        let tail = x.len() - 8;
        return word(&x[..8]) == word(&y[..8]) && word(&x[tail..]) == word(&y[tail..]);
    }
    x == y
}

/// Whether two 16-byte chunks are equal: one SIMD compare where WebAssembly has it.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn same_16(x: &[u8; 16], y: &[u8; 16]) -> bool {
    use core::arch::wasm32::{v128, v128_any_true, v128_load, v128_xor};
    // SAFETY: both arrays hold 16 bytes, and `v128.load` needs no alignment.
    let (x, y) = unsafe {
        (
            v128_load(x.as_ptr().cast::<v128>()),
            v128_load(y.as_ptr().cast::<v128>()),
        )
    };
    !v128_any_true(v128_xor(x, y))
}

/// Whether two 16-byte chunks are equal.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn same_16(x: &[u8; 16], y: &[u8; 16]) -> bool {
    u128::from_ne_bytes(*x) == u128::from_ne_bytes(*y)
}

/// The rules remembered for `key`.
pub(crate) fn known(key: Key<'_>) -> Option<RuleSet> {
    let (tag, parts) = key.parts();
    let hash = hash(tag, &parts);
    TABLE.with(|table| {
        let table = table.borrow();
        let set = table.get((hash % SETS as u64) as usize)?;
        set.ways
            .iter()
            .flatten()
            .find_map(|e| e.is(hash, tag, &parts).then_some(e.fired))
    })
}

/// Remembers `fired` for `key` (unless the key is too long to keep).
pub(crate) fn remember(key: Key<'_>, fired: RuleSet) {
    if !key.kept() {
        return;
    }
    let (tag, parts) = key.parts();
    let hash = hash(tag, &parts);
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        if table.len() < SETS {
            table.resize_with(SETS, Set::default);
        }
        let set = &mut table[(hash % SETS as u64) as usize];
        if let Some(entry) = set
            .ways
            .iter_mut()
            .flatten()
            .find(|e| e.is(hash, tag, &parts))
        {
            entry.fired = fired;
            return;
        }
        let way = set.next;
        set.next = (way + 1) % WAYS;
        set.ways[way] = Some(Entry {
            hash,
            tag,
            bytes: parts.concat().into_boxed_slice(),
            lens: parts.map(|p| p.len() as u32),
            fired,
        });
    });
}

/// The rules that fire for `key`: remembered, or worked out by `compute` and
/// remembered.
pub(crate) fn fired(key: Key<'_>, compute: impl FnOnce() -> RuleSet) -> RuleSet {
    if !key.kept() {
        return compute();
    }
    if let Some(fired) = known(key) {
        return fired;
    }
    let fired = compute();
    remember(key, fired);
    fired
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_told_apart_by_every_part() {
        remember(Key::Line("GET", "/a", "HTTP/1.1"), 1);
        remember(Key::Value(0, "a", b"b"), 2);
        assert_eq!(known(Key::Line("GET", "/a", "HTTP/1.1")), Some(1));
        assert_eq!(known(Key::Line("GET", "/a", "HTTP/2.0")), None);
        assert_eq!(known(Key::Line("GET /", "a", "HTTP/1.1")), None);
        assert_eq!(known(Key::Value(0, "a", b"b")), Some(2));
        assert_eq!(known(Key::Value(1, "a", b"b")), None);
        assert_eq!(known(Key::Value(0, "ab", b"")), None);
        assert_eq!(known(Key::Headers("a")), None);
    }

    #[test]
    fn long_keys_are_computed_every_time() {
        let long = "x".repeat(MAX_BLOCK_BYTES + 1);
        let mut calls = 0;
        for _ in 0..2 {
            fired(Key::Headers(&long), || {
                calls += 1;
                0
            });
        }
        assert_eq!(calls, 2);
        assert_eq!(known(Key::Headers(&long)), None);
    }

    #[test]
    fn words_compare_as_bytes() {
        assert!(same(b"0123456789abc", b"0123456789abc"));
        assert!(!same(b"0123456789abc", b"0123456789abd"));
        assert!(!same(b"0123456X89abc", b"0123456789abc"));
        assert!(!same(b"abc", b"abcd"));
    }

    /// Every length up to three chunks, and a difference at every place of each.
    #[test]
    fn chunks_compare_as_bytes_at_every_length_and_place() {
        let a: Vec<u8> = (0..48u8).map(|i| i.wrapping_mul(37)).collect();
        for len in 0..=a.len() {
            let (x, mut y) = (&a[..len], a[..len].to_vec());
            assert!(same(x, &y), "{len}");
            for at in 0..len {
                y[at] ^= 0x20;
                assert!(!same(x, &y), "{len} {at}");
                y[at] ^= 0x20;
            }
        }
    }
}
