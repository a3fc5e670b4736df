//! What to run: the workloads, and the options of each (durations, sizes, contenders).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::family;
use crate::locker::{self, Library};
use crate::redlock_w4::FencelockRedlockFactory;

/// A workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Workload {
    /// Uncontended latency: 1 client, sequential acquire + release, a new key each cycle.
    W1,
    /// Uncontended throughput: many tasks on one client, each its own key.
    W2,
    /// Contended handoff: several workers on one key.
    W3,
    /// Redlock over several instances, then with one instance stopped.
    W4,
    /// Keeping many locks alive with automatic renewal.
    W5,
    /// The lock family (fencelock only): every kind uncontended and contended, next to the
    /// plain lock.
    W6,
    /// Deployments: TLS, a replica with `WAIT`, a Redis Cluster; fencelock next to raw.
    W7,
    /// Fenced writes: a plain `SET`, a raw fenced script, fencelock's fenced store.
    W8,
    /// W3 at several numbers of workers: what a contended grant costs the server.
    W9,
}

impl Workload {
    /// All workloads.
    pub const ALL: [Workload; 9] = [
        Workload::W1,
        Workload::W2,
        Workload::W3,
        Workload::W4,
        Workload::W5,
        Workload::W6,
        Workload::W7,
        Workload::W8,
        Workload::W9,
    ];
}

impl std::str::FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "w1" | "1" => Ok(Workload::W1),
            "w2" | "2" => Ok(Workload::W2),
            "w3" | "3" => Ok(Workload::W3),
            "w4" | "4" => Ok(Workload::W4),
            "w5" | "5" => Ok(Workload::W5),
            "w6" | "6" => Ok(Workload::W6),
            "w7" | "7" => Ok(Workload::W7),
            "w8" | "8" => Ok(Workload::W8),
            "w9" | "9" => Ok(Workload::W9),
            other => Err(format!("unknown workload {other:?} (expected w1 … w9)")),
        }
    }
}

/// What to run, and for how long.
#[derive(Clone)]
pub struct BenchOptions {
    /// The contenders, in report order. `raw` is the baseline of every ratio.
    pub libraries: Vec<Library>,
    /// The workloads to run.
    pub workloads: Vec<Workload>,
    /// Marks the report as a smoke run (numbers not meaningful).
    pub smoke: bool,
    /// The lease for W1–W4 (identical for every contender).
    pub ttl: Duration,
    /// Upper bound of cycles in any one measured loop (a safety net; durations end runs first).
    pub max_cycles: u64,
    /// W1: repetitions (the report shows medians) and the length of each.
    pub w1_repetitions: usize,
    /// See `w1_repetitions`.
    pub w1_duration: Duration,
    /// W2: concurrent tasks, and how long.
    pub w2_tasks: usize,
    /// See `w2_tasks`.
    pub w2_duration: Duration,
    /// W3: workers, their time in the critical section, and how long.
    pub w3_workers: usize,
    /// See `w3_workers`.
    pub w3_hold: Duration,
    /// See `w3_workers`.
    pub w3_duration: Duration,
    /// W9: W3 (its hold and its duration) at each of these numbers of workers.
    pub w9_workers: Vec<usize>,
    /// W4: instances, the length of each phase (healthy, one stopped), the raw baseline's
    /// per-instance timeout, and the limit after which a cycle counts as hung.
    pub w4_instances: usize,
    /// See `w4_instances`.
    pub w4_phase: Duration,
    /// See `w4_instances`.
    pub w4_instance_timeout: Duration,
    /// See `w4_instances`.
    pub w4_cycle_limit: Duration,
    /// W5: locks held, for how long, with which lease.
    pub w5_locks: usize,
    /// See `w5_locks`.
    pub w5_hold: Duration,
    /// See `w5_locks`.
    pub w5_ttl: Duration,
    /// Run each contender's W5 in a fresh child process: this executable, invoked with
    /// `--w5-child LIB --w5-locks N --w5-seconds S --w5-ttl-ms T`, printing the row as one
    /// line of JSON (see [`run_w5_child`](crate::run_w5_child)). Memory freed by an earlier measurement stays in
    /// the allocator and would make a later contender's bytes-per-lock look smaller; a fresh
    /// process avoids that. `None`: in this process (bytes per lock then only an indication).
    pub w5_child: Option<std::path::PathBuf>,
    /// W6 uncontended: repetitions of every kind (interleaved; the report shows medians), and
    /// the length of each.
    pub w6_repetitions: usize,
    /// See `w6_repetitions`.
    pub w6_duration: Duration,
    /// W6 contended: rounds of every kind (interleaved; medians), the length of each, and the
    /// time each holder stays in the critical section.
    pub w6_rounds: usize,
    /// See `w6_rounds`.
    pub w6_round: Duration,
    /// See `w6_rounds`.
    pub w6_hold: Duration,
    /// W7: repetitions (medians are shown), the length of each measurement, and the tasks of
    /// the concurrent one.
    pub w7_repetitions: usize,
    /// See `w7_repetitions`.
    pub w7_duration: Duration,
    /// See `w7_repetitions`.
    pub w7_tasks: usize,
    /// How W4 builds fencelock's client over several instances (default:
    /// `fencelock::Client::redlock` with default options).
    pub fencelock_redlock: FencelockRedlockFactory,
}

