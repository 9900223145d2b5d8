//! Why a [`RedisConfig`](super::RedisConfig) cannot run: the store's
//! configuration and connection-setup errors.

use core::fmt;

/// A configuration the store cannot run, or a connection it cannot set up.
#[non_exhaustive]
#[derive(Debug)]
pub enum ConfigError {
    /// The quota's interval is finer than the server's `TIME` (1 µs); the
    /// source is the core's [`ConfigError::ClockTooCoarse`](tollgate_core::ConfigError::ClockTooCoarse).
    BelowServerResolution(tollgate_core::ConfigError),
    /// A quota setting the algorithm cannot honour (a burst on a fixed
    /// window); the source says which.
    Quota(tollgate_core::ConfigError),
    /// The bucket's largest lead plus heal threshold (or the window) is too
    /// long to compute exactly in Redis Lua (2^53 ns, about 104 days).
    LeadTooLong {
        /// The largest lead plus heal threshold, in nanoseconds.
        lead_nanos: u64,
    },
    /// A fixed window must last a whole number of microseconds.
    WindowNotWholeMicroseconds {
        /// The requested window, in nanoseconds.
        period_nanos: u64,
    },
    /// The hash tag is empty or contains `{` or `}`.
    InvalidHashTag,
    /// The timeout is zero.
    ZeroTimeout,
    /// The circuit breaker opens after 0 failures or probes every 0 s.
    InvalidCircuitBreaker,
    /// The budget of new keys is 0 per second
    /// ([`RedisConfig::new_keys_per_second`](crate::RedisConfig::new_keys_per_second)):
    /// no key could ever be created.
    ZeroNewKeyRate,
    /// The budget of new keys per second is not a quota tollgate can run
    /// (the source says why).
    NewKeyRate(tollgate_core::ConfigError),
    /// Not called within a tokio runtime (the store spawns its connection
    /// tasks on it and needs its timer: `#[tokio::main]` or a runtime built
    /// with `enable_all()`).
    NoTokioRuntime,
    /// The connection URL or client could not be set up.
    Connection(::redis::RedisError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BelowServerResolution(_) => {
                f.write_str("quota finer than the Redis server clock (1 µs)")
            }
            Self::Quota(_) => f.write_str("quota not supported by the Redis algorithm"),
            Self::LeadTooLong { lead_nanos } => write!(
                f,
                "bucket lead of {lead_nanos} ns exceeds what Redis Lua computes exactly (2^53 ns)"
            ),
            Self::WindowNotWholeMicroseconds { period_nanos } => write!(
                f,
                "fixed window of {period_nanos} ns is not a whole number of microseconds"
            ),
            Self::InvalidHashTag => f.write_str("hash tag is empty or contains '{' or '}'"),
            Self::ZeroTimeout => f.write_str("store timeout is zero"),
            Self::InvalidCircuitBreaker => f.write_str(
                "circuit breaker must open after at least 1 failure and probe at a positive interval",
            ),
            Self::ZeroNewKeyRate => {
                f.write_str("the budget of new keys per second is zero: no key could be created")
            }
            Self::NewKeyRate(_) => f.write_str("invalid budget of new keys per second"),
            Self::NoTokioRuntime => {
                f.write_str("the redis store must be created within a tokio runtime")
            }
            Self::Connection(_) => f.write_str("redis connection setup failed"),
        }
    }
}

impl core::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::BelowServerResolution(e) | Self::Quota(e) | Self::NewKeyRate(e) => Some(e),
            Self::Connection(e) => Some(e),
            _ => None,
        }
    }
}
