//! W6: the lock family (fencelock only), uncontended and contended, beside the plain lock.

use serde::{Deserialize, Serialize};

/// W6 — one lock kind, uncontended: one task, sequential cycles on one name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W6Uncontended {
    /// The kind of lock (and, for the reentrant lock, which measurement).
    pub kind: String,
    /// What one cycle is.
    pub cycle: String,
    /// Median over the repetitions of cycles per second.
    pub cycles_per_s: f64,
    /// Median over the repetitions of the per-cycle p50, in µs.
    pub p50_us: Option<f64>,
    /// Median over the repetitions of the per-cycle p99, in µs.
    pub p99_us: Option<f64>,
    /// How many repetitions.
    pub repetitions: usize,
    /// Cycles over all repetitions.
    pub cycles: u64,
    /// Socket reads of the server (`total_reads_processed`) per cycle: round trips per cycle.
    pub reads_per_cycle: Option<f64>,
    /// Redis commands (`total_commands_processed`, commands inside scripts included) per cycle.
    pub commands_per_cycle: Option<f64>,
    /// Server time in scripts (`usec` of `EVALSHA` and `EVAL` in `INFO commandstats`) per
    /// cycle, µs.
    pub script_us_per_cycle: Option<f64>,
    /// The Redis server's CPU time per cycle, µs.
    pub server_cpu_us_per_cycle: Option<f64>,
    /// This process's CPU time per cycle, µs.
    pub client_cpu_us_per_cycle: Option<f64>,
    /// Calls per cycle of each Redis command (commands run inside scripts included).
    #[serde(default)]
    pub command_mix_per_cycle: std::collections::BTreeMap<String, f64>,
    /// Cycles whose fences broke a promise (a fence not larger than the previous cycle's, a
    /// re-entry with another fence, a reader of a never-written lock with a fence other than 0)
    /// or whose release found the hold gone.
    pub failed_checks: u64,
    /// `cycles_per_s` / the plain lock's, in the same run.
    pub ratio_to_plain: Option<f64>,
    /// Why the row has no numbers.
    pub error: Option<String>,
}

/// W6 — one lock kind, contended: several workers on two clients, one name, a short hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W6Contended {
    /// The kind of lock (for read-write: the writer's row or the readers' row).
    pub kind: String,
    /// Who competes, in words.
    pub contenders: String,
    /// Workers this row counts.
    pub workers: usize,
    /// What the handoff of this row measures (from which release to which grant).
    pub handoff: String,
    /// Rounds measured.
    pub rounds: usize,
    /// Median over the rounds of the acquisitions per second (granted within the window).
    pub acquisitions_per_s: f64,
    /// Acquisitions granted within the windows, all rounds.
    pub acquisitions: u64,
    /// Handoffs measured, all rounds.
    pub handoffs: usize,
    /// Median over the rounds of the handoff p50, µs.
    pub handoff_p50_us: Option<f64>,
    /// Median over the rounds of the handoff p99, µs.
    pub handoff_p99_us: Option<f64>,
    /// Median over the rounds of the script calls (`EVALSHA` + `EVAL` in `INFO commandstats`)
    /// during the window per acquisition: every acquire attempt, refresh and release. For
    /// read-write, the round's scripts over the writer's and the readers' acquisitions together
    /// (the same number in both rows). `None` in reports written before it was measured.
    #[serde(default)]
    pub scripts_per_grant: Option<f64>,
    /// Median over the rounds of the mean time in the critical section, µs.
    pub mean_hold_us: Option<f64>,
    /// Fewest grants of one worker (all rounds).
    pub min_grants: u64,
    /// Most grants of one worker (all rounds).
    pub max_grants: u64,
    /// What must never happen: a grant while another holder of an exclusive kind (or the
    /// writer, or readers for the writer) was inside, more than N permits, a re-entry refused,
    /// a release that found its hold gone.
    pub violations: u64,
    /// Fences that broke a promise: an exclusive grant's fence not larger than every earlier
    /// one, a permit's not larger than those granted before its request began, a reader's not
    /// the last write's, a re-entry's not the outer hold's.
    pub fence_errors: u64,
    /// Grants that overtook a worker still waiting whose request began more than the order
    /// tolerance earlier (the fair lock promises 0). `None` where order is not defined.
    pub out_of_order: Option<u64>,
    /// Grants that overtook a waiting worker whose request began less than the tolerance
    /// earlier (ambiguous: either may have reached Redis first).
    pub near_ties: Option<u64>,
    /// `acquisitions_per_s` / the plain lock's, in the same run: the plain lock with the same
    /// contenders if there is one (the 16-worker rows), else the first plain row (4 workers).
    pub ratio_to_plain: Option<f64>,
    /// `handoff_p50_us` / the plain lock's (the same plain row as `ratio_to_plain`).
    pub handoff_ratio_to_plain: Option<f64>,
    /// Why the row has no numbers.
    pub error: Option<String>,
}

/// W6 — the lock family (fencelock only), side by side with the plain lock in one run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W6Report {
    /// One task, sequential cycles.
    pub uncontended: Vec<W6Uncontended>,
    /// Several workers on one name.
    pub contended: Vec<W6Contended>,
    /// Why W6 did not run.
    pub error: Option<String>,
}

impl W6Report {
    /// Whether there is anything to show.
    pub fn is_empty(&self) -> bool {
        self.uncontended.is_empty() && self.contended.is_empty() && self.error.is_none()
    }
}
