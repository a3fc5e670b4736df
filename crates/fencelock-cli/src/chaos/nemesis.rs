//! The faults a chaos run injects, each recorded as a start and an end in the history.

use std::time::Duration;

use nix::sys::signal::Signal;

use super::Rng;
use super::deployment::blocking;
use super::history::{Entry, Phase, What};
use super::stage::Stage;

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// SIGSTOP a lock server, SIGCONT it later.
    PauseServer,
    /// SIGKILL a lock server and start it again, empty, on the same port.
    KillServer,
    /// `CLIENT PAUSE ms ALL` on a lock server.
    ClientPause,
    /// `SCRIPT FLUSH` on a lock server.
    ScriptFlush,
    /// `DEBUG SLEEP` on a lock server.
    DebugSleep,
    /// The proxy in front of a lock server delays every chunk.
    Latency,
    /// The proxy in front of a lock server delivers nothing (connections stay open).
    Blackhole,
    /// The proxy in front of a lock server cuts every connection.
    CutConnections,
    /// A graceful failover (Cluster: a lock's master; Sentinel: the master).
    Failover,
    /// SIGSTOP a worker (one that holds a lock, if any) for 1.5 to 3 leases, SIGCONT it later.
    PauseWorker,
    /// SIGKILL a worker and start another in its place.
    KillWorker,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 11] = [
        Fault::PauseServer,
        Fault::KillServer,
        Fault::ClientPause,
        Fault::ScriptFlush,
        Fault::DebugSleep,
        Fault::Latency,
        Fault::Blackhole,
        Fault::CutConnections,
        Fault::Failover,
        Fault::PauseWorker,
        Fault::KillWorker,
    ];

    /// The name in the history and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fault::PauseServer => "pause-server",
            Fault::KillServer => "kill-server",
            Fault::ClientPause => "client-pause",
            Fault::ScriptFlush => "script-flush",
            Fault::DebugSleep => "debug-sleep",
            Fault::Latency => "latency",
            Fault::Blackhole => "blackhole",
            Fault::CutConnections => "cut-connections",
            Fault::Failover => "failover",
            Fault::PauseWorker => "pause-worker",
            Fault::KillWorker => "kill-worker",
        }
    }
}

fn record(stage: &Stage, fault: Fault, target: &str, phase: Phase) {
    stage.record(Entry::now(
        None,
        None,
        What::Fault {
            kind: fault.name().into(),
            target: target.into(),
            phase,
        },
    ));
}

/// Logs a fault that could not be applied (the history still says when it was tried).
fn warn_failed(fault: Fault, target: &str, error: impl std::fmt::Display) {
    tracing::warn!(fault = fault.name(), target, %error, "fault not applied");
}

/// Runs `action` on lock server node `index` (off the runtime's threads); a failure is logged.
fn on_node<E: std::fmt::Display>(
    stage: &mut Stage,
    index: usize,
    fault: Fault,
    target: &str,
    action: impl FnOnce(&mut fencelock_testkit::RedisServer) -> Result<(), E>,
) {
    match stage.deployment.node(index) {
        Some(node) => {
            if let Err(e) = blocking(|| action(node)) {
                warn_failed(fault, target, e);
            }
        }
        None => warn_failed(fault, target, "no such server"),
    }
}

