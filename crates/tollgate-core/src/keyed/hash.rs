//! A fast seeded hash for keyed tables.
//!
//! Keys often come from the network, so a table whose hash function is
//! known lets an attacker craft keys that all land in the same probe run.
//! [`RandomSeed`] draws two secret 64-bit words per table (from the
//! operating system's randomness through `std`) and the hashers it builds
//! (copies of itself) mix every input word with them by a folded 64×64→128-bit multiply, so an
//! attacker who does not know the seed cannot predict where keys land.
//!
//! It is a fast, non-cryptographic keyed hash (the same class as the one
//! `hashbrown` uses by default). If you want SipHash, pass
//! `std::collections::hash_map::RandomState` to
//! [`TableBuilder::hasher`](super::TableBuilder::hasher).

use core::hash::{BuildHasher, Hasher};

const MIX_A: u64 = 0x243f_6a88_85a3_08d3; // digits of pi
const MIX_B: u64 = 0x1319_8a2e_0370_7344;

/// Multiplies as 128 bits and folds the halves together.
#[inline(always)]
const fn fold_mul(a: u64, b: u64) -> u64 {
    let product = (a as u128).wrapping_mul(b as u128);
    (product as u64) ^ ((product >> 64) as u64)
}

/// A secret seed that builds the hashers of a table (copies of itself, see
/// its `BuildHasher` impl): the default hasher of
/// [`ShardedKeyedTable`](super::ShardedKeyedTable).
///
/// ```
/// use core::hash::BuildHasher;
/// use tollgate::keyed::RandomSeed;
///
/// let a = RandomSeed::with_seed(1, 2);
/// let b = RandomSeed::with_seed(3, 4);
/// assert_eq!(a.hash_one(42u64), RandomSeed::with_seed(1, 2).hash_one(42u64));
/// assert_ne!(a.hash_one(42u64), b.hash_one(42u64));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RandomSeed {
    start: u64,
    multiplier: u64,
}

impl RandomSeed {
    /// A seed drawn from the operating system's randomness (feature `std`).
    /// Every call gives a different seed.
    #[cfg(feature = "std")]
    #[must_use]
    pub fn new() -> Self {
        // `RandomState` is seeded from the OS once per thread and then
        // incremented per instance: hashing two words with a fresh instance
        // gives two independent-looking secret words per table.
        let state = std::collections::hash_map::RandomState::new();
        Self::with_seed(state.hash_one(MIX_A), state.hash_one(MIX_B))
    }

    /// A fixed seed: reproducible hashing for tests and for `no_std` users
    /// who have their own entropy source.
    #[must_use]
    pub const fn with_seed(k0: u64, k1: u64) -> Self {
        Self {
            start: k0 ^ MIX_A,
            // odd, so the multiply never collapses inputs
            multiplier: (k1 ^ MIX_B) | 1,
        }
    }
}

#[cfg(feature = "std")]
impl Default for RandomSeed {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for RandomSeed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // the seed is a secret: never print it
        f.write_str("RandomSeed { .. }")
    }
}

/// A seed builds hashers that are copies of itself: the seed's two words
/// are the hasher's starting state, so there is no second type to learn.
impl BuildHasher for RandomSeed {
    type Hasher = RandomSeed;

    #[inline]
    fn build_hasher(&self) -> RandomSeed {
        self.clone()
    }
}

/// The hashing itself: a folded-multiply mix of every input word with the
/// secret seed (`start` is the running state of a hasher built from it).
impl Hasher for RandomSeed {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let mut word = [0u8; 8];
            word[..tail.len()].copy_from_slice(tail);
            // the tail length goes into the top byte (≤ 7 bytes of data),
            // so "a" and "a\0" differ
            self.write_u64(u64::from_le_bytes(word) ^ ((tail.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.start = fold_mul(self.start ^ i, self.multiplier);
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.write_u64(i as u64);
        self.write_u64((i >> 64) as u64);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // one more round so the last word is spread over every output bit
        let x = fold_mul(self.start ^ MIX_B, self.multiplier ^ MIX_A);
        x ^ x.rotate_right(29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_hash_and_different_seed_different_hash() {
        let a = RandomSeed::with_seed(7, 9);
        let b = RandomSeed::with_seed(7, 10);
        let mut differing = 0;
        for key in 0u64..1000 {
            assert_eq!(a.hash_one(key), RandomSeed::with_seed(7, 9).hash_one(key));
            if a.hash_one(key) != b.hash_one(key) {
                differing += 1;
            }
        }
        assert_eq!(differing, 1000);
    }

    #[test]
    fn sequential_keys_spread_over_buckets() {
        // 64 buckets from the top bits and from the low bits: sequential keys
        // (the common case: counters, ids) must not pile up.
        let seed = RandomSeed::with_seed(1, 2);
        let mut top = [0u32; 64];
        let mut low = [0u32; 64];
        for key in 0u64..64_000 {
            let h = seed.hash_one(key);
            top[(h >> 58) as usize] += 1;
            low[(h & 63) as usize] += 1;
        }
        for count in top.iter().chain(low.iter()) {
            // expected 1000 per bucket; 6 sigma is about 190
            assert!((800..1200).contains(count), "{count}");
        }
    }

    #[test]
    fn byte_strings_of_different_lengths_differ() {
        let seed = RandomSeed::with_seed(3, 4);
        let hash = |bytes: &[u8]| {
            let mut h = seed.build_hasher();
            h.write(bytes);
            h.finish()
        };
        assert_ne!(hash(b"a"), hash(b"a\0"));
        assert_ne!(hash(b"abcdefgh"), hash(b"abcdefgh\0"));
        assert_ne!(hash(b""), hash(b"\0"));
    }
}
