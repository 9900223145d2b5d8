//! [`TickState`]: a tick bucket's one word of state, the TAT in ticks
//! modulo 2³².

use crate::sync::RmwU32;

/// A 32-bit tick bucket's state: the TAT in ticks, modulo 2³², in one word
/// (4 bytes; see the [module documentation](super) for how it is changed on
/// each target). `Default` and [`TickState::new`] are a full bucket.
///
/// ```
/// use tollgate::tick::TickState;
/// use tollgate::LockFreedom;
///
/// static STATE: TickState = TickState::new();
/// assert_eq!(core::mem::size_of::<TickState>(), 4);
/// // compare-and-swap on this host; a critical section on thumbv6m
/// assert!(TickState::IS_LOCK_FREE && TickState::IS_INTERRUPT_SAFE);
/// # let _ = &STATE;
/// ```
#[derive(Debug, Default)]
pub struct TickState {
    pub(super) tat: RmwU32,
}

impl TickState {
    crate::sync::const_fn_unless_loom! {
        /// A full bucket.
        #[must_use]
        pub fn new() -> Self {
            Self { tat: RmwU32::new(0) }
        }
    }

    /// The stored theoretical arrival time, in ticks modulo 2³²; 0 is the
    /// sentinel "full" (a fresh state), which reads as full at every tick.
    /// A full bucket may also hold an older TAT that reads as full.
    ///
    /// ```
    /// assert_eq!(tollgate::tick::TickState::new().tat_ticks(), 0);
    /// ```
    #[must_use]
    pub fn tat_ticks(&self) -> u32 {
        self.tat.load()
    }
}