/// Injects `fault` and heals it (the call returns when the fault is over).
pub async fn inject(stage: &mut Stage, fault: Fault, rng: &mut Rng) {
    let ttl = stage.ttl();
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let servers = blocking(|| stage.deployment.lock_servers());
    let index = servers
        .get(usize::try_from(rng.below(servers.len() as u64)).unwrap_or(0))
        .copied()
        .unwrap_or(0);
    let server = Server {
        index,
        target: format!("server {index}"),
    };
    // Server faults last a fifth of the lease to twice it; where a longer stop would make
    // the deployment fail over (Cluster, Sentinel: 1 s), at most 800 ms.
    let longest = if stage.deployment.fails_over() {
        800.min(ttl_ms * 2)
    } else {
        ttl_ms * 2
    };
    let short = Duration::from_millis(rng.between(ttl_ms / 5, longest.max(ttl_ms / 5 + 1)));
    match fault {
        Fault::PauseServer => pause_server(stage, &server, short).await,
        Fault::KillServer => kill_server(stage, &server, short).await,
        Fault::ClientPause => client_pause(stage, &server, short).await,
        Fault::ScriptFlush => script_flush(stage, &server),
        Fault::DebugSleep => debug_sleep(stage, &server, short).await,
        Fault::Latency => latency(stage, index, short, rng).await,
        Fault::Blackhole => blackhole(stage, index, short).await,
        Fault::CutConnections => cut_connections(stage, index),
        Fault::Failover => failover(stage, rng),
        Fault::PauseWorker => pause_worker(stage, ttl_ms, rng).await,
        Fault::KillWorker => kill_worker(stage, rng),
    }
}

/// The lock server a fault hits: its node index, and its name in the history.
struct Server {
    index: usize,
    target: String,
}

/// SIGSTOP the server for `short`, then SIGCONT.
async fn pause_server(stage: &mut Stage, server: &Server, short: Duration) {
    let (start, end) = (|n: &mut Node| n.pause(), |n: &mut Node| n.resume());
    node_fault(stage, server, Fault::PauseServer, start, short, end).await;
}

/// SIGKILL the server, and start it again, empty, a quarter of `short` later.
async fn kill_server(stage: &mut Stage, server: &Server, short: Duration) {
    let (start, end) = (|n: &mut Node| n.kill(), |n: &mut Node| n.restart());
    node_fault(stage, server, Fault::KillServer, start, short / 4, end).await;
}

/// A fault of one node: `start` on it, `held` later `end`, recorded as a start and an end.
async fn node_fault<E: std::fmt::Display, F: std::fmt::Display>(
    stage: &mut Stage,
    server: &Server,
    fault: Fault,
    start: impl FnOnce(&mut Node) -> Result<(), E>,
    held: Duration,
    end: impl FnOnce(&mut Node) -> Result<(), F>,
) {
    let Server { index, target } = server;
    record(stage, fault, target, Phase::Start);
    on_node(stage, *index, fault, target, start);
    tokio::time::sleep(held).await;
    on_node(stage, *index, fault, target, end);
    record(stage, fault, target, Phase::End);
}

/// A node of the deployment.
type Node = fencelock_testkit::RedisServer;

/// `CLIENT PAUSE` the server for `short`.
async fn client_pause(stage: &mut Stage, server: &Server, short: Duration) {
    let fault = Fault::ClientPause;
    let Server { index, target } = server;
    record(stage, fault, target, Phase::Start);
    on_node(stage, *index, fault, target, |node| {
        node.client_pause(short)
    });
    tokio::time::sleep(short).await;
    record(stage, fault, target, Phase::End);
}

/// `SCRIPT FLUSH` on the server.
fn script_flush(stage: &mut Stage, server: &Server) {
    let fault = Fault::ScriptFlush;
    let Server { index, target } = server;
    record(stage, fault, target, Phase::Start);
    on_node(stage, *index, fault, target, |node| node.script_flush());
    record(stage, fault, target, Phase::End);
}

/// `DEBUG SLEEP` on the server for `short` (the call blocks a thread of its own).
async fn debug_sleep(stage: &mut Stage, server: &Server, short: Duration) {
    let fault = Fault::DebugSleep;
    let Server { index, target } = server;
    record(stage, fault, target, Phase::Start);
    let sleeping = stage
        .deployment
        .node(*index)
        .map(|node| blocking(|| node.debug_sleep(short)));
    tokio::time::sleep(short).await;
    if let Some(handle) = sleeping {
        match blocking(|| handle.join()) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn_failed(fault, target, e),
            Err(_) => warn_failed(fault, target, "the DEBUG SLEEP thread panicked"),
        }
    }
    record(stage, fault, target, Phase::End);
}

