//! Counting the operator's heap in a test binary, in bytes: the memory tests' global allocator. A test runs the
//! operator on threads that are counted and everything around it (the simulator, a hostile server, the objects it
//! creates) on threads marked [`uncounted`]; [`live`] is then what the operator holds, and [`peak`] the most it
//! held at once since [`reset_peak`] (kept on every allocation, so no short spike is missed between samples).
//!
//! Or the other way round, for a test whose world runs on the test's own threads: after [`count_only_marked`], only
//! threads marked [`counted`] (the operator's runtime) count.
//!
//! A block is counted or not when it is allocated, by the thread that allocates it; its free subtracts it on
//! whatever thread. Use in a test binary:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: capov_testkit::heap::Counting = capov_testkit::heap::Counting;
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Bytes currently allocated by counted threads.
static LIVE: AtomicI64 = AtomicI64::new(0);
/// The highest [`LIVE`] since the last [`reset_peak`].
static PEAK: AtomicI64 = AtomicI64::new(0);

/// Only threads marked [`counted`] count ([`count_only_marked`]).
static ONLY_MARKED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set on threads whose allocations are not the operator's.
    static UNCOUNTED: Cell<bool> = const { Cell::new(false) };
    /// Set on the operator's threads, when only those count.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as not the operator's (for a tokio runtime's `on_thread_start`).
pub fn uncounted() {
    UNCOUNTED.with(|uncounted| uncounted.set(true));
}

/// From now on only threads marked [`counted`] count.
pub fn count_only_marked() {
    ONLY_MARKED.store(true, Ordering::Relaxed);
}

/// Marks the calling thread as the operator's (for a tokio runtime's `on_thread_start`), for [`count_only_marked`].
pub fn counted() {
    COUNTED.with(|counted| counted.set(true));
}

/// Bytes the counted threads hold now.
pub fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// The most the counted threads held at once since the last [`reset_peak`].
pub fn peak() -> i64 {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak from what is held now.
pub fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

/// The system allocator, with a header before each block that records whether the block was counted.
pub struct Counting;

/// Room for the counted flag in front of each block; at least the block's alignment, so the block stays aligned.
fn header(layout: Layout) -> usize {
    layout.align().max(16)
}

fn with_header(layout: Layout) -> Option<Layout> {
    Layout::from_size_align(layout.size().checked_add(header(layout))?, header(layout)).ok()
}

// SAFETY: every block is allocated and freed through `System` with the same enlarged layout; the returned pointer is
// `header` bytes into the block, which keeps the caller's alignment, and the flag byte lies inside the header.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(full) = with_header(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `full` has a non-zero size (it includes the header).
        let base = unsafe { System.alloc(full) };
        if base.is_null() {
            return base;
        }
        // Thread-local access never allocates here (const initialiser); during thread teardown it counts.
        let counted = if ONLY_MARKED.load(Ordering::Relaxed) {
            COUNTED.try_with(Cell::get).unwrap_or(false)
        } else {
            !UNCOUNTED.try_with(Cell::get).unwrap_or(false)
        };
        if counted {
            let now = LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed) + layout.size() as i64;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        // SAFETY: the header is at least 16 bytes of the block just allocated.
        unsafe {
            let block = base.add(header(layout));
            block.sub(1).write(u8::from(counted));
            block
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: `block` came from `alloc` above with this layout, so the header precedes it.
        unsafe {
            if block.sub(1).read() == 1 {
                LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
            }
            if let Some(full) = with_header(layout) {
                System.dealloc(block.sub(header(layout)), full);
            }
        }
    }
}
