//! The lock-free keyed table's slot protocol with real loom orderings on
//! the slot words, the `sweeps` and `reconfig` counters and the
//! configuration words (`loom_tests::lock_free_protocol`: the table's
//! protocol re-implemented on a 64-bit slot word, since the table's own
//! 128-bit slots are a sequentially consistent shim under loom).
//!
//! With the table's orderings every model passes; each `*_needs_*` model
//! weakens one site (an `Acquire` to `Relaxed`, or the freeze before a
//! move) and must fail, so the models are known to see what those sites
//! are for:
//!
//! - a key being moved by a sweep is never reported absent by a lock-free
//!   lookup (`sweeps` is a sequence lock; the slot loads must be `Acquire`
//!   so that a hole left by the sweep is seen together with its odd count);
//! - a check racing a reconfiguration decides on the old configuration
//!   with the old TAT or on the new one with the carried TAT, never a mix
//!   (the slot loads and the configuration loads must be `Acquire`, so
//!   that seeing either half of the change makes the `reconfig` check
//!   fail);
//! - a check racing the move of its own key is counted exactly once (a
//!   moved entry is frozen first, so a check on its old slot fails and
//!   retries under the mutex).
//!
//! Pinned as needed (each weakening alone fails a model): `Acquire` on the
//! slot loads, the `sweeps` loads, the `reconfig` loads (the first look:
//! a seen even count must order the slot and configuration loads after
//! it) and the configuration loads; `Release` on the slot stores (moves,
//! carried TATs), on the eviction compare-and-swap and on the
//! configuration stores; the freeze before a move.
//!
//! Tried and NOT failing in these scenarios (so not pinned): `Relaxed` for
//! the increments that make `sweeps` or `reconfig` odd (the odd count
//! reaches a reader through the `Release` slot writes that follow it in
//! program order), `Relaxed` for `reconfig` in the reconfiguration
//! scenario where the carried TAT is what the reader sees first (its
//! `Acquire` slot load orders the later look), and `Relaxed` slot
//! compare-and-swaps in the move-and-check scenario (a read-modify-write
//! always reads the latest word, so the freeze alone protects it). The
//! table's stronger choices there are harmless.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::Ordering::{Acquire, Relaxed};
use loom_tests::lock_free_protocol::{Checked, Config, ModelTable, Orders};
use loom_tests::model;

/// A sweep evicts idle key 1 (home slot 0) and moves busy key 2 from slot
/// 1 back to slot 0 while a lock-free lookup reads key 2: it is tracked
/// throughout, so the lookup must find it (`contains`, `snapshot`).
fn moved_key_is_found(orders: Orders) {
    model::check(move || {
        let config = Config {
            interval: 10,
            tolerance: 0,
        };
        let table = Arc::new(ModelTable::new(orders, config, 3, &[(1, 5), (2, 100)]));
        let sweeper = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || table.evict_refilled(10))
        };
        let (tat, _) = table.tat(2);
        assert_eq!(sweeper.join().unwrap(), 1);
        assert_eq!(
            tat,
            Some(100),
            "a key in the middle of a move was reported absent"
        );
        assert_eq!(table.entries(), [(2, 100)]);
    });
}

#[test]
fn a_key_being_moved_is_never_reported_absent() {
    moved_key_is_found(Orders::TABLE);
}

#[test]
#[should_panic(expected = "a key in the middle of a move was reported absent")]
fn a_key_being_moved_needs_acquire_slot_loads() {
    moved_key_is_found(Orders {
        slot_load: Relaxed,
        ..Orders::TABLE
    });
}

#[test]
#[should_panic(expected = "a key in the middle of a move was reported absent")]
fn a_key_being_moved_needs_acquire_sweeps_loads() {
    moved_key_is_found(Orders {
        sweeps_load: Relaxed,
        ..Orders::TABLE
    });
}

#[test]
#[should_panic(expected = "a key in the middle of a move was reported absent")]
fn a_key_being_moved_needs_release_slot_stores() {
    moved_key_is_found(Orders {
        slot_store: Relaxed,
        ..Orders::TABLE
    });
}

#[test]
#[should_panic(expected = "a key in the middle of a move was reported absent")]
fn a_key_being_moved_needs_release_evictions() {
    moved_key_is_found(Orders {
        slot_cas: Acquire,
        ..Orders::TABLE
    });
}

