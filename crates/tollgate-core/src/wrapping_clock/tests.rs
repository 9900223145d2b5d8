extern crate std;

use super::*;
use proptest::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as StdOrdering};
use std::vec::Vec;

/// A simulated counter: the true tick count, read truncated.
#[derive(Debug, Clone, Default)]
struct Hardware(Arc<AtomicU64>);

impl Hardware {
    fn at(ticks: u64) -> Self {
        Self(Arc::new(AtomicU64::new(ticks)))
    }
    fn truth(&self) -> u64 {
        self.0.load(StdOrdering::SeqCst)
    }
    fn advance(&self, by: u64) {
        self.0.fetch_add(by, StdOrdering::SeqCst);
    }
}

struct Counter16(Hardware);
impl WrappingCounter for Counter16 {
    type Ticks = u16;
    fn read(&self) -> u16 {
        self.0.truth() as u16
    }
}

struct Counter32(Hardware);
impl WrappingCounter for Counter32 {
    type Ticks = u32;
    fn read(&self) -> u32 {
        self.0.truth() as u32
    }
}

fn hz(hz: u64) -> NonZeroU64 {
    NonZeroU64::new(hz).expect("nonzero")
}

#[test]
fn documented_limits() {
    type C16 = WrappingClock<fn() -> u16>;
    type C32 = WrappingClock<fn() -> u32>;
    assert_eq!(C16::max_read_gap_ticks(), 49_152); // 3/4 of 65 536
    assert_eq!(C32::max_read_gap_ticks(), 15 << 28); // 15/16 of 2^32
    assert_eq!(C16::max_ticks(), (u64::from(u32::MAX)) << 14);
    assert_eq!(C32::max_ticks(), (u64::from(u32::MAX)) << 28);
    let mhz = C32::new(|| 0, hz(1_000_000));
    assert_eq!(mhz.wrap_period(), Duration::from_micros(1 << 32)); // 71.58 min
    assert_eq!(mhz.max_read_gap().as_secs(), 4_026); // 67.1 min
    let lptim = C16::new(|| 0, hz(32_768));
    assert_eq!(lptim.wrap_period(), Duration::from_secs(2));
    assert_eq!(lptim.max_read_gap(), Duration::from_millis(1_500));
    assert_eq!(lptim.resolution(), Duration::from_nanos(30_518));
    assert_eq!(lptim.tick_length(32_768), Duration::from_secs(1));
    assert_eq!(lptim.tick_length(1), Duration::from_nanos(30_517));
    assert_eq!(lptim.ticks_at(Timestamp::from_secs(1)), 32_768);
    assert_eq!(lptim.ticks_at(Timestamp::from_nanos(1)), 1);
}

#[test]
fn follows_a_16_bit_counter_across_many_wraps() {
    let hw = Hardware::at(0);
    let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000_000));
    let gap = WrappingClock::<Counter16>::max_read_gap_ticks();
    let mut last = 0;
    // 1 000 wraps in steps up to the limit, including exactly the limit
    for i in 0..2_500u64 {
        hw.advance(if i % 3 == 0 { gap } else { 1 + i * 7919 % gap });
        let t = clock.ticks();
        assert_eq!(t, hw.truth());
        assert!(t >= last);
        last = t;
    }
    assert!(last > 1_000 * 65_536, "{last}");
    assert_eq!(clock.now(), Timestamp::from_micros(last));
}

#[test]
fn follows_a_32_bit_counter_across_many_wraps() {
    let start = u64::from(u32::MAX) - 5;
    let hw = Hardware::at(start);
    let clock = WrappingClock::new(Counter32(hw.clone()), hz(32_768));
    // the origin is the counter's last zero before the first reading
    assert_eq!(clock.ticks(), start);
    let gap = WrappingClock::<Counter32>::max_read_gap_ticks();
    for _ in 0..100 {
        hw.advance(gap);
        assert_eq!(clock.ticks(), hw.truth());
    }
    // 100 · 15/16 of a wrap: 93 wraps and a bit
    assert_eq!(hw.truth() >> 32, 94);
    let secs = hw.truth() / 32_768;
    assert_eq!(clock.now().as_nanos() / 1_000_000_000, secs);
}

#[test]
fn a_missed_wrap_leaves_the_clock_whole_periods_behind_never_ahead() {
    let hw = Hardware::at(1_000);
    let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000));
    assert_eq!(clock.ticks(), 1_000);
    // unread for 2.5 wraps: the two whole wraps are invisible
    hw.advance(2 * 65_536 + 30_000);
    assert_eq!(clock.ticks(), 31_000);
    assert_eq!(hw.truth() - 31_000, 2 * 65_536);
    // afterwards it follows again, from where it thinks it is
    hw.advance(40_000);
    assert_eq!(clock.ticks(), 71_000);
    // The limit is tight. The latest reading is one tick short of the
    // next unit (the published base is still 0): exactly the gap later
    // the clock is exact, one tick more and the wrap is lost.
    let gap = WrappingClock::<Counter16>::max_read_gap_ticks();
    for (late, expected) in [(0, 65_535), (1, 0)] {
        let hw = Hardware::at(0);
        let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000));
        hw.advance(16_383);
        assert_eq!(clock.ticks(), 16_383);
        hw.advance(gap + late);
        assert_eq!(clock.ticks(), expected);
        // the lost wrap: one period behind, and one reading back by
        // less than a unit (2^14 ticks)
        assert_eq!(hw.truth() - expected, 65_536 * late);
    }
}

