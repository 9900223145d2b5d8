//! The keyed limiter in the firmware: one token bucket per peer id in a
//! `static` [`HeaplessKeyedTable`] of capacity 4, shared by three tasks
//! that serve eight peers between them, then driven full of throttled keys.
//!
//! Phase 1 (tasks): each task serves its peers one visit at a time: a visit
//! takes `PER_VISIT` permits with `embassy::acquire(&peer, &(), 1).await`
//! (through [`Peer`], a `Limiter` view of one key), then leaves the peer
//! alone until its bucket has refilled, counted from the instant the last
//! wait returned (its admission). At most three peers are busy at
//! once, so with eight peers and four slots the table keeps evicting
//! refilled peers to admit new ones (lossless eviction), and no check ever
//! takes the overflow path. Peers visited twice usually come back after
//! they were evicted. Checked afterwards, per peer, against its own quota
//! (even ids: burst 3, one per 2 ms; odd ids: burst 2, one per 3 ms):
//!
//! - over the peer's whole history, across evictions, no window holds more
//!   than `burst + ⌊t / T⌋` admissions;
//! - within a visit, admission `k` comes no earlier than
//!   `start + max(0, k + 1 − burst)·T` (what a fresh bucket allows) and at
//!   most one tick after it, so admissions after the burst are `T` apart
//!   give or take one tick;
//! - each wait returned the instant of the admission the table logged;
//! - every peer got all its permits through its own slot, and a peer was
//!   always still tracked when it came back for the next permit of a visit
//!   (a throttled key is never evicted). A refusal names the path that
//!   answered; an admission does not, so it counts as the own slot's when
//!   the key is tracked right after it and its own state is full again at
//!   the instant the admission reported ([`own_slot`]).
//!
//! Phase 2 ([`check_overflow`]): four more peers are drained, filling the
//! table with throttled keys; a flood of new peers then takes the shared
//! overflow bucket (admitting exactly its burst), while the four throttled
//! peers stay tracked and refused. Once they have refilled, a new peer gets
//! its own slot again and the four are evicted.

use core::cell::{Cell, RefCell};
use core::time::Duration;

use cortex_m_semihosting::hprintln;
use critical_section::Mutex;
use embassy_time::Timer;
use tollgate::embassy::{self, EmbassyClock};
use tollgate::keyed::{HeaplessKeyedTable, KeyedPath, KeyedTable};
use tollgate::{
    valid, Algorithm, Clock, Gcra, Grant, Limiter, Quota, Refusal, Snapshot, Timestamp,
};

use crate::{tick_at, TICK_NS};

/// Slots in the table (a power of two, as heapless requires).
const CAPACITY: usize = 4;
/// Peer ids `0..PEERS` are served by the tasks: twice the capacity.
const PEERS: usize = 8;
/// Tasks serving peers; task `t` owns the peers `t, t + 3, t + 6, …`.
pub const TASKS: usize = 3;
/// Visits per task, round-robin over its peers.
const VISITS: usize = 4;
/// Permits taken in one visit.
const PER_VISIT: usize = 6;
/// The most visits any peer gets (task 0: peers 0, 3, 6, 0).
const MAX_VISITS: usize = 2;
const MAX_PER_PEER: usize = MAX_VISITS * PER_VISIT;

const EVEN_QUOTA: Quota = tick_checked!(valid!(
    valid!(Quota::new(1, Duration::from_millis(2))).with_burst(3)
));
const ODD_QUOTA: Quota = tick_checked!(valid!(
    valid!(Quota::new(1, Duration::from_millis(3))).with_burst(2)
));
/// The default algorithm: what the shared overflow bucket runs.
const SHARED_QUOTA: Quota = tick_checked!(valid!(
    valid!(Quota::new(1, Duration::from_millis(4))).with_burst(2)
));

const fn quota_of(peer: u8) -> Quota {
    if peer.is_multiple_of(2) {
        EVEN_QUOTA
    } else {
        ODD_QUOTA
    }
}

/// The per-key quota: even and odd peers get different buckets.
fn per_peer(peer: &u8) -> Gcra {
    Gcra::token_bucket(quota_of(*peer))
}

