//! A `critical-section` implementation that loom can see (only under
//! `cfg(loom)`), so the `no_std` keyed table can be model-checked.
//!
//! The `no_std` table protects its map with `critical_section::with`. On a
//! single-core MCU that masks interrupts; on a multi-core chip or a host it
//! takes a global lock. Loom sees neither. This crate links this
//! implementation instead: one global loom [`Mutex`], held from `acquire`
//! to the matching `release` (nested sections, which the critical-section
//! contract allows, only count depth), so loom explores every interleaving
//! of the sections with the threads' other operations and blocks a thread
//! that would enter a section another thread holds.
//!
//! This models a lock-based critical section exactly. For interrupt
//! masking it is conservative: masking also stops every operation outside
//! sections, while here other threads keep running; the table's code
//! outside its sections (the shared overflow bucket) is loom atomics, so
//! those extra interleavings are explored too, never fewer.
//!
//! Every test binary of this crate links it (the table's critical sections
//! resolve to it); nothing else in the workspace enables a
//! `critical-section` implementation under loom.
#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};

use loom::sync::{Mutex, MutexGuard};

loom::lazy_static! {
    /// The one lock all critical sections share (fresh for each execution).
    static ref SECTION: Mutex<()> = Mutex::new(());
}

loom::thread_local! {
    /// How deep this thread is in nested critical sections.
    static DEPTH: Cell<usize> = Cell::new(0);
    /// The outermost section's guard while this thread holds one.
    static HELD: RefCell<Option<MutexGuard<'static, ()>>> = RefCell::new(None);
}

struct LoomCriticalSection;
critical_section::set_impl!(LoomCriticalSection);

// SAFETY: `acquire` returns only once this thread holds `SECTION` (or
// already held it: nested), and `release` gives it back when the outermost
// section ends; the loom mutex orders sections (acquire/release) and loom
// checks that it does.
unsafe impl critical_section::Impl for LoomCriticalSection {
    unsafe fn acquire() -> critical_section::RawRestoreState {
        let depth = DEPTH.with(Cell::get);
        if depth == 0 {
            let guard = SECTION
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            HELD.with(|held| *held.borrow_mut() = Some(guard));
        }
        DEPTH.with(|d| d.set(depth + 1));
    }

    unsafe fn release(_restore: critical_section::RawRestoreState) {
        let depth = DEPTH.with(Cell::get).saturating_sub(1);
        DEPTH.with(|d| d.set(depth));
        if depth == 0 {
            let guard = HELD.with(|held| held.borrow_mut().take());
            drop(guard);
        }
    }
}
