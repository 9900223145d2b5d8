//! [`WordKey`]: the keys that fit in one 64-bit word, so that a key and its
//! bucket's TAT share one 128-bit atomic slot.

use core::hash::Hash;

/// A key that fits in 64 bits, so that it can share one atomic word with
/// its bucket: integers, IPv4 addresses, ids. Implement it for your own
/// id types (the two functions must be inverse of each other).
pub trait WordKey: Copy + Eq + Hash {
    /// The key as a word.
    fn to_word(self) -> u64;
    /// The key back from [`to_word`](Self::to_word)'s word.
    fn from_word(word: u64) -> Self;
}

macro_rules! word_key_int {
    ($($t:ty => $u:ty),*) => {$(
        impl WordKey for $t {
            #[inline]
            fn to_word(self) -> u64 {
                self as $u as u64
            }
            #[inline]
            fn from_word(word: u64) -> Self {
                word as $u as $t
            }
        }
    )*};
}
word_key_int!(u8 => u8, u16 => u16, u32 => u32, u64 => u64, usize => usize,
    i8 => u8, i16 => u16, i32 => u32, i64 => u64, isize => usize);

impl WordKey for core::net::Ipv4Addr {
    #[inline]
    fn to_word(self) -> u64 {
        u64::from(u32::from(self))
    }
    #[inline]
    fn from_word(word: u64) -> Self {
        Self::from(word as u32)
    }
}
