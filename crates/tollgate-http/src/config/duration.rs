//! Durations in rules files: whole numbers, each with a unit from a short,
//! case-sensitive list, largest unit first.
//!
//! A unit that reads two ways is refused rather than guessed: `"1M"` is a
//! month to humantime and a minute to a careless hand (43,830 times
//! apart), `"1y"` and `"1w"` are seldom a rate limit's period, and `µs` or
//! `ns` are finer than a request's cost. What is left is `d`, `h`, `m`
//! (minutes), `s` and `ms`, in lower case.

use core::time::Duration;

/// The units, largest first, in nanoseconds.
const UNITS: [(&str, u128); 5] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
];

/// What every duration field says when it is refused (the error names the
/// field: `rules[0].period: must be …`).
pub(crate) const DURATION_RULE: &str = "must be a positive duration with its unit: a whole number of d, h, m (minutes), s or ms, lower case, or several largest first (\"500ms\", \"1s\", \"1m30s\", \"1d\"); a bare number, a fraction, a space and any other unit (\"1M\", \"1w\", \"1y\", \"1us\", \"1ns\") are refused";

/// Parses `"250ms"`, `"1s"`, `"1m30s"`, `"2h"`, `"1d"`: one or more
/// whole numbers, each followed by a unit of [`UNITS`], each unit smaller
/// than the one before. `None` for anything else: a bare number (`"50"`:
/// seconds or milliseconds?), a fraction, whitespace, an unknown or
/// upper-case unit, a unit repeated or out of order, or a total beyond
/// [`Duration::MAX`]. Zero parses (the fields refuse it).
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    let mut rest = s.as_bytes();
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    // index into UNITS of the last unit read: the next must come after it
    let mut last: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let letters = rest[digits..]
            .iter()
            .take_while(|b| b.is_ascii_alphabetic())
            .count();
        if digits == 0 || letters == 0 {
            return None;
        }
        let mut number: u128 = 0;
        for &d in &rest[..digits] {
            number = number.checked_mul(10)?.checked_add(u128::from(d - b'0'))?;
        }
        let unit = &rest[digits..digits + letters];
        let i = UNITS.iter().position(|(name, _)| name.as_bytes() == unit)?;
        if last.is_some_and(|l| i <= l) {
            return None;
        }
        last = Some(i);
        total = total.checked_add(number.checked_mul(UNITS[i].1)?)?;
        rest = &rest[digits + letters..];
    }
    let secs = u64::try_from(total / 1_000_000_000).ok()?;
    let nanos = u32::try_from(total % 1_000_000_000).ok()?;
    Some(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use core::time::Duration;
    use std::format;

    #[test]
    fn durations_need_their_unit() {
        for (text, want) in [
            ("250ms", Duration::from_millis(250)),
            ("2s", Duration::from_secs(2)),
            ("1m", Duration::from_secs(60)),
            ("1m30s", Duration::from_secs(90)),
            ("1h", Duration::from_secs(3600)),
            ("1d", Duration::from_secs(86_400)),
            ("1d2h3m4s5ms", Duration::from_millis(93_784_005)),
            ("1500ms", Duration::from_millis(1500)),
            ("0s", Duration::ZERO),
            ("007s", Duration::from_secs(7)),
        ] {
            assert_eq!(parse_duration(text), Some(want), "{text}");
        }
        for bad in [
            "",
            "2",
            "50",
            "ms",
            "1x",
            "-1s",
            "+1s",
            " 1s",
            "1s ",
            "1m 30s",
            "1.5s",
            "1,5s",
            "99999999999999999999999999999999999999999s",
            // units that read two ways, or are no period of a rate limit
            "1M",
            "1S",
            "1H",
            "1D",
            "1Ms",
            "1MS",
            "1mo",
            "1month",
            "1w",
            "1y",
            "1us",
            "1µs",
            "1ns",
            "1sec",
            "1min",
            // repeated or out of order
            "30s1m",
            "1s1s",
            "1s500ms1s",
            "1m30",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        assert_eq!(parse_duration(&format!("{}h", u64::MAX)), None);
        assert_eq!(
            parse_duration(&format!("{}s", u64::MAX)),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(parse_duration(&format!("{}s1000ms", u64::MAX)), None);
    }
}
