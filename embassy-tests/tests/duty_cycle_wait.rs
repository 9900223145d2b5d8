//! Waiting for a transmission slot of the duty-cycle limiter with
//! `embassy::acquire`, driven by embassy-time's mock driver (1 MHz).
//!
//! The duty-cycle limiter is the core's `Limiter<usize>` (the sub-band's
//! index as the key, airtime in µs as the permits), so it waits through
//! the same `Wait` as a bucket. Each test advances time tick by tick and
//! checks that a frame is admitted exactly on the first tick at or after
//! the previous frame's start plus `airtime / d` (the LoRaWAN time-off
//! arithmetic, `DutyCycle::time_off`), never a tick early, and that the
//! wait returns that instant.

use core::time::Duration;
use std::sync::Mutex;
use std::task::Poll;

use embassy_time::Instant;
use tollgate::duty_cycle::{DutyCycle, DutyCycleLimiter, SubBand, airtime_permits, eu868::Eu868};
use tollgate::embassy::{self, EmbassyClock, WaitError};
use tollgate::{Clock, Timestamp};

mod support;
use support::{Poller, advance_ticks, fresh_time, now_ticks};

/// The tick at which a frame that follows one started at `start`, of
/// `airtime` at duty cycle `d`, may start: `start + airtime + time-off`
/// (`⌈airtime / d⌉`, to the nanosecond), rounded up to a whole tick.
fn next_slot_tick(start: Timestamp, airtime: Duration, d: DutyCycle) -> u64 {
    EmbassyClock::instant_at(start + airtime + d.time_off(airtime)).as_ticks()
}

/// 0.3 %: `a / d` is a third of a tick off a whole number of ticks, so the
/// waiter must round each wake-up up.
const ODD: DutyCycle = match DutyCycle::from_ppm(3_000) {
    Ok(d) => d,
    Err(_) => panic!("a valid duty cycle"),
};

#[test]
fn frames_start_on_the_first_tick_the_time_off_allows() {
    let _t = fresh_time();
    let band = SubBand::new("0.3%", 868_000_000, 868_600_000, ODD).unwrap();
    let radio = DutyCycleLimiter::new([band]);
    let p = Poller::new();
    // Frames of varied airtime, each waited for as soon as the previous
    // one was admitted.
    let airtimes = [1_000u64, 250, 4_000, 1, 333, 10_000].map(Duration::from_micros);
    let mut previous: Option<(Timestamp, Duration)> = None;
    for (i, airtime) in airtimes.into_iter().enumerate() {
        let mut wait = embassy::acquire(&radio, &0, airtime_permits(airtime));
        let at = match previous {
            None => match p.poll(&mut wait) {
                Poll::Ready(Ok(at)) => at,
                other => panic!("a free sub-band admits at once, got {other:?}"),
            },
            Some((start, previous_airtime)) => {
                let due = next_slot_tick(start, previous_airtime, ODD);
                assert!(due > now_ticks(), "frame {i}");
                assert!(p.poll(&mut wait).is_pending());
                let wakes = p.wakes();
                advance_ticks(due - 1 - now_ticks());
                assert_eq!(p.wakes(), wakes, "frame {i}: woken a tick early");
                assert!(p.poll(&mut wait).is_pending(), "frame {i}: a tick early");
                advance_ticks(1);
                assert_eq!(p.wakes(), wakes + 1, "frame {i}: not woken on its tick");
                let Poll::Ready(Ok(at)) = p.poll(&mut wait) else {
                    panic!("frame {i}: not admitted on tick {due}");
                };
                assert_eq!(at, EmbassyClock::timestamp(Instant::from_ticks(due)));
                at
            }
        };
        // the wait returned the admission: the time-off runs from it
        assert_eq!(at, EmbassyClock.now());
        assert_eq!(
            radio.free_at(0).unwrap(),
            at + airtime + ODD.time_off(airtime),
            "frame {i}"
        );
        previous = Some((at, airtime));
    }
    // 1 000 µs at 0.3 %: 333 333 334 ns, so the second frame is on tick
    // 333 334, not 333 333
    assert_eq!(
        next_slot_tick(Timestamp::ZERO, Duration::from_micros(1_000), ODD),
        333_334
    );
}

