//! `Recent`: a small, bounded memory of recent answers keyed by a string, for work the
//! hot path repeats for the same input (a pass's HMAC, a user-agent scan). Each thread
//! keeps its own (see [`PerThread`]), so the hot path takes no lock.

use std::cell::RefCell;

/// Answers in direct-mapped slots chosen by a hash of their key; each slot keeps
/// its key to confirm a hit, and a new answer takes its slot over. Keys longer than
/// the limit are not remembered, so the memory is bounded by slots × (limit + answer).
pub struct Recent<T> {
    slots: Vec<Option<(Box<str>, T)>>,
    max_key: usize,
}

/// The slot hash: eight bytes a step (a multiply-rotate over little-endian words, as
/// FxHash does), since it runs over a user agent or a cookie on every request. Not
/// keyed: a collision only costs the work the memory saves, as the slot keeps its key.
fn slot_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let step =
        |hash: u64, word: [u8; 8]| (hash.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    let hash = (&mut words).fold(bytes.len() as u64, |hash, word| {
        step(hash, word.try_into().expect("eight bytes"))
    });
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    // The high bits are the well-mixed ones.
    step(hash, tail) >> 32
}

/// One [`Recent`] per thread, behind the owner's shared reference, each made with the
/// same sizes on the thread's first use.
pub struct PerThread<T: Send> {
    threads: thread_local::ThreadLocal<RefCell<Recent<T>>>,
    slots: usize,
    max_key: usize,
}

/// How many user agents each thread's memory of user-agent scans holds, and the longest
/// user agent it holds: real traffic repeats a few hundred user agents, most of them
/// under 300 bytes.
const USER_AGENT_SLOTS: usize = 64;
const MAX_REMEMBERED_USER_AGENT: usize = 512;

impl<T: Send> PerThread<T> {
    /// Each thread's memory: `slots` slots, keys of at most `max_key` bytes.
    pub fn new(slots: usize, max_key: usize) -> Self {
        PerThread {
            threads: thread_local::ThreadLocal::new(),
            slots,
            max_key,
        }
    }

    /// A memory of what scans of user agents found, sized for that.
    pub fn for_user_agents() -> Self {
        Self::new(USER_AGENT_SLOTS, MAX_REMEMBERED_USER_AGENT)
    }

    /// This thread's memory.
    pub fn here(&self) -> &RefCell<Recent<T>> {
        self.threads
            .get_or(|| RefCell::new(Recent::new(self.slots, self.max_key)))
    }

    /// This thread's memory, if it has used it.
    pub fn here_if_used(&self) -> Option<&RefCell<Recent<T>>> {
        self.threads.get()
    }
}

impl<T> Recent<T> {
    /// `slots` slots, remembering keys of at most `max_key` bytes.
    pub fn new(slots: usize, max_key: usize) -> Self {
        Recent {
            slots: std::iter::repeat_with(|| None).take(slots.max(1)).collect(),
            max_key,
        }
    }

    fn slot(&self, key: &str) -> usize {
        (slot_hash(key.as_bytes()) % self.slots.len() as u64) as usize
    }

    /// The answer remembered for `key`.
    pub fn get(&self, key: &str) -> Option<&T> {
        match &self.slots[self.slot(key)] {
            Some((known, answer)) if **known == *key => Some(answer),
            _ => None,
        }
    }

    /// Remembers `answer` for `key`, unless the key is too long.
    pub fn put(&mut self, key: &str, answer: T) {
        if key.len() <= self.max_key {
            let slot = self.slot(key);
            self.slots[slot] = Some((key.into(), answer));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_needs_the_same_key_and_a_new_key_takes_its_slot_over() {
        let mut recent = Recent::new(1, 8);
        assert_eq!(recent.get("a"), None);
        recent.put("a", 1);
        assert_eq!(recent.get("a"), Some(&1));
        assert_eq!(recent.get("b"), None, "same slot, other key");
        recent.put("b", 2);
        assert_eq!((recent.get("a"), recent.get("b")), (None, Some(&2)));
        recent.put("too long a key", 3);
        assert_eq!(recent.get("too long a key"), None);
        assert_eq!(
            recent.get("b"),
            Some(&2),
            "a refused key leaves the slot alone"
        );
    }

    #[test]
    fn each_thread_has_its_own_memory() {
        let per_thread = PerThread::new(4, 8);
        assert!(per_thread.here_if_used().is_none());
        per_thread.here().borrow_mut().put("a", 1);
        assert_eq!(per_thread.here().borrow().get("a"), Some(&1));
        std::thread::scope(|scope| {
            scope.spawn(|| {
                assert!(per_thread.here_if_used().is_none());
                assert_eq!(per_thread.here().borrow().get("a"), None);
            });
        });
    }
}
