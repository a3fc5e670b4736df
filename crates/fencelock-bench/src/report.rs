//! The benchmark's results: markdown tables with each row's ratio to the raw baseline, JSON,
//! the target checks and a small SVG chart of the ratios.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

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

/// W1 — uncontended latency.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W1Row {
    /// The contender.
    pub library: String,
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
    /// `cycles_per_s` / raw's.
    pub ratio_to_raw: Option<f64>,
    /// Why the row has no numbers.
    pub error: Option<String>,
}

/// W2 — uncontended throughput.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W2Row {
    /// The contender.
    pub library: String,
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
    /// `cycles_per_s` / raw's.
    pub ratio_to_raw: Option<f64>,
    /// Why the row has no numbers.
    pub error: Option<String>,
}

/// W3 — contended handoff.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W3Row {
    /// The contender.
    pub library: String,
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
    /// `acquisitions_per_s` / raw's.
    pub ratio_to_raw: Option<f64>,
    /// Why the row has no numbers.
    pub error: Option<String>,
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

/// W4 — Redlock over several instances.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W4Row {
    /// The contender.
    pub library: String,
    /// Instances.
    pub instances: usize,
    /// All instances running.
    pub healthy: W4Phase,
    /// One instance stopped with `SIGSTOP`.
    pub one_stopped: W4Phase,
    /// Healthy `cycles_per_s` / raw's.
    pub ratio_to_raw: Option<f64>,
    /// Why the row has no numbers.
    pub error: Option<String>,
}

/// W5 — keeping many locks alive.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct W5Row {
    /// The contender.
    pub library: String,
    /// Locks held.
    pub locks: usize,
    /// The measured window, seconds.
    pub seconds: f64,
    /// Scripts (`EVALSHA` + `EVAL`) per second: the renewals.
    pub renewal_commands_per_s: f64,
    /// All commands per second (`total_commands_processed`).
    pub total_commands_per_s: f64,
    /// Server socket reads per second (`total_reads_processed`): an upper bound of round trips.
    pub reads_per_s: f64,
    /// This process's CPU (user + system) over the window, in % of one core.
    pub client_cpu_percent: f64,
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
    /// `client_cpu_percent` / raw's (lower is better).
    pub ratio_to_raw: Option<f64>,
    /// Why the row has no numbers.
    pub error: Option<String>,
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
    /// Fills in the ratios to the plain lock of the same run.
    pub(crate) fn set_ratios(&mut self) {
        let plain = self
            .uncontended
            .iter()
            .find(|r| r.kind == "plain" && r.error.is_none())
            .map(|r| r.cycles_per_s);
        for r in self.uncontended.iter_mut().filter(|r| r.error.is_none()) {
            r.ratio_to_plain = ratio(r.cycles_per_s, plain);
        }
        let plains: Vec<(String, f64, Option<f64>)> = self
            .contended
            .iter()
            .filter(|r| r.kind == "plain" && r.error.is_none())
            .map(|r| (r.contenders.clone(), r.acquisitions_per_s, r.handoff_p50_us))
            .collect();
        for r in self.contended.iter_mut().filter(|r| r.error.is_none()) {
            let plain = plains
                .iter()
                .find(|p| p.0 == r.contenders)
                .or_else(|| plains.first())
                .map(|p| (p.1, p.2));
            r.ratio_to_plain = ratio(r.acquisitions_per_s, plain.map(|p| p.0));
            r.handoff_ratio_to_plain = r
                .handoff_p50_us
                .and_then(|h| ratio(h, plain.and_then(|p| p.1)));
        }
    }

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
    /// The issue's targets.
    pub targets: Vec<TargetCheck>,
    /// Remarks (left-out contenders, TODOs).
    pub notes: Vec<String>,
}

fn ratio(value: f64, raw: Option<f64>) -> Option<f64> {
    raw.filter(|r| *r > 0.0 && r.is_finite())
        .map(|r| value / r)
        .filter(|x| x.is_finite())
}

