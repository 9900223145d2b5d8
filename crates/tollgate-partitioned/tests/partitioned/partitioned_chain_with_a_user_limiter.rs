//! A user-written `Limiter<Job>` chains with the built-in
//! `Partitioned`, in either order and three in a row: the chain is all or
//! nothing (a later refusal gives back what the earlier members took,
//! through their `cancel`), and its refusal names the refusing limiter,
//! policy and stage, with the longest `retry_after` of the chain.
//!
//! The user limiter here is a prepaid credit balance per tenant: a tenant
//! with no account is refused for good, one without enough credits is
//! refused until the next top-up; a cancelled lease gives its credits back.

use core::time::Duration;
use std::collections::HashMap;
use std::sync::Mutex;

use tollgate::keyed::ShardedKeyedTable;
use tollgate::partitioned::Partitioned;
use tollgate::{Bucket, Gcra, Limiter, Quota, Refusal, Snapshot, Timestamp};

#[derive(Debug)]
struct Job {
    tenant: u32,
}

/// The credits are topped up every hour.
const TOP_UP: Duration = Duration::from_secs(3600);

/// A prepaid credit balance per tenant (written by a user of the crate:
/// nothing here is tollgate's own).
#[derive(Debug, Default)]
struct Credits {
    balance: Mutex<HashMap<u32, u32>>,
}

impl Credits {
    fn with(accounts: &[(u32, u32)]) -> Self {
        Self {
            balance: Mutex::new(accounts.iter().copied().collect()),
        }
    }

    fn balance(&self, tenant: u32) -> Option<u32> {
        self.balance.lock().unwrap().get(&tenant).copied()
    }
}

/// Who was charged, and how much.
#[derive(Debug)]
struct Spent {
    tenant: u32,
    n: u32,
}

impl Limiter<Job> for Credits {
    type Permit = Spent;

    fn capacity(&self, job: &Job) -> u32 {
        // no account: nothing, ever; else no limit on one request's size
        match self.balance(job.tenant) {
            None => 0,
            Some(_) => u32::MAX,
        }
    }

    fn try_acquire_n(&self, job: &Job, n: u32, _: Timestamp) -> Result<Spent, Refusal<'static>> {
        let mut balance = self.balance.lock().unwrap();
        let Some(left) = balance.get_mut(&job.tenant) else {
            let none = Snapshot::new(0, 0, Duration::ZERO);
            // no account: no amount of credits can ever be spent
            return Err(Refusal::never(n, none).by("credits", "no_account"));
        };
        if *left < n {
            let snapshot = Snapshot::new(u32::MAX, *left, TOP_UP);
            return Err(Refusal::new(TOP_UP, snapshot).by("credits", "balance"));
        }
        *left -= n;
        Ok(Spent {
            tenant: job.tenant,
            n,
        })
    }

    fn snapshot(&self, job: &Job, _: Timestamp) -> Snapshot {
        let left = self.balance(job.tenant).unwrap_or(0);
        Snapshot::new(u32::MAX, left, TOP_UP)
    }

    fn cancel(&self, _: &Job, lease: Spent, now: Timestamp) {
        let job = Job {
            tenant: lease.tenant,
        };
        self.refund(&job, lease.n, now);
    }

    fn refund(&self, job: &Job, n: u32, _: Timestamp) {
        if let Some(left) = self.balance.lock().unwrap().get_mut(&job.tenant) {
            *left += n;
        }
    }

    fn time_until_ready(
        &self,
        job: &Job,
        n: u32,
        _: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        match self.balance(job.tenant) {
            None => {
                Err(Refusal::never(n, Snapshot::new(0, 0, Duration::ZERO))
                    .by("credits", "no_account"))
            }
            Some(left) if left < n => Ok(TOP_UP),
            Some(_) => Ok(Duration::ZERO),
        }
    }
}

/// Two jobs at once per tenant, then one every 500 ms.
fn per_tenant() -> Partitioned<Job, u32> {
    let table = ShardedKeyedTable::builder(Gcra::token_bucket(Quota::per_second(2).unwrap()))
        .build()
        .unwrap();
    Partitioned::<Job, u32>::builder("tenants")
        .policy("per_tenant", |j: &Job| Some(j.tenant), table)
        .build()
}

/// `permits` jobs at once for everyone together.
fn global(permits: u32) -> Partitioned<Job, u32> {
    Partitioned::<Job, u32>::builder("global")
        .default(Bucket::token_bucket(Quota::per_second(permits).unwrap()))
        .build()
}

const NOW: Timestamp = Timestamp::ZERO;

#[test]
fn a_user_limiter_then_a_builtin_one_refunds_the_users_credits_when_the_builtin_refuses() {
    let chain = Credits::with(&[(7, 10)]).and(per_tenant());
    assert_eq!(chain.stages(), 2);
    let job = Job { tenant: 7 };
    assert!(chain.try_acquire(&job, NOW).is_ok());
    assert!(chain.try_acquire(&job, NOW).is_ok());
    assert_eq!(chain.first().balance(7), Some(8));

    // the bucket refuses the third: the credits it took come back
    let r = chain.try_acquire(&job, NOW).unwrap_err();
    assert_eq!(
        (r.stage(), r.limiter(), r.policy()),
        (1, "tenants", "per_tenant")
    );
    assert_eq!(r.retry_after(), Duration::from_millis(500));
    assert_eq!(chain.first().balance(7), Some(8));

    // the user limiter refuses first: the bucket is not asked to take anything
    let r = chain.try_acquire(&Job { tenant: 9 }, NOW).unwrap_err();
    assert_eq!(
        (r.stage(), r.limiter(), r.policy()),
        (0, "credits", "no_account")
    );
    assert!(r.is_never());
    assert_eq!(r.retry_after(), Duration::MAX);
}

