//! A chaos run: the servers, the worker processes, the fault schedule and the history file;
//! then the checker.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufReader, BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, BufReader as AsyncBufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::check::{Bounds, check, render};
use super::history::{self, Entry, What};
use super::nemesis::{Fault, inject};
use super::{ChaosArgs, CheckArgs, Kind, Mutation, Rng, Topology, counter_key, log_key};
use crate::duration::format_duration;
use crate::error::CliError;
use crate::output::{Output, Tone};
use crate::process::{ChildProcess, until_signalled};
use fencelock_testkit::{FaultProxy, RedisCluster, RedisServer, SentinelSet};

/// The deployment of a run: its lock servers, and how workers reach them.
pub enum Deployment {
    /// One server, or Redlock's independent instances, each behind a fault proxy.
    Servers {
        servers: Vec<RedisServer>,
        proxies: Vec<FaultProxy>,
    },
    /// A Redis Cluster of 3 masters with a replica each.
    Cluster(RedisCluster),
    /// A master with 2 replicas and 3 sentinels.
    Sentinel(SentinelSet),
}

impl Deployment {
    async fn start(topology: Topology) -> Result<Deployment, CliError> {
        let started =
            |what: &str, e: std::io::Error| CliError::RedisServerStart(format!("{what}: {e}"));
        match topology {
            Topology::Single | Topology::Redlock => {
                let n = if topology == Topology::Single { 1 } else { 5 };
                let mut servers = Vec::new();
                let mut proxies = Vec::new();
                for _ in 0..n {
                    let server =
                        blocking(RedisServer::start).map_err(|e| started("redis-server", e))?;
                    proxies.push(
                        FaultProxy::start(server.addr())
                            .await
                            .map_err(|e| started("a fault proxy", e))?,
                    );
                    servers.push(server);
                }
                Ok(Deployment::Servers { servers, proxies })
            }
            Topology::Cluster => blocking(|| RedisCluster::start(3, 1))
                .map(Deployment::Cluster)
                .map_err(|e| started("a Redis Cluster", e)),
            Topology::Sentinel => blocking(|| SentinelSet::start(2, 3))
                .map(Deployment::Sentinel)
                .map_err(|e| started("a Sentinel set", e)),
        }
    }

    /// The worker's `FENCELOCK_URL` (comma-separated).
    fn urls(&self) -> String {
        match self {
            Deployment::Servers { proxies, .. } => proxies
                .iter()
                .map(FaultProxy::url)
                .collect::<Vec<_>>()
                .join(","),
            Deployment::Cluster(cluster) => cluster.urls().join(","),
            Deployment::Sentinel(set) => set.sentinel_urls().join(","),
        }
    }

    fn describe(&self) -> String {
        match self {
            Deployment::Servers { servers, .. } if servers.len() == 1 => {
                "one redis-server (behind a fault proxy)".to_owned()
            }
            Deployment::Servers { servers, .. } => format!(
                "Redlock over {} redis-servers (each behind a fault proxy)",
                servers.len()
            ),
            Deployment::Cluster(cluster) => format!(
                "a Redis Cluster of {} masters with a replica each",
                cluster.masters().len()
            ),
            Deployment::Sentinel(set) => format!(
                "a Sentinel master with {} replicas and {} sentinels",
                set.nodes.len().saturating_sub(1),
                set.sentinels.len()
            ),
        }
    }

