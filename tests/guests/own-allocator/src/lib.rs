//! A rule component with a `#[global_allocator]` of its own, exported so that the SDK
//! installs none: it says whether its own allocator served the call.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting what it hands out.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

struct OwnAllocator;

impl Ruleset for OwnAllocator {
    fn info() -> Info {
        botgate_ruleset_sdk::info!("own_allocator", "Counts its own allocations.")
    }

    fn evaluate(_req: &Request<'_>) -> Option<Opinion> {
        // The request's strings came through `cabi_realloc`, so through this allocator.
        if ALLOCATIONS.load(Relaxed) > 0 {
            opinion(Category::Humans, 10, "own-allocator.counted")
        } else {
            opinion(Category::Humans, 10, "own-allocator.not-counted")
        }
    }
}

botgate_ruleset_sdk::export_ruleset!(OwnAllocator, own_allocator);