#[test]
fn a_builtin_limiter_then_a_user_one_refunds_the_bucket_when_the_user_limiter_refuses() {
    let chain = per_tenant().and(Credits::with(&[(7, 1)]));
    let job = Job { tenant: 7 };
    let admitted = chain.try_acquire(&job, NOW).unwrap();
    assert_eq!(chain.second().balance(7), Some(0));

    // out of credits: the bucket's permit comes back, so it still has one
    let r = chain.try_acquire(&job, NOW).unwrap_err();
    assert_eq!(
        (r.stage(), r.limiter(), r.policy()),
        (1, "credits", "balance")
    );
    assert_eq!(r.retry_after(), TOP_UP);
    assert_eq!(
        chain.first().time_until_ready(&job, 1, NOW),
        Ok(Duration::ZERO)
    );
    assert!(chain.first().try_acquire(&job, NOW).is_ok());
    assert!(chain.first().try_acquire(&job, NOW).is_err());

    // cancelling the chain's lease gives back to both members
    chain.cancel(&job, admitted, NOW);
    assert_eq!(chain.second().balance(7), Some(1));
    assert_eq!(
        chain.first().time_until_ready(&job, 1, NOW),
        Ok(Duration::ZERO)
    );
}

#[test]
fn three_in_a_row_with_a_user_limiter_in_the_middle_are_all_or_nothing() {
    let chain = global(10)
        .and(Credits::with(&[(7, 3), (8, 10)]))
        .and(per_tenant());
    assert_eq!(chain.stages(), 3);
    let (seven, eight) = (Job { tenant: 7 }, Job { tenant: 8 });

    // stage 2 (the per-tenant bucket) refuses: the global permit and the
    // credits both come back
    assert!(chain.try_acquire(&eight, NOW).is_ok());
    assert!(chain.try_acquire(&eight, NOW).is_ok());
    for _ in 0..5 {
        let r = chain.try_acquire(&eight, NOW).unwrap_err();
        assert_eq!(
            (r.stage(), r.limiter(), r.policy()),
            (2, "tenants", "per_tenant")
        );
        assert_eq!(r.retry_after(), Duration::from_millis(500));
    }
    assert_eq!(chain.first().second().balance(8), Some(8));

    // stage 1 (the credits) refuses: the global permits come back
    assert!(chain.try_acquire_n(&seven, 2, NOW).is_ok());
    assert_eq!(chain.first().second().balance(7), Some(1));
    let r = chain.try_acquire_n(&seven, 2, NOW).unwrap_err();
    assert_eq!(
        (r.stage(), r.limiter(), r.policy()),
        (1, "credits", "balance")
    );
    assert_eq!(r.retry_after(), TOP_UP);
    assert_eq!(chain.first().second().balance(7), Some(1));

    // only the four admitted permits were spent from the global ten
    let global = chain.first().first();
    let left = (0..10)
        .take_while(|_| global.try_acquire(&seven, NOW).is_ok())
        .count();
    assert_eq!(left, 6);
}

#[test]
fn a_user_limiter_chains_after_a_chain_and_before_one() {
    // user.and(builtin.and(builtin)): stages count the nested chain
    let chain = Credits::with(&[(7, 10)]).and(global(100).and(per_tenant()));
    assert_eq!(chain.stages(), 3);
    let job = Job { tenant: 7 };
    assert!(chain.try_acquire(&job, NOW).is_ok());
    assert!(chain.try_acquire(&job, NOW).is_ok());
    let r = chain.try_acquire(&job, NOW).unwrap_err();
    assert_eq!((r.stage(), r.policy()), (2, "per_tenant"));
    assert_eq!(chain.first().balance(7), Some(8));

    // (builtin.and(user)).and(builtin)
    let chain = per_tenant().and(Credits::with(&[(7, 0)])).and(global(100));
    let r = chain.try_acquire(&job, NOW).unwrap_err();
    assert_eq!((r.stage(), r.policy()), (1, "balance"));
    assert_eq!(
        chain.first().first().time_until_ready(&job, 2, NOW),
        Ok(Duration::ZERO)
    );
}

#[test]
fn a_chain_reports_the_member_with_the_fewest_permits_left_when_asked() {
    let chain = Credits::with(&[(7, 10)]).and(per_tenant());
    let job = Job { tenant: 7 };
    // before anything: the bucket's 2 are fewer than the 10 credits
    let s = chain.snapshot(&job, NOW);
    assert_eq!((s.limit(), s.remaining()), (2, 2));
    assert!(chain.try_acquire(&job, NOW).is_ok());
    assert_eq!(chain.snapshot(&job, NOW).remaining(), 1);
    assert_eq!(chain.first().balance(7), Some(9)); // asking took nothing
    // the credits run low: now they are the tighter member
    let poor = Credits::with(&[(7, 1)]).and(per_tenant());
    let s = poor.snapshot(&job, NOW);
    assert_eq!((s.limit(), s.remaining()), (u32::MAX, 1));
}
