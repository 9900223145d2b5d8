//! The configuration's validation and key names.

use super::*;
use std::string::ToString;

#[test]
fn bad_configurations_are_typed_errors() {
    let q = Quota::per_second(10).unwrap();
    assert!(RedisConfig::token_bucket(q).validate().is_ok());
    assert!(matches!(
        RedisConfig::token_bucket(q)
            .timeout(Duration::ZERO)
            .validate(),
        Err(ConfigError::ZeroTimeout)
    ));
    assert!(matches!(
        RedisConfig::token_bucket(q).hash_tag(b"a}b").validate(),
        Err(ConfigError::InvalidHashTag)
    ));
    let fine = Quota::new(1, Duration::from_nanos(500)).unwrap();
    assert!(matches!(
        RedisConfig::token_bucket(fine).validate(),
        Err(ConfigError::BelowServerResolution(_))
    ));
    let long = Quota::per_hour(1).unwrap().with_burst(100_000).unwrap();
    assert!(matches!(
        RedisConfig::token_bucket(long).validate(),
        Err(ConfigError::LeadTooLong { .. })
    ));
    let odd = Quota::new(5, Duration::from_nanos(1_500)).unwrap();
    assert!(matches!(
        RedisConfig::fixed_window(odd).validate(),
        Err(ConfigError::WindowNotWholeMicroseconds { .. })
    ));
    let fine = Quota::new(5, Duration::from_micros(1500)).unwrap();
    assert!(RedisConfig::fixed_window(fine).validate().is_ok());
    assert!(!ConfigError::ZeroTimeout.to_string().is_empty());
}

#[test]
fn keys_are_prefix_tag_and_a_fixed_size_digest() {
    let q = Quota::per_second(10).unwrap();
    let c = RedisConfig::token_bucket(q).prefix(b"p:");
    // SHA-256("abc") = ba7816bf 8f01cfea 414140de 5dae2223 b00361a3 …
    assert_eq!(c.redis_key(b"abc"), b"p:ba7816bf8f01cfea414140de5dae2223");
    assert_eq!(c.redis_key(b"\xff\r\n*").len(), 2 + KEY_DIGEST_LEN);
    assert_eq!(c.redis_key(&[7; 1 << 20]).len(), 2 + KEY_DIGEST_LEN);
    assert_ne!(c.redis_key(b"k"), c.redis_key(b"k "));
    let c = c.hash_tag(b"t");
    assert!(c.redis_key(b"k").starts_with(b"p:{t}"));
    let zero = RedisConfig::token_bucket(q).circuit_breaker(0, Duration::from_millis(1));
    assert!(matches!(
        zero.validate(),
        Err(ConfigError::InvalidCircuitBreaker)
    ));
}

#[test]
fn a_zero_new_key_budget_is_a_typed_error() {
    let q = Quota::per_second(10).unwrap();
    let zero = RedisConfig::token_bucket(q).new_keys_per_second(0);
    assert!(matches!(zero.validate(), Err(ConfigError::ZeroNewKeyRate)));
    assert!(ConfigError::ZeroNewKeyRate.to_string().contains("new keys"));
    let window = RedisConfig::fixed_window(q).new_keys_per_second(0);
    assert!(matches!(
        window.validate(),
        Err(ConfigError::ZeroNewKeyRate)
    ));
    let one = RedisConfig::token_bucket(q).new_keys_per_second(1);
    assert!(one.validate().is_ok());
    assert_eq!(one.new_key_rate(), 1);
    // a rate whose interval is under a nanosecond is no quota
    let max = RedisConfig::token_bucket(q).new_keys_per_second(u32::MAX);
    assert!(matches!(max.validate(), Err(ConfigError::NewKeyRate(_))));
    let high = RedisConfig::token_bucket(q).new_keys_per_second(1_000_000);
    assert!(high.validate().is_ok());
}

#[test]
fn the_new_key_budget_is_on_by_default() {
    let q = Quota::per_second(10).unwrap();
    let config = RedisConfig::token_bucket(q);
    assert_eq!(config.new_key_rate(), DEFAULT_NEW_KEYS_PER_SECOND);
    assert_eq!(DEFAULT_NEW_KEYS_PER_SECOND, 1_000);
}

#[test]
fn the_live_key_bound_is_burst_plus_rate_times_the_longest_key_life() {
    // token bucket 10/s burst 20: T = 100 ms, a key lives up to 2 s
    let q = Quota::per_second(10).unwrap().with_burst(20).unwrap();
    let c = RedisConfig::token_bucket(q).new_keys_per_second(500);
    assert_eq!(c.max_key_lifetime(), Duration::from_secs(2));
    assert_eq!(c.max_live_keys_per_replica(), 500 + 500 * 2);
    // leaky bucket: capacity (its largest weight) × T; weight 1, T = 100
    // ms, rounded up to 1 s in the bound
    let one = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let c = RedisConfig::leaky_bucket(one).new_keys_per_second(500);
    assert_eq!(c.max_key_lifetime(), Duration::from_millis(100));
    assert_eq!(c.max_live_keys_per_replica(), 500 + 500);
    // fixed window: the window
    let c = RedisConfig::fixed_window(Quota::per_minute(100).unwrap()).new_keys_per_second(7);
    assert_eq!(c.max_key_lifetime(), Duration::from_secs(60));
    assert_eq!(c.max_live_keys_per_replica(), 7 + 7 * 60);
    // saturates instead of wrapping
    let long = Quota::per_hour(1).unwrap().with_burst(1000).unwrap();
    let c = RedisConfig::token_bucket(long).new_keys_per_second(u32::MAX);
    assert!(c.max_live_keys_per_replica() > u64::from(u32::MAX));
}

#[test]
fn the_overflow_key_is_never_a_client_key() {
    let q = Quota::per_second(10).unwrap();
    let c = RedisConfig::token_bucket(q).prefix(b"p:");
    assert_eq!(c.overflow_key(), b"p:overflow");
    assert_eq!(c.clone().hash_tag(b"t").overflow_key(), b"p:{t}overflow");
    // a client key is the namespace and 32 hex digits; "overflow" is 8
    // bytes, and not hex
    for key in [&b"overflow"[..], b"", b"p:overflow"] {
        assert_ne!(c.redis_key(key), c.overflow_key());
    }
    assert!(OVERFLOW_KEY_SUFFIX.len() != KEY_DIGEST_LEN);
}
