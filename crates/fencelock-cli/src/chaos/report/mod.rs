//! The HTML report of a chaos history (`fencelock chaos --report FILE`, `fencelock chaos-check
//! HISTORY --report FILE`): one self-contained page (inline CSS, a little inline JavaScript for
//! the zoom, SVG drawn here on the server; nothing loaded from the network) in the manner of
//! Jepsen's `timeline.html` and latency plots.
//!
//! - [`model`]: the history as drawn (bars, waits, losses, refusals, faults, violations);
//! - [`timeline`]: the timeline per lock;
//! - [`latency`]: the latency plot;
//! - [`html`]: escaping, numbers, the time scale.
//!
//! Elements a test (or a reader's script) can count: `class="grant"` per grant,
//! `class="fault"` per fault, `class="violation"` per violation (`id="violation-N"`, listed as
//! `id="violation-item-N"`), `class="loss"` per loss told, `class="refused"` per refused write,
//! `class="wait"` per request, `class="latency-point"` per request in the plot.

mod html;
mod latency;
mod model;
mod timeline;

use std::fmt::Write as _;
use std::path::Path;

use super::check::{Verdict, render};
use super::history::{Entry, What};
use crate::error::CliError;
use html::escape;

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// Writes the report of `entries` (checked as `verdict`) to `path`.
pub fn write(path: &Path, entries: &[Entry], verdict: &Verdict) -> Result<(), CliError> {
    std::fs::write(path, page(entries, verdict))
        .map_err(|e| CliError::io(format!("cannot write {}", path.display()), e))
}

/// The report's page.
pub fn page(entries: &[Entry], verdict: &Verdict) -> String {
    let model = model::build(entries, &verdict.violations);
    let mut out = String::new();
    let title = format!("fencelock chaos: {}", settings(entries));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>",
        escape(&title)
    );
    let count = verdict.violations.len();
    let (class, said) = match count {
        0 => ("ok", "no violation".to_owned()),
        1 => ("bad", "1 violation".to_owned()),
        n => ("bad", format!("{n} violations")),
    };
    let _ = write!(
        out,
        r#"<header><h1>fencelock chaos <span class="verdict {class}" id="verdict">{said}</span></h1><p class="settings">{}</p></header>"#,
        escape(&settings(entries))
    );
    let grants: usize = model.locks.iter().map(|l| l.bars.len()).sum();
    let _ = write!(
        out,
        r#"<section><h2>Timeline</h2><p class="legend"><span class="key grant"></span>grant (to the start of its release) <span class="key wait"></span>waiting <span class="key loss"></span>lost() told <span class="key refused"></span>write refused by the store <span class="key fault"></span>fault <span class="key violation"></span>violation <span class="zoom">zoom <button type="button" data-zoom="0.5">−</button><button type="button" data-zoom="2">+</button><button type="button" data-zoom="0">whole run</button></span></p><p class="counts">{grants} grants, {} faults, {count} violations; hover over anything for its history lines.</p>"#,
        model.faults.len()
    );
    out.push_str(&timeline::timeline(&model, &verdict.violations));
    out.push_str("</section>");
    let _ = write!(
        out,
        r#"<section><h2>Latency of each request</h2><p class="legend">from the request to its answer, against the answer's time; filled: granted, hollow: not granted; lines: median and 99th percentile of the grants; shaded: faults{}</p>{}</section>"#,
        lock_keys(&model),
        latency::plot(&model)
    );
    violations(&mut out, entries, verdict);
    let _ = write!(
        out,
        r#"<section><h2>Checker</h2><pre class="summary">{}</pre></section><script>{JS}</script></body></html>"#,
        escape(&render(verdict))
    );
    out.push('\n');
    out
}

/// Each lock's colour in the latency plot.
fn lock_keys(model: &model::Model) -> String {
    let mut out = String::new();
    for (i, lock) in model.locks.iter().enumerate() {
        let _ = write!(
            out,
            r#" <span class="key dot" style="background:{}"></span>{}"#,
            latency::colour(i),
            escape(&lock.name)
        );
    }
    out
}

/// The run's settings, from the history's first line.
fn settings(entries: &[Entry]) -> String {
    entries
        .iter()
        .find_map(|e| match &e.what {
            What::Run {
                topology,
                kind,
                workers,
                locks,
                ttl_ms,
                seed,
                faults,
                mutations,
                ..
            } => {
                let mutated = if mutations.is_empty() {
                    String::new()
                } else {
                    format!(", mutated: {}", mutations.join(", "))
                };
                Some(format!(
                    "{topology}, {kind}, {workers} workers on {}, lease {ttl_ms} ms, seed {seed}, faults: {}{mutated}",
                    locks.join(", "),
                    if faults.is_empty() {
                        "none".to_owned()
                    } else {
                        faults.join(", ")
                    }
                ))
            }
            _ => None,
        })
        .unwrap_or_else(|| "a history without its settings line".to_owned())
}

/// Every violation, with the history lines that show it.
fn violations(out: &mut String, entries: &[Entry], verdict: &Verdict) {
    let _ = write!(out, r#"<section><h2>Violations</h2>"#);
    if verdict.violations.is_empty() {
        out.push_str(r#"<p class="none">The checker found none.</p></section>"#);
        return;
    }
    out.push_str(r#"<ol class="violations">"#);
    for (i, v) in verdict.violations.iter().enumerate() {
        let _ = write!(
            out,
            r##"<li class="violation-item" id="violation-item-{i}"><a class="show" href="#violation-{i}" data-violation="{i}">show</a> <b>{}</b>: {}<pre>"##,
            escape(v.kind),
            escape(&v.message)
        );
        for line in &v.lines {
            let text = line
                .checked_sub(1)
                .and_then(|i| entries.get(i))
                .map_or_else(|| "(not in the history)".to_owned(), Entry::to_line);
            let _ = writeln!(out, "{line:>7}  {}", escape(&text));
        }
        out.push_str("</pre></li>");
    }
    out.push_str("</ol></section>");
}

#[cfg(test)]
mod tests;
