//! `WrappingClock`'s one-word state under every interleaving: a ticker
//! advances a simulated 16-bit counter across a wrap and reads the clock
//! after each step (so the read rule holds), while readers race it. Every
//! reading must be exact (between the true counts just before and just
//! after it) and a reader's readings must never go back.
//!
//! The ticker's steps are sized so that a reader that loaded the state,
//! was preempted, and then sampled the counter more than a wrap past that
//! state would compute the wrong period: only the re-load of the state
//! after the sample (and the retry) keeps it exact. So the model fails if
//! that check is removed.
#![cfg(loom)]

use core::num::NonZeroU64;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom_tests::model;
use tollgate::WrappingClock;
use tollgate::wrapping_clock::WrappingCounter;

/// The simulated hardware: the true tick count, read truncated to 16 bits.
struct Counter(Arc<AtomicU64>);

impl WrappingCounter for Counter {
    type Ticks = u16;
    fn read(&self) -> u16 {
        self.0.load(Ordering::SeqCst) as u16
    }
}

const START: u64 = 60_000; // unit 3 of 2^14 ticks, near the first wrap

fn setup() -> (Arc<AtomicU64>, Arc<WrappingClock<Counter>>) {
    let hw = Arc::new(AtomicU64::new(START));
    let clock = Arc::new(WrappingClock::new(
        Counter(Arc::clone(&hw)),
        NonZeroU64::new(1_000).expect("nonzero"),
    ));
    // the clock has been read at START: its state is unit 3
    assert_eq!(clock.ticks(), START);
    (hw, clock)
}

/// Advances the hardware by each step and reads the clock after it: the
/// reads that keep the rule (steps below 49 152 ticks).
fn tick(hw: &AtomicU64, clock: &WrappingClock<Counter>, steps: &[u64]) {
    for &step in steps {
        let truth = hw.fetch_add(step, Ordering::SeqCst) + step;
        assert_eq!(clock.ticks(), truth, "the ticker's own reading");
    }
}

/// Reads `n` times, each between the truth before and after, never back.
fn read(hw: &AtomicU64, clock: &WrappingClock<Counter>, n: usize) {
    let mut last = 0;
    for _ in 0..n {
        let before = hw.load(Ordering::SeqCst);
        let t = clock.ticks();
        let after = hw.load(Ordering::SeqCst);
        assert!(before <= t && t <= after, "{before} <= {t} <= {after}");
        assert!(t >= last, "went back from {last} to {t}");
        last = t;
    }
}

#[test]
fn a_reader_racing_a_wrap_stays_exact() {
    model::check(|| {
        let (hw, clock) = setup();
        let ticker = {
            let (hw, clock) = (Arc::clone(&hw), Arc::clone(&clock));
            // 60 000 -> 70 000 (wrapped) -> 100 000 -> 130 000: the last
            // sample is more than a wrap past the initial base (49 152)
            loom::thread::spawn(move || tick(&hw, &clock, &[10_000, 30_000, 30_000]))
        };
        read(&hw, &clock, 1);
        ticker.join().expect("ticker");
        assert_eq!(clock.ticks(), START + 70_000);
    });
}

#[test]
fn two_readers_and_a_ticker() {
    model::check(|| {
        let (hw, clock) = setup();
        let ticker = {
            let (hw, clock) = (Arc::clone(&hw), Arc::clone(&clock));
            loom::thread::spawn(move || tick(&hw, &clock, &[20_000, 40_000]))
        };
        let reader = {
            let (hw, clock) = (Arc::clone(&hw), Arc::clone(&clock));
            loom::thread::spawn(move || read(&hw, &clock, 1))
        };
        read(&hw, &clock, 2);
        ticker.join().expect("ticker");
        reader.join().expect("reader");
        assert_eq!(clock.ticks(), START + 60_000);
    });
}