/// The proxy in front of server `index` delays every chunk (5 to 100 ms each way) for twice
/// `short`.
async fn latency(stage: &mut Stage, index: usize, short: Duration, rng: &mut Rng) {
    let fault = Fault::Latency;
    let delay = Duration::from_millis(rng.between(5, 100));
    let target = format!("proxy {index} (+{} ms each way)", delay.as_millis());
    record(stage, fault, &target, Phase::Start);
    if let Some(proxy) = stage.deployment.proxy(index) {
        proxy.set_latency(delay);
    }
    tokio::time::sleep(short * 2).await;
    if let Some(proxy) = stage.deployment.proxy(index) {
        proxy.set_latency(Duration::ZERO);
    }
    record(stage, fault, &target, Phase::End);
}

/// The proxy in front of server `index` delivers nothing for `short`.
async fn blackhole(stage: &mut Stage, index: usize, short: Duration) {
    let fault = Fault::Blackhole;
    let target = format!("proxy {index}");
    record(stage, fault, &target, Phase::Start);
    if let Some(proxy) = stage.deployment.proxy(index) {
        proxy.set_blackhole(true);
    }
    tokio::time::sleep(short).await;
    if let Some(proxy) = stage.deployment.proxy(index) {
        proxy.set_blackhole(false);
    }
    record(stage, fault, &target, Phase::End);
}

/// The proxy in front of server `index` cuts every connection.
fn cut_connections(stage: &mut Stage, index: usize) {
    let fault = Fault::CutConnections;
    let target = format!("proxy {index}");
    record(stage, fault, &target, Phase::Start);
    if let Some(proxy) = stage.deployment.proxy(index) {
        proxy.cut_all();
    }
    record(stage, fault, &target, Phase::End);
}

/// A graceful failover of the master of one of the locks, chosen by `rng`.
fn failover(stage: &mut Stage, rng: &mut Rng) {
    let fault = Fault::Failover;
    let locks = stage.locks().to_vec();
    let lock = locks
        .get(usize::try_from(rng.below(locks.len() as u64)).unwrap_or(0))
        .cloned()
        .unwrap_or_default();
    record(stage, fault, &format!("the master of {lock}"), Phase::Start);
    let outcome = blocking(|| stage.deployment.failover(&lock));
    let target = match outcome {
        Ok(what) => what,
        Err(e) => {
            warn_failed(fault, &lock, &e);
            format!("the master of {lock} (failed: {e})")
        }
    };
    record(stage, fault, &target, Phase::End);
}

/// SIGSTOP a worker (one that holds a lock, if any) past its lease, 1.5 to 3 leases; then
/// SIGCONT.
async fn pause_worker(stage: &mut Stage, ttl_ms: u64, rng: &mut Rng) {
    let fault = Fault::PauseWorker;
    let worker = stage.pick_worker(rng);
    let target = format!("worker {worker}");
    let pause = Duration::from_millis(rng.between(ttl_ms * 3 / 2, ttl_ms * 3));
    record(stage, fault, &target, Phase::Start);
    stage.signal_worker(worker, Signal::SIGSTOP);
    tokio::time::sleep(pause).await;
    stage.signal_worker(worker, Signal::SIGCONT);
    record(stage, fault, &target, Phase::End);
}

/// SIGKILL a worker (one that holds a lock, if any) and start another in its place.
fn kill_worker(stage: &mut Stage, rng: &mut Rng) {
    let fault = Fault::KillWorker;
    let worker = stage.pick_worker(rng);
    let target = format!("worker {worker}");
    // Recorded once it is dead (and reaped): every line it wrote is older than the kill.
    stage.kill_worker(worker);
    record(stage, fault, &target, Phase::Start);
    // Its lease runs out on its own; another worker takes its place meanwhile.
    stage.spawn_worker(worker);
    record(stage, fault, &target, Phase::End);
}
