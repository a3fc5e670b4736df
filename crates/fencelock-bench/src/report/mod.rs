//! The benchmark's results: markdown tables with each row's ratio to the raw baseline, JSON,
//! the target checks and a small SVG chart of the ratios.
//!
//! One module per job: `model` (the data, as JSON stores it), `checks` (ratios and target
//! checks), `markdown` and `svg` (the renderings), `table` (the markdown tables).

mod checks;
mod markdown;
mod model;
#[cfg(test)]
mod pinned;
mod svg;
mod table;

pub use model::{
    LibraryRow, Machine, Report, TargetCheck, W1Measured, W1Row, W2Measured, W2Row, W3Measured,
    W3Row, W4Measured, W4Phase, W4Row, W5Measured, W5Row, W6Contended, W6Report, W6Uncontended,
    W7Row, W8Row,
};

use crate::error::{BenchError, Result};

impl Report {
    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| BenchError::Json {
            context: "serialising the report".into(),
            source: e,
        })
    }

    /// A report read back from [`Report::to_json`]'s output (the target checks are made again,
    /// with this version's definitions).
    pub fn from_json(text: &str) -> Result<Report> {
        let mut report: Report = serde_json::from_str(text).map_err(|e| BenchError::Json {
            context: "reading a report".into(),
            source: e,
        })?;
        report.targets = report.check_targets();
        Ok(report)
    }
}

/// A ratio as the markdown tables and the chart print it.
fn fmt_ratio(r: f64) -> String {
    if r >= 0.1 {
        format!("{r:.2}×")
    } else {
        format!("{r:.4}×")
    }
}
