//! A chaos run: the servers, the worker processes, the fault schedule and the history file;
//! then the checker.

use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::check::{Bounds, check, render};
use super::deployment::{Deployment, blocking};
use super::history::{self, Entry, What};
use super::nemesis::{Fault, inject};
use super::report;
use super::stage::{Stage, WorkerSettings};
use super::{ChaosArgs, CheckArgs, Kind, Mutation, Rng, Topology, counter_key, log_key};
use crate::duration::format_duration;
use crate::error::CliError;
use crate::output::{Output, Tone};
use crate::process::until_signalled;
use fencelock_testkit::RedisServer;

/// Runs `fencelock chaos`.
pub async fn run(args: ChaosArgs) -> Result<(), CliError> {
    let mut out = Output::stdout();
    let result = until_signalled(chaos(&args, &mut out)).await;
    out.clear_status();
    result
}

/// What a run will do, from its arguments.
struct Plan {
    seed: u64,
    /// The faults that apply to the topology.
    faults: Vec<Fault>,
    /// The history file.
    path: PathBuf,
    locks: Vec<String>,
    /// The semaphore's permits (1 for the other kinds).
    permits: u32,
}

impl Plan {
    /// The plan of `args`; a usage error for what the topology cannot take.
    fn of(args: &ChaosArgs) -> Result<Plan, CliError> {
        // Checked here, used by the workers.
        Mutation::parse_list(&args.mutate.join(",")).map_err(CliError::Usage)?;
        let seed = args
            .seed
            .unwrap_or_else(|| history::wall_ms() ^ u64::from(std::process::id()));
        let faults: Vec<Fault> = if args.faults.is_empty() {
            Fault::ALL.to_vec()
        } else {
            args.faults.clone()
        };
        let explicit = !args.faults.is_empty();
        let path = args
            .history
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("fencelock-chaos-{seed}.jsonl")));
        let locks: Vec<String> = (0..args.locks).map(|i| format!("chaos-{i}")).collect();
        if args.topology == Topology::Redlock && matches!(args.kind, Kind::Semaphore | Kind::Fair) {
            return Err(CliError::Usage(format!(
                "--kind {} is not offered over Redlock (majority voting cannot bound a semaphore, \
                 and each instance would order a fair queue its own way)",
                args.kind.name()
            )));
        }
        let applicable = args.topology.faults();
        if let Some(fault) = faults.iter().find(|f| explicit && !applicable.contains(f)) {
            return Err(CliError::Usage(format!(
                "fault {} does not apply to --topology {}; it takes: {}",
                fault.name(),
                args.topology.name(),
                applicable
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let faults: Vec<Fault> = faults
            .into_iter()
            .filter(|f| applicable.contains(f))
            .collect();
        let permits = if args.kind == Kind::Semaphore {
            args.permits
        } else {
            1
        };
        Ok(Plan {
            seed,
            faults,
            path,
            locks,
            permits,
        })
    }

    /// The history's first line: the run's settings.
    fn entry(&self, args: &ChaosArgs) -> Entry {
        Entry::now(
            None,
            None,
            What::Run {
                topology: args.topology.name().into(),
                kind: args.kind.name().into(),
                permits: self.permits,
                workers: args.workers,
                locks: self.locks.clone(),
                ttl_ms: u64::try_from(args.ttl.as_millis()).unwrap_or(u64::MAX),
                seed: self.seed,
                faults: self.faults.iter().map(|f| f.name().to_owned()).collect(),
                mutations: args.mutate.clone(),
            },
        )
    }
}

async fn chaos(args: &ChaosArgs, out: &mut Output) -> Result<(), CliError> {
    let plan = Plan::of(args)?;
    if let Some(report) = &args.report {
        // A report that cannot be written fails now, not after the run.
        let dir = report
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !dir.is_dir() {
            return Err(CliError::Usage(format!(
                "--report {}: no directory {}",
                report.display(),
                dir.display()
            )));
        }
    }
    let deployment = Deployment::start(args.topology).await?;
    let store = blocking(RedisServer::start)
        .map_err(|e| CliError::RedisServerStart(format!("the store's redis-server: {e}")))?;
    announce(args, &plan, &deployment, out)?;

    let (tx, rx) = mpsc::unbounded_channel();
    let grants = Arc::new(AtomicU64::new(0));
    let writer = tokio::task::spawn_blocking({
        let path = plan.path.clone();
        let grants = grants.clone();
        move || write_history(&path, rx, &grants)
    });
    let exe = std::env::current_exe()
        .map_err(|e| CliError::io("cannot find this program's own executable", e))?;
    let settings = WorkerSettings {
        topology: args.topology,
        kind: args.kind,
        permits: plan.permits,
        locks: plan.locks.clone(),
        ttl: args.ttl,
        seed: plan.seed,
        mutate: args.mutate.join(","),
    };
    let mut stage = Stage::new(deployment, store, exe, settings, tx);
    stage.record(plan.entry(args));
    for id in 1..=args.workers {
        stage.spawn_worker(id);
    }

    schedule(args, &plan, &mut stage, &grants, out).await?;
    out.clear_status();
    stage.finish().await;

    // The resource's own record.
    let final_state = read_store(&stage.store_url(), &plan.locks).await;
    match final_state {
        Ok(entries) => {
            for entry in entries {
                stage.record(entry);
            }
        }
        Err(e) => out.line(&out.paint(Tone::Bad, &format!("cannot read the store: {e}")))?,
    }
    drop(stage);
    writer
        .await
        .map_err(|e| CliError::io("the history writer", std::io::Error::other(e)))??;
    let bounds = Bounds { resume_ms: 15_000 };
    check_file(&plan.path, &bounds, args.report.as_deref(), out)
}

/// The run's first two lines: what runs where, the faults, the history file.
fn announce(
    args: &ChaosArgs,
    plan: &Plan,
    deployment: &Deployment,
    out: &mut Output,
) -> Result<(), CliError> {
    out.line(&format!(
        "{}: {} workers on {} over {}, lease {}, {} of faults every ~{}, seed {}",
        out.paint(Tone::Strong, "fencelock chaos"),
        args.workers,
        plan.locks.join(", "),
        deployment.describe(),
        format_duration(args.ttl),
        format_duration(args.duration),
        format_duration(args.fault_interval),
        plan.seed,
    ))?;
    out.line(&out.paint(
        Tone::Dim,
        &format!(
            "faults: {}; history: {}",
            plan.faults
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", "),
            plan.path.display()
        ),
    ))
}

/// The schedule: until the run's duration is over, a fault chosen by the seed at intervals
/// around `--fault-interval`, with a status line.
async fn schedule(
    args: &ChaosArgs,
    plan: &Plan,
    stage: &mut Stage,
    grants: &AtomicU64,
    out: &mut Output,
) -> Result<(), CliError> {
    let faults = &plan.faults;
    let started = Instant::now();
    let deadline = started + args.duration;
    let mut rng = Rng::new(plan.seed);
    let interval_ms = u64::try_from(args.fault_interval.as_millis()).unwrap_or(u64::MAX);
    let mut injected: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut bag = Bag::new(faults);
    loop {
        let wait = Duration::from_millis(rng.between(interval_ms / 2, interval_ms * 3 / 2));
        if Instant::now() + wait >= deadline {
            tokio::time::sleep_until(deadline).await;
            return Ok(());
        }
        tokio::time::sleep(wait).await;
        let Some(fault) = bag.draw(&mut rng) else {
            continue;
        };
        *injected.entry(fault.name()).or_default() += 1;
        let elapsed = started.elapsed().as_secs_f64();
        out.status(&format!(
            "{elapsed:>5.0}s  {:>6} grants ({:.0}/s)  {} faults, now {}",
            grants.load(Ordering::Relaxed),
            grants.load(Ordering::Relaxed) as f64 / elapsed.max(0.001),
            injected.values().sum::<u32>(),
            fault.name()
        ))?;
        inject(stage, fault, &mut rng).await;
    }
}

/// The faults still to come before any comes again: every kind once, in a random order, so
/// that a short run sees as many kinds as it has faults.
struct Bag<'a> {
    all: &'a [Fault],
    left: Vec<Fault>,
}

