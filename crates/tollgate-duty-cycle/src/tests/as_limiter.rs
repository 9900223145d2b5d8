//! The duty-cycle limiter as the core's `Limiter<usize>`: every answer in
//! permits (µs of airtime) agrees with the inherent calls, and cancel and
//! refund never leave a sub-band freer than the frames really sent allow.

use super::*;
use tollgate_core::limiter::{Grant, Limiter};

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

#[test]
fn airtime_permits_round_up_to_the_microsecond() {
    assert_eq!(airtime_permits(Duration::ZERO), 0);
    assert_eq!(airtime_permits(Duration::from_nanos(1)), 1);
    assert_eq!(airtime_permits(Duration::from_nanos(1_000)), 1);
    assert_eq!(airtime_permits(Duration::from_nanos(1_001)), 2);
    assert_eq!(airtime_permits(secs(3_600)), 3_600_000_000);
    assert_eq!(airtime_permits(secs(4_295)), u32::MAX); // 4.295e9 µs
    assert_eq!(airtime_permits(Duration::MAX), u32::MAX);
}

#[test]
fn capacity_is_the_longest_frame_in_whole_microseconds() {
    let radio = DutyCycleLimiter::eu868();
    assert_eq!(radio.capacity(&Eu868::M.index()), 36_000_000);
    assert_eq!(radio.capacity(&Eu868::N.index()), 3_600_000);
    assert_eq!(radio.capacity(&Eu868::P.index()), 360_000_000);
    assert_eq!(radio.capacity(&6), 0);
    // a hard cap of 1.5 ms plus half a microsecond: 1 500 whole µs fit
    let capped = eu868::M
        .with_hard_hourly_cap(Duration::from_nanos(1_500_500))
        .unwrap();
    let radio = DutyCycleLimiter::new([capped]);
    assert_eq!(radio.capacity(&0), 1_500);
    assert!(radio.try_acquire_n(&0, 1_500, Timestamp::ZERO).is_ok());
    assert!(
        radio
            .try_acquire_n(&0, 1_501, Timestamp::ZERO)
            .unwrap_err()
            .is_never()
    );
}

#[test]
fn an_admission_is_try_transmit_in_microseconds() {
    let view = DutyCycleLimiter::eu868();
    let direct = DutyCycleLimiter::eu868();
    let m = Eu868::M.index();
    let mut now = Timestamp::from_secs(7);
    for airtime_us in [1_000, 250_000, 1, 36_000_000, 999] {
        // the view and the inherent call see the same sub-band
        let wait = direct.time_until_allowed(m, us(airtime_us), now).unwrap();
        assert_eq!(view.time_until_ready(&m, airtime_us as u32, now), Ok(wait));
        if !wait.is_zero() {
            let refusal = view.try_acquire_n(&m, airtime_us as u32, now).unwrap_err();
            assert_eq!(refusal.retry_after(), wait);
            assert!(!refusal.is_never());
            assert_eq!(
                (refusal.limit(), refusal.snapshot().remaining()),
                (36_000_000, 0)
            );
            now += wait;
        }
        let grant = view.try_acquire_n(&m, airtime_us as u32, now).unwrap();
        let Transmit::Allowed { free_at } = direct.try_transmit(m, us(airtime_us), now).unwrap()
        else {
            panic!("the sub-band is free at {now:?}");
        };
        assert_eq!(grant, Grant::new(airtime_us as u32, free_at));
        assert_eq!(view.free_at(m), Ok(free_at));
        let s = view.snapshot(&m, now);
        assert_eq!((s.limit(), s.remaining()), (36_000_000, 0));
        assert_eq!(now + s.reset_after(), free_at);
        now += us(airtime_us);
    }
    // free again: all of the longest frame remains
    let s = view.snapshot(&m, view.free_at(m).unwrap());
    assert_eq!(
        (s.remaining(), s.reset_after()),
        (36_000_000, Duration::ZERO)
    );
}

#[test]
fn never_for_a_frame_too_long_or_an_unknown_band_and_nothing_recorded() {
    let radio = DutyCycleLimiter::eu868();
    let n = Eu868::N.index();
    let t = Timestamp::from_secs(1);
    for (band, permits, limit) in [(n, 3_600_001, 3_600_000), (6, 1, 0), (usize::MAX, 0, 0)] {
        let refusal = radio.try_acquire_n(&band, permits, t).unwrap_err();
        assert!(refusal.is_never(), "{band} {permits}");
        assert_eq!((refusal.requested(), refusal.limit()), (permits, limit));
        assert!(
            radio
                .time_until_ready(&band, permits, t)
                .unwrap_err()
                .is_never()
        );
    }
    assert_eq!(radio.free_at(n), Ok(Timestamp::ZERO));
}

