//! A small SVG chart: each contender's ratio to raw, per workload.

use std::fmt::Write as _;

use super::fmt_ratio;
use super::model::{LibraryRow, Report};

/// The chart's geometry: the labels' width, the longest bar, a bar's height.
const LABEL_W: f64 = 110.0;
const BAR_W: f64 = 420.0;
const BAR_H: f64 = 16.0;

/// One bar of the chart: a contender and its ratio.
type Bar = (String, Option<f64>);

impl Report {
    /// A horizontal bar chart (SVG) of each contender's ratio to raw, per workload.
    pub fn to_svg(&self) -> String {
        let mut groups: Vec<(&str, Vec<Bar>)> = vec![
            ("W1 cycles/s (1 client)", bars(&self.w1)),
            ("W2 cycles/s (32 tasks)", bars(&self.w2)),
            ("W3 acquisitions/s (8 workers, 1 key)", bars(&self.w3)),
            ("W4 Redlock cycles/s (5 instances)", bars(&self.w4)),
            (
                "W5 client CPU for renewals (lower is better)",
                bars(&self.w5),
            ),
        ];
        groups.retain(|(_, rows)| !rows.is_empty());
        let max = groups
            .iter()
            .flat_map(|(_, rows)| rows.iter().filter_map(|(_, r)| *r))
            .fold(1.2f64, f64::max)
            .min(2.0);
        let (label_w, bar_w, bar_h, gap) = (LABEL_W, BAR_W, BAR_H, 4.0);
        let width = label_w + bar_w + 90.0;
        let mut y = 40.0;
        let mut body = String::new();
        for (title, rows) in &groups {
            let _ = writeln!(
                body,
                r#"<text x="10" y="{:.0}" font-weight="bold">{}</text>"#,
                y + 12.0,
                escape(title)
            );
            y += 20.0;
            for (lib, r) in rows {
                let _ = writeln!(
                    body,
                    r#"<text x="{:.0}" y="{:.0}" text-anchor="end">{}</text>"#,
                    label_w - 8.0,
                    y + 12.0,
                    escape(lib)
                );
                bar(&mut body, lib, *r, y, max);
                y += bar_h + gap;
            }
            y += 10.0;
        }
        let one = label_w + 1.0 / max * bar_w;
        let height = y + 10.0;
        format!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14" font-weight="bold">fencelock benchmark: ratio to the raw baseline (same run{smoke})</text>
<line x1="{one:.1}" y1="30" x2="{one:.1}" y2="{bottom:.0}" stroke="#e53e3e" stroke-dasharray="4 3"/>
<text x="{one:.1}" y="{label_y:.0}" fill="#e53e3e" text-anchor="middle">raw = 1.0</text>
{body}</svg>
"##,
            smoke = if self.smoke { ", smoke" } else { "" },
            bottom = y - 5.0,
            label_y = y + 5.0,
        )
    }
}

/// (library, ratio to raw) of every row.
fn bars<M>(rows: &[LibraryRow<M>]) -> Vec<Bar> {
    rows.iter()
        .map(|r| (r.library.clone(), r.ratio_to_raw))
        .collect()
}

/// One contender's bar (or "not measured") at height `y`, the scale running up to `max`.
fn bar(body: &mut String, lib: &str, ratio: Option<f64>, y: f64, max: f64) {
    let (label_w, bar_w, bar_h) = (LABEL_W, BAR_W, BAR_H);
    match ratio {
        Some(r) => {
            let w = (r.min(max) / max * bar_w).max(1.0);
            let color = match lib {
                "fencelock" => "#2b6cb0",
                "raw" => "#718096",
                "rslock" => "#dd6b20",
                _ => "#38a169",
            };
            let _ = writeln!(
                body,
                r#"<rect x="{label_w:.0}" y="{y:.0}" width="{w:.1}" height="{bar_h:.0}" fill="{color}"/>"#
            );
            let _ = writeln!(
                body,
                r#"<text x="{:.1}" y="{:.0}">{}</text>"#,
                label_w + w + 4.0,
                y + 12.0,
                if r > max {
                    format!("{} (bar cut at {max:.1}×)", fmt_ratio(r))
                } else {
                    fmt_ratio(r)
                }
            );
        }
        None => {
            let _ = writeln!(
                body,
                r##"<text x="{:.0}" y="{:.0}" fill="#a0aec0">not measured</text>"##,
                label_w + 4.0,
                y + 12.0
            );
        }
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