impl std::fmt::Debug for BenchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchOptions")
            .field("libraries", &self.libraries)
            .field("workloads", &self.workloads)
            .field("smoke", &self.smoke)
            .field("ttl", &self.ttl)
            .field("w1", &(self.w1_repetitions, self.w1_duration))
            .field("w2", &(self.w2_tasks, self.w2_duration))
            .field("w3", &(self.w3_workers, self.w3_hold, self.w3_duration))
            .field("w4", &(self.w4_instances, self.w4_phase))
            .field("w5", &(self.w5_locks, self.w5_hold, self.w5_ttl))
            .field(
                "w6",
                &(
                    self.w6_repetitions,
                    self.w6_duration,
                    self.w6_rounds,
                    self.w6_round,
                    self.w6_hold,
                ),
            )
            .finish_non_exhaustive()
    }
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self::full()
    }
}

/// How W4 builds fencelock's Redlock client: `Client::redlock` with default options.
/// The full and smoke options pick it up from here.
fn fencelock_redlock_factory() -> FencelockRedlockFactory {
    std::sync::Arc::new(|urls: &[String]| fencelock::Client::redlock(urls).build())
}

impl BenchOptions {
    /// The full run (several minutes; docs/BENCHMARKS.md tells how long it took there).
    pub fn full() -> Self {
        BenchOptions {
            libraries: Library::all(),
            workloads: Workload::ALL.to_vec(),
            smoke: false,
            ttl: Duration::from_secs(10),
            max_cycles: 10_000_000,
            w1_repetitions: 5,
            w1_duration: Duration::from_secs(2),
            w2_tasks: 32,
            w2_duration: Duration::from_secs(5),
            w3_workers: 8,
            w3_hold: Duration::from_millis(1),
            w3_duration: Duration::from_secs(5),
            w9_workers: vec![8, 64, 256],
            w4_instances: 5,
            w4_phase: Duration::from_secs(3),
            w4_instance_timeout: Duration::from_millis(50),
            w4_cycle_limit: Duration::from_secs(5),
            w5_locks: 10_000,
            w5_hold: Duration::from_secs(30),
            w5_ttl: Duration::from_secs(3),
            w5_child: None,
            w6_repetitions: 5,
            w6_duration: Duration::from_secs(1),
            w6_rounds: 3,
            w6_round: Duration::from_secs(2),
            w6_hold: Duration::from_millis(1),
            w7_repetitions: 3,
            w7_duration: Duration::from_secs(1),
            w7_tasks: 32,
            fencelock_redlock: fencelock_redlock_factory(),
        }
    }