impl Report {
    /// Fills in the ratios to the raw baseline and the target checks.
    pub(crate) fn finish(&mut self) {
        let raw_of = |rows: &[(String, Option<String>, f64)]| {
            rows.iter()
                .find(|(l, e, _)| l == "raw" && e.is_none())
                .map(|(_, _, v)| *v)
        };
        let key1: Vec<_> = self
            .w1
            .iter()
            .map(|r| (r.library.clone(), r.error.clone(), r.cycles_per_s))
            .collect();
        let raw1 = raw_of(&key1);
        for r in self.w1.iter_mut().filter(|r| r.error.is_none()) {
            r.ratio_to_raw = ratio(r.cycles_per_s, raw1);
        }
        let key2: Vec<_> = self
            .w2
            .iter()
            .map(|r| (r.library.clone(), r.error.clone(), r.cycles_per_s))
            .collect();
        let raw2 = raw_of(&key2);
        for r in self.w2.iter_mut().filter(|r| r.error.is_none()) {
            r.ratio_to_raw = ratio(r.cycles_per_s, raw2);
        }
        let key3: Vec<_> = self
            .w3
            .iter()
            .map(|r| (r.library.clone(), r.error.clone(), r.acquisitions_per_s))
            .collect();
        let raw3 = raw_of(&key3);
        for r in self.w3.iter_mut().filter(|r| r.error.is_none()) {
            r.ratio_to_raw = ratio(r.acquisitions_per_s, raw3);
        }
        let key4: Vec<_> = self
            .w4
            .iter()
            .map(|r| (r.library.clone(), r.error.clone(), r.healthy.cycles_per_s))
            .collect();
        let raw4 = raw_of(&key4);
        for r in self.w4.iter_mut().filter(|r| r.error.is_none()) {
            r.ratio_to_raw = ratio(r.healthy.cycles_per_s, raw4);
        }
        let key5: Vec<_> = self
            .w5
            .iter()
            .map(|r| (r.library.clone(), r.error.clone(), r.client_cpu_percent))
            .collect();
        let raw5 = raw_of(&key5);
        for r in self.w5.iter_mut().filter(|r| r.error.is_none()) {
            r.ratio_to_raw = ratio(r.client_cpu_percent, raw5);
        }
        self.w6.set_ratios();
        self.targets = self.check_targets();
    }

