//! A tokio runtime whose paused clock starts before the process's first
//! std clock is made (its paused time then lags the real clock) still
//! sees its `TokioClock` move with every `advance`.
//!
//! One test in its own binary, so that nothing else fixes the process
//! origin first.

use std::time::Duration;

use tollgate::{Clock, TokioClock};

#[test]
fn a_paused_runtime_built_before_the_first_clock_still_moves_its_tokio_clock() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    // Kept real sleep: real time passing while the runtime's clock is
    // paused is the condition under test (at least 5 ms, more under load);
    // the assertions below hold however long it lasts.
    std::thread::sleep(Duration::from_millis(5));
    rt.block_on(async {
        // the first clock of the process fixes the origin now, when tokio's
        // paused time is at least 5 ms behind the real clock
        let clock = TokioClock::new();
        let start = clock.now();
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(clock.now() - start, Duration::from_millis(1));
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(
            clock.now() - start,
            Duration::from_millis(60_001),
            "tokio's time did not move the clock"
        );
        // the timer instant of a timestamp, and back
        let at = clock.now() + Duration::from_millis(250);
        assert_eq!(clock.timestamp(clock.instant_at(at)), at);
        assert_eq!(
            clock.instant_at(at),
            tokio::time::Instant::now() + Duration::from_millis(250)
        );
    });
}
