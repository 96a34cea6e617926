//! The components' allocator: small freed blocks kept by size class in front of talc,
//! so the allocations every call repeats in its class of 16 bytes (the host's strings
//! and argument block, their frees, the opinion's reason) are a pop and a push on a list.
//!
//! A block of class `c` is `(c + 1) * GRANULE` bytes, aligned to `GRANULE`, whatever
//! size below that it was asked for, so any request of its class fits it. What is kept
//! is bounded (a few blocks a class, `KEPT_BYTES` in all); the rest goes back to the
//! allocator below. Larger or more strictly aligned blocks go to that allocator
//! directly.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr;

/// Blocks are sized in steps of this many bytes and aligned to it.
const GRANULE: usize = 16;
/// Freed blocks up to this size are kept.
const LARGEST: usize = 4096;
/// The classes: 1 to 16 bytes, 17 to 32, ..., up to `LARGEST`.
const CLASSES: usize = LARGEST / GRANULE;
/// At most this many freed blocks are kept per class.
const KEPT_PER_CLASS: u8 = 8;
/// At most this many bytes are kept in all.
const KEPT_BYTES: usize = 64 << 10;

/// A size-class cache of freed blocks over the allocator `A`. Not for threads: its
/// lists are unsynchronised, and it is `Sync` only on single-threaded WebAssembly.
pub struct Cached<A: GlobalAlloc> {
    inner: A,
    lists: UnsafeCell<Lists>,
}

struct Lists {
    /// Each class's first kept block; a kept block holds the next one's address.
    heads: [*mut u8; CLASSES],
    counts: [u8; CLASSES],
    bytes: usize,
}

// SAFETY: single-threaded WebAssembly has one thread, so the lists are never shared.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl<A: GlobalAlloc + Sync> Sync for Cached<A> {}

impl<A: GlobalAlloc> Cached<A> {
    /// A cache with nothing kept, over `inner`.
    pub const fn new(inner: A) -> Self {
        Cached {
            inner,
            lists: UnsafeCell::new(Lists {
                heads: [ptr::null_mut(); CLASSES],
                counts: [0; CLASSES],
                bytes: 0,
            }),
        }
    }

    /// Takes a kept block of `class` off its list (null when none is kept).
    fn pop(&self, class: usize) -> *mut u8 {
        // SAFETY: one thread, and the borrow ends before any call out.
        let lists = unsafe { &mut *self.lists.get() };
        let head = lists.heads[class];
        if !head.is_null() {
            // SAFETY: a kept block starts with the next kept block's address.
            lists.heads[class] = unsafe { head.cast::<*mut u8>().read() };
            lists.counts[class] -= 1;
            lists.bytes -= block_layout(class).size();
        }
        head
    }

    /// Gives every kept block back to the allocator below.
    fn release(&self) {
        for class in 0..CLASSES {
            loop {
                let block = self.pop(class);
                if block.is_null() {
                    break;
                }
                // SAFETY: a kept block is the allocator below's, of its class's layout.
                unsafe { self.inner.dealloc(block, block_layout(class)) };
            }
        }
    }
}

/// The class of blocks that serves `layout`, if it is small enough to keep.
fn class_of(layout: Layout) -> Option<usize> {
    (layout.size() <= LARGEST && layout.align() <= GRANULE)
        .then(|| layout.size().saturating_sub(1) / GRANULE)
}

/// What the allocator below is asked for (and given back) for a block of `class`.
fn block_layout(class: usize) -> Layout {
    const { assert!(GRANULE.is_power_of_two() && LARGEST.is_multiple_of(GRANULE)) };
    debug_assert!(class < CLASSES);
    // SAFETY: `GRANULE` is a power of two and the size, at most `LARGEST`, is a
    // multiple of it.
    unsafe { Layout::from_size_align_unchecked((class + 1) * GRANULE, GRANULE) }
}

/// A global allocator is never dropped; another cache gives back what it kept.
impl<A: GlobalAlloc> Drop for Cached<A> {
    fn drop(&mut self) {
        self.release();
    }
}

