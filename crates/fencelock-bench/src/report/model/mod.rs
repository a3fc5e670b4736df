//! The report's data: where the benchmark ran, one row type per workload, the target checks,
//! and the whole [`Report`] (what `--json` writes and `--from-json` reads).
//!
//! This file holds what every workload shares (the machine, a contender's row of W1–W5, the
//! target checks, the report); each workload group's measurements are in a file of their own:
//! `uncontended.rs` (W1, W2), `handoff.rs` (W3, W9), `redlock.rs` (W4), `renewal.rs` (W5),
//! `family.rs` (W6), `deployments.rs` (W7, W8).

mod deployments;
mod family;
mod handoff;
mod redlock;
mod renewal;
mod uncontended;

pub use deployments::{W7Row, W8Row};
pub use family::{W6Contended, W6Report, W6Uncontended};
pub use handoff::W3Measured;
pub use redlock::{W4Measured, W4Phase};
pub use renewal::W5Measured;
pub use uncontended::{W1Measured, W2Measured};

use serde::{Deserialize, Serialize};

use crate::locker::Library;

/// Where the benchmark ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// `std::thread::available_parallelism`.
    pub cores: usize,
    /// The CPU model from `/proc/cpuinfo`, if known.
    pub cpu_model: Option<String>,
    /// `redis_version` of the benchmark's own server.
    pub redis_version: String,
    /// The 1-minute load average before and after the run.
    pub load_before: Option<f64>,
    /// See `load_before`.
    pub load_after: Option<f64>,
    /// The sentence about client and server sharing the machine's cores.
    pub sharing: String,
    /// The operating system and architecture.
    pub os: String,
}

/// One contender's row of W1–W5: the part every such row has (the contender, the ratio of its
/// headline number to raw's, why it has no numbers) around what the workload measured, `M`
/// ([`W1Measured`] … [`W5Measured`]). JSON keeps the order of the fields: `library`, then the
/// measurements, then `ratio_to_raw` and `error`. The measurements read as the row's own fields
/// (`row.cycles_per_s`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LibraryRow<M> {
    /// The contender.
    pub library: String,
    /// What the workload measured.
    #[serde(flatten)]
    pub measured: M,
    /// The headline number / raw's: W1 and W2 `cycles_per_s`, W3 `acquisitions_per_s`, W4 the
    /// healthy `cycles_per_s`, W5 `client_cpu_us_per_renewal` (lower is better).
    pub ratio_to_raw: Option<f64>,
    /// Why the row has no numbers.
    pub error: Option<String>,
}

impl<M> LibraryRow<M> {
    /// A measured row (its ratio to raw is set when the report is finished).
    pub(crate) fn new(library: Library, measured: M) -> Self {
        LibraryRow {
            library: library.name().into(),
            measured,
            ratio_to_raw: None,
            error: None,
        }
    }

    /// A row without numbers: `measured` says only what the workload was (tasks, workers, …).
    pub(crate) fn failed(library: Library, measured: M, error: impl std::fmt::Display) -> Self {
        LibraryRow {
            error: Some(error.to_string()),
            ..LibraryRow::new(library, measured)
        }
    }
}

impl<M> std::ops::Deref for LibraryRow<M> {
    type Target = M;

    fn deref(&self) -> &M {
        &self.measured
    }
}

impl<M> std::ops::DerefMut for LibraryRow<M> {
    fn deref_mut(&mut self) -> &mut M {
        &mut self.measured
    }
}

/// W1 — uncontended latency.
pub type W1Row = LibraryRow<W1Measured>;
/// W2 — uncontended throughput.
pub type W2Row = LibraryRow<W2Measured>;
/// W3 — contended handoff.
pub type W3Row = LibraryRow<W3Measured>;
/// W4 — Redlock over several instances.
pub type W4Row = LibraryRow<W4Measured>;
/// W5 — keeping many locks alive.
pub type W5Row = LibraryRow<W5Measured>;

/// One target of the issue, checked against this run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetCheck {
    /// The target.
    pub target: String,
    /// What this run measured.
    pub measured: String,
    /// Met, missed, or not measurable in this run.
    pub met: Option<bool>,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// Whether this was a `--smoke` run.
    pub smoke: bool,
    /// The parameters, in words.
    pub parameters: Vec<String>,
    /// W1 rows.
    pub w1: Vec<W1Row>,
    /// W2 rows.
    pub w2: Vec<W2Row>,
    /// W3 rows.
    pub w3: Vec<W3Row>,
    /// W4 rows.
    pub w4: Vec<W4Row>,
    /// W5 rows.
    pub w5: Vec<W5Row>,
    /// W6: the lock family (absent from reports written before it existed).
    #[serde(default)]
    pub w6: W6Report,
    /// W7: deployments (absent from reports written before it existed).
    #[serde(default)]
    pub w7: Vec<W7Row>,
    /// W8: fenced writes (absent from reports written before it existed).
    #[serde(default)]
    pub w8: Vec<W8Row>,
    /// W9: W3 at each number of workers, what a grant costs the server (absent from reports
    /// written before it existed).
    #[serde(default)]
    pub w9: Vec<W3Row>,
    /// The targets.
    pub targets: Vec<TargetCheck>,
    /// Remarks (left-out contenders, how a workload ran).
    pub notes: Vec<String>,
}
