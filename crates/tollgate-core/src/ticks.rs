//! Exact conversion between tick counts and nanoseconds for any tick rate:
//! [`TickRate`], shared by the tick-based clocks
//! ([`WrappingClock`](crate::WrappingClock), and the embassy and RTIC
//! clocks built on this crate).
//!
//! The rate becomes a reduced
//! fraction `num / den` of nanoseconds per tick, computed once (in `const`
//! where the rate is a constant), and a conversion splits the tick count
//! into whole multiples of `den` and a remainder, so common rates stay in
//! `u64` arithmetic and no rate overflows. Ticks to nanoseconds round down
//! (a clock never reads ahead of the hardware); nanoseconds to ticks round
//! up (a wake-up is never early). Everything saturates at `u64::MAX`.

const NANOS_PER_SEC: u64 = 1_000_000_000;

const fn gcd_u128(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// A timer's tick rate, for exact conversions between its ticks and
/// nanoseconds: what a [`Clock`](crate::Clock) over a hardware counter or an
/// async runtime's timebase needs.
///
/// Kept as nanoseconds per tick in a reduced fraction (`den` ticks last
/// `num` nanoseconds), so that no rate loses precision and none overflows.
/// Ticks to nanoseconds round down (a clock never reads ahead of the
/// hardware); nanoseconds to ticks round up (a wake-up is never early).
///
/// ```
/// use tollgate::clock::TickRate;
///
/// // a 32.768 kHz RTC: 1 s is 32,768 ticks, and one tick is 30,517.578125 ns
/// const RTC: TickRate = TickRate::from_hz(32_768);
/// assert_eq!(RTC.ticks_to_nanos(32_768), 1_000_000_000);
/// assert_eq!(RTC.ticks_to_nanos(1), 30_517); // rounded down
/// assert_eq!(RTC.nanos_to_ticks_ceil(30_518), 2); // rounded up
/// assert_eq!(RTC.resolution_nanos(), 30_518);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TickRate {
    num: u64,
    den: u64,
}

impl TickRate {
    /// The rate of a counter running at `hz` ticks per second (`0` is
    /// taken as 1 Hz).
    pub const fn from_hz(hz: u64) -> Self {
        Self::from_seconds_per_tick(1, hz)
    }

    /// The rate of a counter whose tick lasts `nom / denom` seconds (the
    /// `fugit` convention). Zeros are taken as 1. A tick longer than `u64::MAX`
    /// nanoseconds (584 years) saturates: every tick but zero then reads as
    /// the end of time.
    pub const fn from_seconds_per_tick(nom: u64, denom: u64) -> Self {
        let nom = if nom == 0 { 1 } else { nom };
        let denom = if denom == 0 { 1 } else { denom };
        let num = nom as u128 * NANOS_PER_SEC as u128;
        let g = gcd_u128(num, denom as u128);
        let num = num / g;
        let den = denom as u128 / g;
        if num > u64::MAX as u128 {
            // more than 584 years per tick
            return Self {
                num: u64::MAX,
                den: 1,
            };
        }
        Self {
            num: num as u64,
            den: den as u64,
        }
    }

    /// `ticks · num / den`, rounded down, saturating at `u64::MAX`.
    #[inline]
    pub const fn ticks_to_nanos(self, ticks: u64) -> u64 {
        let Self { num, den } = self;
        let whole = match (ticks / den).checked_mul(num) {
            Some(w) => w,
            None => return u64::MAX,
        };
        let rem = ticks % den;
        let part = match rem.checked_mul(num) {
            Some(p) => p / den,
            None => ((rem as u128 * num as u128) / den as u128) as u64, // < num
        };
        whole.saturating_add(part)
    }

    /// The smallest tick count `t` with `ticks_to_nanos(t) >= nanos`, i.e.
    /// `⌈nanos · den / num⌉`, saturating at `u64::MAX`.
    #[inline]
    pub const fn nanos_to_ticks_ceil(self, nanos: u64) -> u64 {
        let Self { num, den } = self;
        let whole = match (nanos / num).checked_mul(den) {
            Some(w) => w,
            None => return u64::MAX,
        };
        let rem = nanos % num;
        let part = match rem.checked_mul(den) {
            Some(p) => p.div_ceil(num),
            None => (rem as u128 * den as u128).div_ceil(num as u128) as u64, // <= den
        };
        whole.saturating_add(part)
    }