// SAFETY: every block handed out is either the allocator below's for its own layout,
// or one of its blocks of the class's size and alignment, given out again only after it
// was freed; a kept block is not handed out twice (it leaves its list first).
unsafe impl<A: GlobalAlloc> GlobalAlloc for Cached<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class_of(layout) else {
            return unsafe { self.inner.alloc(layout) };
        };
        let kept = self.pop(class);
        if !kept.is_null() {
            return kept;
        }
        let block = unsafe { self.inner.alloc(block_layout(class)) };
        if !block.is_null() {
            return block;
        }
        // Out of memory below: what is kept in other classes may make room.
        self.release();
        unsafe { self.inner.alloc(block_layout(class)) }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(class) = class_of(layout) else {
            return unsafe { self.inner.dealloc(block, layout) };
        };
        let size = block_layout(class).size();
        {
            // SAFETY: as in `alloc`.
            let lists = unsafe { &mut *self.lists.get() };
            if lists.counts[class] < KEPT_PER_CLASS && lists.bytes + size <= KEPT_BYTES {
                // SAFETY: the block is at least `GRANULE` bytes, aligned to it, and ours.
                unsafe { block.cast::<*mut u8>().write(lists.heads[class]) };
                lists.heads[class] = block;
                lists.counts[class] += 1;
                lists.bytes += size;
                return;
            }
        }
        unsafe { self.inner.dealloc(block, block_layout(class)) }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees that `new_size`, rounded up to the alignment,
        // does not overflow.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(layout), class_of(new_layout)) {
            // The block already holds the class's whole size.
            (Some(old), Some(new)) if old == new => block,
            (None, None) => unsafe { self.inner.realloc(block, layout, new_size) },
            _ => {
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    let kept = layout.size().min(new_size);
                    // SAFETY: both blocks hold at least `kept` bytes and are apart.
                    unsafe { ptr::copy_nonoverlapping(block, moved, kept) };
                    unsafe { self.dealloc(block, layout) };
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;
    use std::cell::{Cell, RefCell};
    use std::collections::HashMap;

    /// The system allocator, counting what reaches it and checking that every block
    /// comes back once, with the layout it was allocated with.
    #[derive(Default)]
    struct Counting {
        allocs: Cell<usize>,
        frees: Cell<usize>,
        out: RefCell<HashMap<usize, Layout>>,
    }

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.allocs.set(self.allocs.get() + 1);
            let block = unsafe { System.alloc(layout) };
            assert!(
                self.out
                    .borrow_mut()
                    .insert(block as usize, layout)
                    .is_none()
            );
            block
        }
        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            self.frees.set(self.frees.get() + 1);
            let given = self.out.borrow_mut().remove(&(block as usize));
            assert_eq!(given, Some(layout), "freed with another layout, or twice");
            unsafe { System.dealloc(block, layout) }
        }
    }

    impl Drop for Counting {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                assert!(self.out.borrow().is_empty(), "blocks never given back");
            }
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_freed_block_serves_the_next_request_of_its_class_only() {
        let cache = Cached::new(Counting::default());
        unsafe {
            let a = cache.alloc(layout(20, 1));
            assert_eq!(a as usize % GRANULE, 0);
            cache.dealloc(a, layout(20, 1));
            // Another class: a new block from below.
            let b = cache.alloc(layout(40, 8));
            assert_ne!(a, b);
            // The same class (17 to 32 bytes), another alignment up to the granule's.
            let c = cache.alloc(layout(32, 16));
            assert_eq!(a, c);
            assert_eq!(cache.inner.allocs.get(), 2);
            assert_eq!(cache.inner.frees.get(), 0);
            cache.dealloc(b, layout(40, 8));
            cache.dealloc(c, layout(32, 16));
        }
    }

    #[test]
    fn what_is_kept_is_bounded_per_class_and_in_all() {
        let cache = Cached::new(Counting::default());
        let small = layout(100, 4);
        unsafe {
            let blocks: Vec<_> = (0..20).map(|_| cache.alloc(small)).collect();
            for &b in &blocks {
                cache.dealloc(b, small);
            }
            assert_eq!(cache.inner.frees.get(), 20 - usize::from(KEPT_PER_CLASS));
            // The largest class: 8 kept.
            let big = layout(LARGEST, 8);
            let blocks: Vec<_> = (0..40).map(|_| cache.alloc(big)).collect();
            let below = cache.inner.frees.get();
            for &b in &blocks {
                cache.dealloc(b, big);
            }
            assert_eq!(cache.inner.frees.get() - below, 40 - 8);
            assert_eq!((*cache.lists.get()).bytes, 8 * 112 + 8 * LARGEST);
            // The next class down fills the rest of the 64 KiB: 7 more of 4080 bytes
            // fit, the eighth does not.
            let next = layout(LARGEST - GRANULE, 8);
            let blocks: Vec<_> = (0..8).map(|_| cache.alloc(next)).collect();
            let below = cache.inner.frees.get();
            for &b in &blocks {
                cache.dealloc(b, next);
            }
            assert_eq!(cache.inner.frees.get() - below, 1);
            let kept = (*cache.lists.get()).bytes;
            assert_eq!(kept, 8 * 112 + 8 * LARGEST + 7 * (LARGEST - GRANULE));
            assert!(kept <= KEPT_BYTES && kept + LARGEST - GRANULE > KEPT_BYTES);
        }
    }

    /// Out of memory below: the kept blocks go back, and the request is tried again.
    #[test]
    fn kept_blocks_are_given_back_when_memory_runs_out() {
        /// Refuses every request while `full` is set.
        #[derive(Default)]
        struct Scarce {
            inner: Counting,
            full: Cell<bool>,
        }
        unsafe impl GlobalAlloc for Scarce {
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                if self.full.replace(false) {
                    return ptr::null_mut();
                }
                unsafe { self.inner.alloc(layout) }
            }
            unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
                unsafe { self.inner.dealloc(block, layout) }
            }
        }
        let cache = Cached::new(Scarce::default());
        unsafe {
            let kept = cache.alloc(layout(64, 8));
            cache.dealloc(kept, layout(64, 8));
            assert_eq!(cache.inner.inner.frees.get(), 0);
            cache.inner.full.set(true);
            let b = cache.alloc(layout(200, 8));
            assert!(!b.is_null());
            assert_eq!(cache.inner.inner.frees.get(), 1);
            assert_eq!((*cache.lists.get()).bytes, 0);
            cache.dealloc(b, layout(200, 8));
        }
    }

    #[test]
    fn a_dropped_cache_gives_back_what_it_kept() {
        let cache = Cached::new(Counting::default());
        unsafe {
            let blocks: Vec<_> = (1..=30).map(|n| cache.alloc(layout(n * 50, 4))).collect();
            for (n, &b) in (1..=30).zip(&blocks) {
                cache.dealloc(b, layout(n * 50, 4));
            }
        }
        assert!((unsafe { &*cache.lists.get() }).bytes > 0);
        // `Counting`'s drop checks that every block came back.
        drop(cache);
    }

    #[test]
    fn large_and_strictly_aligned_blocks_pass_through() {
        let cache = Cached::new(Counting::default());
        for wanted in [
            layout(LARGEST + 1, 8),
            layout(64, 32),
            layout(1 << 20, 4096),
        ] {
            unsafe {
                let b = cache.alloc(wanted);
                assert_eq!(b as usize % wanted.align(), 0);
                cache.dealloc(b, wanted);
            }
        }
        assert_eq!(cache.inner.allocs.get(), 3);
        assert_eq!(cache.inner.frees.get(), 3);
    }

    #[test]
    fn realloc_keeps_the_contents_within_a_class_and_across_classes() {
        let cache = Cached::new(Counting::default());
        unsafe {
            let mut size = 3;
            let mut b = cache.alloc(layout(size, 1));
            ptr::copy_nonoverlapping(b"abc".as_ptr(), b, 3);
            // Within the class: the same block.
            let same = cache.realloc(b, layout(size, 1), 16);
            assert_eq!(same, b);
            size = 16;
            // Growing through the classes and past the largest, then back.
            for new_size in [17, 500, LARGEST, LARGEST + 1, 1 << 16, 40, 3] {
                b = cache.realloc(b, layout(size, 1), new_size);
                size = new_size;
                assert_eq!(std::slice::from_raw_parts(b, 3), b"abc");
            }
            cache.dealloc(b, layout(size, 1));
        }
    }

    /// Blocks in use never overlap: each keeps its own pattern through a long run of
    /// allocations, frees and reallocations of mixed sizes.
    #[test]
    fn blocks_in_use_keep_their_contents() {
        let cache = Cached::new(Counting::default());
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        for round in 0..20_000u32 {
            let pick = next();
            if live.len() < 64 && pick % 3 != 0 {
                let size = 1 + (next() % 6000) as usize;
                let wanted = layout(size, 1 << (next() % 6));
                let fill = round as u8;
                unsafe {
                    let b = cache.alloc(wanted);
                    assert!(!b.is_null());
                    assert_eq!(b as usize % wanted.align(), 0);
                    b.write_bytes(fill, size);
                    live.push((b, wanted, fill));
                }
            } else if !live.is_empty() {
                let at = (next() as usize) % live.len();
                let (b, wanted, fill) = live.swap_remove(at);
                unsafe {
                    let bytes = std::slice::from_raw_parts(b, wanted.size());
                    assert!(bytes.iter().all(|&x| x == fill), "block overwritten");
                    if pick % 2 == 0 {
                        cache.dealloc(b, wanted);
                    } else {
                        let size = 1 + (next() % 6000) as usize;
                        let moved = cache.realloc(b, wanted, size);
                        let kept = wanted.size().min(size);
                        let bytes = std::slice::from_raw_parts(moved, kept);
                        assert!(bytes.iter().all(|&x| x == fill), "contents lost");
                        moved.write_bytes(fill, size);
                        live.push((moved, layout(size, wanted.align()), fill));
                    }
                }
            }
        }
        for (b, wanted, fill) in live {
            unsafe {
                assert!(
                    std::slice::from_raw_parts(b, wanted.size())
                        .iter()
                        .all(|&x| x == fill)
                );
                cache.dealloc(b, wanted);
            }
        }
    }
}
