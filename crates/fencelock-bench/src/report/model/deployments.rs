//! W7 (deployments: TLS, a replica with `WAIT`, a cluster) and W8 (fenced writes): one row per
//! deployment and contender, and per writer.

use serde::{Deserialize, Serialize};

/// W7 — one deployment (a TLS server, a replica with `WAIT`, a cluster), one contender.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W7Row {
    /// The deployment.
    pub deployment: String,
    /// The contender (`fencelock` or `raw`).
    pub library: String,
    /// Tasks of the concurrent measurement.
    pub tasks: usize,
    /// Cycles per second, 1 task (median of the repetitions).
    pub sequential_per_s: Option<f64>,
    /// Cycles per second, `tasks` tasks on one client (median of the repetitions).
    pub concurrent_per_s: Option<f64>,
    /// fencelock: from the start of a release to the grant of the waiter it wakes, median, µs
    /// (raw has no notification: it polls).
    #[serde(default)]
    pub wake_p50_us: Option<f64>,
    /// Why the row has no numbers (or lacks some).
    pub error: Option<String>,
}

impl W7Row {
    pub(crate) fn failed(deployment: &str, library: &str, error: String) -> Self {
        W7Row {
            deployment: deployment.into(),
            library: library.into(),
            tasks: 0,
            sequential_per_s: None,
            concurrent_per_s: None,
            wake_p50_us: None,
            error: Some(error),
        }
    }
}

/// W8 — one way of writing to a resource (plain, raw fenced, fencelock's fenced store).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W8Row {
    /// The writer.
    pub writer: String,
    /// Tasks of the concurrent measurement.
    pub tasks: usize,
    /// Writes per second, 1 task (median of the repetitions).
    pub sequential_per_s: Option<f64>,
    /// Writes per second, `tasks` tasks on one client (median of the repetitions).
    pub concurrent_per_s: Option<f64>,
    /// `sequential_per_s` / the plain `SET`'s.
    pub sequential_ratio_to_set: Option<f64>,
    /// `concurrent_per_s` / the plain `SET`'s.
    pub concurrent_ratio_to_set: Option<f64>,
    /// Why the row has no numbers (or lacks some).
    pub error: Option<String>,
}

impl W8Row {
    pub(crate) fn failed(error: String) -> Self {
        W8Row {
            writer: "all".into(),
            tasks: 0,
            sequential_per_s: None,
            concurrent_per_s: None,
            sequential_ratio_to_set: None,
            concurrent_ratio_to_set: None,
            error: Some(error),
        }
    }
}
