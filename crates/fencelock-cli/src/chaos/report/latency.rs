//! The latency plot, in SVG: each request's time from invocation to answer against the
//! instant of its answer, on a log scale (`class="latency-point"`, coloured by lock; requests
//! not granted hollow), the median and 99th percentile of the grants per time bucket as lines,
//! and the faults shaded (`class="latency-fault"`).

use std::fmt::Write as _;

use super::html::{Scale, at, escape, px, span};
use super::model::Model;

const WIDTH: f64 = 1_200.0;
const HEIGHT: f64 = 300.0;
/// Room for the axes' labels.
const LEFT: f64 = 64.0;
const BOTTOM: f64 = 24.0;
const TOP: f64 = 8.0;
/// Time buckets for the percentile lines.
const BUCKETS: u64 = 60;

/// The colour of the `i`-th lock.
pub(super) fn colour(i: usize) -> &'static str {
    const PALETTE: [&str; 8] = [
        "#2f6fb3", "#2a9d5b", "#8e44ad", "#c27c0e", "#0f8b8d", "#b5446e", "#5d6d7e", "#6b8e23",
    ];
    PALETTE[i % PALETTE.len()]
}

/// The y axis: log10 of milliseconds, from a decade below the fastest to a decade above the
/// slowest.
struct LogAxis {
    low: f64,
    high: f64,
}

impl LogAxis {
    fn of(model: &Model) -> LogAxis {
        let ms = |ns: u64| (ns.max(1) as f64 / 1e6).log10();
        let low = model
            .points
            .iter()
            .map(|p| ms(p.latency_ns))
            .fold(f64::INFINITY, f64::min);
        let high = model
            .points
            .iter()
            .map(|p| ms(p.latency_ns))
            .fold(f64::NEG_INFINITY, f64::max);
        if low.is_finite() && high.is_finite() {
            LogAxis {
                low: low.floor().min(0.0),
                high: high.ceil().max(low.floor() + 1.0),
            }
        } else {
            LogAxis {
                low: -1.0,
                high: 3.0,
            }
        }
    }

    fn y(&self, ns: u64) -> f64 {
        let v = (ns.max(1) as f64 / 1e6).log10().clamp(self.low, self.high);
        TOP + (self.high - v) / (self.high - self.low) * (HEIGHT - TOP - BOTTOM)
    }
}