impl<'a> Bag<'a> {
    fn new(all: &'a [Fault]) -> Self {
        Self {
            all,
            left: Vec::new(),
        }
    }

    /// The next fault (`None` if there are none at all).
    fn draw(&mut self, rng: &mut Rng) -> Option<Fault> {
        if self.left.is_empty() {
            self.left = self.all.to_vec();
        }
        let drawn = usize::try_from(rng.below(self.left.len() as u64)).unwrap_or(0);
        (drawn < self.left.len()).then(|| self.left.swap_remove(drawn))
    }
}

/// Writes history entries to `path` as they come, counting grants.
fn write_history(
    path: &Path,
    mut rx: mpsc::UnboundedReceiver<Entry>,
    grants: &AtomicU64,
) -> Result<(), CliError> {
    let file = std::fs::File::create(path)
        .map_err(|e| CliError::io(format!("cannot create {}", path.display()), e))?;
    let mut file = BufWriter::new(file);
    while let Some(entry) = rx.blocking_recv() {
        if matches!(entry.what, What::Granted { .. }) {
            grants.fetch_add(1, Ordering::Relaxed);
        }
        entry
            .write_to(&mut file)
            .map_err(|e| CliError::io(format!("cannot write {}", path.display()), e))?;
    }
    file.flush()
        .map_err(|e| CliError::io(format!("cannot write {}", path.display()), e))
}