#[test]
fn a_peek_is_admitted_even_during_the_time_off_and_records_nothing() {
    let radio = DutyCycleLimiter::eu868();
    let m = Eu868::M.index();
    let t = Timestamp::from_secs(1);
    let sent = radio.try_acquire_n(&m, 1_000_000, t).unwrap(); // 100 s cycle
    let peek = radio.try_acquire_n(&m, 0, t).unwrap();
    assert_eq!(peek, Grant::new(0, sent.full_at()));
    assert_eq!(radio.time_until_ready(&m, 0, t), Ok(Duration::ZERO));
    assert_eq!(radio.free_at(m), Ok(sent.full_at()));
}

#[test]
fn cancel_takes_back_the_last_frame_only() {
    let radio = DutyCycleLimiter::eu868();
    let m = Eu868::M.index();
    let t = Timestamp::from_secs(1);
    let grant = radio.try_acquire_n(&m, 1_000, t).unwrap();
    assert_eq!(grant.full_at(), t + ms(100));
    radio.cancel(&m, grant, t);
    assert_eq!(radio.free_at(m), Ok(t)); // as before the frame
    assert!(radio.try_acquire_n(&m, 1_000, t).is_ok());
    // a grant whose time-off was served and followed by another frame:
    // cancelling it changes nothing
    let later = t + ms(100);
    let second = radio.try_acquire_n(&m, 2_000, later).unwrap();
    radio.cancel(&m, grant, later);
    assert_eq!(radio.free_at(m), Ok(second.full_at()));
    // a peek's grant and an unknown band: nothing
    radio.cancel(&m, Grant::new(0, second.full_at()), later);
    radio.cancel(&6, second, later);
    assert_eq!(radio.free_at(m), Ok(second.full_at()));
}

#[test]
fn refund_shortens_the_time_off_never_to_before_now() {
    let radio = DutyCycleLimiter::eu868();
    let m = Eu868::M.index();
    let t = Timestamp::from_secs(1);
    radio.try_acquire_n(&m, 1_000, t).unwrap(); // free at t + 100 ms
    radio.refund(&m, 400, t + ms(1)); // a frame of 600 µs: free at t + 60 ms
    assert_eq!(radio.free_at(m), Ok(t + ms(60)));
    radio.refund(&m, 1_000, t + ms(20)); // more than is left: free now
    assert_eq!(radio.free_at(m), Ok(t + ms(20)));
    radio.refund(&m, 1_000, t + ms(30)); // already free: nothing
    assert_eq!(radio.free_at(m), Ok(t + ms(20)));
    radio.refund(&6, 1_000, t); // unknown band: nothing
}

proptest! {
    /// A frame of `a` µs refunded by `r ≤ a` µs at any time during its
    /// time-off leaves the sub-band silent at least as long as a frame of
    /// `a − r` µs sent at the same instant would, and never past the
    /// frame's own time-off.
    #[test]
    fn a_refund_is_never_more_than_the_shorter_frame_allows(
        ppm in 1u32..=1_000_000,
        a_frac in 0u64..=1_000_000,
        r_frac in 0u64..=1_000,
        at in 0u64..=10_000_000_000,
    ) {
        let d = DutyCycle::from_ppm(ppm).unwrap();
        let band = SubBand::new("b", 1, 2, d).unwrap();
        // any frame that fits (the budget is ppm · 3 600 µs), and a refund
        // of up to all of it
        let budget_us = u64::from(ppm) * 3_600;
        let a = u32::try_from(1 + (budget_us - 1) * a_frac / 1_000_000).unwrap();
        let r = u32::try_from(u64::from(a) * r_frac / 1_000).unwrap();
        let radio = DutyCycleLimiter::new([band]);
        let t0 = Timestamp::from_secs(1);
        let grant = radio.try_acquire_n(&0, a, t0).unwrap();
        let now = (t0 + Duration::from_nanos(at)).min(grant.full_at());
        radio.refund(&0, r, now);
        let free = radio.free_at(0).unwrap();
        let shorter = DutyCycleLimiter::new([band]);
        let Transmit::Allowed { free_at: shorter_free } =
            shorter.try_transmit(0, us(u64::from(a - r)), t0).unwrap()
        else {
            unreachable!("a fresh limiter allows a frame that fits")
        };
        prop_assert!(free >= shorter_free.max(now), "{free:?} < {shorter_free:?}");
        prop_assert!(free <= grant.full_at());
    }
}
