//! A global allocator that counts allocations, so benchmarks can assert that a hot path makes
//! none. Install it in a bench binary:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;
//! ```
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // A constant initialiser and no destructor: reading it never allocates, so the
    // allocator itself may use it.
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    THREAD_ALLOCATIONS.with(|c| c.set(c.get() + 1));
}

/// Forwards to the system allocator and counts `alloc` and `realloc` calls.
pub struct CountingAllocator;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds exactly as it does for `System`; the counters are an atomic
// and a thread-local cell that never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `alloc`'s contract, which is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was returned by `System.alloc`/`realloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `realloc`'s contract, which is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and reallocations) so far, process-wide.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Allocations (and reallocations) so far by the calling thread: what a single-threaded hot
/// path makes, whatever the test harness's own threads do meanwhile (it allocates to report a
/// test running for over a minute, for one).
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.with(Cell::get)
}