    /// One tick in nanoseconds, rounded up (at least 1): a clock's honest
    /// resolution.
    pub const fn resolution_nanos(self) -> u64 {
        let r = self.num.div_ceil(self.den);
        if r == 0 { 1 } else { r }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reference: the whole computation in u128, no reduction, no split.
    fn ref_ticks_to_nanos(ticks: u64, nom: u64, denom: u64) -> u64 {
        let ns = u128::from(ticks) * u128::from(nom) * 1_000_000_000 / u128::from(denom);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    fn ref_nanos_to_ticks_ceil(nanos: u64, nom: u64, denom: u64) -> u64 {
        let p = u128::from(nanos) * u128::from(denom);
        let t = p.div_ceil(u128::from(nom) * 1_000_000_000);
        u64::try_from(t).unwrap_or(u64::MAX)
    }

    fn any_hz() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(1u64),
            Just(32_768),
            Just(1_000_000),
            Just(12_000_000),
            Just(1_000_000_000),
            Just(5_242_880_000),
            1u64..=2_000_000_000,
            1u64..=u64::MAX,
        ]
    }

    #[test]
    fn common_rates_convert_exactly() {
        let khz32 = TickRate::from_hz(32_768);
        assert_eq!(khz32.ticks_to_nanos(1), 30_517); // 30 517.578 ns
        assert_eq!(khz32.ticks_to_nanos(32_768), 1_000_000_000);
        assert_eq!(khz32.nanos_to_ticks_ceil(30_517), 1);
        assert_eq!(khz32.nanos_to_ticks_ceil(30_518), 2);
        assert_eq!(khz32.resolution_nanos(), 30_518);
        let mhz = TickRate::from_hz(1_000_000);
        assert_eq!(mhz.ticks_to_nanos(1), 1_000);
        assert_eq!(mhz.resolution_nanos(), 1_000);
        assert_eq!(mhz.ticks_to_nanos(u64::MAX), u64::MAX);
        assert_eq!(TickRate::from_hz(5_000_000_000).resolution_nanos(), 1);
        assert_eq!(TickRate::from_hz(0), TickRate::from_hz(1));
        // fugit's `Instant<_, 1, 1_000>` is a millisecond tick
        assert_eq!(
            TickRate::from_seconds_per_tick(1, 1_000),
            TickRate::from_hz(1_000)
        );
        assert_eq!(
            TickRate::from_seconds_per_tick(60, 1).ticks_to_nanos(2),
            120_000_000_000
        );
        // a tick longer than 584 years saturates instead of overflowing
        let huge = TickRate::from_seconds_per_tick(u64::MAX, 1);
        assert_eq!(huge.ticks_to_nanos(0), 0);
        assert_eq!(huge.ticks_to_nanos(1), u64::MAX);
        assert_eq!(huge.nanos_to_ticks_ceil(1), 1);
    }

    proptest! {
        #[test]
        fn ticks_to_nanos_matches_u128_reference(ticks in any::<u64>(), hz in any_hz()) {
            prop_assert_eq!(TickRate::from_hz(hz).ticks_to_nanos(ticks), ref_ticks_to_nanos(ticks, 1, hz));
        }

        #[test]
        fn fractional_ticks_match_u128_reference(
            ticks in any::<u64>(),
            nom in 1u64..=1_000_000,
            denom in 1u64..=u64::MAX,
        ) {
            let r = TickRate::from_seconds_per_tick(nom, denom);
            prop_assert_eq!(r.ticks_to_nanos(ticks), ref_ticks_to_nanos(ticks, nom, denom));
        }

        #[test]
        fn nanos_to_ticks_ceil_matches_u128_reference(nanos in any::<u64>(), hz in any_hz()) {
            prop_assert_eq!(TickRate::from_hz(hz).nanos_to_ticks_ceil(nanos), ref_nanos_to_ticks_ceil(nanos, 1, hz));
        }

        /// The ceiling tick is the first tick at which the clock has
        /// reached the time: never a tick early, never a tick late.
        #[test]
        fn ceil_tick_is_first_tick_at_or_after(nanos in 0u64..=u64::MAX / 4, hz in 1u64..=2_000_000_000) {
            let r = TickRate::from_hz(hz);
            let t = r.nanos_to_ticks_ceil(nanos);
            prop_assert!(r.ticks_to_nanos(t) >= nanos);
            if t > 0 {
                prop_assert!(r.ticks_to_nanos(t - 1) < nanos);
            }
        }

        #[test]
        fn resolution_is_at_least_one_tick(hz in 1u64..=u64::MAX) {
            let r = TickRate::from_hz(hz).resolution_nanos();
            prop_assert!(r >= 1);
            prop_assert!(u128::from(r) * u128::from(hz) >= 1_000_000_000);
        }
    }
}