/// Two tasks send frames of 2 ms in the EU868 sub-band P (10 %), five
/// each, polled only when woken: every frame starts exactly 20 ms after the
/// previous one, both tasks are served, and the other sub-bands stay free.
#[test]
fn two_tasks_share_a_sub_band_one_frame_per_cycle() {
    let _t = fresh_time();
    static RADIO: DutyCycleLimiter<6> = DutyCycleLimiter::eu868();
    let band = Eu868::P.index();
    let airtime = Duration::from_millis(2);
    let sent: Mutex<Vec<(u8, Timestamp)>> = Mutex::new(Vec::new());
    let task = |id: u8| {
        let sent = &sent;
        async move {
            for _ in 0..5 {
                let at = embassy::acquire(&RADIO, &band, airtime_permits(airtime))
                    .await
                    .expect("a 2 ms frame fits");
                sent.lock().unwrap().push((id, at));
            }
        }
    };
    let mut both = Box::pin(embassy_futures::join::join(task(1), task(2)));
    let p = Poller::new();
    let mut done = p.poll(&mut both).is_ready();
    let (mut seen_wakes, mut polls, mut ticks) = (0, 1, 0u64);
    while !done {
        assert!(
            ticks < 300_000,
            "the tasks were never served (lost wake-up?)"
        );
        advance_ticks(1);
        ticks += 1;
        if p.wakes() > seen_wakes {
            seen_wakes = p.wakes();
            polls += 1;
            done = p.poll(&mut both).is_ready();
        }
    }
    drop(both);
    let sent = sent.into_inner().unwrap();
    let starts: Vec<Timestamp> = sent.iter().map(|&(_, at)| at).collect();
    let expected: Vec<Timestamp> = (0..10u64).map(|k| Timestamp::from_millis(20 * k)).collect();
    assert_eq!(starts, expected);
    for id in [1, 2] {
        assert_eq!(sent.iter().filter(|&&(who, _)| who == id).count(), 5);
    }
    assert!(polls <= 2 * sent.len() + 2, "{polls} polls for 10 frames");
    for other in [Eu868::K, Eu868::L, Eu868::M, Eu868::N, Eu868::Q] {
        assert_eq!(RADIO.free_at(other.index()), Ok(Timestamp::ZERO));
    }
}

#[test]
fn a_frame_that_never_fits_is_an_error_at_once_and_arms_no_timer() {
    let _t = fresh_time();
    let radio = DutyCycleLimiter::eu868();
    let n = Eu868::N.index(); // 0.1 %: 3.6 s an hour
    let p = Poller::new();
    // a frame is in its time-off, so a fitting one would wait
    assert!(p.poll(&mut embassy::acquire(&radio, &n, 1_000)).is_ready());
    let free_at = radio.free_at(n).unwrap();
    let too_long = airtime_permits(Duration::from_millis(3_600) + Duration::from_nanos(1));
    for (band, permits) in [(n, too_long), (6, 1)] {
        let mut never =
            embassy::acquire(&radio, &band, permits).with_timeout(Duration::from_secs(7_200));
        match p.poll(&mut never) {
            Poll::Ready(Err(WaitError::CapacityExceeded(e))) => {
                assert!(e.is_never(), "{e:?}");
                assert_eq!(e.requested(), permits);
            }
            other => panic!("expected CapacityExceeded, got {other:?}"),
        }
        assert!(matches!(
            p.poll(&mut embassy::until_ready(&radio, &band, permits)),
            Poll::Ready(Err(WaitError::CapacityExceeded(_)))
        ));
    }
    advance_ticks(10_000_000);
    assert_eq!(p.wakes(), 0, "no timer was armed");
    assert_eq!(radio.free_at(n), Ok(free_at), "nothing was recorded");
}

#[test]
fn a_deadline_before_the_slot_gives_up_at_once_and_records_nothing() {
    let _t = fresh_time();
    let radio = DutyCycleLimiter::eu868();
    let m = Eu868::M.index(); // 1 %: 10 ms of airtime, a 1 s cycle
    let frame = airtime_permits(Duration::from_millis(10));
    let p = Poller::new();
    assert!(p.poll(&mut embassy::acquire(&radio, &m, frame)).is_ready());
    let slot = Timestamp::from_secs(1);

    let mut early =
        embassy::acquire(&radio, &m, frame).with_deadline(slot - Duration::from_micros(1));
    match p.poll(&mut early) {
        Poll::Ready(Err(WaitError::Timeout { ready_at, deadline })) => {
            assert_eq!(ready_at, slot);
            assert_eq!(deadline, slot - Duration::from_micros(1));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(radio.free_at(m), Ok(slot));

    let mut on_time = embassy::acquire(&radio, &m, frame).with_deadline(slot);
    assert!(p.poll(&mut on_time).is_pending());
    advance_ticks(1_000_000);
    assert_eq!(p.poll(&mut on_time), Poll::Ready(Ok(slot)));
}

#[test]
fn a_dropped_wait_records_nothing_and_until_ready_takes_nothing() {
    let _t = fresh_time();
    let radio = DutyCycleLimiter::eu868();
    let p_band = Eu868::P.index();
    let frame = airtime_permits(Duration::from_millis(2)); // a 20 ms cycle
    let p = Poller::new();
    assert!(
        p.poll(&mut embassy::acquire(&radio, &p_band, frame))
            .is_ready()
    );
    {
        let mut cancelled = embassy::acquire(&radio, &p_band, frame);
        assert!(p.poll(&mut cancelled).is_pending());
        advance_ticks(10_000);
    } // dropped while waiting
    let mut ready = embassy::until_ready(&radio, &p_band, frame);
    assert!(p.poll(&mut ready).is_pending());
    advance_ticks(10_000);
    // the slot at 20 ms is found free, and left free
    assert_eq!(
        p.poll(&mut ready),
        Poll::Ready(Ok(Timestamp::from_millis(20)))
    );
    assert_eq!(radio.free_at(p_band), Ok(Timestamp::from_millis(20)));
    assert_eq!(
        p.poll(&mut embassy::acquire(&radio, &p_band, frame)),
        Poll::Ready(Ok(Timestamp::from_millis(20)))
    );
}