/// One bucket per peer, 4 slots, shared overflow bucket (the default
/// policy). Configuration and all state live in this one `static`.
static TABLE: HeaplessKeyedTable<u8, Gcra, CAPACITY, fn(&u8) -> Gcra> =
    HeaplessKeyedTable::builder(Gcra::token_bucket(SHARED_QUOTA))
        .per_key(per_peer as fn(&u8) -> Gcra)
        .build();

/// The peers task `task` owns, in visiting order.
fn owned(task: u8) -> impl Iterator<Item = u8> + Clone {
    (task..PEERS as u8).step_by(TASKS)
}

/// How many visits `peer` gets, from the schedule (independent of the log).
fn visits_of(peer: u8) -> usize {
    let task = peer % TASKS as u8;
    let count = owned(task).count().max(1);
    (0..VISITS)
        .filter(|v| owned(task).nth(v % count) == Some(peer))
        .count()
}

/// One peer's admissions: the `now` the table was given and the visit.
#[derive(Clone, Copy)]
struct PeerLog {
    at: [Timestamp; MAX_PER_PEER],
    visit: [u8; MAX_PER_PEER],
    len: usize,
    /// When each visit started (the tick the task read).
    start: [Timestamp; MAX_VISITS],
    visits: usize,
}

impl PeerLog {
    const fn new() -> Self {
        Self {
            at: [Timestamp::ZERO; MAX_PER_PEER],
            visit: [0; MAX_PER_PEER],
            len: 0,
            start: [Timestamp::ZERO; MAX_VISITS],
            visits: 0,
        }
    }
}

static LOGS: Mutex<RefCell<[PeerLog; PEERS]>> = Mutex::new(RefCell::new([PeerLog::new(); PEERS]));
/// Checks (taking permits) answered by something other than the key's own
/// slot during phase 1.
static OVERFLOWED: Mutex<Cell<usize>> = Mutex::new(Cell::new(0));
/// Checks in the middle of a visit that found the key no longer tracked:
/// a throttled key evicted (the visit's earlier admissions came through
/// its own slot whenever `OVERFLOWED` is 0).
static LOST: Mutex<Cell<usize>> = Mutex::new(Cell::new(0));
/// Visits to a peer seen before that found it evicted.
static RETURNED: Mutex<Cell<usize>> = Mutex::new(Cell::new(0));
/// Checks taking permits during phase 1.
static CHECKS: Mutex<Cell<usize>> = Mutex::new(Cell::new(0));
/// Waits whose returned instant is the `now` the table logged for their
/// admission.
static RETURNED_AT_ADMISSION: Mutex<Cell<usize>> = Mutex::new(Cell::new(0));

fn bump(counter: &Mutex<Cell<usize>>) {
    critical_section::with(|cs| {
        let c = counter.borrow(cs);
        c.set(c.get() + 1);
    });
}

fn read(counter: &Mutex<Cell<usize>>) -> usize {
    critical_section::with(|cs| counter.borrow(cs).get())
}

/// True if `verdict`, [`TABLE`]'s answer to a check of `id` at `now`
/// (asked right before, with nothing in between), came from `id`'s own
/// slot. A refusal names the path that refused; an admission does not, so
/// it counts as the own slot's when `id` is tracked right after it (the
/// shared overflow bucket admits keys that have no slot) and `id`'s own
/// state is full again at the instant the admission reported.
fn own_slot(id: u8, now: Timestamp, verdict: &Result<Grant, Refusal<'_>>) -> bool {
    match verdict {
        Ok(grant) => {
            TABLE.contains(&id) && now + TABLE.snapshot(&id, now).reset_after() == grant.full_at()
        }
        Err(refusal) => refusal.path() == KeyedPath::Own,
    }
}

/// True if `verdict`, [`TABLE`]'s answer to a check of `id` at `now`
/// (asked right before, with nothing in between), came from the shared
/// overflow bucket: a refusal names that path; an admission leaves `id`
/// without a slot, and the shared bucket full again at the instant the
/// admission reported.
fn shared_slot(id: u8, now: Timestamp, verdict: &Result<Grant, Refusal<'_>>) -> bool {
    match verdict {
        Ok(grant) => {
            !TABLE.contains(&id)
                && now + TABLE.shared_snapshot(now).reset_after() == grant.full_at()
        }
        Err(refusal) => refusal.path() == KeyedPath::SharedOverflow,
    }
}

