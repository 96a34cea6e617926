//! `Recent`: a small, bounded memory of recent answers keyed by a string, for work the
//! hot path repeats for the same input (a pass's HMAC, a user-agent scan). Each thread
//! keeps its own (see [`PerThread`]), so the hot path takes no lock.

use std::cell::RefCell;

/// Answers in direct-mapped slots chosen by an FNV-1a hash of their key; each slot keeps
/// its key to confirm a hit, and a new answer takes its slot over. Keys longer than
/// the limit are not remembered, so the memory is bounded by slots × (limit + answer).
pub struct Recent<T> {
    slots: Vec<Option<(Box<str>, T)>>,
    max_key: usize,
}

/// One [`Recent`] per thread, behind the owner's shared reference, each made with the
/// same sizes on the thread's first use.
pub struct PerThread<T: Send> {
    threads: thread_local::ThreadLocal<RefCell<Recent<T>>>,
    slots: usize,
    max_key: usize,
}

impl<T: Send> PerThread<T> {
    /// Each thread's memory: `slots` slots, keys of at most `max_key` bytes.
    pub fn new(slots: usize, max_key: usize) -> Self {
        PerThread {
            threads: thread_local::ThreadLocal::new(),
            slots,
            max_key,
        }
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
        let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        (hash % self.slots.len() as u64) as usize
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
