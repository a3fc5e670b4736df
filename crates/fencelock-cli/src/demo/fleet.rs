//! The demo's worker processes: started by re-executing this binary, read line by line, and
//! stopped (stdin closed, then SIGKILL after a grace period) by the PIDs started here.

use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use super::events::Event;
use crate::duration::format_duration;
use crate::error::CliError;
use crate::process::ChildProcess;

/// Something a worker said, or did.
#[derive(Debug)]
pub enum Report {
    /// An event line.
    Event { worker: u32, event: Event },
    /// A line that is not an event.
    Garbled { worker: u32, line: String },
    /// The worker's stdout ended: it exited (or is about to).
    Closed { worker: u32 },
}

/// The running workers, numbered from 1.
pub struct Fleet {
    workers: Vec<ChildProcess>,
}

impl Fleet {
    /// Starts `count` workers for the lock server `url` with lease `ttl`.
    pub fn start(
        count: u32,
        url: &str,
        ttl: Duration,
        verbose: u8,
    ) -> Result<(Fleet, mpsc::UnboundedReceiver<Report>), CliError> {
        let exe = std::env::current_exe()
            .map_err(|e| CliError::io("cannot find this program's own executable", e))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut fleet = Fleet {
            workers: Vec::new(),
        };
        for id in 1..=count {
            let mut command = Command::new(&exe);
            if verbose > 0 {
                command.arg(format!("-{}", "v".repeat(usize::from(verbose))));
            }
            command
                .arg("demo-worker")
                .arg("--id")
                .arg(id.to_string())
                .arg("--ttl")
                .arg(format_duration(ttl))
                .arg("--parent-pid")
                .arg(std::process::id().to_string())
                // In the environment, not on the command line where `ps` would show a password.
                .env("FENCELOCK_URL", url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            // If this fails, the workers started so far are killed as `fleet` is dropped.
            let mut worker =
                ChildProcess::spawn(format!("worker {id}"), &mut command).map_err(|e| {
                    CliError::io(format!("cannot start worker {id} ({})", exe.display()), e)
                })?;
            let stdout = worker
                .take_stdout()
                .ok_or_else(|| CliError::io("worker stdout", std::io::ErrorKind::Other.into()))?;
            let stdout = tokio::process::ChildStdout::from_std(stdout)
                .map_err(|e| CliError::io(format!("cannot read worker {id}'s output"), e))?;
            fleet.workers.push(worker);
            tokio::spawn(forward_lines(id, stdout, tx.clone()));
        }
        Ok((fleet, rx))
    }

    /// The process ids, by worker number.
    pub fn pids(&self) -> Vec<(u32, u32)> {
        (1..)
            .zip(self.workers.iter().map(ChildProcess::pid))
            .collect()
    }

    /// Sends `signal` to worker `id`.
    pub fn signal(&mut self, id: u32, signal: Signal) -> Result<(), CliError> {
        let worker = self.worker_mut(id)?;
        let label = worker.label().to_owned();
        worker
            .signal(signal)
            .map_err(|e| CliError::io(format!("cannot send {signal} to {label}"), e))
    }

    /// Asks every worker to finish its round and exit (closes their stdin).
    pub fn ask_to_finish(&mut self) {
        for worker in &mut self.workers {
            worker.close_stdin();
        }
    }

    /// Waits up to `grace` for the workers to exit, then kills the rest; every worker is reaped.
    /// Returns the workers that had to be killed or did not exit cleanly.
    pub async fn finish(&mut self, grace: Duration) -> Vec<(u32, Option<ExitStatus>)> {
        self.ask_to_finish();
        let mut unclean = Vec::new();
        for (id, worker) in (1..).zip(self.workers.iter_mut()) {
            // The grace period is shared: later workers have had the same time to finish.
            let status = match worker.wait_for_exit(grace).await {
                Some(status) => Some(status),
                None => {
                    worker.kill_and_reap();
                    None
                }
            };
            if !status.is_some_and(|s| s.success()) {
                unclean.push((id, status));
            }
        }
        unclean
    }

    fn worker_mut(&mut self, id: u32) -> Result<&mut ChildProcess, CliError> {
        usize::try_from(id)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| self.workers.get_mut(i))
            .ok_or_else(|| CliError::DemoFailed(format!("there is no worker {id}")))
    }
}

/// Forwards a worker's stdout lines to the demo until it closes.
async fn forward_lines(
    worker: u32,
    stdout: tokio::process::ChildStdout,
    tx: mpsc::UnboundedSender<Report>,
) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let report = match Event::parse(&line) {
            Some(event) => Report::Event { worker, event },
            None => Report::Garbled { worker, line },
        };
        if tx.send(report).is_err() {
            return;
        }
    }
    let _ = tx.send(Report::Closed { worker });
}
