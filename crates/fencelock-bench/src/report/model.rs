//! The report's data: where the benchmark ran, one row type per workload, the target checks,
//! and the whole [`Report`] (what `--json` writes and `--from-json` reads).

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

/// What W1 (uncontended latency) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W1Measured {
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
    /// Redis commands (`total_commands_processed`) per cycle.
    pub commands_per_cycle: Option<f64>,
    /// Socket reads of the server (`total_reads_processed`) per cycle: round trips per cycle.
    pub reads_per_cycle: Option<f64>,
    /// This process's CPU time per cycle, µs.
    pub client_cpu_us_per_cycle: Option<f64>,
    /// The Redis server's CPU time per cycle, µs.
    pub server_cpu_us_per_cycle: Option<f64>,
    /// Calls per cycle of each Redis command (commands run inside scripts included).
    #[serde(default)]
    pub command_mix_per_cycle: std::collections::BTreeMap<String, f64>,
    /// Server time (`usec` of `INFO commandstats`) per cycle, by command. A script's time
    /// includes the commands it runs.
    #[serde(default)]
    pub command_usec_per_cycle: std::collections::BTreeMap<String, f64>,
}

/// What W2 (uncontended throughput) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W2Measured {
    /// Concurrent tasks.
    pub tasks: usize,
    /// Cycles per second, all tasks together.
    pub cycles_per_s: f64,
    /// Cycles in total.
    pub cycles: u64,
    /// The slowest task's cycles.
    pub min_task_cycles: u64,
    /// The fastest task's cycles.
    pub max_task_cycles: u64,
    /// This process's CPU time per cycle, µs.
    pub client_cpu_us_per_cycle: Option<f64>,
    /// The Redis server's CPU time per cycle, µs.
    pub server_cpu_us_per_cycle: Option<f64>,
    /// Script runs (`EVALSHA` and `EVAL` calls) per cycle: 2 for a lock that runs a script per
    /// acquire and per release, less when calls are coalesced (2 / this is the mean number of
    /// calls per script run).
    #[serde(default)]
    pub script_runs_per_cycle: Option<f64>,
    /// The server's socket reads per cycle (`total_reads_processed`): an upper bound of the
    /// request batches it saw.
    #[serde(default)]
    pub reads_per_cycle: Option<f64>,
}

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

/// What W3 (contended handoff) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W3Measured {
    /// Workers on the one key.
    pub workers: usize,
    /// Acquisitions per second (granted within the measured window).
    pub acquisitions_per_s: f64,
    /// Acquisitions granted within the window.
    pub acquisitions: u64,
    /// Handoffs measured (a release while someone waited, then a grant to another worker).
    pub handoffs: usize,
    /// Handoff latency p50 (instant before the release call → the next grant), µs.
    pub handoff_p50_us: Option<f64>,
    /// Handoff latency p99, µs.
    pub handoff_p99_us: Option<f64>,
    /// The share of the time someone waited in which nobody was in the critical section (the
    /// lock free, being released or handed over), %.
    #[serde(default)]
    pub free_while_waiting_percent: Option<f64>,
    /// A granted acquire call, from the call to the grant: p50, µs.
    #[serde(default)]
    pub wait_p50_us: Option<f64>,
    /// The same, p99, µs.
    #[serde(default)]
    pub wait_p99_us: Option<f64>,
    /// Grants that went back to the worker that had just released while others waited.
    #[serde(default)]
    pub self_reacquisitions: u64,
    /// The measured time in the critical section, µs.
    pub mean_hold_us: Option<f64>,
    /// Fewest grants of one worker.
    pub min_grants: u64,
    /// Most grants of one worker.
    pub max_grants: u64,
    /// Acquisitions that found another holder inside the critical section.
    pub violations: u64,
    /// Updates lost by the read-then-write counter.
    pub lost_updates: u64,
    /// The server's CPU (user + system) per grant, µs: the whole run, from the first worker's
    /// first try to the last release, over every grant in it.
    #[serde(default)]
    pub server_us_per_grant: Option<f64>,
    /// The server's CPU per handoff (a grant to another worker while someone waited), µs,
    /// counted as the CPU per grant is: what a lock costs per grant that moves the work on,
    /// where a grant taken back by the worker that just released costs little and waits for
    /// nothing.
    #[serde(default)]
    pub server_us_per_handoff: Option<f64>,
    /// Server commands per grant (`total_commands_processed`, commands run inside scripts
    /// included), counted as the CPU is.
    #[serde(default)]
    pub commands_per_grant: Option<f64>,
    /// The server's client connections in the middle of the window (`connected_clients`, the
    /// benchmark's own one included).
    #[serde(default)]
    pub connections: Option<u64>,
    /// The handoff's floor on the same server, p50, µs: from just before a client sends a bare
    /// `PUBLISH` to the moment another client, subscribed, has the message (W3 only).
    #[serde(default)]
    pub handoff_floor_p50_us: Option<f64>,
}

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

/// What W5 (keeping many locks alive) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W5Measured {
    /// Locks held.
    pub locks: usize,
    /// The measured window, seconds.
    pub seconds: f64,
    /// Scripts (`EVALSHA` + `EVAL`) per second: the renewal script runs (fencelock renews a
    /// batch of locks in one run).
    pub renewal_commands_per_s: f64,
    /// Renewals per second: `PEXPIRE` and `SET` calls, from scripts too (fencelock and raw renew
    /// a lock with a `PEXPIRE`, rslock with a `SET PX`; nothing else in the window makes
    /// either).
    #[serde(default)]
    pub renewals_per_s: f64,
    /// All commands per second (`total_commands_processed`).
    pub total_commands_per_s: f64,
    /// Server socket reads per second (`total_reads_processed`): an upper bound of round trips.
    pub reads_per_s: f64,
    /// This process's CPU (user + system) over the window, in % of one core.
    pub client_cpu_percent: f64,
    /// This process's CPU per renewal, µs: what the goal compares (a window holds a whole number
    /// of renewal rounds, a few more or fewer of them than its length suggests; per renewal,
    /// that does not matter). 0 when nothing was renewed.
    #[serde(default)]
    pub client_cpu_us_per_renewal: f64,
    /// Resident memory added by taking the locks, per lock.
    pub bytes_per_lock: f64,
    /// Locks the contender still considered held at the end of the window.
    pub still_held: usize,
    /// Lock keys that still existed in Redis at the end of the window.
    #[serde(default)]
    pub held_in_redis: usize,
    /// `NOSCRIPT` replies to `EVALSHA` while the locks were taken and first renewed.
    #[serde(default)]
    pub noscript_replies: u64,
}

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