/// One peer's key in [`TABLE`] as a `Limiter`, so tasks can
/// `embassy::acquire(&peer, &(), 1).await` on it; it logs every admission with the `now` the
/// table saw.
struct Peer {
    id: u8,
    visit: u8,
}

impl Limiter for Peer {
    type Permit = Grant;

    fn capacity(&self, _: &()) -> u32 {
        per_peer(&self.id).capacity()
    }
    fn try_acquire_n(&self, _: &(), n: u32, now: Timestamp) -> Result<Grant, Refusal<'static>> {
        let i = usize::from(self.id);
        // Mid-visit (this visit already admitted something), the key has
        // not refilled: it must still hold its slot.
        let mid_visit = critical_section::with(|cs| {
            let logs = LOGS.borrow_ref(cs);
            let log = &logs[i];
            log.len > 0 && log.visit[log.len - 1] == self.visit
        });
        if n > 0 && mid_visit && !TABLE.contains(&self.id) {
            bump(&LOST);
        }
        let keyed = TABLE.try_acquire_n(&self.id, n, now);
        if keyed.as_ref().is_err_and(Refusal::is_never) {
            // more than the key can ever hold: not a check that took a path
            return keyed;
        }
        if n > 0 {
            bump(&CHECKS);
            if !own_slot(self.id, now, &keyed) {
                bump(&OVERFLOWED);
            }
            if keyed.is_ok() {
                critical_section::with(|cs| {
                    let mut logs = LOGS.borrow_ref_mut(cs);
                    let log = &mut logs[i];
                    for _ in 0..n {
                        if log.len < MAX_PER_PEER {
                            log.at[log.len] = now;
                            log.visit[log.len] = self.visit;
                            log.len += 1;
                        }
                    }
                });
            }
        }
        keyed
    }
    fn cancel(&self, _: &(), permit: Grant, now: Timestamp) {
        TABLE.cancel(&self.id, permit, now);
    }
    fn refund(&self, _: &(), n: u32, now: Timestamp) {
        TABLE.refund(&self.id, n, now);
    }
    fn snapshot(&self, _: &(), now: Timestamp) -> Snapshot {
        TABLE.snapshot(&self.id, now)
    }
    fn time_until_ready(
        &self,
        _: &(),
        n: u32,
        now: Timestamp,
    ) -> Result<Duration, Refusal<'static>> {
        TABLE.time_until_ready(&self.id, n, now)
    }
    fn required_resolution(&self) -> Duration {
        per_peer(&self.id).required_resolution()
    }
}

/// Serves the peers task `task` owns, one visit at a time.
#[embassy_executor::task(pool_size = TASKS)]
pub async fn peer_task(task: u8) {
    let clock = EmbassyClock::new();
    let owned_count = owned(task).count().max(1);
    for v in 0..VISITS {
        let Some(id) = owned(task).nth(v % owned_count) else {
            break;
        };
        let start = clock.now();
        let visit = critical_section::with(|cs| {
            let mut logs = LOGS.borrow_ref_mut(cs);
            let log = &mut logs[usize::from(id)];
            let visit = log.visits;
            if visit < MAX_VISITS {
                log.start[visit] = start;
            }
            log.visits += 1;
            visit
        });
        if visit > 0 && !TABLE.contains(&id) {
            bump(&RETURNED);
        }
        let peer = Peer {
            id,
            visit: visit as u8,
        };
        let mut last = start;
        for _ in 0..PER_VISIT {
            match embassy::acquire(&peer, &(), 1).await {
                Ok(at) => {
                    last = at;
                    // the `now` the table was given for this admission
                    let logged = critical_section::with(|cs| {
                        let logs = LOGS.borrow_ref(cs);
                        let log = &logs[usize::from(id)];
                        log.len.checked_sub(1).map(|i| log.at[i])
                    });
                    if logged == Some(at) {
                        bump(&RETURNED_AT_ADMISSION);
                    }
                }
                Err(e) => {
                    hprintln!("FAIL peer {}: {}", id, e);
                    crate::fail();
                }
            }
        }
        // Leave the peer alone until its bucket has refilled (from its last
        // admission): from then on it is idle and its slot can go to
        // another peer.
        let reset = TABLE.snapshot(&id, last).reset_after();
        Timer::at(EmbassyClock::instant_at(last + reset)).await;
    }
    crate::finished();
}