    /// The servers that take locks now (one server, Redlock's instances, the cluster's
    /// masters, the Sentinel master), as indices into [`Deployment::node`].
    pub fn lock_servers(&self) -> Vec<usize> {
        match self {
            Deployment::Servers { servers, .. } => (0..servers.len()).collect(),
            Deployment::Cluster(cluster) => cluster
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| is_master(n))
                .map(|(i, _)| i)
                .collect(),
            Deployment::Sentinel(set) => set.master_index().into_iter().collect(),
        }
    }

    /// Node `index` (a server, a cluster node, a Sentinel data node).
    pub fn node(&mut self, index: usize) -> Option<&mut RedisServer> {
        match self {
            Deployment::Servers { servers, .. } => servers.get_mut(index),
            Deployment::Cluster(cluster) => cluster.nodes.get_mut(index),
            Deployment::Sentinel(set) => set.nodes.get_mut(index),
        }
    }

    /// The fault proxy in front of server `index`, if there is one.
    pub fn proxy(&self, index: usize) -> Option<&FaultProxy> {
        match self {
            Deployment::Servers { proxies, .. } => proxies.get(index),
            _ => None,
        }
    }

    /// Whether server faults must stay short of a failover (Cluster and Sentinel detect a
    /// master as down after 1 s).
    pub fn fails_over(&self) -> bool {
        !matches!(self, Deployment::Servers { .. })
    }

    /// A graceful failover (Cluster: of the master serving `lock`; Sentinel: of the master).
    /// Returns what failed over.
    pub fn failover(&self, lock: &str) -> Result<String, String> {
        match self {
            Deployment::Cluster(cluster) => {
                let master = cluster
                    .master_of(&format!("fencelock:{{{lock}}}"))
                    .map_err(|e| e.to_string())?;
                let id = cluster.node_id(master).map_err(|e| e.to_string())?;
                let replica = cluster
                    .nodes
                    .iter()
                    .find(|n| replica_of(n, &id))
                    .ok_or_else(|| format!("no replica of the master on port {}", master.port()))?;
                cluster
                    .failover(replica, false)
                    .map_err(|e| e.to_string())?;
                Ok(format!("cluster master on port {}", master.port()))
            }
            Deployment::Sentinel(set) => {
                let old = set.master().map_err(|e| e.to_string())?.port();
                set.failover().map_err(|e| e.to_string())?;
                Ok(format!("sentinel master on port {old}"))
            }
            Deployment::Servers { .. } => Err("no failover without replicas".into()),
        }
    }
}

/// Whether a cluster node says it is a master.
fn is_master(node: &RedisServer) -> bool {
    node.is_running()
        && matches!(node.cmd(&["ROLE"]), Ok(redis::Value::Array(parts))
            if matches!(parts.first(), Some(redis::Value::BulkString(b)) if b == b"master"))
}

/// Whether a cluster node is a replica of the master with node id `id`.
fn replica_of(node: &RedisServer, id: &str) -> bool {
    let Ok(value) = node.cmd(&["CLUSTER", "NODES"]) else {
        return false;
    };
    let text = match value {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        _ => return false,
    };
    text.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields
            .get(2)
            .is_some_and(|f| f.contains("myself") && f.contains("slave"))
            && fields.get(3) == Some(&id)
    })
}

/// Runs a blocking test-kit call without stalling the other tasks (the fault proxies relay on
/// this runtime).
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Everything a run started, for the nemesis to act on. Dropping it kills every process.
pub struct Stage {
    // Workers first: they are killed before the servers.
    workers: BTreeMap<u32, ChildProcess>,
    pub deployment: Deployment,
    store: RedisServer,
    exe: PathBuf,
    topology: Topology,
    kind: Kind,
    permits: u32,
    urls: String,
    locks: Vec<String>,
    ttl: Duration,
    seed: u64,
    mutate: String,
    spawned: u64,
    /// Workers that hold a lock now (as their history lines say).
    holding: Arc<Mutex<BTreeSet<u32>>>,
    tx: mpsc::UnboundedSender<Entry>,
}