    fn check_targets(&self) -> Vec<TargetCheck> {
        let mut out = Vec::new();
        let w1 = |lib: &str| {
            self.w1
                .iter()
                .find(|r| r.library == lib && r.error.is_none())
        };
        let w2 = |lib: &str| {
            self.w2
                .iter()
                .find(|r| r.library == lib && r.error.is_none())
        };
        let (f1, r1) = (w1("fencelock"), w1("raw"));
        if !self.w1.is_empty() {
            out.push(match (f1, r1) {
                (Some(f), Some(_)) => TargetCheck {
                    target: "W1: fencelock ≥ 0.95× raw cycles/s".into(),
                    measured: format!("{:.3}×", f.ratio_to_raw.unwrap_or(0.0)),
                    met: f.ratio_to_raw.map(|x| x >= 0.95),
                },
                _ => unmeasured("W1: fencelock ≥ 0.95× raw cycles/s"),
            });
        }
        if !self.w2.is_empty() {
            let (f2, r2, s2) = (w2("fencelock"), w2("raw"), w2("rslock"));
            out.push(match (f2, r2) {
                (Some(f), Some(_)) => TargetCheck {
                    target: "W2: fencelock ≥ 0.9× raw cycles/s".into(),
                    measured: format!("{:.3}×", f.ratio_to_raw.unwrap_or(0.0)),
                    met: f.ratio_to_raw.map(|x| x >= 0.9),
                },
                _ => unmeasured("W2: fencelock ≥ 0.9× raw cycles/s"),
            });
            out.push(match (f2, s2) {
                (Some(f), Some(s)) => TargetCheck {
                    target: "W2: fencelock above rslock".into(),
                    measured: format!("{:.0} vs {:.0} cycles/s", f.cycles_per_s, s.cycles_per_s),
                    met: Some(f.cycles_per_s > s.cycles_per_s),
                },
                _ => unmeasured("W2: fencelock above rslock"),
            });
        }
        if let Some(f3) = self
            .w3
            .iter()
            .find(|r| r.library == "fencelock" && r.error.is_none())
        {
            // One round trip: half of raw's W1 cycle (two round trips), else fencelock's own.
            let rtt = r1.or(f1).and_then(|r| r.p50_us).map(|p50| p50 / 2.0);
            out.push(match (f3.handoff_p50_us, rtt) {
                (Some(h), Some(rtt)) => TargetCheck {
                    target: "W3: handoff p50 ≤ 3 round trips (1 round trip = W1 raw p50 / 2)"
                        .into(),
                    measured: format!("{h:.0} µs = {:.1} round trips of {rtt:.0} µs", h / rtt),
                    met: Some(h <= 3.0 * rtt),
                },
                _ => unmeasured("W3: handoff p50 ≤ 3 round trips"),
            });
            out.push(match f3.handoff_p99_us {
                Some(p99) => TargetCheck {
                    target: "W3: handoff p99 < 2 ms".into(),
                    measured: format!("{p99:.0} µs"),
                    met: Some(p99 < 2000.0),
                },
                None => unmeasured("W3: handoff p99 < 2 ms"),
            });
            out.push(TargetCheck {
                target: "W3: zero violations".into(),
                measured: format!(
                    "{} overlaps, {} lost counter updates",
                    f3.violations, f3.lost_updates
                ),
                met: Some(f3.violations == 0 && f3.lost_updates == 0),
            });
        }
        if let Some(f5) = self
            .w5
            .iter()
            .find(|r| r.library == "fencelock" && r.error.is_none())
        {
            let per_read = f5.renewal_commands_per_s / f5.reads_per_s.max(f64::MIN_POSITIVE);
            out.push(TargetCheck {
                target: "W5: renewal round trips do not grow with the number of locks (batched: ≥ 10 renewals per server read)".into(),
                measured: format!(
                    "{:.0} renewals/s in {:.1} reads/s ({per_read:.0} per read) for {} locks",
                    f5.renewal_commands_per_s, f5.reads_per_s, f5.locks
                ),
                met: Some(per_read >= 10.0),
            });
            out.push(TargetCheck {
                target: "W5: every lock is still held at the end (renewal keeps up)".into(),
                measured: format!(
                    "{} of {} held by the client's view, {} in Redis",
                    f5.still_held, f5.locks, f5.held_in_redis
                ),
                met: Some(f5.still_held == f5.locks && f5.held_in_redis == f5.locks),
            });
        }
        let w6 = &self.w6;
        if !w6.uncontended.is_empty() || !w6.contended.is_empty() {
            let checks: u64 = w6.uncontended.iter().map(|r| r.failed_checks).sum();
            let violations: u64 = w6.contended.iter().map(|r| r.violations).sum();
            let fences: u64 = w6.contended.iter().map(|r| r.fence_errors).sum();
            let errors = w6.uncontended.iter().filter(|r| r.error.is_some()).count()
                + w6.contended.iter().filter(|r| r.error.is_some()).count();
            out.push(TargetCheck {
                target: "W6: every kind keeps its invariant (no violations, no fence errors, no failed checks)".into(),
                measured: format!(
                    "{violations} violations, {fences} fence errors (contended); {checks} failed checks (uncontended){}",
                    if errors > 0 {
                        format!("; {errors} rows failed to run")
                    } else {
                        String::new()
                    }
                ),
                met: (errors == 0).then_some(violations == 0 && fences == 0 && checks == 0),
            });
            // Every fair row (4 and 16 workers) together.
            let fair: Vec<(&W6Contended, u64)> = w6
                .contended
                .iter()
                .filter(|r| r.kind == "fair" && r.error.is_none())
                .filter_map(|r| r.out_of_order.map(|o| (r, o)))
                .collect();
            out.push(if fair.is_empty() {
                unmeasured("W6: the fair lock grants in request order")
            } else {
                let o: u64 = fair.iter().map(|(_, o)| o).sum();
                let acquisitions: u64 = fair.iter().map(|(r, _)| r.acquisitions).sum();
                let ties: u64 = fair.iter().filter_map(|(r, _)| r.near_ties).sum();
                TargetCheck {
                    target: "W6: the fair lock grants in request order".into(),
                    measured: format!(
                        "{o} out-of-order grants of {acquisitions} (and {ties} near ties) in {} rows",
                        fair.len()
                    ),
                    met: Some(o == 0),
                }
            });
        }
        out
    }

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

