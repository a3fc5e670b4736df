//! node-redlock, the Redlock client the W4 goal names, as a contender: `node` runs
//! `node/w4.js` (the `redlock` npm package 4.2.0 on ioredis, default options) in a child
//! process, which runs each phase's cycles itself and answers with their count and latencies, so
//! that no cycle pays for a hop between the processes.
//!
//! It needs `node` on `PATH` and the packages installed next to the script:
//! `npm ci --prefix crates/fencelock-bench/node` (`FENCELOCK_BENCH_NODE_DIR` names another
//! directory with `w4.js` and its `node_modules`). Without them the contender is not in the
//! default list, and asking for it by name says what is missing.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::error::{BenchError, Result};

/// The directory with `w4.js` and its `node_modules`.
fn dir() -> PathBuf {
    std::env::var_os("FENCELOCK_BENCH_NODE_DIR").map_or_else(
        || PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/node")),
        PathBuf::from,
    )
}

/// The script's directory if `node` and the packages are there, or what is missing.
pub(crate) fn installed() -> std::result::Result<PathBuf, String> {
    let dir = dir();
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|p| p.join("node").is_file()));
    if !on_path {
        return Err("node-redlock needs `node` on PATH".into());
    }
    if !dir.join("node_modules/redlock/package.json").is_file() {
        return Err(format!(
            "node-redlock needs its packages: npm ci --prefix {}",
            dir.display()
        ));
    }
    Ok(dir)
}

/// What one phase measured, as `w4.js` reports it.
#[derive(Debug, Deserialize)]
pub(crate) struct NodePhase {
    pub(crate) cycles: u64,
    pub(crate) failures: u64,
    pub(crate) seconds: f64,
    pub(crate) latencies_us: Vec<f64>,
    pub(crate) stalled: bool,
    pub(crate) last_error: Option<String>,
}

/// A running `w4.js`, connected to the instances it was started with. Killed when dropped.
pub(crate) struct NodeRedlock {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl NodeRedlock {
    /// Starts `w4.js` over `urls` with a lease of `ttl`, and warms it up (connections made and
    /// scripts loaded before anything is measured; a cycle over `cycle_limit` fails it).
    pub(crate) async fn start(
        urls: &[String],
        ttl: Duration,
        cycle_limit: Duration,
    ) -> Result<NodeRedlock> {
        let dir = installed().map_err(BenchError::Bench)?;
        let mut child = Command::new("node")
            .arg(dir.join("w4.js"))
            .arg(ttl.as_millis().max(1).to_string())
            .args(urls)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BenchError::io("node-redlock: starting node", e))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(BenchError::Bench("node-redlock: no pipes to node".into()));
        };
        let mut node = NodeRedlock {
            _child: child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        let warm = node
            .phase("warm-up", Duration::from_millis(100), 100, cycle_limit)
            .await?;
        if warm.cycles == 0 {
            return Err(BenchError::Bench(format!(
                "node-redlock: no cycle in its warm-up ({})",
                warm.last_error.unwrap_or_default()
            )));
        }
        Ok(node)
    }

    /// Sequential cycles on keys `bench:w4:LABEL:N` for `duration` (at most `max_cycles`); a
    /// cycle that takes longer than `cycle_limit` ends the phase as stalled.
    pub(crate) async fn phase(
        &mut self,
        label: &str,
        duration: Duration,
        max_cycles: u64,
        cycle_limit: Duration,
    ) -> Result<NodePhase> {
        let command = format!(
            "run {label} {} {max_cycles} {}\n",
            duration.as_secs_f64(),
            cycle_limit.as_millis().max(1)
        );
        self.stdin
            .write_all(command.as_bytes())
            .await
            .map_err(|e| BenchError::io("node-redlock: writing to node", e))?;
        let mut line = String::new();
        // The phase, one stalled cycle's limit, and node's own start-up, with room to spare.
        let limit = duration + cycle_limit + Duration::from_secs(30);
        match tokio::time::timeout(limit, self.stdout.read_line(&mut line)).await {
            Err(_) => Err(BenchError::Bench(format!(
                "node-redlock: no answer within {limit:?}"
            ))),
            Ok(Err(e)) => Err(BenchError::io("node-redlock: reading from node", e)),
            Ok(Ok(0)) => Err(BenchError::Bench("node-redlock: node exited".into())),
            Ok(Ok(_)) => serde_json::from_str(&line).map_err(|e| {
                BenchError::Bench(format!("node-redlock: unreadable answer {line:?}: {e}"))
            }),
        }
    }
}
