//! The partitioned limiter on a manual clock: policies are tried in order,
//! unclaimed resources go to the default limiter (or pass), keys of
//! different policies never share a bucket, every algorithm works behind a
//! policy, in-flight leases give their permits back on drop, and a chain
//! refunds what its earlier members granted when a later one refuses.

use core::time::Duration;

use tollgate::keyed::{KeyedPath, KeyedTable, ShardedKeyedTable};
use tollgate::partitioned::Partitioned;
use tollgate::{Bucket, FixedWindow, Gcra, Limiter, Quota, SlidingWindow, Timestamp};

#[derive(Debug, Clone)]
struct Msg {
    kind: &'static str,
    user: u64,
}

const fn msg(kind: &'static str, user: u64) -> Msg {
    Msg { kind, user }
}

fn t(ms: u64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn bucket(per_sec: u32, burst: u32) -> ShardedKeyedTable<u64, Gcra> {
    ShardedKeyedTable::builder(Gcra::token_bucket(
        Quota::per_second(per_sec)
            .unwrap()
            .with_burst(burst)
            .unwrap(),
    ))
    .max_keys(64)
    .build()
    .unwrap()
}

fn admitted<P: Limiter<Msg>>(p: &P, m: &Msg, now: Timestamp, tries: usize) -> usize {
    (0..tries)
        .filter(|_| match p.try_acquire(m, now) {
            Ok(a) => {
                drop(a);
                true
            }
            Err(_) => false,
        })
        .count()
}

#[test]
fn the_first_policy_that_claims_a_resource_charges_it() {
    let p = Partitioned::<Msg, u64>::builder("msgs")
        .policy(
            "uploads",
            |m: &Msg| (m.kind == "upload").then_some(m.user),
            bucket(1, 1),
        )
        .policy("by_user", |m: &Msg| Some(m.user), bucket(1, 3))
        .build();
    // an upload is claimed by "uploads" (burst 1), never by "by_user"
    assert_eq!(admitted(&p, &msg("upload", 1), t(0), 5), 1);
    let r = p.try_acquire(&msg("upload", 1), t(0)).unwrap_err();
    assert_eq!((r.limiter(), r.policy()), ("msgs", "uploads"));
    // user 1's other messages have their own budget under "by_user"
    assert_eq!(admitted(&p, &msg("chat", 1), t(0), 5), 3);
    assert_eq!(
        p.try_acquire(&msg("chat", 1), t(0)).unwrap_err().policy(),
        "by_user"
    );
    assert_eq!(p.policy_names().collect::<Vec<_>>(), ["uploads", "by_user"]);
}

#[test]
fn unclaimed_resources_share_the_default_limiter_or_pass() {
    let only_uploads = |m: &Msg| (m.kind == "upload").then_some(m.user);
    let with_default = Partitioned::<Msg, u64>::builder("msgs")
        .policy("uploads", only_uploads, bucket(1, 1))
        .default(Bucket::token_bucket(
            Quota::per_second(1).unwrap().with_burst(2).unwrap(),
        ))
        .build();
    // every unclaimed resource, whatever its user, shares one bucket of 2
    assert_eq!(admitted(&with_default, &msg("chat", 1), t(0), 1), 1);
    assert_eq!(admitted(&with_default, &msg("chat", 2), t(0), 1), 1);
    let r = with_default.try_acquire(&msg("chat", 3), t(0)).unwrap_err();
    assert_eq!(r.policy(), "default");
    assert_eq!(r.retry_after(), Duration::from_secs(1));
    let without = Partitioned::<Msg, u64>::builder("msgs")
        .policy("uploads", only_uploads, bucket(1, 1))
        .build();
    assert_eq!(admitted(&without, &msg("chat", 1), t(0), 100), 100);
}

#[test]
fn the_same_key_in_two_policies_is_two_buckets() {
    // .NET's note: a "Post" method key and a "/Post" path key must not collide
    let p = Partitioned::<Msg, u64>::builder("msgs")
        .policy("a", |m: &Msg| (m.kind == "a").then_some(7), bucket(1, 1))
        .policy("b", |m: &Msg| (m.kind == "b").then_some(7), bucket(1, 1))
        .build();
    assert_eq!(admitted(&p, &msg("a", 0), t(0), 3), 1);
    assert_eq!(admitted(&p, &msg("b", 0), t(0), 3), 1);
}

#[test]
fn every_algorithm_works_behind_a_policy() {
    let gcra = |g: Gcra| ShardedKeyedTable::<u64, Gcra>::builder(g).build().unwrap();
    let q = Quota::per_second(2).unwrap();
    let p = Partitioned::<Msg, u64>::builder("all")
        .policy(
            "token",
            |m: &Msg| (m.kind == "token").then_some(m.user),
            gcra(Gcra::token_bucket(q)),
        )
        .policy(
            "leaky",
            |m: &Msg| (m.kind == "leaky").then_some(m.user),
            gcra(Gcra::leaky_bucket(q)),
        )
        .policy(
            "fixed",
            |m: &Msg| (m.kind == "fixed").then_some(m.user),
            ShardedKeyedTable::<u64, _>::builder(
                FixedWindow::new(3, Duration::from_secs(1)).unwrap(),
            )
            .build()
            .unwrap(),
        )
        .policy(
            "sliding",
            |m: &Msg| (m.kind == "sliding").then_some(m.user),
            ShardedKeyedTable::<u64, _>::builder(
                SlidingWindow::<4>::new(3, Duration::from_secs(1)).unwrap(),
            )
            .build()
            .unwrap(),
        )
        .concurrency(
            "in_flight",
            |m: &Msg| (m.kind == "job").then_some(m.user),
            Partitioned::<Msg, u64>::in_flight_table(2, 64).unwrap(),
        )
        .build();
    let now = t(100);
    assert_eq!(admitted(&p, &msg("token", 1), now, 10), 2);
    assert_eq!(admitted(&p, &msg("leaky", 1), now, 10), 1);
    assert_eq!(admitted(&p, &msg("fixed", 1), now, 10), 3);
    assert_eq!(admitted(&p, &msg("sliding", 1), now, 10), 3);
    // the window opens again at 1 s (fixed) / when the segment leaves (sliding)
    assert_eq!(
        p.try_acquire(&msg("fixed", 1), now)
            .unwrap_err()
            .retry_after(),
        Duration::from_millis(900)
    );
    // in-flight: leases held count, dropped ones give their permit back
    let a = p.try_acquire(&msg("job", 1), now).unwrap();
    let b = p.try_acquire(&msg("job", 1), now).unwrap();
    assert!(a.holds_in_flight());
    assert!(p.try_acquire(&msg("job", 1), now).is_err());
    assert!(p.try_acquire(&msg("job", 2), now).is_ok()); // another key
    drop(a);
    let c = p.try_acquire(&msg("job", 1), now).unwrap();
    drop((b, c));
    assert_eq!(admitted(&p, &msg("job", 1), now, 1), 1);
}

#[test]
fn a_chain_refunds_the_earlier_members_when_a_later_one_refuses() {
    let global = Partitioned::<Msg, u64>::builder("global")
        .policy("all", |_: &Msg| Some(0), bucket(10, 10))
        .build();
    let per_user = Partitioned::<Msg, u64>::builder("per_user")
        .policy("user", |m: &Msg| Some(m.user), bucket(1, 2))
        .build();
    let chain = global.and(per_user);
    let now = t(0);
    assert_eq!(admitted(&chain, &msg("x", 1), now, 5), 2);
    let r = chain.try_acquire(&msg("x", 1), now).unwrap_err();
    assert_eq!(
        (r.stage(), r.limiter(), r.policy()),
        (1, "per_user", "user")
    );
    assert_eq!(r.retry_after(), Duration::from_secs(1));
    // the 3 refused requests cost the global limiter nothing: 8 of its 10
    // are left for the other users
    assert_eq!(admitted(&chain, &msg("x", 2), now, 10), 2);
    assert_eq!(admitted(&chain, &msg("x", 3), now, 10), 2);
    assert_eq!(admitted(&chain, &msg("x", 4), now, 10), 2);
    assert_eq!(admitted(&chain, &msg("x", 5), now, 10), 2); // the 9th and 10th
    let r = chain.try_acquire(&msg("x", 6), now).unwrap_err();
    assert_eq!((r.stage(), r.policy()), (0, "all"));
    // the longest wait of the chain: user 1 waits 1 s in "per_user"
    let r = chain.try_acquire(&msg("x", 1), now).unwrap_err();
    assert_eq!(r.retry_after(), Duration::from_secs(1));
}

#[test]
fn cancel_gives_back_rate_and_in_flight_permits() {
    let p = Partitioned::<Msg, u64>::builder("p")
        .policy(
            "rate",
            |m: &Msg| (m.kind == "rate").then_some(m.user),
            bucket(1, 1),
        )
        .concurrency(
            "jobs",
            |m: &Msg| (m.kind == "job").then_some(m.user),
            Partitioned::<Msg, u64>::in_flight_table(1, 8).unwrap(),
        )
        .build();
    let now = t(0);
    let a = p.try_acquire(&msg("rate", 1), now).unwrap();
    assert!(p.try_acquire(&msg("rate", 1), now).is_err());
    p.cancel(&msg("rate", 1), a, now);
    assert!(p.try_acquire(&msg("rate", 1), now).is_ok());
    let j = p.try_acquire(&msg("job", 1), now).unwrap();
    p.cancel(&msg("job", 1), j, now); // released once, not twice
    let j1 = p.try_acquire(&msg("job", 1), now).unwrap();
    assert!(p.try_acquire(&msg("job", 1), now).is_err());
    drop(j1);
}

#[test]
fn a_full_in_flight_table_refuses_new_keys_and_keeps_busy_ones() {
    let p = Partitioned::<Msg, u64>::builder("p")
        .concurrency(
            "jobs",
            |m: &Msg| Some(m.user),
            Partitioned::<Msg, u64>::in_flight_table(1, 2).unwrap(),
        )
        .build();
    let now = t(0);
    let held: Vec<_> = (0..2)
        .map(|u| p.try_acquire(&msg("j", u), now).unwrap())
        .collect();
    let r = p.try_acquire(&msg("j", 99), now).unwrap_err();
    assert_eq!(r.path(), KeyedPath::OverflowDenied);
    drop(held);
    assert!(p.try_acquire(&msg("j", 99), now).is_ok());
}

#[test]
fn a_request_larger_than_any_bucket_is_refused_for_good() {
    let p = Partitioned::<Msg, u64>::builder("p")
        .policy("b", |m: &Msg| Some(m.user), bucket(1, 2))
        .build();
    let r = p.try_acquire_n(&msg("x", 1), 3, t(0)).unwrap_err();
    assert!(r.is_never());
    // the whole bucket is granted now (was: with a zero `delay()`, now that
    // every admission is immediate: it took both permits)
    assert_eq!(
        p.try_acquire_n(&msg("x", 1), 2, t(0))
            .map(|a| a.permits())
            .unwrap(),
        2
    );
    assert_eq!(
        p.try_acquire(&msg("x", 1), t(0)).unwrap_err().retry_after(),
        Duration::from_secs(1)
    );
}

#[test]
fn a_per_key_factory_gives_keys_different_kinds_of_limiter() {
    // .NET's factory: internal users unlimited, premium users a generous
    // bucket, everyone else a strict one
    let p = Partitioned::<Msg, u64>::builder("api")
        .unlimited("internal", |m: &Msg| m.user < 10)
        .policy(
            "premium",
            |m: &Msg| (m.user < 100).then_some(m.user),
            bucket(1, 5),
        )
        .policy("everyone", |m: &Msg| Some(m.user), bucket(1, 1))
        .build();
    let now = t(0);
    assert_eq!(admitted(&p, &msg("x", 3), now, 1_000), 1_000);
    assert_eq!(admitted(&p, &msg("x", 42), now, 10), 5);
    assert_eq!(admitted(&p, &msg("x", 500), now, 10), 1);
    let r = p.try_acquire(&msg("x", 500), now).unwrap_err();
    assert_eq!(r.policy(), "everyone");
}

#[test]
fn a_policy_store_carries_into_a_new_limiter_reconfigured() {
    use tollgate::Inheritance;
    use tollgate::partitioned::PolicyStore;

    let user = |m: &Msg| Some(m.user);
    let old = Partitioned::<Msg, u64>::builder("old")
        .concurrency(
            "jobs",
            |m: &Msg| (m.kind == "job").then_some(m.user),
            Partitioned::<Msg, u64>::in_flight_table(1, 8).unwrap(),
        )
        .store("per_user", user, PolicyStore::keyed(bucket(1, 2)))
        .build();
    assert_eq!(admitted(&old, &msg("a", 1), t(0), 5), 2);
    // stores are found by policy name, not by position
    let store = old.policy_store("per_user").unwrap();
    assert!(old.policy_store("old").is_none()); // the limiter's name
    assert!(old.policy_store("nope").is_none());
    assert!(store.same_table(&old.policy_store("per_user").unwrap()));
    assert!(!store.same_table(&old.policy_store("jobs").unwrap()));
    assert!(!store.holds_in_flight());
    // the wrong algorithm comes back untouched
    let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
    assert_eq!(
        store.reconfigure(window, Inheritance::Reset, t(0)),
        Err(window)
    );
    // a bucket of 4: the 2 used stay used
    let four = Gcra::token_bucket(Quota::per_second(1).unwrap().with_burst(4).unwrap());
    assert!(
        store
            .reconfigure(four, Inheritance::UsedAmount, t(0))
            .is_ok()
    );
    let new = Partitioned::<Msg, u64>::builder("new")
        .store("per_user", user, store.clone())
        .build();
    assert!(new.policy_store("per_user").unwrap().same_table(&store));
    assert_eq!(admitted(&new, &msg("a", 1), t(0), 5), 2);
    let r = new.try_acquire(&msg("a", 1), t(0)).unwrap_err();
    assert_eq!((r.limiter(), r.policy()), ("new", "per_user"));
    assert_eq!(r.retry_after(), Duration::from_secs(1));
    // the old limiter shares the table (under the new quota)
    assert!(old.try_acquire(&msg("a", 1), t(0)).is_err());
    assert_eq!(old.snapshot(&msg("a", 1), t(0)).limit(), 4);
    // another user's bucket was carried too: fresh, of 4
    assert_eq!(admitted(&new, &msg("a", 2), t(0), 10), 4);
    // one permit comes back a second later, for whichever limiter asks
    assert!(old.try_acquire(&msg("a", 1), t(1_000)).is_ok());
    assert!(new.try_acquire(&msg("a", 1), t(1_000)).is_err());
    // an in-flight store carries its held permits: a lease taken from the
    // old limiter is counted by, and released into, the new one's table
    let jobs = old.policy_store("jobs").unwrap();
    assert!(jobs.holds_in_flight());
    let held = old.try_acquire(&msg("job", 1), t(0)).unwrap();
    let next = Partitioned::<Msg, u64>::builder("next")
        .store("jobs", |m: &Msg| Some(m.user), jobs.clone())
        .build();
    assert_eq!(
        next.try_acquire(&msg("job", 1), t(0)).unwrap_err().policy(),
        "jobs"
    );
    drop(held);
    assert!(
        next.try_acquire(&msg("job", 1), t(0))
            .unwrap()
            .holds_in_flight()
    );
    // a store's algorithm kind is fixed: an in-flight store, or a window
    // store, takes no bucket (was: neither could be shaped)
    assert_eq!(jobs.reconfigure(four, Inheritance::Reset, t(0)), Err(four));
    let w = ShardedKeyedTable::<u64, _>::builder(window)
        .build()
        .unwrap();
    assert_eq!(
        PolicyStore::keyed(w).reconfigure(four, Inheritance::Reset, t(0)),
        Err(four)
    );
}

#[test]
fn the_state_is_computed_when_asked() {
    let p = Partitioned::<Msg, u64>::builder("p")
        .policy("per_user", |m: &Msg| Some(m.user), bucket(1, 3))
        .build();
    let m = msg("a", 1);
    let other = msg("b", 2);
    assert_eq!(p.snapshot(&m, t(0)).remaining(), 3); // asking takes nothing
    let _a = p.try_acquire(&m, t(0)).unwrap();
    let s = p.snapshot(&m, t(0));
    assert_eq!((s.limit(), s.remaining()), (3, 2));
    let _b = p.try_acquire(&m, t(0)).unwrap();
    assert_eq!(p.snapshot(&m, t(0)).remaining(), 1);
    // another user's key is untouched
    assert_eq!(p.snapshot(&other, t(0)).remaining(), 3);
}

#[test]
fn a_refusal_outlives_its_limiter_and_rebuilt_limiters_share_their_names() {
    fn refused() -> Result<(), Box<dyn std::error::Error>> {
        let name = String::from("jobs"); // a name read at run time
        let p = Partitioned::<Msg, u64>::builder(name)
            .policy("per_user", |m: &Msg| Some(m.user), bucket(1, 1))
            .build();
        let m = msg("post", 7);
        let _first = p.try_acquire(&m, t(0))?;
        let _second = p.try_acquire(&m, t(0))?; // refused: `?` carries it out of here
        Ok(())
    }
    // the limiter is gone; its refusal still names it
    let err = refused().expect_err("the second message is refused");
    assert_eq!(err.to_string(), "refused by jobs/per_user: retry after 1s");

    // a reload builds the same names again: one copy each, not one per build
    let build = || {
        Partitioned::<Msg, u64>::builder(String::from("jobs"))
            .policy(
                String::from("per_user"),
                |m: &Msg| Some(m.user),
                bucket(1, 1),
            )
            .build()
    };
    let (a, b) = (build(), build());
    assert!(core::ptr::eq(a.name(), b.name()));
    let (pa, pb) = (a.policy_names().next(), b.policy_names().next());
    assert!(core::ptr::eq(pa.expect("a policy"), pb.expect("a policy")));
}

#[test]
fn a_table_shared_by_arc_is_one_table_for_a_policy_and_direct_use() {
    let table = std::sync::Arc::new(bucket(1, 2));
    let p = Partitioned::<Msg, u64>::builder("jobs")
        .policy(
            "per_user",
            |m: &Msg| Some(m.user),
            std::sync::Arc::clone(&table),
        )
        .build();
    let m = msg("post", 7);
    assert!(p.try_acquire(&m, t(0)).is_ok());
    // the direct view sees the key the policy charged
    assert!(table.contains(&7));
    assert_eq!(table.len(), 1);
    assert_eq!(table.snapshot(&7, t(0)).remaining(), 1);
    // a direct check spends the same bucket: the policy has nothing left
    assert!(table.try_acquire(&7, t(0)).is_ok());
    assert_eq!(p.try_acquire(&m, t(0)).unwrap_err().policy(), "per_user");
    // and the table's admin half works through the Arc
    assert_eq!(table.evict_refilled(t(10_000)), 1);
    assert!(p.try_acquire(&m, t(10_000)).is_ok());
}