    /// The report as markdown: machine, parameters, one table per workload, the targets.
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        let m = &self.machine;
        let _ = writeln!(md, "### Machine\n");
        let _ = writeln!(
            md,
            "- {} cores ({}), {}",
            m.cores,
            m.cpu_model.as_deref().unwrap_or("unknown CPU"),
            m.os
        );
        let _ = writeln!(md, "- Redis {}", m.redis_version);
        let _ = writeln!(md, "- {}", m.sharing);
        let _ = writeln!(
            md,
            "- load average (1 min): {} before, {} after",
            opt(m.load_before, 2),
            opt(m.load_after, 2)
        );
        if self.smoke {
            let _ = writeln!(
                md,
                "- **smoke run**: every workload ran ~0.5 s; the numbers are not meaningful"
            );
        }
        let _ = writeln!(md, "\n### Parameters\n");
        for p in &self.parameters {
            let _ = writeln!(md, "- {p}");
        }
        if !self.w1.is_empty() {
            let _ = writeln!(
                md,
                "\n### W1 — uncontended latency (1 client, sequential acquire + release, new key each cycle)\n"
            );
            let _ = writeln!(
                md,
                "| library | cycles/s | p50 µs | p99 µs | round trips/cycle | Redis cmds/cycle | client CPU µs/cycle | server CPU µs/cycle | ratio to raw |"
            );
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
            for r in &self.w1 {
                if let Some(e) = &r.error {
                    let _ = writeln!(md, "| {} | {} | | | | | | | |", r.library, cell_error(e));
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
                    r.library,
                    r.cycles_per_s,
                    opt(r.p50_us, 0),
                    opt(r.p99_us, 0),
                    opt(r.reads_per_cycle, 2),
                    opt(r.commands_per_cycle, 2),
                    opt(r.client_cpu_us_per_cycle, 1),
                    opt(r.server_cpu_us_per_cycle, 1),
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w2.is_empty() {
            let tasks = self.w2.first().map_or(0, |r| r.tasks);
            let _ = writeln!(
                md,
                "\n### W2 — uncontended throughput ({tasks} tasks on one client, each its own key)\n"
            );
            let _ = writeln!(
                md,
                "| library | cycles/s | cycles per task (min–max) | client CPU µs/cycle | server CPU µs/cycle | ratio to raw |"
            );
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
            for r in &self.w2 {
                if let Some(e) = &r.error {
                    let _ = writeln!(md, "| {} | {} | | | | |", r.library, cell_error(e));
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {}–{} | {} | {} | {} |",
                    r.library,
                    r.cycles_per_s,
                    r.min_task_cycles,
                    r.max_task_cycles,
                    opt(r.client_cpu_us_per_cycle, 1),
                    opt(r.server_cpu_us_per_cycle, 1),
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w3.is_empty() {
            let workers = self.w3.first().map_or(0, |r| r.workers);
            let _ = writeln!(
                md,
                "\n### W3 — contended handoff ({workers} workers, each its own client, one key)\n"
            );
            let _ = writeln!(
                md,
                "| library | acquisitions/s | handoff p50 µs | handoff p99 µs | handoffs | mean hold µs | grants per worker (min–max) | violations | lost updates | ratio to raw |"
            );
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for r in &self.w3 {
                if let Some(e) = &r.error {
                    let _ = writeln!(md, "| {} | {} | | | | | | | | |", r.library, cell_error(e));
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {} | {} | {} | {} | {}–{} | {} | {} | {} |",
                    r.library,
                    r.acquisitions_per_s,
                    opt(r.handoff_p50_us, 0),
                    opt(r.handoff_p99_us, 0),
                    r.handoffs,
                    opt(r.mean_hold_us, 0),
                    r.min_grants,
                    r.max_grants,
                    r.violations,
                    r.lost_updates,
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w4.is_empty() {
            let n = self.w4.iter().map(|r| r.instances).max().unwrap_or(0);
            let _ = writeln!(
                md,
                "\n### W4 — Redlock over {n} instances (1 client, sequential), then one instance SIGSTOPped\n"
            );
            let _ = writeln!(
                md,
                "| library | healthy cycles/s | p50 µs | p99 µs | one stopped: cycles/s | p50 µs | p99 µs | failed cycles | hung | ratio to raw (healthy) |"
            );
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
            for r in &self.w4 {
                if let Some(e) = &r.error {
                    let _ = writeln!(md, "| {} | {} | | | | | | | | |", r.library, cell_error(e));
                    continue;
                }
                let (h, s) = (&r.healthy, &r.one_stopped);
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {} | {} | {:.1} | {} | {} | {} | {} | {} |",
                    r.library,
                    h.cycles_per_s,
                    opt(h.p50_us, 0),
                    opt(h.p99_us, 0),
                    s.cycles_per_s,
                    opt(s.p50_us, 0),
                    opt(s.p99_us, 0),
                    h.failures + s.failures,
                    if s.stalled || h.stalled {
                        "**yes**"
                    } else {
                        "no"
                    },
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w5.is_empty() {
            let _ = writeln!(md, "\n### W5 — keeping locks alive (automatic renewal)\n");
            let _ = writeln!(
                md,
                "| library | locks | renewal scripts/s | all Redis cmds/s | server reads/s | renewals per read | client CPU % | bytes per lock | held (client view) | held (in Redis) | NOSCRIPT at start | CPU ratio to raw |"
            );
            let _ = writeln!(
                md,
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for r in &self.w5 {
                if let Some(e) = &r.error {
                    let _ = writeln!(
                        md,
                        "| {} | {} | | | | | | | | | | |",
                        r.library,
                        cell_error(e)
                    );
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {:.0} | {:.1} | {:.0} | {:.2} | {:.0} | {}/{} | {}/{} | {} | {} |",
                    r.library,
                    r.locks,
                    r.renewal_commands_per_s,
                    r.total_commands_per_s,
                    r.reads_per_s,
                    r.renewal_commands_per_s / r.reads_per_s.max(f64::MIN_POSITIVE),
                    r.client_cpu_percent,
                    r.bytes_per_lock,
                    r.still_held,
                    r.locks,
                    r.held_in_redis,
                    r.locks,
                    r.noscript_replies,
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w6.is_empty() {
            self.w6_markdown(&mut md);
        }
        if !self.targets.is_empty() {
            let _ = writeln!(md, "\n### Targets\n");
            let _ = writeln!(md, "| target | measured | met |");
            let _ = writeln!(md, "|---|---|---|");
            for t in &self.targets {
                let met = match t.met {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "not measured",
                };
                let _ = writeln!(md, "| {} | {} | {met} |", t.target, t.measured);
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(md, "\n### Notes\n");
            for n in &self.notes {
                let _ = writeln!(md, "- {n}");
            }
        }
        md
    }

    fn w6_markdown(&self, md: &mut String) {
        let w6 = &self.w6;
        if let Some(e) = &w6.error {
            let _ = writeln!(md, "\n### W6 — the lock family\n\n*{e}*");
        }
        if !w6.uncontended.is_empty() {
            let _ = writeln!(
                md,
                "\n### W6 — the lock family, uncontended (1 task, sequential cycles, one name per kind)\n"
            );
            let _ = writeln!(
                md,
                "| kind | a cycle | cycles/s | p50 µs | p99 µs | round trips/cycle | Redis cmds/cycle | script µs/cycle (server) | server CPU µs/cycle | client CPU µs/cycle | failed checks | ratio to plain |"
            );
            let _ = writeln!(
                md,
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for r in &w6.uncontended {
                if let Some(e) = &r.error {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | | | | | | | | | |",
                        r.kind,
                        r.cycle,
                        cell_error(e)
                    );
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.kind,
                    r.cycle,
                    r.cycles_per_s,
                    opt(r.p50_us, 0),
                    opt(r.p99_us, 0),
                    opt(r.reads_per_cycle, 2),
                    opt(r.commands_per_cycle, 1),
                    opt(r.script_us_per_cycle, 1),
                    opt(r.server_cpu_us_per_cycle, 1),
                    opt(r.client_cpu_us_per_cycle, 1),
                    r.failed_checks,
                    ratio_cell(r.ratio_to_plain)
                );
            }
        }
        if !w6.contended.is_empty() {
            let _ = writeln!(
                md,
                "\n### W6 — the lock family, contended (workers on 2 clients, one name, short holds)\n"
            );
            let _ = writeln!(
                md,
                "| kind | contenders | acquisitions/s | handoff p50 µs | handoff p99 µs | handoffs | scripts per grant | mean hold µs | grants per worker (min–max) | violations | fence errors | out-of-order grants (near ties) | acq/s ratio to plain | handoff p50 ratio to plain |"
            );
            let _ = writeln!(
                md,
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for r in &w6.contended {
                if let Some(e) = &r.error {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | | | | | | | | | | | |",
                        r.kind,
                        r.contenders,
                        cell_error(e)
                    );
                    continue;
                }
                let order = match (r.out_of_order, r.near_ties) {
                    (Some(o), Some(t)) => format!("{o} ({t})"),
                    (Some(o), None) => o.to_string(),
                    _ => "–".into(),
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {}–{} | {} | {} | {order} | {} | {} |",
                    r.kind,
                    r.contenders,
                    r.acquisitions_per_s,
                    opt(r.handoff_p50_us, 0),
                    opt(r.handoff_p99_us, 0),
                    r.handoffs,
                    opt(r.scripts_per_grant, 2),
                    opt(r.mean_hold_us, 0),
                    r.min_grants,
                    r.max_grants,
                    r.violations,
                    r.fence_errors,
                    ratio_cell(r.ratio_to_plain),
                    ratio_cell(r.handoff_ratio_to_plain)
                );
            }
            let _ = writeln!(md, "\nHandoff, per row:\n");
            for r in &w6.contended {
                let _ = writeln!(md, "- {}: {}", r.kind, r.handoff);
            }
        }
    }

    /// A horizontal bar chart (SVG) of each contender's ratio to raw, per workload.
    pub fn to_svg(&self) -> String {
        let mut groups: Vec<(&str, Vec<Bar>)> = Vec::new();
        let row = |l: &String, r: Option<f64>| (l.clone(), r);
        groups.push((
            "W1 cycles/s (1 client)",
            self.w1
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.push((
            "W2 cycles/s (32 tasks)",
            self.w2
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.push((
            "W3 acquisitions/s (8 workers, 1 key)",
            self.w3
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.push((
            "W4 Redlock cycles/s (5 instances)",
            self.w4
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.push((
            "W5 client CPU for renewals (lower is better)",
            self.w5
                .iter()
                .map(|r| row(&r.library, r.ratio_to_raw))
                .collect(),
        ));
        groups.retain(|(_, rows)| !rows.is_empty());
        let max = groups
            .iter()
            .flat_map(|(_, rows)| rows.iter().filter_map(|(_, r)| *r))
            .fold(1.2f64, f64::max)
            .min(2.0);
        let (label_w, bar_w, bar_h, gap) = (110.0, 420.0, 16.0, 4.0);
        let width = label_w + bar_w + 90.0;
        let mut y = 40.0;
        let mut body = String::new();
        for (title, rows) in &groups {
            let _ = writeln!(
                body,
                r#"<text x="10" y="{:.0}" font-weight="bold">{}</text>"#,
                y + 12.0,
                escape(title)
            );
            y += 20.0;
            for (lib, r) in rows {
                let _ = writeln!(
                    body,
                    r#"<text x="{:.0}" y="{:.0}" text-anchor="end">{}</text>"#,
                    label_w - 8.0,
                    y + 12.0,
                    escape(lib)
                );
                match r {
                    Some(r) => {
                        let w = (r.min(max) / max * bar_w).max(1.0);
                        let color = match lib.as_str() {
                            "fencelock" => "#2b6cb0",
                            "raw" => "#718096",
                            "rslock" => "#dd6b20",
                            _ => "#38a169",
                        };
                        let _ = writeln!(
                            body,
                            r#"<rect x="{label_w:.0}" y="{y:.0}" width="{w:.1}" height="{bar_h:.0}" fill="{color}"/>"#
                        );
                        let _ = writeln!(
                            body,
                            r#"<text x="{:.1}" y="{:.0}">{}</text>"#,
                            label_w + w + 4.0,
                            y + 12.0,
                            if *r > max {
                                format!("{} (bar cut at {max:.1}×)", fmt_ratio(*r))
                            } else {
                                fmt_ratio(*r)
                            }
                        );
                    }
                    None => {
                        let _ = writeln!(
                            body,
                            r##"<text x="{:.0}" y="{:.0}" fill="#a0aec0">not measured</text>"##,
                            label_w + 4.0,
                            y + 12.0
                        );
                    }
                }
                y += bar_h + gap;
            }
            y += 10.0;
        }
        let one = label_w + 1.0 / max * bar_w;
        let height = y + 10.0;
        format!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14" font-weight="bold">fencelock benchmark: ratio to the raw baseline (same run{smoke})</text>
<line x1="{one:.1}" y1="30" x2="{one:.1}" y2="{bottom:.0}" stroke="#e53e3e" stroke-dasharray="4 3"/>
<text x="{one:.1}" y="{label_y:.0}" fill="#e53e3e" text-anchor="middle">raw = 1.0</text>
{body}</svg>
"##,
            smoke = if self.smoke { ", smoke" } else { "" },
            bottom = y - 5.0,
            label_y = y + 5.0,
        )
    }
}

/// One bar of the chart: a contender and its ratio.
type Bar = (String, Option<f64>);

fn unmeasured(target: &str) -> TargetCheck {
    TargetCheck {
        target: target.into(),
        measured: "not measured in this run".into(),
        met: None,
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(|| "–".into(), |x| format!("{x:.decimals$}"))
}

fn fmt_ratio(r: f64) -> String {
    if r >= 0.1 {
        format!("{r:.2}×")
    } else {
        format!("{r:.4}×")
    }
}

fn ratio_cell(r: Option<f64>) -> String {
    r.map_or_else(|| "–".into(), fmt_ratio)
}

fn cell_error(e: &str) -> String {
    format!("*{}*", e.replace('|', "/").replace('\n', " "))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contended(kind: &str, contenders: &str, acquisitions_per_s: f64, p50: f64) -> W6Contended {
        W6Contended {
            kind: kind.into(),
            contenders: contenders.into(),
            workers: 0,
            handoff: String::new(),
            rounds: 1,
            acquisitions_per_s,
            acquisitions: 1,
            handoffs: 1,
            handoff_p50_us: Some(p50),
            handoff_p99_us: Some(p50),
            scripts_per_grant: Some(2.0),
            mean_hold_us: None,
            min_grants: 0,
            max_grants: 0,
            violations: 0,
            fence_errors: 0,
            out_of_order: None,
            near_ties: None,
            ratio_to_plain: None,
            handoff_ratio_to_plain: None,
            error: None,
        }
    }

    #[test]
    fn contended_rows_compare_to_the_plain_lock_with_the_same_contenders() {
        let (four, many) = ("4 workers on 2 clients", "16 workers on 2 clients");
        let mut w6 = W6Report {
            contended: vec![
                contended("plain", four, 800.0, 200.0),
                contended("fair", four, 400.0, 300.0),
                contended("semaphore (N=2)", "6 workers on 2 clients", 1600.0, 100.0),
                contended("plain", many, 500.0, 250.0),
                contended("fair", many, 250.0, 500.0),
            ],
            ..W6Report::default()
        };
        w6.set_ratios();
        let ratios: Vec<(Option<f64>, Option<f64>)> = w6
            .contended
            .iter()
            .map(|r| (r.ratio_to_plain, r.handoff_ratio_to_plain))
            .collect();
        assert_eq!(
            ratios,
            [
                (Some(1.0), Some(1.0)),
                (Some(0.5), Some(1.5)),
                // No plain row with 6 workers: the first plain row.
                (Some(2.0), Some(0.5)),
                (Some(1.0), Some(1.0)),
                (Some(0.5), Some(2.0)),
            ]
        );
    }
}
