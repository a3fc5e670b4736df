//! Everything a chaos run started: the deployment, the store's server and the worker processes,
//! which the nemesis stops, kills and starts again; each worker's history lines are forwarded to
//! the run's history.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, BufReader as AsyncBufReader};
use tokio::sync::mpsc;

use super::deployment::Deployment;
use super::history::{Entry, What};
use super::{Kind, Rng, Topology};
use crate::process::ChildProcess;
use fencelock_testkit::RedisServer;

/// What every worker is started with (each also gets its id and a seed of its own).
pub struct WorkerSettings {
    pub topology: Topology,
    pub kind: Kind,
    pub permits: u32,
    pub locks: Vec<String>,
    pub ttl: Duration,
    /// The run's seed.
    pub seed: u64,
    /// The deliberate bugs, comma-separated.
    pub mutate: String,
}

/// Everything a run started, for the nemesis to act on. Dropping it kills every process.
pub struct Stage {
    // Workers first: they are killed before the servers.
    workers: BTreeMap<u32, ChildProcess>,
    pub deployment: Deployment,
    store: RedisServer,
    exe: PathBuf,
    settings: WorkerSettings,
    urls: String,
    spawned: u64,
    /// Workers that hold a lock now (as their history lines say).
    holding: Arc<Mutex<BTreeSet<u32>>>,
    tx: mpsc::UnboundedSender<Entry>,
}

impl Stage {
    /// The stage of `deployment` and the store's server `store`, whose workers (none yet) run
    /// `exe` with `settings`, and whose history goes to `tx`.
    pub fn new(
        deployment: Deployment,
        store: RedisServer,
        exe: PathBuf,
        settings: WorkerSettings,
        tx: mpsc::UnboundedSender<Entry>,
    ) -> Stage {
        let urls = deployment.urls();
        Stage {
            workers: BTreeMap::new(),
            deployment,
            store,
            exe,
            settings,
            urls,
            spawned: 0,
            holding: Arc::default(),
            tx,
        }
    }

    /// Adds `entry` to the history.
    pub fn record(&self, entry: Entry) {
        let _ = self.tx.send(entry);
    }

    pub fn ttl(&self) -> Duration {
        self.settings.ttl
    }

    pub fn locks(&self) -> &[String] {
        &self.settings.locks
    }

    /// The URL of the store's server.
    pub fn store_url(&self) -> String {
        self.store.url()
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
        let settings = &self.settings;
        let mut command = Command::new(&self.exe);
        command
            .arg("chaos-worker")
            .arg("--id")
            .arg(id.to_string())
            .arg("--topology")
            .arg(settings.topology.name())
            .arg("--kind")
            .arg(settings.kind.name())
            .arg("--permits")
            .arg(settings.permits.to_string())
            .arg("--locks")
            .arg(settings.locks.join(","))
            .arg("--ttl-ms")
            .arg(settings.ttl.as_millis().to_string())
            .arg("--seed")
            .arg(settings.seed.wrapping_add(self.spawned).to_string())
            .arg("--mutate")
            .arg(&settings.mutate)
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
    pub async fn finish(&mut self) {
        for worker in self.workers.values_mut() {
            let _ = worker.signal(Signal::SIGCONT);
            worker.close_stdin();
        }
        let limit = self.settings.ttl * 4 + Duration::from_secs(2);
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
