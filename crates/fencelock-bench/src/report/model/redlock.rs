//! W4 (Redlock over several instances): its phases, healthy and with one instance stopped.

use serde::{Deserialize, Serialize};

/// One phase of W4.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W4Phase {
    /// Successful cycles per second.
    pub cycles_per_s: f64,
    /// Successful cycles.
    pub cycles: u64,
    /// Cycles that ended in an error or without the lock.
    pub failures: u64,
    /// Per-cycle p50, µs.
    pub p50_us: Option<f64>,
    /// Per-cycle p99, µs.
    pub p99_us: Option<f64>,
    /// Whether a cycle hung past the per-cycle limit (the phase then ended).
    pub stalled: bool,
    /// The last error seen.
    pub last_error: Option<String>,
}

/// What W4 (Redlock over several instances) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W4Measured {
    /// Instances.
    pub instances: usize,
    /// All instances running.
    pub healthy: W4Phase,
    /// One instance stopped with `SIGSTOP`.
    pub one_stopped: W4Phase,
}