/// A reconfiguration from `old` to `new` carrying each TAT through `carry`
/// races a check of key 1 (TAT `tat`) at 0. The observed (decision, final
/// TAT) must be what one of the two orders gives.
fn check_sees_one_configuration(
    orders: Orders,
    old: Config,
    new: Config,
    carry: fn(u64) -> u64,
    tat: u64,
) {
    // the two sequential orders
    let check_first = {
        let (allowed, store) = old.step(tat, 0);
        (allowed, carry(store.unwrap_or(tat)))
    };
    let change_first = {
        let carried = carry(tat);
        let (allowed, store) = new.step(carried, 0);
        (allowed, store.unwrap_or(carried))
    };
    model::check(move || {
        let table = Arc::new(ModelTable::new(orders, old, 2, &[(1, tat)]));
        let changer = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || table.reconfigure(new, carry))
        };
        let decision = table.check(1, 0);
        changer.join().unwrap();
        let entries = table.entries();
        assert_eq!(entries.len(), 1);
        let observed = (decision == Checked::Allowed, entries[0].1);
        assert!(
            observed == check_first || observed == change_first,
            "observed {observed:?}: neither the check first {check_first:?} \
             nor the change first {change_first:?}"
        );
    });
}

/// Old: burst 1 (refuses TAT 5 at 0); new: T = 20, τ = 20, carrying TAT
/// − 5. A check that read the carried TAT with the old configuration would
/// admit (10): neither order does.
fn carried_tat_with_old_config(orders: Orders) {
    check_sees_one_configuration(
        orders,
        Config {
            interval: 10,
            tolerance: 0,
        },
        Config {
            interval: 20,
            tolerance: 20,
        },
        |tat| tat.saturating_sub(5),
        5,
    );
}

#[test]
fn a_check_never_steps_a_carried_tat_with_the_old_configuration() {
    carried_tat_with_old_config(Orders::TABLE);
}

#[test]
#[should_panic(expected = "observed (true, 10): neither")]
fn a_carried_tat_needs_acquire_slot_loads() {
    carried_tat_with_old_config(Orders {
        slot_load: Relaxed,
        ..Orders::TABLE
    });
}

/// Old: τ = 20 (admits TAT 5 at 0); new: τ = 0, carrying TAT − 5. Both
/// orders admit (final TAT 10). A check that read the new configuration
/// with the TAT from before the change would refuse (5 > 0), and a refusal
/// writes nothing, so only its look at `reconfig` can catch it: that look
/// must be ordered after the configuration loads.
fn old_tat_with_new_config(orders: Orders) {
    check_sees_one_configuration(
        orders,
        Config {
            interval: 10,
            tolerance: 20,
        },
        Config {
            interval: 10,
            tolerance: 0,
        },
        |tat| tat.saturating_sub(5),
        5,
    );
}

#[test]
fn a_check_never_steps_the_old_tat_with_the_new_configuration() {
    old_tat_with_new_config(Orders::TABLE);
}

#[test]
#[should_panic(expected = "observed (false, 0): neither")]
fn the_old_tat_needs_acquire_configuration_loads() {
    old_tat_with_new_config(Orders {
        config_load: Relaxed,
        ..Orders::TABLE
    });
}

#[test]
#[should_panic(expected = "observed (false, 0): neither")]
fn the_old_tat_needs_release_configuration_stores() {
    old_tat_with_new_config(Orders {
        config_store: Relaxed,
        ..Orders::TABLE
    });
}

#[test]
#[should_panic(expected = "observed (false, 0): neither")]
fn the_old_tat_needs_acquire_reconfig_loads() {
    old_tat_with_new_config(Orders {
        reconfig_load: Relaxed,
        ..Orders::TABLE
    });
}

/// A sweep moves busy key 2 (TAT 8) from slot 1 to slot 0 while a
/// lock-free check admits it at 6 (τ = 10): the admission is applied once,
/// to the one entry of key 2.
fn move_and_check(orders: Orders) {
    model::check(move || {
        let config = Config {
            interval: 10,
            tolerance: 10,
        };
        let table = Arc::new(ModelTable::new(orders, config, 3, &[(1, 5), (2, 8)]));
        let sweeper = {
            let table = Arc::clone(&table);
            loom::thread::spawn(move || table.evict_refilled(6))
        };
        let decision = table.check(2, 6);
        assert_eq!(sweeper.join().unwrap(), 1);
        assert_eq!(decision, Checked::Allowed);
        assert_eq!(
            table.entries(),
            [(2, 18)],
            "the admission was lost or key 2 duplicated by the move"
        );
    });
}

#[test]
fn a_check_racing_the_move_of_its_key_counts_once() {
    move_and_check(Orders::TABLE);
}

#[test]
#[should_panic(expected = "the admission was lost")]
fn a_move_needs_the_freeze() {
    move_and_check(Orders {
        freeze_moves: false,
        ..Orders::TABLE
    });
}