    /// The smoke run: every workload for about half a second (W5: 500 locks for 2 s; W6: each
    /// kind 2 × 150 ms uncontended and 300 ms contended), to check that everything works. Its
    /// numbers are not meaningful.
    pub fn smoke() -> Self {
        BenchOptions {
            smoke: true,
            w1_repetitions: 2,
            w1_duration: Duration::from_millis(250),
            w2_duration: Duration::from_millis(500),
            w3_duration: Duration::from_millis(500),
            w9_workers: vec![4],
            w4_phase: Duration::from_millis(250),
            w4_cycle_limit: Duration::from_secs(1),
            w5_locks: 500,
            w5_hold: Duration::from_secs(2),
            w6_repetitions: 2,
            w6_duration: Duration::from_millis(150),
            w6_rounds: 1,
            w6_round: Duration::from_millis(300),
            w7_repetitions: 1,
            w7_duration: Duration::from_millis(200),
            ..Self::full()
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(BenchError::Bench(format!("invalid options: {what}")));
        if self.libraries.is_empty() {
            return bad("no library selected");
        }
        if let Some(l) = self.libraries.iter().find(|l| !l.available()) {
            return bad(&format!(
                "{l} is not built in (build with the `peers` feature)"
            ));
        }
        if self.w2_tasks == 0
            || self.w3_workers == 0
            || self.w9_workers.contains(&0)
            || self.w4_instances == 0
            || self.w7_tasks == 0
        {
            return bad("tasks, workers and instances must be at least 1");
        }
        if self.w5_ttl < Duration::from_millis(100) || self.ttl < Duration::from_millis(100) {
            return bad("leases must be at least 100 ms");
        }
        let longest = [
            self.w1_duration * u32::try_from(self.w1_repetitions).unwrap_or(u32::MAX),
            self.w2_duration,
            self.w3_duration,
            self.w4_phase,
            self.w5_hold,
            self.w6_duration * u32::try_from(self.w6_repetitions).unwrap_or(u32::MAX),
            self.w6_round * u32::try_from(self.w6_rounds).unwrap_or(u32::MAX),
            self.w7_duration * u32::try_from(self.w7_repetitions).unwrap_or(u32::MAX),
        ]
        .into_iter()
        .max()
        .unwrap_or_default();
        if longest > Duration::from_secs(3600) {
            return bad("a workload longer than an hour");
        }
        Ok(())
    }

    /// The parameters of the selected workloads, in words.
    pub(crate) fn parameters(&self) -> Vec<String> {
        let lines = [
            (
                None,
                format!(
                    "lease (TTL) {:?} for W1–W4 and W6, {:?} for W5; identical for every library",
                    self.ttl, self.w5_ttl
                ),
            ),
            (
                Some(Workload::W1),
                format!(
                    "W1: {} repetitions × {:?}; medians of the repetitions",
                    self.w1_repetitions, self.w1_duration
                ),
            ),
            (
                Some(Workload::W2),
                format!("W2: {} tasks × {:?}", self.w2_tasks, self.w2_duration),
            ),
            (
                Some(Workload::W3),
                format!(
                    "W3: {} workers (one client each) × {:?}, holding the lock {:?} each time (a thread sleep on the blocking pool)",
                    self.w3_workers, self.w3_duration, self.w3_hold
                ),
            ),
            (
                Some(Workload::W9),
                format!("W9: W3 with {:?} workers", self.w9_workers),
            ),
            (
                Some(Workload::W4),
                format!(
                    "W4: {} instances, {:?} healthy then {:?} with one SIGSTOPped; raw per-instance timeout {:?}; a cycle longer than {:?} counts as hung",
                    self.w4_instances,
                    self.w4_phase,
                    self.w4_phase,
                    self.w4_instance_timeout,
                    self.w4_cycle_limit
                ),
            ),
            (
                Some(Workload::W5),
                format!("W5: {} locks held for {:?}", self.w5_locks, self.w5_hold),
            ),
            (
                Some(Workload::W6),
                format!(
                    "W6 (fencelock only, one server): uncontended {} repetitions × {:?} per kind, interleaved across kinds, medians; contended {} rounds × {:?} per kind, interleaved, medians; holds of {:?}; {} workers on {} clients (plain and fair also {}; semaphore: {} workers, N={}; read-write: 1 writer + {} readers); scripts per grant = EVALSHA + EVAL calls in the window / acquisitions; out of order = overtook a waiter that asked more than {:?} earlier",
                    self.w6_repetitions,
                    self.w6_duration,
                    self.w6_rounds,
                    self.w6_round,
                    self.w6_hold,
                    family::WORKERS,
                    family::CLIENTS,
                    family::MANY_WORKERS,
                    family::PERMIT_WORKERS,
                    family::CROWD_PERMITS,
                    family::READERS,
                    family::ORDER_TOLERANCE
                ),
            ),
            (
                Some(Workload::W3),
                format!(
                    "waiting (W3): fencelock release notifications; raw polls SET NX every {:?}; rslock/redlock their own retry loops (3 tries, random 0–200 ms apart, repeated until the window ends)",
                    locker::RAW_POLL
                ),
            ),
            (
                Some(Workload::W8),
                format!(
                    "W8: {} repetitions × {:?} per measurement (the W7 settings), the writers alternating on one server of their own; 1 task, then {} tasks on one client, each its own resource; medians",
                    self.w7_repetitions, self.w7_duration, self.w7_tasks
                ),
            ),
            (
                Some(Workload::W7),
                format!(
                    "W7: {} repetitions × {:?} per measurement, fencelock and raw alternating on the same servers; 1 task, then {} tasks on one client; medians; TLS with rustls and a test CA; WAIT for 1 replica (at most 200 ms) after each grant, for both; Redis Cluster of 3 masters on this machine",
                    self.w7_repetitions, self.w7_duration, self.w7_tasks
                ),
            ),
        ];
        lines
            .into_iter()
            .filter(|(w, _)| w.is_none_or(|w| self.workloads.contains(&w)))
            .map(|(_, line)| line)
            .collect()
    }
}
