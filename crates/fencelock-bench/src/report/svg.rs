//! A small SVG chart: each contender's ratio to raw, per workload.

use std::fmt::Write as _;

use super::fmt_ratio;
use super::model::Report;

/// One bar of the chart: a contender and its ratio.
type Bar = (String, Option<f64>);

impl Report {
    /// A horizontal bar chart (SVG) of each contender's ratio to raw, per workload.
    pub fn to_svg(&self) -> String {
        let mut groups: Vec<(&str, Vec<Bar>)> = Vec::new();
        let row = |l: &String, r: Option<f64>| (l.clone(), r);
        groups.push((
            "W1 cycles/s (1 client)",
            self.w1
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.push((
            "W2 cycles/s (32 tasks)",
            self.w2
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.push((
            "W3 acquisitions/s (8 workers, 1 key)",
            self.w3
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.push((
            "W4 Redlock cycles/s (5 instances)",
            self.w4
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.push((
            "W5 client CPU for renewals (lower is better)",
            self.w5
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.retain(|(_, rows)| !rows.is_empty());
        let max = groups
            .iter()
            .flat_map(|(_, rows)| rows.iter().filter_map(|(_, r)| *r))
            .fold(1.2f64, f64::max)
            .min(2.0);
        let (label_w, bar_w, bar_h, gap) = (110.0, 420.0, 16.0, 4.0);
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
                match r {
                    Some(r) => {
                        let w = (r.min(max) / max * bar_w).max(1.0);
                        let color = match lib.as_str() {
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
                            if *r > max {
                                format!("{} (bar cut at {max:.1}×)", fmt_ratio(*r))
                            } else {
                                fmt_ratio(*r)
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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