/// Phase 1, after the tasks are done: every peer against its own quota.
pub fn check_peers() -> bool {
    let logs = critical_section::with(|cs| *LOGS.borrow_ref(cs));
    let mut ok = true;
    let mut admitted = 0;
    let mut max_late_ticks = 0;
    let mut counts = [0usize; PEERS];
    for (id, log) in logs.iter().enumerate() {
        let peer = id as u8;
        let quota = quota_of(peer);
        let (t_ns, burst) = (quota.interval_nanos(), u64::from(quota.burst()));
        let visits = visits_of(peer);
        counts[id] = log.len;
        admitted += log.len;
        if log.visits != visits || log.len != visits * PER_VISIT {
            hprintln!(
                "FAIL keyed peer {}: {} admitted in {} visits, expected {} in {}",
                id,
                log.len,
                log.visits,
                visits * PER_VISIT,
                visits
            );
            ok = false;
        }
        let at = log.at.map(Timestamp::as_nanos);
        let at = &at[..log.len];
        // The safety bound over every window of the peer's whole history,
        // evictions included (admissions are in order: one task per peer).
        for i in 0..at.len() {
            for j in i..at.len() {
                let bound = burst + at[j].saturating_sub(at[i]) / t_ns;
                if (j - i + 1) as u64 > bound {
                    hprintln!(
                        "FAIL keyed peer {}: {} admitted in {} ns (burst {}, T {} ns)",
                        id,
                        j - i + 1,
                        at[j] - at[i],
                        burst,
                        t_ns
                    );
                    ok = false;
                }
            }
        }
        // Within a visit the peer starts refilled, and demand waits from
        // the start: admission k is due at start + max(0, k + 1 - burst)·T.
        let mut k = 0;
        let mut prev_visit = None;
        // Gaps between admissions after the burst: T, give or take a tick.
        let (mut min_gap, mut max_gap) = (u64::MAX, 0);
        for i in 0..at.len() {
            let visit = log.visit[i];
            if prev_visit != Some(visit) {
                k = 0;
            } else if k >= burst {
                let gap = at[i] - at[i - 1];
                min_gap = min_gap.min(gap);
                max_gap = max_gap.max(gap);
            }
            prev_visit = Some(visit);
            let start = log.start[usize::from(visit).min(MAX_VISITS - 1)].as_nanos();
            let due = start + (k + 1u64).saturating_sub(burst) * t_ns;
            let tick = tick_at(at[i]);
            let due_tick = tick_at(due);
            if at[i] < due || tick > due_tick + 1 {
                hprintln!(
                    "FAIL keyed peer {}: visit {} admission {} at tick {}, due {}",
                    id,
                    visit,
                    k,
                    tick,
                    due_tick
                );
                ok = false;
            }
            max_late_ticks = max_late_ticks.max(tick.saturating_sub(due_tick));
            k += 1;
        }
        if min_gap + TICK_NS < t_ns || max_gap > t_ns + TICK_NS {
            hprintln!(
                "FAIL keyed peer {}: gaps after the burst {}..{} ns, T {} ns",
                id,
                min_gap,
                max_gap,
                t_ns
            );
            ok = false;
        }
        hprintln!(
            "  keyed peer {}: burst={} interval_us={} visits={} admitted={} gaps_after_burst_us={}..{}",
            id,
            burst,
            t_ns / 1_000,
            log.visits,
            log.len,
            min_gap / 1_000,
            max_gap / 1_000
        );
    }
    let (overflowed, lost, returned) = (read(&OVERFLOWED), read(&LOST), read(&RETURNED));
    let at_admission = read(&RETURNED_AT_ADMISSION);
    ok &= overflowed == 0 && lost == 0 && returned > 0 && at_admission == admitted;
    hprintln!(
        "keyed: capacity={} peers={} tasks={} per-peer={}/{}/{}/{}/{}/{}/{}/{} admitted={} throttled-evicted={} overflow-path={}/{} checks evicted-and-returned={} max_late_ticks={} returned-instants={}/{} {}",
        CAPACITY,
        PEERS,
        TASKS,
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        counts[5],
        counts[6],
        counts[7],
        admitted,
        lost,
        overflowed,
        read(&CHECKS),
        returned,
        max_late_ticks,
        at_admission,
        admitted,
        if ok { "PASS" } else { "FAIL" }
    );
    ok
}