/// The latency plot's HTML.
pub(super) fn plot(model: &Model) -> String {
    let scale = Scale {
        t0: model.t0,
        t1: model.t1,
        width: WIDTH - LEFT,
    };
    let axis = LogAxis::of(model);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="latency" width="{}" height="{}" viewBox="0 0 {} {}">"#,
        px(WIDTH),
        px(HEIGHT),
        px(WIDTH),
        px(HEIGHT)
    );
    let plot_h = HEIGHT - TOP - BOTTOM;
    for fault in &model.faults {
        let x = LEFT + scale.x(fault.start_ns);
        let _ = write!(
            out,
            r#"<rect class="latency-fault" x="{}" y="{}" width="{}" height="{}"><title>{} on {}</title></rect>"#,
            px(x),
            px(TOP),
            px((LEFT + scale.x(fault.end_ns) - x).max(1.0)),
            px(plot_h),
            escape(&fault.kind),
            escape(&fault.target)
        );
    }
    axes(&mut out, &scale, &axis);
    for p in &model.points {
        let lock = model
            .locks
            .iter()
            .position(|l| l.name == p.lock)
            .unwrap_or(0);
        let granted = p.outcome == "granted";
        let paint = if granted {
            format!(r#"fill="{}""#, colour(lock))
        } else {
            format!(r#"fill="none" stroke="{}""#, colour(lock))
        };
        let _ = write!(
            out,
            r#"<circle class="latency-point" data-outcome="{}" cx="{}" cy="{}" r="2" {paint}><title>{}: {} after {} ({}), line {}</title></circle>"#,
            escape(&p.outcome),
            px(LEFT + scale.x(p.at_ns)),
            px(axis.y(p.latency_ns)),
            escape(&p.lock),
            escape(&p.outcome),
            span(p.latency_ns),
            at(p.at_ns, model.t0),
            p.line
        );
    }
    for (class, q) in [("latency-p50", 0.5), ("latency-p99", 0.99)] {
        // One line per run of buckets with grants: a gap stays a gap.
        for run in percentiles(model, q).chunk_by(|a, b| b.0 == a.0 + 1) {
            let points: Vec<String> = run
                .iter()
                .map(|(_, t, ns)| format!("{},{}", px(LEFT + scale.x(*t)), px(axis.y(*ns))))
                .collect();
            let _ = write!(
                out,
                r#"<polyline class="{class}" points="{}"/>"#,
                points.join(" ")
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// The axes: seconds along the bottom, milliseconds by decade up the left.
fn axes(out: &mut String, scale: &Scale, axis: &LogAxis) {
    let bottom = px(HEIGHT - BOTTOM);
    let _ = write!(
        out,
        r#"<line class="axis" x1="{l}" x2="{l}" y1="{}" y2="{bottom}"/><line class="axis" x1="{l}" x2="{}" y1="{bottom}" y2="{bottom}"/>"#,
        px(TOP),
        px(WIDTH),
        l = px(LEFT)
    );
    for (t, label) in scale.ticks(80.0) {
        let x = px(LEFT + scale.x(t));
        let _ = write!(
            out,
            r#"<text class="tick-label" x="{x}" y="{}" text-anchor="middle">{}</text>"#,
            px(HEIGHT - 6.0),
            escape(&label)
        );
    }
    let (low, high) = (axis.low as i32, axis.high as i32);
    for decade in low..=high {
        let ns = (10f64.powi(decade) * 1e6) as u64;
        let y = px(axis.y(ns));
        let label = match decade {
            d if d < 0 => format!("{} ms", 10f64.powi(d)),
            d if d < 3 => format!("{} ms", 10u64.pow(d.unsigned_abs())),
            d => format!("{} s", 10u64.pow(d.unsigned_abs() - 3)),
        };
        let _ = write!(
            out,
            r#"<line class="grid" x1="{}" x2="{}" y1="{y}" y2="{y}"/><text class="tick-label" x="{}" y="{y}" dy="4" text-anchor="end">{}</text>"#,
            px(LEFT),
            px(WIDTH),
            px(LEFT - 6.0),
            escape(&label)
        );
    }
}

/// The `q` quantile of the grants' latencies per time bucket that has grants: (the bucket's
/// number, its middle, the latency).
fn percentiles(model: &Model, q: f64) -> Vec<(usize, u64, u64)> {
    let span_ns = model.t1.saturating_sub(model.t0).max(1);
    let width = span_ns.div_ceil(BUCKETS).max(1);
    let mut buckets: Vec<Vec<u64>> = vec![Vec::new(); BUCKETS as usize + 1];
    for p in model.points.iter().filter(|p| p.outcome == "granted") {
        let i = (p.at_ns.saturating_sub(model.t0) / width) as usize;
        if let Some(bucket) = buckets.get_mut(i) {
            bucket.push(p.latency_ns);
        }
    }
    buckets
        .into_iter()
        .enumerate()
        .filter(|(_, b)| !b.is_empty())
        .map(|(i, mut b)| {
            b.sort_unstable();
            let at = ((b.len() - 1) as f64 * q).round() as usize;
            let middle = model.t0 + width * i as u64 + width / 2;
            (i, middle.min(model.t1), b[at.min(b.len() - 1)])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::report::model::Point;

    fn point(at_ns: u64, latency_ns: u64) -> Point {
        Point {
            at_ns,
            latency_ns,
            lock: "a".into(),
            outcome: "granted".into(),
            line: 1,
        }
    }

    #[test]
    fn the_log_axis_spans_whole_decades() {
        let model = Model {
            t0: 0,
            t1: 60_000_000_000,
            points: vec![point(1, 300_000), point(2, 2_500_000_000)],
            ..Model::default()
        };
        let axis = LogAxis::of(&model);
        assert_eq!((axis.low, axis.high), (-1.0, 4.0));
        assert!(axis.y(300_000) > axis.y(2_500_000_000));
    }

    #[test]
    fn percentiles_are_per_bucket() {
        let model = Model {
            t0: 0,
            t1: 60_000_000_000,
            points: (1..=100).map(|i| point(10, i * 1_000_000)).collect(),
            ..Model::default()
        };
        assert_eq!(percentiles(&model, 0.5), vec![(0, 500_000_000, 51_000_000)]);
        assert_eq!(
            percentiles(&model, 0.99),
            vec![(0, 500_000_000, 99_000_000)]
        );
    }
}
