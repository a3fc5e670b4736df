//! `fencelock chaos`: worker processes contend for a few locks over servers the run starts
//! itself, while a nemesis injects faults on a seeded schedule; every operation and fault goes
//! to a history file, and a checker reads it and says whether a guarantee broke.
//!
//! - [`history`]: the history's lines;
//! - [`worker`]: one worker process (the hidden `chaos-worker` subcommand);
//! - [`nemesis`]: the faults;
//! - [`deployment`]: the lock servers (one, Redlock's five, a Cluster, a Sentinel set);
//! - [`stage`]: everything a run started (the deployment, the store, the worker processes);
//! - [`run`]: the plan, the schedule, the history file;
//! - [`check`]: the checker (also `fencelock chaos-check FILE`);
//! - [`report`]: the history and the checker's verdict as one HTML page (`--report FILE`).

pub mod check;
pub mod deployment;
pub mod history;
pub mod nemesis;
pub mod report;
pub mod run;
pub mod stage;
pub mod worker;

use crate::error::{exit, exit_help};
use std::path::PathBuf;
use std::time::Duration;

use crate::duration::parse_duration;
pub use crate::rng::Rng;

pub const ABOUT: &str = "\
Fault injection with a history checker: worker processes contend for a few locks while a \
nemesis stops, kills and pauses servers and workers; every operation and fault is recorded, and \
a checker says whether any guarantee broke.

The run starts its own redis-server processes on free ports of 127.0.0.1 (one server, five for \
Redlock, a Cluster of 3 masters and 3 replicas, or a Sentinel master with 2 replicas and 3 \
sentinels), plus one more for the protected resource (a fenced store and an unfenced counter, \
never faulted), and worker processes of this program. Each worker loops: take one of the locks, \
write to the fenced store with its fence, read-modify-write the unfenced counter, hold for a \
moment, note whether it was told the lock was lost, release.

Faults (--faults, comma-separated; default: all): pause-server (SIGSTOP/SIGCONT), kill-server \
(SIGKILL, restart empty on the same port), client-pause (CLIENT PAUSE ALL), script-flush, \
debug-sleep (DEBUG SLEEP), latency, blackhole and cut-connections (at a TCP proxy in front of \
each server: one server and Redlock), failover (Cluster: CLUSTER FAILOVER; Sentinel: SENTINEL \
FAILOVER), pause-worker (SIGSTOP a worker past its lease), kill-worker (SIGKILL, start \
another). Over Redlock, server faults hit one instance at a time; faults a topology cannot take \
are refused before anything starts.

The checker (also `fencelock chaos-check FILE`) verifies: fences per lock grow in grant order; \
the fenced store accepted fences in order, refused only older ones and kept every write it \
acknowledged; two holders overlap only when one was told by lost() — else an exclusion \
violation, and a silent overlap when not even the fenced store refused a write, the worst \
failure (overlaps just after a server lost its data, or during a Sentinel failover, whose \
replication is asynchronous, are counted apart: no lock survives those); after each fault \
heals, grants resume within a bound.

With --report FILE.html (also on chaos-check), the history and the verdict are drawn as one \
self-contained HTML page: per lock a timeline of the holders (a bar per grant), waits, losses \
and refused writes, the faults shaded and each violation marked and listed with its history \
lines; and the latency of each request over time.

With --kind semaphore, at most --permits holders may overlap (the fenced store is not used: \
permits are held together); with --kind fair, grants must also follow the order of requests \
made at least 50 ms apart with no fault in between.";

/// The help after the options.
pub fn after_help() -> String {
    exit_help(
        &[
            exit::SUCCESS.saying("no violation was found"),
            exit::CHECK_FAILED.saying("a violation was found"),
            exit::USAGE,
            exit::OTHER,
            exit::INTERRUPTED,
        ],
        "\
Examples:
  fencelock chaos --duration 60s                     # one server, every fault
  fencelock chaos --topology redlock --duration 5m --seed 42
  fencelock chaos --faults pause-worker,kill-server --history run.jsonl
  fencelock chaos --duration 30s --report run.html   # and a page: timeline, latency, violations
  fencelock chaos-check run.jsonl                    # check a history again
  fencelock chaos-check run.jsonl --report run.html  # and draw it",
    )
}

/// The deployments a run can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Topology {
    /// One redis-server.
    Single,
    /// Redlock over five independent redis-servers.
    Redlock,
    /// A Redis Cluster of 3 masters with a replica each.
    Cluster,
    /// A Sentinel master with 2 replicas and 3 sentinels.
    Sentinel,
}