/// The store's logs and counters, as history entries.
async fn read_store(url: &str, locks: &[String]) -> redis::RedisResult<Vec<Entry>> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut entries = Vec::new();
    for lock in locks {
        let raw: Vec<String> = redis::cmd("LRANGE")
            .arg(log_key(lock))
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await?;
        let log = raw
            .iter()
            .filter_map(|e| {
                let (fence, worker) = e.split_once(':')?;
                Some((fence.parse().ok()?, worker.parse().ok()?))
            })
            .collect();
        entries.push(Entry::now(None, Some(lock), What::StoreLog { log }));
        let value: Option<u64> = redis::cmd("GET")
            .arg(counter_key(lock))
            .query_async(&mut conn)
            .await?;
        entries.push(Entry::now(
            None,
            Some(lock),
            What::CounterFinal {
                value: value.unwrap_or(0),
            },
        ));
    }
    Ok(entries)
}

/// Checks a history file and prints the verdict, and writes the HTML report if asked; `Err`
/// when a violation was found.
fn check_file(
    path: &Path,
    bounds: &Bounds,
    report_path: Option<&Path>,
    out: &mut Output,
) -> Result<(), CliError> {
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::io(format!("cannot open {}", path.display()), e))?;
    let entries = history::read(BufReader::new(file))
        .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    let verdict = check(&entries, bounds);
    for line in render(&verdict).lines() {
        out.line(line)?;
    }
    if let Some(report_path) = report_path {
        report::write(report_path, &entries, &verdict)?;
        out.line(&out.paint(Tone::Dim, &format!("report: {}", report_path.display())))?;
    }
    if verdict.violations.is_empty() {
        Ok(())
    } else {
        Err(CliError::ChaosViolations(verdict.violations.len()))
    }
}

/// Runs `fencelock chaos-check FILE`.
pub fn check_command(args: &CheckArgs) -> Result<(), CliError> {
    let mut out = Output::stdout();
    let bounds = Bounds {
        resume_ms: u64::try_from(args.resume_bound.as_millis()).unwrap_or(u64::MAX),
    };
    check_file(&args.file, &bounds, args.report.as_deref(), &mut out)
}

#[cfg(test)]
mod tests {
    use super::{Bag, Fault, Rng};

    #[test]
    fn each_fault_comes_once_before_any_comes_again() {
        let all = [Fault::PauseWorker, Fault::KillWorker, Fault::Latency];
        let mut rng = Rng::new(7);
        let mut bag = Bag::new(&all);
        for _ in 0..4 {
            let mut round: Vec<&str> = (0..all.len())
                .filter_map(|_| bag.draw(&mut rng).map(Fault::name))
                .collect();
            round.sort_unstable();
            assert_eq!(round, ["kill-worker", "latency", "pause-worker"]);
        }
        assert_eq!(Bag::new(&[]).draw(&mut rng).map(Fault::name), None);
    }
}
