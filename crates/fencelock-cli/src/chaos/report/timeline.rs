//! The timeline, drawn in SVG on the server: per lock a band with a lane per worker, each grant
//! a bar (`class="grant"`), each request's wait a thin line (`class="wait"`), losses told
//! (`class="loss"`) and refused writes (`class="refused"`) as ticks in the lane; every fault a
//! shaded span over all locks (`class="fault"`); every violation a red frame over the span of
//! its history lines (`class="violation"`, `id="violation-N"`).
//!
//! Three SVGs: the lane labels (fixed on the left), and in a scrolling box the axis with the
//! faults' names (x in percent, so that its text keeps its size when the page zooms) over the
//! bands (a `viewBox` stretched to the zoomed width; strokes keep their width).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::html::{Scale, at, escape, px, span};
use super::model::{LockView, Model};
use crate::chaos::check::Violation;

/// The axis and the faults' names, above the bands.
const TOP_H: f64 = 40.0;
/// A lock's header row.
const HEADER_H: f64 = 18.0;
/// One worker's lane.
const LANE_H: f64 = 12.0;
/// A grant bar's height.
const BAR_H: f64 = 8.0;
/// The labels' column.
const LABEL_W: f64 = 110.0;

/// Where each lock's band sits: its top, and the total height.
struct Layout {
    tops: Vec<f64>,
    height: f64,
}

impl Layout {
    fn of(model: &Model) -> Layout {
        let mut tops = Vec::new();
        let mut y = 0.0;
        for lock in &model.locks {
            tops.push(y);
            y += HEADER_H + LANE_H * lock.workers.len().max(1) as f64;
        }
        Layout {
            tops,
            height: y.max(LANE_H),
        }
    }
}

/// The width of the bands before any zoom: about 100 px a second, within bounds.
pub(super) fn base_width(model: &Model) -> f64 {
    let seconds = model.t1.saturating_sub(model.t0) as f64 / 1e9;
    (seconds * 100.0).clamp(1_200.0, 40_000.0)
}

