//! # fencelock-bench — how fencelock compares with the physical limit and with its peers
//!
//! Runs eight workloads against redis-server instances it starts itself (on free ports, through
//! `fencelock-testkit`), for each contender:
//!
//! - **fencelock** — this project's library with its default options (only the lease is set);
//! - **raw** — no library: `SET k tok NX PX` plus a compare-and-delete script by `EVALSHA` over
//!   one multiplexed connection, the physical limit of two round trips per cycle;
//! - **raw-fenced** — no library, but fenced: `SET NX PX` and an `INCR` of a fence key in one
//!   script, the least any fenced Redis lock can do (W1–W3);
//! - **rslock** and **redlock** — the peer crates (feature `peers`, on by default);
//! - **node-redlock** — the `redlock` npm package, run by `node` in a child process (W4 only,
//!   when `node` and its packages are there).
//!
//! Workloads: W1 uncontended latency, W2 uncontended throughput, W3 contended handoff, W4 Redlock
//! over five instances (healthy, then one stopped), W5 keeping many locks alive, W6 the lock
//! family (fencelock only: its reentrant, read-write, semaphore and fair locks next to its plain
//! lock, uncontended and contended, with invariant counters), W7 deployments (TLS, a replica with
//! `WAIT`, Redis Cluster; fencelock and raw) and W8 fenced writes (a plain `SET`, a raw fenced
//! script, fencelock's fenced store). See `docs/BENCHMARKS.md` for what each measures and how to
//! read the numbers.
//!
//! ```no_run
//! # async fn example() -> Result<(), fencelock_bench::BenchError> {
//! let report = fencelock_bench::run(fencelock_bench::BenchOptions::smoke()).await?;
//! println!("{}", report.to_markdown());
//! std::fs::write("bench.json", report.to_json()?).ok();
//! # Ok(()) }
//! ```
//!
//! `run` needs a multi-threaded Tokio runtime (redlock runs on the blocking pool).

mod deployments;
mod error;
mod family;
mod fenced_writes;
mod locker;
mod node_redlock;
mod redlock_w4;
mod report;
mod stats;
mod system;
mod workloads;

use std::time::Duration;

pub use error::{BenchError, Result};
pub use locker::Library;
pub use redlock_w4::FencelockRedlockFactory;
pub use report::{
    Machine, Report, TargetCheck, W1Row, W2Row, W3Row, W4Phase, W4Row, W5Row, W6Contended,
    W6Report, W6Uncontended, W7Row, W8Row,
};

use serde::{Deserialize, Serialize};

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
}

