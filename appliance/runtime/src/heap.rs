//! How much heap the worker holds: a global allocator that wraps the system allocator
//! with one atomic counter of live bytes.
//!
//! Once locked down the worker cannot read `/proc/self/*` (no `open`, Landlock, three
//! descriptors), so it counts what it allocates itself. `action-worker` installs
//! [`CountingAllocator`] as its global allocator and reports [`live_bytes`] in every
//! `done` message (`JobDone::heap_bytes`); the pool retires a worker whose report passes
//! its threshold. The count is what Rust code (boa included) holds through the global
//! allocator: it does not see allocator slack, fragmentation or stacks, and a worker
//! compromised through an interpreter bug could report anything. The report is advisory;
//! the pool's job-count and failure rules do not depend on it.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes currently allocated through [`CountingAllocator`].
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator with a live-byte counter (one relaxed atomic add or subtract per
/// call). Install it with `#[global_allocator]`.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAllocator;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// adds bookkeeping on an atomic; the contract of `GlobalAlloc` is `System`'s.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is (see the impl).
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is (see the impl).
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // On failure the old block is untouched and still counted.
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        new
    }
}

/// Keeps every thread of the worker on glibc's main malloc arena. A thread's first
/// allocation would otherwise create an arena of its own, reserving 64 MiB of address
/// space that counts against `RLIMIT_AS`, so the lock-down's parent-watch thread could
/// take half of an action's memory limit, in some runs and not others. Call it before
/// any second thread starts. Elsewhere than glibc it does nothing.
pub fn single_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; M_ARENA_MAX with 1 is valid.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Live heap bytes, or `None` when [`CountingAllocator`] is not the global allocator
/// (the counter is then still zero: a running program always holds some heap).
pub fn live_bytes() -> Option<u64> {
    match LIVE.load(Ordering::Relaxed) {
        0 => None,
        n => u64::try_from(n).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_alloc_realloc_and_free() {
        // Not the global allocator of the test binary: drive it directly.
        let a = CountingAllocator;
        let before = LIVE.load(Ordering::Relaxed);
        let layout = Layout::from_size_align(1000, 8).unwrap();
        // SAFETY: a non-zero layout; the block is freed with the layout it has.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            assert_eq!(LIVE.load(Ordering::Relaxed), before + 1000);
            let p = a.realloc(p, layout, 5000);
            assert!(!p.is_null());
            assert_eq!(LIVE.load(Ordering::Relaxed), before + 5000);
            let z = a.alloc_zeroed(layout);
            assert_eq!(LIVE.load(Ordering::Relaxed), before + 6000);
            a.dealloc(z, layout);
            a.dealloc(p, Layout::from_size_align(5000, 8).unwrap());
        }
        assert_eq!(LIVE.load(Ordering::Relaxed), before);
    }
}