/// The timeline's HTML.
pub(super) fn timeline(model: &Model, violations: &[Violation]) -> String {
    let scale = Scale {
        t0: model.t0,
        t1: model.t1,
        width: base_width(model),
    };
    let layout = Layout::of(model);
    let w = px(scale.width);
    let h = px(layout.height);
    let mut out = String::new();
    let _ = write!(out, r#"<div class="timeline">"#);
    labels(&mut out, model, &layout);
    let _ = write!(
        out,
        r#"<div class="scroll" id="timeline-scroll"><svg class="top zoomable" data-base-width="{w}" width="{w}" height="{}">"#,
        px(TOP_H)
    );
    top(&mut out, model, &scale);
    let _ = write!(
        out,
        r#"</svg><svg class="bands zoomable" data-base-width="{w}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" preserveAspectRatio="none">"#
    );
    for (t, _) in scale.ticks(70.0) {
        let x = px(scale.x(t));
        let _ = write!(
            out,
            r#"<line class="tick" x1="{x}" x2="{x}" y1="0" y2="{h}"/>"#
        );
    }
    faults(&mut out, model, &scale, layout.height);
    let involved = involved_lines(violations);
    for (lock, y0) in model.locks.iter().zip(&layout.tops) {
        band(&mut out, lock, *y0, &scale, model.t0, &involved);
    }
    marks(&mut out, model, &layout, &scale, violations);
    out.push_str("</svg></div></div>");
    out
}

/// The labels' column: a lock's name on its header, a worker's number on its lane.
fn labels(out: &mut String, model: &Model, layout: &Layout) {
    let _ = write!(
        out,
        r#"<svg class="labels" width="{}" height="{}">"#,
        px(LABEL_W),
        px(TOP_H + layout.height)
    );
    for (lock, y0) in model.locks.iter().zip(&layout.tops) {
        let y = TOP_H + y0;
        let _ = write!(
            out,
            r#"<text class="lock-name" x="4" y="{}">{}</text>"#,
            px(y + 13.0),
            escape(&lock.name)
        );
        for (i, worker) in lock.workers.iter().enumerate() {
            let _ = write!(
                out,
                r#"<text class="lane-name" x="14" y="{}">worker {worker}</text>"#,
                px(y + HEADER_H + LANE_H * i as f64 + 10.0)
            );
        }
    }
    out.push_str("</svg>");
}

/// The axis's labels and the faults' names, x in percent of the zoomed width.
fn top(out: &mut String, model: &Model, scale: &Scale) {
    for (t, label) in scale.ticks(70.0) {
        let x = px(scale.percent(t));
        let _ = write!(
            out,
            r#"<line class="tick" x1="{x}%" x2="{x}%" y1="16" y2="22"/><text class="tick-label" x="{x}%" y="12">{}</text>"#,
            escape(&label)
        );
    }
    for fault in &model.faults {
        let x = scale.percent(fault.start_ns);
        let width = (scale.percent(fault.end_ns) - x).max(0.05);
        let _ = write!(
            out,
            r#"<g class="fault-name"><title>{}</title><rect x="{}%" y="24" width="{}%" height="14"/><text x="{}%" y="35">{}</text></g>"#,
            escape(&fault_text(model, fault)),
            px(x),
            px(width),
            px(x),
            escape(&fault.kind)
        );
    }
}

fn fault_text(model: &Model, fault: &super::model::FaultSpan) -> String {
    format!(
        "{} on {}\nfrom {} to {} ({})\nhistory line {}",
        fault.kind,
        fault.target,
        at(fault.start_ns, model.t0),
        at(fault.end_ns, model.t0),
        span(fault.end_ns.saturating_sub(fault.start_ns)),
        fault.line
    )
}

/// Every fault, shaded over every band.
fn faults(out: &mut String, model: &Model, scale: &Scale, height: f64) {
    for fault in &model.faults {
        let x = scale.x(fault.start_ns);
        let width = scale.x(fault.end_ns) - x;
        let _ = write!(
            out,
            r#"<rect class="fault" data-kind="{}" data-line="{}" x="{}" y="0" width="{}" height="{}"><title>{}</title></rect>"#,
            escape(&fault.kind),
            fault.line,
            px(x),
            px(width),
            px(height),
            escape(&fault_text(model, fault))
        );
    }
}

/// History lines of the violations, each with the first violation that names it.
fn involved_lines(violations: &[Violation]) -> BTreeMap<usize, usize> {
    let mut lines = BTreeMap::new();
    for (i, v) in violations.iter().enumerate() {
        for line in &v.lines {
            lines.entry(*line).or_insert(i);
        }
    }
    lines
}

/// One lock's band: its header, and per lane the waits, the grants, the losses and refusals.
fn band(
    out: &mut String,
    lock: &LockView,
    y0: f64,
    scale: &Scale,
    t0: u64,
    involved: &BTreeMap<usize, usize>,
) {
    let lanes = lock.workers.len().max(1) as f64;
    let _ = write!(
        out,
        r#"<rect class="band" x="0" y="{}" width="{}" height="{}"/>"#,
        px(y0),
        px(scale.width),
        px(HEADER_H + LANE_H * lanes)
    );
    let lane = |worker: u32| {
        let i = lock.workers.iter().position(|w| *w == worker).unwrap_or(0);
        y0 + HEADER_H + LANE_H * i as f64
    };
    for wait in &lock.waits {
        let y = px(lane(wait.worker) + LANE_H / 2.0);
        let _ = write!(
            out,
            r#"<line class="wait" data-outcome="{}" x1="{}" x2="{}" y1="{y}" y2="{y}"><title>worker {} waited {} ({}), line {}</title></line>"#,
            escape(&wait.outcome),
            px(scale.x(wait.start_ns)),
            px(scale.x(wait.end_ns)),
            wait.worker,
            span(wait.end_ns.saturating_sub(wait.start_ns)),
            escape(&wait.outcome),
            wait.line
        );
    }
    for bar in &lock.bars {
        let x = scale.x(bar.start_ns);
        let violation = [bar.line, bar.end_line]
            .iter()
            .find_map(|l| involved.get(l))
            .map(|i| format!(r#" data-violation="{i}""#))
            .unwrap_or_default();
        let lost = if bar.lost_ns.is_some() {
            r#" data-lost="1""#
        } else {
            ""
        };
        let _ = write!(
            out,
            r#"<rect class="grant" data-worker="{}" data-fence="{}" data-line="{}" data-end="{}"{violation}{lost} x="{}" y="{}" width="{}" height="{}"><title>{}: worker {}, fence {}&#10;granted at {}, held {} ({})&#10;history lines {}–{}</title></rect>"#,
            bar.worker,
            bar.fence,
            bar.line,
            bar.end.name(),
            px(x),
            px(lane(bar.worker) + (LANE_H - BAR_H) / 2.0),
            px(scale.x(bar.end_ns) - x),
            px(BAR_H),
            escape(&lock.name),
            bar.worker,
            bar.fence,
            at(bar.start_ns, t0),
            span(bar.end_ns.saturating_sub(bar.start_ns)),
            bar.end.name(),
            bar.line,
            bar.end_line
        );
    }
    for (class, list) in [("loss", &lock.losses), ("refused", &lock.refused)] {
        for mark in list {
            let x = px(scale.x(mark.at_ns));
            let y = lane(mark.worker);
            let _ = write!(
                out,
                r#"<line class="{class}" data-line="{}" x1="{x}" x2="{x}" y1="{}" y2="{}"><title>worker {}: {} at {}, line {}</title></line>"#,
                mark.line,
                px(y),
                px(y + LANE_H),
                mark.worker,
                escape(&mark.text),
                at(mark.at_ns, t0),
                mark.line
            );
        }
    }
}

/// Every violation: a frame over the span of its lines, on its lock's band (or on all).
fn marks(
    out: &mut String,
    model: &Model,
    layout: &Layout,
    scale: &Scale,
    violations: &[Violation],
) {
    for (mark, violation) in model.violations.iter().zip(violations) {
        let band = mark
            .lock
            .as_ref()
            .and_then(|l| model.locks.iter().position(|v| &v.name == l))
            .and_then(|i| {
                let top = layout.tops.get(i)?;
                let bottom = layout.tops.get(i + 1).copied().unwrap_or(layout.height);
                Some((*top, bottom - top))
            })
            .unwrap_or((0.0, layout.height));
        let x = scale.x(mark.start_ns);
        let _ = write!(
            out,
            r##"<a href="#violation-item-{i}"><rect class="violation" id="violation-{i}" x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect></a>"##,
            px(x),
            px(band.0 + 1.0),
            px(scale.x(mark.end_ns) - x),
            px(band.1 - 2.0),
            escape(violation.kind),
            escape(&violation.message),
            i = mark.index
        );
    }
}
