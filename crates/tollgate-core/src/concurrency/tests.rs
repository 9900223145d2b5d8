use super::*;

#[test]
fn zero_limit_is_an_error() {
    assert_eq!(
        ConcurrencyLimiter::with_limit(0).map(|_| ()),
        Err(ConfigError::ZeroLimit)
    );
}

#[test]
fn permits_return_on_drop_and_release_some() {
    let l = ConcurrencyLimiter::with_limit(5).unwrap();
    let mut p = l.try_acquire(4).unwrap();
    assert_eq!(l.available(), 1);
    assert!(matches!(l.try_acquire(2), Err(r) if !r.is_never()));
    p.release_some(3);
    assert_eq!((p.permits(), l.in_flight()), (1, 1));
    drop(p);
    assert_eq!(l.in_flight(), 0);
    let never = l.try_acquire(6).unwrap_err();
    assert!(never.is_never());
    assert_eq!((never.requested(), never.limit()), (6, 5));
}

#[test]
fn into_raw_detaches_until_release() {
    let l = ConcurrencyLimiter::with_limit(2).unwrap();
    let n = l.try_acquire(2).unwrap().into_raw();
    assert_eq!(l.in_flight(), 2);
    l.release(n);
    assert_eq!(l.in_flight(), 0);
    l.release(10); // never below zero
    assert_eq!(l.in_flight(), 0);
}

#[test]
fn refusal_reports_the_retry_hint() {
    let l = ConcurrencyLimiter::with_limit(1)
        .unwrap()
        .with_retry_hint(Duration::from_micros(5));
    let held = l.try_acquire(1).unwrap();
    let Err(d) = l.try_acquire(1) else {
        panic!("expected a refusal")
    };
    assert!(!d.is_never());
    assert_eq!(d.retry_after(), Duration::from_micros(5));
    assert_eq!(l.snapshot().reset_after(), Duration::from_micros(5));
    drop(held);
    assert_eq!(l.snapshot().reset_after(), Duration::ZERO);
}

#[test]
fn lowering_the_limit_refuses_until_enough_are_released() {
    let l = ConcurrencyLimiter::with_limit(3).unwrap();
    let a = l.try_acquire(2).unwrap();
    l.set_limit(1).unwrap();
    assert!(l.try_acquire(1).is_err()); // 2 in flight > 1
    drop(a);
    assert!(l.try_acquire(1).is_ok());
    assert_eq!(l.set_limit(0), Err(ConfigError::ZeroLimit));
    assert_eq!(l.limit(), 1);
}
