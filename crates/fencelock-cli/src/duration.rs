//! Durations on the command line: `500ms`, `1s`, `2.5s`, `1m`.

use std::time::Duration;

/// Parses a number with a unit (`us`, `ms`, `s`, `m`, `h`), for clap's `value_parser`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let hint = || {
        format!("{text:?} is not a duration: write a number and a unit, like 500ms, 1s, 2.5s or 1m")
    };
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| hint())?;
    let seconds_per_unit = match unit.trim() {
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(hint()),
    };
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| hint())
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
    }

    #[test]
    fn refuses_numbers_without_units_and_garbage() {
        for bad in ["1", "", "s", "-1s", "1 parsec", "1.2.3s"] {
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
}
