//! The Prometheus text format (version 0.0.4) of a snapshot.

use std::fmt::Write;

use super::instruments::{BUCKETS, Instrument};
use super::registry::{Series, Value};

/// `series` in the Prometheus text format (version 0.0.4), series of one name together (as
/// [`Registry::snapshot`](super::Registry::snapshot) sorts them): the `# HELP` and `# TYPE`
/// of each name once (from `instruments`; a name not there has its type from its value and no
/// help), then its samples. Label values are escaped.
///
/// ```
/// use fencelock::metrics::{Instrument, InstrumentKind, Series, Value, render};
///
/// const HELD: Instrument =
///     Instrument::new("locks_held", InstrumentKind::Gauge, "", &["lock"], "Locks held.");
/// let series = [Series::new("locks_held", [("lock", "reports")], Value::Gauge(1.0))];
/// assert_eq!(
///     render(&series, &[HELD]),
///     "# HELP locks_held Locks held.\n# TYPE locks_held gauge\nlocks_held{lock=\"reports\"} 1\n"
/// );
/// ```
pub fn render(series: &[Series], instruments: &[Instrument]) -> String {
    let mut out = String::new();
    let mut last: Option<&str> = None;
    for s in series {
        if last != Some(s.name.as_str()) {
            last = Some(&s.name);
            let (help, kind) = match instruments.iter().find(|i| i.name == s.name) {
                Some(i) => (i.help, i.kind.as_str()),
                None => ("", s.value.kind().as_str()),
            };
            if !help.is_empty() {
                let _ = writeln!(out, "# HELP {} {}", s.name, help);
            }
            let _ = writeln!(out, "# TYPE {} {kind}", s.name);
        }
        match &s.value {
            Value::Counter(n) => sample(&mut out, &s.name, "", &s.labels, None, &n.to_string()),
            Value::Gauge(v) => sample(&mut out, &s.name, "", &s.labels, None, &number(*v)),
            Value::Histogram { counts, sum, count } => {
                let mut below = 0u64;
                for (at, n) in counts.iter().enumerate() {
                    below = below.saturating_add(*n);
                    let le = BUCKETS
                        .get(at)
                        .map_or_else(|| "+Inf".to_owned(), |b| number(*b));
                    sample(
                        &mut out,
                        &s.name,
                        "_bucket",
                        &s.labels,
                        Some(&le),
                        &below.to_string(),
                    );
                }
                sample(&mut out, &s.name, "_sum", &s.labels, None, &number(*sum));
                sample(
                    &mut out,
                    &s.name,
                    "_count",
                    &s.labels,
                    None,
                    &count.to_string(),
                );
            }
        }
    }
    out
}

fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(String, String)],
    le: Option<&str>,
    value: &str,
) {
    out.push_str(name);
    out.push_str(suffix);
    let le = le.map(|le| ("le", le));
    let all = labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(le);
    let mut first = true;
    for (key, value) in all {
        out.push(if first { '{' } else { ',' });
        first = false;
        let _ = write!(out, "{key}=\"{}\"", escape(value));
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A number as Prometheus writes it (`+Inf`, `-Inf`, `NaN`).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_escape_labels_and_histograms_count_up_to_each_bound() {
        let series = vec![
            Series {
                name: "fencelock_held".into(),
                labels: vec![
                    ("kind".into(), "lock".into()),
                    ("lock".into(), "a\"b\\c\nd".into()),
                ],
                value: Value::Gauge(1.0),
            },
            Series {
                name: "fencelock_wait_seconds".into(),
                labels: vec![("kind".into(), "lock".into())],
                value: Value::Histogram {
                    counts: (0..=BUCKETS.len())
                        .map(|i| u64::from(i == 1 || i == BUCKETS.len()))
                        .collect(),
                    sum: 100.001,
                    count: 2,
                },
            },
        ];
        let text = render(&series, super::super::INSTRUMENTS);
        assert!(text.contains("# TYPE fencelock_held gauge\n"), "{text}");
        assert!(
            text.contains("fencelock_held{kind=\"lock\",lock=\"a\\\"b\\\\c\\nd\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("fencelock_wait_seconds_bucket{kind=\"lock\",le=\"0.0005\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("fencelock_wait_seconds_bucket{kind=\"lock\",le=\"0.001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("fencelock_wait_seconds_bucket{kind=\"lock\",le=\"3600\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("fencelock_wait_seconds_bucket{kind=\"lock\",le=\"+Inf\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("fencelock_wait_seconds_sum{kind=\"lock\"} 100.001\n"),
            "{text}"
        );
        assert!(
            text.contains("fencelock_wait_seconds_count{kind=\"lock\"} 2\n"),
            "{text}"
        );
    }
}