impl Topology {
    /// The name on the command line and in the history.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Single => "single",
            Topology::Redlock => "redlock",
            Topology::Cluster => "cluster",
            Topology::Sentinel => "sentinel",
        }
    }

    /// The faults this deployment can take: proxies sit in front of single servers only
    /// (Cluster and Sentinel hand out the real addresses), failovers need replicas, and a
    /// killed cluster or Sentinel node is not brought back.
    pub fn faults(self) -> Vec<nemesis::Fault> {
        use clap::ValueEnum;
        use nemesis::Fault::{Blackhole, CutConnections, Failover, KillServer, Latency};
        let replicated = matches!(self, Topology::Cluster | Topology::Sentinel);
        nemesis::Fault::value_variants()
            .iter()
            .copied()
            .filter(|fault| match fault {
                Failover => replicated,
                KillServer | Latency | Blackhole | CutConnections => !replicated,
                _ => true,
            })
            .collect()
    }
}

/// The kind of lock the workers contend for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// The fenced lock.
    Lock,
    /// The reentrant lock (each worker its own owner).
    Reentrant,
    /// The write side of the read-write lock.
    Write,
    /// A semaphore of `--permits` permits.
    Semaphore,
    /// The fair lock (first come, first served).
    Fair,
}

impl Kind {
    /// The name on the command line and in the history.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Reentrant => "reentrant",
            Kind::Write => "write",
            Kind::Semaphore => "semaphore",
            Kind::Fair => "fair",
        }
    }
}

/// Arguments of `fencelock chaos`.
#[derive(Debug, clap::Args)]
pub struct ChaosArgs {
    /// The deployment to start and fault
    #[arg(long, value_enum, default_value = "single")]
    pub topology: Topology,
    /// Worker processes
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,
    /// Lock names the workers share
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub locks: u32,
    /// The kind of lock (the semaphore and the fair lock need one server, Cluster or Sentinel:
    /// not Redlock)
    #[arg(long, value_enum, default_value = "lock")]
    pub kind: Kind,
    /// The semaphore's permits (with --kind semaphore)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub permits: u32,
    /// The lease of each lock
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub ttl: Duration,
    /// How long the run lasts
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// The faults, comma-separated (default: all); each comes once, in a random order, before
    /// any comes again
    #[arg(long, value_delimiter = ',')]
    pub faults: Vec<nemesis::Fault>,
    /// The mean time between two faults
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub fault_interval: Duration,
    /// The seed of the schedule (default: from the clock; printed, so a run can be repeated)
    #[arg(long)]
    pub seed: Option<u64>,
    /// The history file (default: fencelock-chaos-SEED.jsonl in the current directory)
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Also write the history and the checker's verdict as one self-contained HTML page: a
    /// timeline of each lock's holders with the faults and violations, and the latency of each
    /// request
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Deliberate bugs that the checker must report (for its own tests): unfenced-store,
    /// never-lost, release-any
    #[arg(long, value_delimiter = ',', hide = true)]
    pub mutate: Vec<String>,
}

/// Arguments of `fencelock chaos-check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The history file a chaos run wrote
    pub file: PathBuf,
    /// The longest time from a fault's end to the next grant before it counts as a violation
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub resume_bound: Duration,
    /// Also write the history and the verdict as one self-contained HTML page (timeline,
    /// latency, violations with their history lines)
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

/// Deliberate bugs, each of which the checker must find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The worker writes to the store without the fence check.
    UnfencedStore,
    /// The worker never says it was told of a loss.
    NeverLost,
    /// The worker deletes the lock key at release, whoever holds it.
    ReleaseAny,
}

impl Mutation {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "unfenced-store" => Ok(Mutation::UnfencedStore),
            "never-lost" => Ok(Mutation::NeverLost),
            "release-any" => Ok(Mutation::ReleaseAny),
            other => Err(format!(
                "unknown mutation {other:?} (unfenced-store, never-lost, release-any)"
            )),
        }
    }

    /// Parses a comma-separated list (empty: none).
    pub fn parse_list(s: &str) -> Result<Vec<Self>, String> {
        s.split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(Mutation::parse)
            .collect()
    }
}

/// The fenced store's log of lock `lock` (on the store server).
pub fn log_key(lock: &str) -> String {
    format!("chaos:{{{lock}}}:log")
}

/// The unfenced counter of lock `lock` (on the store server).
pub fn counter_key(lock: &str) -> String {
    format!("chaos:{{{lock}}}:counter")
}