impl Workload {
    /// All workloads.
    pub const ALL: [Workload; 8] = [
        Workload::W1,
        Workload::W2,
        Workload::W3,
        Workload::W4,
        Workload::W5,
        Workload::W6,
        Workload::W7,
        Workload::W8,
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
            other => Err(format!("unknown workload {other:?} (expected w1 … w8)")),
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
    /// line of JSON (see [`run_w5_child`]). Memory freed by an earlier measurement stays in
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

    fn validate(&self) -> Result<()> {
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
    fn parameters(&self) -> Vec<String> {
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

/// Runs the selected workloads for the selected contenders and returns the report.
///
/// A contender that fails in one workload gets an error in that row; the run goes on. Errors
/// are returned only when the benchmark itself cannot run (no `redis-server`, bad options).
pub async fn run(opts: BenchOptions) -> Result<Report> {
    opts.validate()?;
    let load_before = system::load_average();
    let mut probe = workloads::Bed::start().await?;
    let redis_version = system::redis_version(&mut probe.admin).await?;
    drop(probe);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut report = Report {
        machine: Machine {
            cores,
            cpu_model: system::cpu_model(),
            redis_version,
            load_before,
            load_after: None,
            sharing: format!(
                "client and server share {cores} core{} (redis-server runs on the same machine, over 127.0.0.1)",
                if cores == 1 { "" } else { "s" }
            ),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        },
        smoke: opts.smoke,
        parameters: opts.parameters(),
        w1: Vec::new(),
        w2: Vec::new(),
        w3: Vec::new(),
        w4: Vec::new(),
        w5: Vec::new(),
        w6: W6Report::default(),
        w7: Vec::new(),
        w8: Vec::new(),
        targets: Vec::new(),
        notes: Vec::new(),
    };
    if !cfg!(feature = "peers") {
        report
            .notes
            .push("rslock and redlock are not built in (feature `peers` off)".into());
    }
    let has = |w: Workload| opts.workloads.contains(&w);
    let cycles = opts.max_cycles;
    // node-redlock runs in W4 only.
    let single_server: Vec<Library> = opts
        .libraries
        .iter()
        .copied()
        .filter(|lib| lib.single_server())
        .collect();
    if has(Workload::W1) {
        let rows = workloads::w1(
            &single_server,
            opts.ttl,
            opts.w1_repetitions,
            opts.w1_duration,
            cycles,
        )
        .await;
        for (lib, row) in rows {
            report.w1.push(row.unwrap_or_else(|e| W1Row {
                library: lib.name().into(),
                cycles_per_s: 0.0,
                p50_us: None,
                p99_us: None,
                repetitions: 0,
                cycles: 0,
                commands_per_cycle: None,
                reads_per_cycle: None,
                client_cpu_us_per_cycle: None,
                server_cpu_us_per_cycle: None,
                command_mix_per_cycle: Default::default(),
                command_usec_per_cycle: Default::default(),
                ratio_to_raw: None,
                error: Some(e.to_string()),
            }));
        }
    }
    if has(Workload::W2) {
        let rows = workloads::w2(
            &single_server,
            opts.ttl,
            opts.w2_tasks,
            opts.w2_duration,
            cycles,
        )
        .await;
        for (lib, row) in rows {
            report.w2.push(row.unwrap_or_else(|e| W2Row {
                library: lib.name().into(),
                tasks: opts.w2_tasks,
                cycles_per_s: 0.0,
                cycles: 0,
                min_task_cycles: 0,
                max_task_cycles: 0,
                client_cpu_us_per_cycle: None,
                server_cpu_us_per_cycle: None,
                script_runs_per_cycle: None,
                reads_per_cycle: None,
                ratio_to_raw: None,
                error: Some(e.to_string()),
            }));
        }
    }
    for &lib in &single_server {
        if has(Workload::W3) {
            let row = workloads::w3(
                lib,
                opts.ttl,
                opts.w3_workers,
                opts.w3_hold,
                opts.w3_duration,
                cycles,
            )
            .await
            .unwrap_or_else(|e| W3Row {
                library: lib.name().into(),
                workers: opts.w3_workers,
                acquisitions_per_s: 0.0,
                acquisitions: 0,
                handoffs: 0,
                handoff_p50_us: None,
                handoff_p99_us: None,
                free_while_waiting_percent: None,
                wait_p50_us: None,
                wait_p99_us: None,
                self_reacquisitions: 0,
                mean_hold_us: None,
                min_grants: 0,
                max_grants: 0,
                violations: 0,
                lost_updates: 0,
                ratio_to_raw: None,
                error: Some(e.to_string()),
            });
            report.w3.push(row);
        }
    }
    if has(Workload::W4) {
        let params = redlock_w4::W4Params {
            ttl: opts.ttl,
            instances: opts.w4_instances,
            phase: opts.w4_phase,
            per_instance_timeout: opts.w4_instance_timeout,
            cycle_limit: opts.w4_cycle_limit,
            max_cycles: cycles,
        };
        let rows = redlock_w4::w4(&opts.libraries, &params, &opts.fencelock_redlock).await;
        for (lib, row) in rows {
            let row = row.unwrap_or_else(|e| W4Row {
                library: lib.name().into(),
                instances: opts.w4_instances,
                healthy: W4Phase::default(),
                one_stopped: W4Phase::default(),
                ratio_to_raw: None,
                error: Some(e.to_string()),
            });
            report.w4.push(row);
        }
    }
    if has(Workload::W5) {
        let mut measured = Vec::new();
        let mut not_applicable = Vec::new();
        for &lib in &single_server {
            if lib == Library::RawFenced {
                // Its renewal is raw's, row for row.
                continue;
            }
            if lib == Library::Redlock {
                not_applicable.push(W5Row {
                    library: lib.name().into(),
                    locks: opts.w5_locks,
                    seconds: 0.0,
                    renewal_commands_per_s: 0.0,
                    renewals_per_s: 0.0,
                    total_commands_per_s: 0.0,
                    reads_per_s: 0.0,
                    client_cpu_percent: 0.0,
                    client_cpu_us_per_renewal: 0.0,
                    bytes_per_lock: 0.0,
                    still_held: 0,
                    held_in_redis: 0,
                    noscript_replies: 0,
                    ratio_to_raw: None,
                    error: Some(
                        "redlock has no automatic renewal (and no extend): not applicable".into(),
                    ),
                });
                continue;
            }
            measured.push(lib);
        }
        // The contenders take turns (W5_TURNS each, each turn a W5_TURNS-th of the hold), as in W1.
        let mut turn_opts = opts.clone();
        turn_opts.w5_hold = opts.w5_hold / W5_TURNS;
        let mut runs: Vec<(Library, Result<Vec<W5Row>>)> = measured
            .into_iter()
            .map(|lib| (lib, Ok(Vec::new())))
            .collect();
        workloads::take_turns(
            &mut runs,
            W5_TURNS as usize,
            async |lib, rows: &mut Vec<W5Row>, _| {
                let row = match &turn_opts.w5_child {
                    Some(exe) => w5_in_child(exe, lib, &turn_opts).await,
                    None => {
                        workloads::w5(lib, turn_opts.w5_ttl, turn_opts.w5_locks, turn_opts.w5_hold)
                            .await
                    }
                }?;
                rows.push(row);
                Ok(())
            },
        )
        .await;
        let merged = workloads::finish_all(runs, |rows| async move { merge_w5(rows) }).await;
        for (lib, row) in merged {
            let row = row.unwrap_or_else(|e| W5Row {
                library: lib.name().into(),
                locks: opts.w5_locks,
                seconds: 0.0,
                renewal_commands_per_s: 0.0,
                renewals_per_s: 0.0,
                total_commands_per_s: 0.0,
                reads_per_s: 0.0,
                client_cpu_percent: 0.0,
                client_cpu_us_per_renewal: 0.0,
                bytes_per_lock: 0.0,
                still_held: 0,
                held_in_redis: 0,
                noscript_replies: 0,
                ratio_to_raw: None,
                error: Some(e.to_string()),
            });
            report.w5.push(row);
        }
        report.w5.extend(not_applicable);
    }
    if has(Workload::W5) && opts.w5_child.is_none() {
        report.notes.push("W5 ran in this process: bytes per lock of a later contender can read low (the allocator reuses memory an earlier one freed)".into());
    }
    if has(Workload::W6) {
        if opts.libraries.contains(&Library::Fencelock) {
            let params = family::W6Params {
                ttl: opts.ttl,
                repetitions: opts.w6_repetitions,
                repetition: opts.w6_duration,
                rounds: opts.w6_rounds,
                round: opts.w6_round,
                hold: opts.w6_hold,
                max_cycles: cycles,
            };
            report.w6 = family::w6(&params).await.unwrap_or_else(|e| W6Report {
                error: Some(e.to_string()),
                ..W6Report::default()
            });
        } else {
            report.notes.push(
                "W6 measures fencelock's lock kinds; it ran only with fencelock selected".into(),
            );
        }
    }
    if has(Workload::W7) {
        report.w7 = deployments::w7(
            opts.ttl,
            opts.w7_tasks,
            opts.w7_repetitions,
            opts.w7_duration,
        )
        .await;
    }
    if has(Workload::W8) {
        report.w8 = fenced_writes::w8(opts.w7_tasks, opts.w7_repetitions, opts.w7_duration).await;
    }
    report.machine.load_after = system::load_average();
    report.finish();
    Ok(report)
}

/// How many turns W5 takes per contender (see [`run`]).
const W5_TURNS: u32 = 4;

/// One contender's W5 turns as one row: rates and CPU weighted by each turn's length, the
/// fewest locks still held, the most bytes per lock and `NOSCRIPT` replies of a turn.
fn merge_w5(rows: Vec<W5Row>) -> Result<W5Row> {
    let mut merged = rows
        .first()
        .cloned()
        .ok_or_else(|| BenchError::Bench("W5: no turn ran".into()))?;
    let seconds: f64 = rows.iter().map(|r| r.seconds).sum();
    let weighted = |value: fn(&W5Row) -> f64| {
        if seconds > 0.0 {
            rows.iter().map(|r| value(r) * r.seconds).sum::<f64>() / seconds
        } else {
            0.0
        }
    };
    merged.seconds = seconds;
    merged.renewal_commands_per_s = weighted(|r| r.renewal_commands_per_s);
    merged.renewals_per_s = weighted(|r| r.renewals_per_s);
    merged.total_commands_per_s = weighted(|r| r.total_commands_per_s);
    merged.reads_per_s = weighted(|r| r.reads_per_s);
    merged.client_cpu_percent = weighted(|r| r.client_cpu_percent);
    // All turns' CPU over all their renewals (both weighted by the same lengths).
    merged.client_cpu_us_per_renewal =
        workloads::cpu_us_per_renewal(merged.client_cpu_percent, merged.renewals_per_s);
    merged.bytes_per_lock = rows.iter().map(|r| r.bytes_per_lock).fold(0.0, f64::max);
    merged.still_held = rows.iter().map(|r| r.still_held).min().unwrap_or(0);
    merged.held_in_redis = rows.iter().map(|r| r.held_in_redis).min().unwrap_or(0);
    merged.noscript_replies = rows.iter().map(|r| r.noscript_replies).max().unwrap_or(0);
    Ok(merged)
}

/// W5 for one contender, in this process, for a parent that runs W5 in child processes (see
/// [`BenchOptions::w5_child`]). Print the row with `serde_json::to_string` as one line.
pub async fn run_w5_child(
    library: Library,
    ttl: Duration,
    locks: usize,
    hold: Duration,
) -> Result<W5Row> {
    workloads::w5(library, ttl, locks, hold).await
}

async fn w5_in_child(exe: &std::path::Path, lib: Library, opts: &BenchOptions) -> Result<W5Row> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("--w5-child")
        .arg(lib.name())
        .arg("--w5-locks")
        .arg(opts.w5_locks.to_string())
        .arg("--w5-seconds")
        .arg(opts.w5_hold.as_secs_f64().to_string())
        .arg("--w5-ttl-ms")
        .arg(opts.w5_ttl.as_millis().to_string())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let limit = opts.w5_hold + opts.w5_ttl * 2 + Duration::from_secs(120);
    let context = format!("W5 child process for {lib} ({})", exe.display());
    let output = tokio::time::timeout(limit, cmd.output())
        .await
        .map_err(|_| BenchError::Bench(format!("{context}: no result within {limit:?}")))?
        .map_err(|e| BenchError::io(context.clone(), e))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(BenchError::Bench(format!(
            "{context} failed ({}); its messages are on stderr",
            output.status
        )));
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| BenchError::Bench(format!("{context} printed no result")))?;
    serde_json::from_str(line).map_err(|e| BenchError::Json { context, source: e })
}
