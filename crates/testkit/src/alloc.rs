//! A global allocator that counts allocations, so benchmarks can assert that a hot path makes
//! none, and the bytes held and their peak, so a test can show that memory stops growing. Install it in a bench binary:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;
//! ```
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Bytes allocated and not yet freed, process-wide.
static HELD: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // A constant initialiser and no destructor: reading it never allocates, so the
    // allocator itself may use it.
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    THREAD_ALLOCATIONS.with(|c| c.set(c.get() + 1));
}

fn held_grew(bytes: usize) {
    let now = HELD.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn held_shrank(bytes: usize) {
    HELD.fetch_sub(bytes as u64, Ordering::Relaxed);
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
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            held_grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        held_shrank(layout.size());
        // SAFETY: `ptr` was returned by `System.alloc`/`realloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `realloc`'s contract, which is `System.realloc`'s.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            held_shrank(layout.size());
            held_grew(new_size);
        }
        p
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

/// Bytes allocated and not yet freed, process-wide.
pub fn held_bytes() -> u64 {
    HELD.load(Ordering::Relaxed)
}

/// The most bytes held at once since the start or the last [`reset_peak`].
pub fn peak_bytes() -> u64 {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak from what is held now.
pub fn reset_peak() {
    PEAK.store(HELD.load(Ordering::Relaxed), Ordering::Relaxed);
}
