//! `acquire(n).await` on a 32-bit tick bucket (`tollgate::tick`), driven by
//! embassy-time's mock driver: the waiter wakes at exactly the tick at
//! which the tick-native call would admit, with the bucket's ticks taken
//! from `EmbassyClock` timestamps.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use embassy_time::{Duration, Instant, MockDriver, TICK_HZ};
use tollgate::embassy::{self, EmbassyClock};
use tollgate::tick::{TickGcra, TickState};
use tollgate::{Bucket, BucketKind, Clock};

static SERIAL: Mutex<()> = Mutex::new(());

#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn acquire_on_a_tick_bucket_wakes_on_the_due_tick() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    MockDriver::get().reset();
    let hz = u32::try_from(TICK_HZ).expect("embassy's test rate fits a u32");
    // one permit per 250 ticks, bursts of 2, at embassy's own tick rate
    let bucket = Bucket::from_parts(
        TickGcra::from_ticks(BucketKind::TokenBucket, 250, 2, hz).expect("valid"),
        TickState::new(),
    );
    MockDriver::get().advance(Duration::from_ticks(1_000));
    let clock = EmbassyClock::new();
    assert_eq!(bucket.algorithm().tick_of(clock.now()), 1_000);
    assert!(bucket.check_n(2, clock.now()).is_ok());
    // the tick-native view agrees: the next permit is 250 ticks away
    let due = bucket
        .algorithm()
        .time_until_ready_ticks(bucket.state(), 1, 1_000)
        .expect("fits");
    assert_eq!(due, 250);

    let count = Arc::new(CountingWaker::default());
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut wait = embassy::acquire(&bucket, &(), 1);
    assert!(Pin::new(&mut wait).poll(&mut cx).is_pending());
    MockDriver::get().advance(Duration::from_ticks(249));
    assert_eq!(count.0.load(Ordering::SeqCst), 0, "woken a tick early");
    MockDriver::get().advance(Duration::from_ticks(1));
    assert_eq!(
        count.0.load(Ordering::SeqCst),
        1,
        "not woken on the due tick"
    );
    assert_eq!(Instant::now().as_ticks(), 1_250);
    match Pin::new(&mut wait).poll(&mut cx) {
        Poll::Ready(Ok(at)) => assert_eq!(
            at,
            EmbassyClock::timestamp(Instant::from_ticks(1_250)),
            "the admission instant"
        ),
        other => panic!("expected the permit on tick 1250, got {other:?}"),
    }
    // and it was taken: the next is due 250 ticks later
    assert_eq!(
        bucket
            .algorithm()
            .time_until_ready_ticks(bucket.state(), 1, 1_250)
            .expect("fits"),
        250
    );
}
