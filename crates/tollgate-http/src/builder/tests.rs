//! The builder's validation, unit by unit.

use super::*;
use tollgate_core::gcra::Gcra;
use tollgate_core::quota::Quota;

fn plan(alg: StoreAlg) -> Plan {
    Plan { alg }
}

#[test]
fn a_quota_finer_than_the_clock_is_refused() {
    let ms = Duration::from_millis(1);
    // 1000 per second: one permit per millisecond, as fine as the clock
    let ok = plan(StoreAlg::Gcra(Gcra::token_bucket(
        Quota::per_second(1000).unwrap(),
    )));
    assert_eq!(check_resolution("global", &ok, ms), Ok(()));
    // 2000 per second: a 500 µs interval a 1 ms clock cannot see
    let fine = plan(StoreAlg::Gcra(Gcra::token_bucket(
        Quota::per_second(2000).unwrap(),
    )));
    let e = check_resolution("policies[0]", &fine, ms).unwrap_err();
    assert_eq!(e.location(), "policies[0].rate");
    // in-flight limits have no time step
    assert_eq!(
        check_resolution("x", &plan(StoreAlg::InFlight(3)), ms),
        Ok(())
    );
    // the layer's default clock resolves a nanosecond: any quota fits
    assert_eq!(LayerClock::default().resolution(), Duration::from_nanos(1));
}
