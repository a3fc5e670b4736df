//! Writing HTML and SVG by hand: escaping, numbers, the time axis's scale.

/// `text` escaped for HTML text and attribute values (double- or single-quoted).
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A span of nanoseconds for people: `850 µs`, `12.3 ms`, `1.25 s`.
pub(super) fn span(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    if ms < 1.0 {
        format!("{:.0} µs", ns as f64 / 1e3)
    } else if ms < 1_000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

/// An instant of the run, as seconds from its start: `12.345 s`.
pub(super) fn at(ns: u64, t0: u64) -> String {
    format!("{:.3} s", ns.saturating_sub(t0) as f64 / 1e9)
}

/// A coordinate, to a tenth of a pixel.
pub(super) fn px(x: f64) -> String {
    let rounded = (x * 10.0).round() / 10.0;
    if rounded == rounded.trunc() {
        format!("{rounded:.0}")
    } else {
        format!("{rounded:.1}")
    }
}

/// The time axis: the run's span mapped onto `width` pixels.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scale {
    pub(super) t0: u64,
    pub(super) t1: u64,
    pub(super) width: f64,
}

impl Scale {
    /// The x of instant `ns` (clamped to the run).
    pub(super) fn x(&self, ns: u64) -> f64 {
        let span = self.t1.saturating_sub(self.t0).max(1) as f64;
        let from = ns.clamp(self.t0, self.t1.max(self.t0)) - self.t0;
        from as f64 / span * self.width
    }

    /// The x of instant `ns` as a share of the width, in percent.
    pub(super) fn percent(&self, ns: u64) -> f64 {
        self.x(ns) / self.width.max(1.0) * 100.0
    }

    /// Ticks at a round step, at least `min_gap` pixels apart: (instant, label).
    pub(super) fn ticks(&self, min_gap: f64) -> Vec<(u64, String)> {
        const STEPS_MS: [u64; 14] = [
            10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000,
        ];
        let span_ms = (self.t1.saturating_sub(self.t0) / 1_000_000).max(1);
        let per_ms = self.width / span_ms as f64;
        let step = STEPS_MS
            .iter()
            .copied()
            .find(|s| *s as f64 * per_ms >= min_gap)
            .unwrap_or(300_000);
        (0..=span_ms / step)
            .map(|i| {
                let ms = i * step;
                let label = if step < 1_000 {
                    format!("{:.2} s", ms as f64 / 1e3)
                } else {
                    format!("{} s", ms / 1_000)
                };
                (self.t0 + ms * 1_000_000, label)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_text_and_attributes() {
        assert_eq!(
            escape(r#"<script>"a" & 'b'</script>"#),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn spans_and_coordinates_read_well() {
        assert_eq!(span(850_000), "850 µs");
        assert_eq!(span(12_340_000), "12.3 ms");
        assert_eq!(span(1_250_000_000), "1.25 s");
        assert_eq!(px(3.0), "3");
        assert_eq!(px(3.04), "3");
        assert_eq!(px(3.06), "3.1");
    }

    #[test]
    fn the_scale_maps_the_run_onto_the_width() {
        let scale = Scale {
            t0: 1_000,
            t1: 1_000 + 10_000_000_000,
            width: 1_000.0,
        };
        assert_eq!(scale.x(0), 0.0);
        assert_eq!(scale.x(1_000 + 5_000_000_000), 500.0);
        assert_eq!(scale.x(u64::MAX), 1_000.0);
        let ticks = scale.ticks(70.0);
        assert_eq!(ticks.len(), 11);
        assert_eq!(ticks[1].1, "1 s");
    }
}
