//! A shard's storage: its buckets of inline entries, the overflow bits that
//! let a lookup stop early, probing, insertion and re-indexing after a
//! sweep.

use std::vec::Vec;

use crate::keyed::AtomicSweepHint;
use crate::limiter::Algorithm;

/// Entries per bucket.
const BUCKET: usize = 4;

type Bucket<K, S> = heapless::Vec<(K, S), BUCKET, u8>;

pub(super) struct Shard<K, A: Algorithm> {
    pub(super) buckets: Vec<Bucket<K, A::State>>,
    /// One bit per bucket: some key homed at or before it lives after it.
    overflowed: Vec<u64>,
    pub(super) len: usize,
    pub(super) capacity: usize,
    pub(super) hint: AtomicSweepHint,
    /// The default algorithm, read under the shard's lock, so that a
    /// [`reconfigure`](crate::keyed::KeyedTable::reconfigure) (which holds every
    /// shard's write lock) is atomic with every check.
    pub(super) default: A,
}

impl<K: Eq, A: Algorithm> Shard<K, A> {
    pub(super) fn new(capacity: usize, default: A) -> Self {
        let slots = capacity + capacity.div_ceil(10);
        let buckets = slots.div_ceil(BUCKET).max(1);
        Self {
            buckets: (0..buckets).map(|_| Bucket::new()).collect(),
            overflowed: std::vec![0; buckets.div_ceil(64)],
            len: 0,
            capacity,
            hint: AtomicSweepHint::new(),
            default,
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        // multiply-shift range reduction of the low 32 bits
        ((u64::from(hash as u32) * self.buckets.len() as u64) >> 32) as usize
    }

    #[inline]
    fn next(&self, bucket: usize) -> usize {
        if bucket + 1 == self.buckets.len() {
            0
        } else {
            bucket + 1
        }
    }

    #[inline]
    fn is_overflowed(&self, bucket: usize) -> bool {
        self.overflowed
            .get(bucket / 64)
            .is_some_and(|word| word >> (bucket % 64) & 1 == 1)
    }

    #[inline]
    fn set_overflowed(&mut self, bucket: usize) {
        if let Some(word) = self.overflowed.get_mut(bucket / 64) {
            *word |= 1 << (bucket % 64);
        }
    }

    /// `key`'s entry, if tracked.
    #[inline]
    pub(super) fn get(&self, key: &K, hash: u64) -> Option<&A::State> {
        let mut bucket = self.home(hash);
        for _ in 0..self.buckets.len() {
            let entries = &self.buckets[bucket];
            if let Some((_, state)) = entries.iter().find(|(k, _)| k == key) {
                return Some(state);
            }
            if !self.is_overflowed(bucket) {
                return None;
            }
            bucket = self.next(bucket);
        }
        None
    }

    /// Inserts a key known to be absent: its (bucket, index), or `None` if
    /// the shard holds `capacity` keys already.
    #[inline]
    pub(super) fn insert(&mut self, key: K, state: A::State, hash: u64) -> Option<(usize, usize)> {
        if self.len >= self.capacity {
            return None;
        }
        let mut bucket = self.home(hash);
        // len < capacity < slots: some bucket has room
        for _ in 0..self.buckets.len() {
            if !self.buckets[bucket].is_full() {
                self.len += 1;
                let entries = &mut self.buckets[bucket];
                let i = entries.len();
                // not full: cannot fail; stored inline, never allocates
                let _ = entries.push((key, state));
                return Some((bucket, i));
            }
            self.set_overflowed(bucket);
            bucket = self.next(bucket);
        }
        None
    }

    /// Recomputes `len` and the overflow bits from the entries (after a
    /// sweep removed some).
    pub(super) fn reindex(&mut self, hash: impl Fn(&K) -> u64) {
        self.overflowed.fill(0);
        self.len = 0;
        for bucket in 0..self.buckets.len() {
            self.len += self.buckets[bucket].len();
            for i in 0..self.buckets[bucket].len() {
                let mut b = match self.buckets[bucket].get(i) {
                    Some((key, _)) => self.home(hash(key)),
                    None => continue,
                };
                while b != bucket {
                    self.set_overflowed(b);
                    b = self.next(b);
                }
            }
        }
    }

    pub(super) fn entries(&self) -> impl Iterator<Item = &(K, A::State)> {
        self.buckets.iter().flat_map(|b| b.iter())
    }
}
