use super::*;

fn t(ns: u64) -> Timestamp {
    Timestamp::from_nanos(ns)
}

#[test]
fn validation() {
    assert_eq!(
        SlidingWindow::<4>::from_nanos(0, 8),
        Err(ConfigError::ZeroLimit)
    );
    assert_eq!(
        SlidingWindow::<4>::from_nanos(1, 0),
        Err(ConfigError::ZeroWindow)
    );
    assert_eq!(
        SlidingWindow::<0>::from_nanos(1, 8),
        Err(ConfigError::ZeroSegments)
    );
    assert_eq!(
        SlidingWindow::<3>::from_nanos(1, 8),
        Err(ConfigError::WindowNotDivisible {
            window: Duration::from_nanos(8),
            segments: 3
        })
    );
    // a window shorter than its segment count is not divisible either
    assert!(SlidingWindow::<4>::from_nanos(1, 2).is_err());
    let w = SlidingWindow::<4>::from_nanos(1, 8).unwrap();
    assert_eq!(w.segment(), Duration::from_nanos(2));
    assert_eq!(w.required_resolution(), Duration::from_nanos(2));
}

#[test]
fn static_state_is_const() {
    static W: Bucket<SlidingWindow<3>> =
        Bucket::sliding_window(crate::valid!(SlidingWindow::<3>::from_nanos(2, 30)));
    assert!(W.check_n(2, t(0)).is_ok());
    assert!(W.check(t(29)).is_err());
    assert!(W.check(t(30)).is_ok());
}

#[test]
fn wait_behind_queued_permits() {
    // 4 per second in 2 segments of 500 ms: 3 taken at 0, 1 at 600 ms
    let w = SlidingWindow::<2>::new(4, Duration::from_secs(1)).unwrap();
    let st = w.new_state();
    assert!(w.check_n(&st, 3, t(0)).is_ok());
    assert!(w.check_n(&st, 1, t(600_000_000)).is_ok());
    let at = t(700_000_000);
    let ms = |d: Option<Duration>| d.map(|d| d.as_millis());
    // segment 0 (3 permits) leaves at 1 s
    assert_eq!(ms(w.time_until_ready_after(&st, 0, 1, at)), Some(300));
    assert_eq!(ms(w.time_until_ready_after(&st, 2, 1, at)), Some(300));
    // 3 ahead take what segment 0 frees; segment 1 leaves at 1.5 s
    assert_eq!(ms(w.time_until_ready_after(&st, 3, 1, at)), Some(800));
    // the 3 taken at 1 s leave at 2 s
    assert_eq!(ms(w.time_until_ready_after(&st, 4, 3, at)), Some(1_300));
    assert_eq!(w.time_until_ready_after(&st, 0, 5, at), None);
    // far behind a long line: bounded, never early
    let far = w.time_until_ready_after(&st, 1_000, 1, at).unwrap();
    assert!(far >= Duration::from_secs(250), "{far:?}");
    // agrees with check's own retry_after when nothing is ahead
    let own = Bucket::from_parts(w, st)
        .check(at)
        .unwrap_err()
        .retry_after();
    assert_eq!(own, Duration::from_millis(300));
}

#[test]
fn heal_redates_counts() {
    let w = SlidingWindow::<2>::from_nanos(2, 2_000)
        .unwrap()
        .with_heal_threshold(Duration::from_nanos(5_000));
    let b = Bucket::new(w);
    assert!(b.check_n(2, t(1_000_000)).is_ok());
    // a small step back: charged to the head segment, expires with it
    let d = b.check(t(998_000));
    assert_eq!(d.unwrap_err().retry_after_nanos(), 4_000);
    // a jump back: the 2 permits are re-dated to segment 10
    let d = b.check(t(10_000));
    assert_eq!(d.unwrap_err().retry_after_nanos(), 2_000);
    assert!(b.check(t(12_000)).is_ok());
}

#[test]
fn state_size_is_as_documented() {
    use core::mem::size_of;
    assert_eq!(size_of::<SlidingWindowState<4>>(), 32); // 4·4 + 12, rounded up
    assert_eq!(size_of::<SlidingWindowState<1>>(), 16);
    assert_eq!(size_of::<crate::FixedWindowState>(), 8);
}

#[test]
fn end_of_time() {
    let b = Bucket::new(SlidingWindow::<4>::from_nanos(3, 4).unwrap());
    let end = Timestamp::MAX;
    assert!(b.check_n(3, end).is_ok());
    let d = b.check(end);
    assert!(d.unwrap_err().retry_after().as_nanos() >= 1);
    b.refund(u32::MAX, end);
    assert!(b.is_idle(end));
}