#[test]
fn stops_at_the_end_of_its_range_and_never_wraps_back() {
    let hw = Hardware::at(0);
    let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000_000));
    let max = WrappingClock::<Counter16>::max_ticks();
    // jump close to the end without reading 2^32 units one by one:
    // publish a state just below the end by hand
    clock.state.store(ENDED - 1, Ordering::SeqCst);
    hw.0.store(max - (1 << 14), StdOrdering::SeqCst);
    assert_eq!(clock.ticks(), max - (1 << 14));
    hw.advance((1 << 14) - 1);
    assert_eq!(clock.ticks(), max - 1);
    hw.advance(1);
    assert_eq!(clock.ticks(), max);
    for _ in 0..10 {
        hw.advance(40_000);
        assert_eq!(clock.ticks(), max);
    }
    assert_eq!(clock.now(), clock.timestamp(max));
}

#[test]
fn readers_on_many_threads_agree_with_the_hardware() {
    // A ticker advances a 16-bit counter (wrapping every 65 536 ticks)
    // and reads the clock after each step, so the read rule holds;
    // four readers race it and each other. Every reading must lie
    // between the true counts just before and just after it, and each
    // thread's readings must never go back.
    let hw = Hardware::at(0);
    let clock = Arc::new(WrappingClock::new(Counter16(hw.clone()), hz(1_000_000)));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (hw, clock, stop) = (hw.clone(), Arc::clone(&clock), Arc::clone(&stop));
            std::thread::spawn(move || {
                let (mut last, mut reads) = (0, 0u64);
                while !stop.load(StdOrdering::SeqCst) {
                    let before = hw.truth();
                    let t = clock.ticks();
                    let after = hw.truth();
                    assert!(before <= t && t <= after, "{before} <= {t} <= {after}");
                    assert!(t >= last, "went back from {last} to {t}");
                    last = t;
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut x = 12_345u64;
    for _ in 0..200_000 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        hw.advance(1 + (x >> 33) % 20_000);
        assert_eq!(clock.ticks(), hw.truth());
    }
    stop.store(true, StdOrdering::SeqCst);
    let reads: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
    assert!(reads > 0);
    assert!(hw.truth() > 10_000 * 65_536, "{} wraps", hw.truth() >> 16);
}

#[test]
fn debug_shows_the_tick() {
    let clock = WrappingClock::new(|| 0u32, hz(48_000_000));
    let text = std::format!("{clock:?}");
    // 48 MHz: 125 ns per 6 ticks
    assert!(text.contains("num: 125, den: 6"), "{text}");
}

/// A step of the simulation: advance the hardware by some ticks, then
/// maybe read the clock.
fn steps(max_step: u64) -> impl Strategy<Value = Vec<(u64, bool)>> {
    proptest::collection::vec((0..=max_step, proptest::bool::weighted(0.8)), 1..200)
}

proptest! {
    /// Against a reference (the true 64-bit count): while the read rule
    /// holds, every reading is exact, in ticks and in nanoseconds.
    #[test]
    fn exact_while_the_rule_holds_16(
        start in any::<u16>(),
        hz_value in prop_oneof![Just(32_768u64), Just(1_000_000), 1u64..=4_000_000_000],
        steps in steps(49_152),
    ) {
        let hw = Hardware::at(u64::from(start));
        let clock = WrappingClock::new(Counter16(hw.clone()), hz(hz_value));
        prop_assert_eq!(clock.ticks(), u64::from(start));
        let mut since_read = 0;
        for (step, read) in steps {
            if since_read + step > 49_152 {
                // the read the rule requires before the counter moves on
                prop_assert_eq!(clock.ticks(), hw.truth());
                since_read = 0;
            }
            hw.advance(step);
            since_read += step;
            if read {
                let t = clock.ticks();
                prop_assert_eq!(t, hw.truth());
                let ns = u128::from(t) * 1_000_000_000 / u128::from(hz_value);
                prop_assert_eq!(u128::from(clock.now().as_nanos()), ns);
                since_read = 0;
            }
        }
    }

    #[test]
    fn exact_while_the_rule_holds_32(
        start in any::<u32>(),
        steps in proptest::collection::vec(0..=(15u64 << 28), 1..100),
    ) {
        let hw = Hardware::at(u64::from(start));
        let clock = WrappingClock::new(Counter32(hw.clone()), hz(1_000_000));
        prop_assert_eq!(clock.ticks(), u64::from(start));
        for step in steps {
            hw.advance(step);
            prop_assert_eq!(clock.ticks(), hw.truth());
            prop_assert_eq!(clock.now(), Timestamp::from_micros(hw.truth()));
        }
    }

    /// With arbitrary gaps, including ones that break the rule, a
    /// reading is never ahead of the hardware and always shows the
    /// counter's value: it can only lose whole wraps.
    #[test]
    fn never_ahead_only_whole_wraps_behind(
        start in any::<u16>(),
        steps in steps(300_000),
    ) {
        let hw = Hardware::at(u64::from(start));
        let clock = WrappingClock::new(Counter16(hw.clone()), hz(1_000));
        for (step, read) in steps {
            hw.advance(step);
            if read {
                let t = clock.ticks();
                let truth = hw.truth();
                prop_assert!(t <= truth, "{} ahead of {}", t, truth);
                prop_assert_eq!((truth - t) % 65_536, 0);
            }
        }
    }
}