/// Phase 2: the table full of throttled keys takes the overflow path, never
/// evicts them, and frees their slots once they have refilled.
pub async fn check_overflow() -> bool {
    const FLOOD: u8 = 16;
    let clock = EmbassyClock::new();
    let throttled = 100..100 + CAPACITY as u8;

    // Drain four new peers: their first checks evict the refilled phase-1
    // peers, then each is refused, so the table is full of throttled keys.
    let mut fill_own = true;
    for id in throttled.clone() {
        let mut taken = 0;
        loop {
            let now = clock.now();
            let d = TABLE.try_acquire(&id, now);
            fill_own &= own_slot(id, now, &d);
            if d.is_err() || taken > 8 {
                break;
            }
            taken += 1;
        }
        fill_own &= taken == quota_of(id).burst() as usize;
    }
    let full = TABLE.len() == CAPACITY;

    // A flood of peers the table has never seen.
    let (mut shared_path, mut shared_admitted) = (0, 0);
    let flood_start = clock.now();
    for id in 200..200 + FLOOD {
        let now = clock.now();
        let d = TABLE.try_acquire(&id, now);
        if shared_slot(id, now, &d) {
            shared_path += 1;
        }
        if d.is_ok() {
            shared_admitted += 1;
        }
    }
    let flood_end = clock.now();
    // A fresh shared bucket admits exactly its burst in less than one
    // interval (the flood takes microseconds).
    let shared_t = SHARED_QUOTA.interval();
    let shared_ok = shared_path == FLOOD
        && flood_end - flood_start < shared_t
        && shared_admitted == SHARED_QUOTA.burst();

    // The throttled peers kept their slots and their state: still refused.
    let now = clock.now();
    let (mut kept, mut refused) = (0, 0);
    for id in throttled.clone() {
        if TABLE.contains(&id) {
            kept += 1;
        }
        let d = TABLE.try_acquire(&id, now);
        if d.is_err_and(|r| r.path() == KeyedPath::Own) {
            refused += 1;
        }
    }
    let ok = fill_own && full && shared_ok && kept == CAPACITY && refused == CAPACITY;
    hprintln!(
        "keyed-overflow: table full of {} throttled keys; {} new keys -> shared-overflow {}/{}, admitted {} (shared burst {}); throttled kept {}/{}, still refused {}/{} {}",
        if full { CAPACITY } else { TABLE.len() },
        FLOOD,
        shared_path,
        FLOOD,
        shared_admitted,
        SHARED_QUOTA.burst(),
        kept,
        CAPACITY,
        refused,
        CAPACITY,
        if ok { "PASS" } else { "FAIL" }
    );

    // Once they have refilled, their slots are free: a new peer gets its
    // own slot and all four are evicted (lossless: they were idle).
    let now = clock.now();
    let refilled_at = throttled
        .clone()
        .map(|id| now + TABLE.snapshot(&id, now).reset_after())
        .max()
        .unwrap_or(now);
    Timer::at(EmbassyClock::instant_at(refilled_at)).await;
    let now = clock.now();
    let d = TABLE.try_acquire(&250, now);
    let own = d.is_ok() && own_slot(250, now, &d);
    let evicted = throttled.filter(|id| !TABLE.contains(id)).count();
    let refill_ok = own && evicted == CAPACITY;
    hprintln!(
        "keyed-refill: throttled keys refilled -> new key gets its own slot, {}/{} refilled keys evicted, len {} {}",
        evicted,
        CAPACITY,
        TABLE.len(),
        if refill_ok { "PASS" } else { "FAIL" }
    );
    ok && refill_ok
}