impl Stage {
    /// Adds `entry` to the history.
    pub fn record(&self, entry: Entry) {
        let _ = self.tx.send(entry);
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn locks(&self) -> &[String] {
        &self.locks
    }

    /// A worker, chosen by `rng`: one that holds a lock now if there is one (a pause then
    /// outlives its lease), else any.
    pub fn pick_worker(&self, rng: &mut Rng) -> u32 {
        let holding: Vec<u32> = self
            .holding
            .lock()
            .map(|h| {
                h.iter()
                    .copied()
                    .filter(|w| self.workers.contains_key(w))
                    .collect()
            })
            .unwrap_or_default();
        let ids: Vec<u32> = if holding.is_empty() {
            self.workers.keys().copied().collect()
        } else {
            holding
        };
        let index = usize::try_from(rng.below(ids.len() as u64)).unwrap_or(0);
        ids.get(index).copied().unwrap_or(1)
    }

    pub fn signal_worker(&mut self, id: u32, sig: Signal) {
        if let Some(Err(e)) = self.workers.get_mut(&id).map(|w| w.signal(sig)) {
            tracing::warn!(worker = id, %e, "cannot signal a worker");
        }
    }

    pub fn kill_worker(&mut self, id: u32) {
        if let Some(mut worker) = self.workers.remove(&id) {
            worker.kill_and_reap();
        }
        if let Ok(mut holding) = self.holding.lock() {
            holding.remove(&id);
        }
    }

    /// Starts worker `id` (again); its history lines go to the run's history.
    pub fn spawn_worker(&mut self, id: u32) {
        self.spawned += 1;
        let mut command = Command::new(&self.exe);
        command
            .arg("chaos-worker")
            .arg("--id")
            .arg(id.to_string())
            .arg("--topology")
            .arg(self.topology.name())
            .arg("--kind")
            .arg(self.kind.name())
            .arg("--permits")
            .arg(self.permits.to_string())
            .arg("--locks")
            .arg(self.locks.join(","))
            .arg("--ttl-ms")
            .arg(self.ttl.as_millis().to_string())
            .arg("--seed")
            .arg(self.seed.wrapping_add(self.spawned).to_string())
            .arg("--mutate")
            .arg(&self.mutate)
            // In the environment, not on the command line.
            .env("FENCELOCK_URL", &self.urls)
            .env("FENCELOCK_CHAOS_STORE_URL", self.store.url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut worker = match ChildProcess::spawn(format!("worker {id}"), &mut command) {
            Ok(worker) => worker,
            Err(e) => {
                tracing::warn!(worker = id, %e, "cannot start a worker");
                return;
            }
        };
        if let Some(stdout) = worker.take_stdout() {
            match tokio::process::ChildStdout::from_std(stdout) {
                Ok(stdout) => {
                    tokio::spawn(forward(id, stdout, self.tx.clone(), self.holding.clone()));
                }
                Err(e) => tracing::warn!(worker = id, %e, "cannot read a worker's output"),
            }
        }
        self.workers.insert(id, worker);
    }

    /// Closes every worker's stdin, waits for them, kills those still there.
    async fn finish(&mut self) {
        for worker in self.workers.values_mut() {
            let _ = worker.signal(Signal::SIGCONT);
            worker.close_stdin();
        }
        let limit = self.ttl * 4 + Duration::from_secs(2);
        for worker in self.workers.values_mut() {
            if worker.wait_for_exit(limit).await.is_none() {
                worker.kill_and_reap();
            }
        }
    }
}

/// Forwards a worker's history lines.
async fn forward(
    id: u32,
    stdout: tokio::process::ChildStdout,
    tx: mpsc::UnboundedSender<Entry>,
    holding: Arc<Mutex<BTreeSet<u32>>>,
) {
    let mut lines = AsyncBufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        match serde_json::from_str::<Entry>(&line) {
            Ok(entry) => {
                if let Ok(mut holding) = holding.lock() {
                    match entry.what {
                        What::Granted { .. } => {
                            holding.insert(id);
                        }
                        What::Release { .. } => {
                            holding.remove(&id);
                        }
                        _ => {}
                    }
                }
                let _ = tx.send(entry);
            }
            Err(e) => tracing::warn!(worker = id, %e, %line, "not a history line"),
        }
    }
}

/// Runs `fencelock chaos`.
pub async fn run(args: ChaosArgs) -> Result<(), CliError> {
    let mut out = Output::stdout();
    let result = until_signalled(chaos(&args, &mut out)).await;
    out.clear_status();
    result
}

async fn chaos(args: &ChaosArgs, out: &mut Output) -> Result<(), CliError> {
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
    let deployment = Deployment::start(args.topology).await?;
    let store = blocking(RedisServer::start)
        .map_err(|e| CliError::RedisServerStart(format!("the store's redis-server: {e}")))?;
    out.line(&format!(
        "{}: {} workers on {} over {}, lease {}, {} of faults every ~{}, seed {seed}",
        out.paint(Tone::Strong, "fencelock chaos"),
        args.workers,
        locks.join(", "),
        deployment.describe(),
        format_duration(args.ttl),
        format_duration(args.duration),
        format_duration(args.fault_interval),
    ))?;
    out.line(&out.paint(
        Tone::Dim,
        &format!(
            "faults: {}; history: {}",
            faults.iter().map(|f| f.name()).collect::<Vec<_>>().join(", "),
            path.display()
        ),
    ))?;

    let (tx, rx) = mpsc::unbounded_channel();
    let grants = Arc::new(AtomicU64::new(0));
    let writer = tokio::task::spawn_blocking({
        let path = path.clone();
        let grants = grants.clone();
        move || write_history(&path, rx, &grants)
    });
    let exe = std::env::current_exe()
        .map_err(|e| CliError::io("cannot find this program's own executable", e))?;
    let urls = deployment.urls();
    let mut stage = Stage {
        workers: BTreeMap::new(),
        deployment,
        store,
        exe,
        topology: args.topology,
        kind: args.kind,
        permits: if args.kind == Kind::Semaphore {
            args.permits
        } else {
            1
        },
        urls,
        locks: locks.clone(),
        ttl: args.ttl,
        seed,
        mutate: args.mutate.join(","),
        spawned: 0,
        holding: Arc::default(),
        tx,
    };
    stage.record(Entry::now(
        None,
        None,
        What::Run {
            topology: args.topology.name().into(),
            kind: args.kind.name().into(),
            permits: if args.kind == Kind::Semaphore {
                args.permits
            } else {
                1
            },
            workers: args.workers,
            locks: locks.clone(),
            ttl_ms: u64::try_from(args.ttl.as_millis()).unwrap_or(u64::MAX),
            seed,
            faults: faults.iter().map(|f| f.name().to_owned()).collect(),
            mutations: args.mutate.clone(),
        },
    ));
    for id in 1..=args.workers {
        stage.spawn_worker(id);
    }

    // The schedule.
    let started = Instant::now();
    let deadline = started + args.duration;
    let mut rng = Rng::new(seed);
    let interval_ms = u64::try_from(args.fault_interval.as_millis()).unwrap_or(u64::MAX);
    let mut injected: BTreeMap<&'static str, u32> = BTreeMap::new();
    loop {
        let wait = Duration::from_millis(rng.between(interval_ms / 2, interval_ms * 3 / 2));
        if Instant::now() + wait >= deadline {
            tokio::time::sleep_until(deadline).await;
            break;
        }
        tokio::time::sleep(wait).await;
        let Some(&fault) = faults.get(usize::try_from(rng.below(faults.len() as u64)).unwrap_or(0))
        else {
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
        inject(&mut stage, fault, &mut rng).await;
    }
    out.clear_status();
    stage.finish().await;

    // The resource's own record.
    let final_state = read_store(&stage.store.url(), &locks).await;
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
    check_file(&path, &Bounds { resume_ms: 15_000 }, out)
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

/// Checks a history file and prints the verdict; `Err` when a violation was found.
fn check_file(path: &Path, bounds: &Bounds, out: &mut Output) -> Result<(), CliError> {
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::io(format!("cannot open {}", path.display()), e))?;
    let entries = history::read(BufReader::new(file))
        .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    let verdict = check(&entries, bounds);
    for line in render(&verdict).lines() {
        out.line(line)?;
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
    check_file(&args.file, &bounds, &mut out)
}
