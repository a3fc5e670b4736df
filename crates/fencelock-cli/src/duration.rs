//! Durations on the command line: `500ms`, `1s`, `2.5s`, `1m`, `1m30s`.

use std::time::Duration;

/// Parses a duration for clap's `value_parser`: what `humantime` reads (`500ms`, `1s`, `1m`,
/// `2h`, `1m 30s`, `250us`), and a decimal number with one unit (`2.5s`, `0.5m`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let hint = || {
        format!("{text:?} is not a duration: write a number and a unit, like 500ms, 1s, 2.5s or 1m")
    };
    if let Ok(d) = humantime::parse_duration(text) {
        // humantime reads a bare "0" as zero; every other number needs a unit, so this does too.
        return if text.chars().all(|c| c.is_ascii_digit()) {
            Err(hint())
        } else {
            Ok(d)
        };
    }
    // A decimal number and one unit: the unit's length from humantime, times the number.
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(hint)?;
    let (number, unit) = text.split_at(split);
    if !number.contains('.') {
        return Err(hint());
    }
    let value: f64 = number.parse().map_err(|_| hint())?;
    let per_unit = humantime::parse_duration(&format!("1{}", unit.trim())).map_err(|_| hint())?;
    Duration::try_from_secs_f64(value * per_unit.as_secs_f64()).map_err(|_| hint())
}

/// Formats a duration the way [`parse_duration`] reads it: `1s`, `2.5s`, `500ms`, `250us`.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        format!("{}s", d.as_secs())
    } else if d >= Duration::from_secs(1) && nanos.is_multiple_of(100_000_000) {
        format!("{}s", d.as_secs_f64())
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}us", d.as_micros())
    }
}

/// Formats a measured duration for people, rounded as the library's messages do: `250us`,
/// `502ms` (not `501.655815ms`), `1.5s` (tenths below a minute), `1m30s`, `2h5m` (whole seconds
/// above); what it prints, [`parse_duration`] reads back, give or take the rounding.
pub fn format_rounded(d: Duration) -> String {
    fencelock::rounded_duration(d)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking
mod tests {
    use super::*;

    #[test]
    fn parses_common_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0.5m"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
    }

    #[test]
    fn refuses_numbers_without_units_and_garbage() {
        for bad in ["1", "0", "", "s", "-1s", "1 parsec", "1.2.3s", "2.5"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("not a duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn formatting_round_trips() {
        for d in [
            Duration::from_secs(1),
            Duration::from_millis(2500),
            Duration::from_millis(300),
            Duration::from_micros(1500),
        ] {
            assert_eq!(
                parse_duration(&format_duration(d)),
                Ok(d),
                "{}",
                format_duration(d)
            );
        }
        assert_eq!(format_duration(Duration::from_millis(2500)), "2.5s");
        assert_eq!(format_duration(Duration::from_millis(300)), "300ms");
    }

    #[test]
    fn measured_durations_print_rounded() {
        for (d, text) in [
            (Duration::ZERO, "0us"),
            (Duration::from_nanos(400), "0us"),
            (Duration::from_micros(250), "250us"),
            (Duration::from_nanos(501_655_815), "502ms"),
            (Duration::from_micros(999_600), "1s"),
            (Duration::from_millis(1_000), "1s"),
            (Duration::from_micros(1_502_317), "1.5s"),
            (Duration::from_millis(27_431), "27.4s"),
            (Duration::from_millis(59_960), "1m"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3_600), "1h"),
            (Duration::from_secs(7_500), "2h5m"),
            (Duration::from_secs(3_605), "1h5s"),
        ] {
            assert_eq!(format_rounded(d), text, "{d:?}");
        }
    }

    #[test]
    fn rounded_durations_parse_back_close_to_what_they_were() {
        for ms in [
            1, 7, 501, 999, 1_000, 1_549, 27_431, 59_949, 90_400, 7_500_000,
        ] {
            let d = Duration::from_millis(ms);
            let back = parse_duration(&format_rounded(d)).unwrap();
            let off = back.abs_diff(d);
            assert!(off <= d / 20 + Duration::from_millis(1), "{d:?}: {back:?}");
        }
    }
}
