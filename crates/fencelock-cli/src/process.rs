//! Child processes the tool starts: signalled and killed only by the PID it started, and always
//! reaped, on every exit path (the guard kills and reaps on drop).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::CliError;

/// A started child process; dropping it kills (SIGKILL) and reaps it if it is still running.
#[derive(Debug)]
pub struct ChildProcess {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl ChildProcess {
    /// Starts `command` in a process group of its own, so that a Ctrl-C in the terminal reaches
    /// only this tool, which then stops its children in order.
    pub fn spawn(label: impl Into<String>, command: &mut Command) -> io::Result<Self> {
        command.process_group(0);
        let mut child = command.spawn()?;
        let stdin = child.stdin.take();
        Ok(ChildProcess {
            label: label.into(),
            child,
            stdin,
        })
    }

    /// What this process is, for messages (`worker 2`, `redis-server`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Takes the child's stdout pipe, if it was piped.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Sends `signal` to this process, unless it has already exited and been reaped (its PID
    /// could then belong to someone else).
    pub fn signal(&mut self, signal: Signal) -> io::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            return Err(io::Error::other(format!(
                "{} (pid {}) has already exited ({status})",
                self.label,
                self.child.id()
            )));
        }
        let pid = i32::try_from(self.child.id())
            .map_err(|_| io::Error::other(format!("pid {} out of range", self.child.id())))?;
        nix::sys::signal::kill(Pid::from_raw(pid), signal).map_err(io::Error::from)
    }

    /// Closes the child's stdin (a demo worker takes that as "finish your round and exit").
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits up to `limit` for the process to exit on its own.
    pub async fn wait_for_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let give_up = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < give_up => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ => return None,
            }
        }
    }

    /// Kills the process (SIGKILL, which also ends a stopped process) if it is still running,
    /// and reaps it.
    pub fn kill_and_reap(&mut self) -> Option<ExitStatus> {
        self.stdin = None;
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        if let Err(err) = self.child.kill() {
            tracing::debug!(process = %self.label, pid = self.child.id(), %err, "kill failed");
        }
        match self.child.wait() {
            Ok(status) => {
                tracing::debug!(process = %self.label, pid = self.child.id(), %status, "stopped");
                Some(status)
            }
            Err(err) => {
                tracing::debug!(process = %self.label, pid = self.child.id(), %err, "wait failed");
                None
            }
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// Runs `work` until it ends, or until SIGINT or SIGTERM (then `work` is dropped — its
/// [`ChildProcess`] guards kill and reap what it started — and the error says which signal).
///
/// # Errors
/// `work`'s own error, [`CliError::Interrupted`], or an I/O error if the signals cannot be
/// handled.
pub async fn until_signalled<T>(
    work: impl Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| CliError::io("cannot handle SIGINT", e))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| CliError::io("cannot handle SIGTERM", e))?;
    tokio::select! {
        result = work => result,
        _ = interrupt.recv() => Err(CliError::Interrupted("SIGINT")),
        _ = terminate.recv() => Err(CliError::Interrupted("SIGTERM")),
    }
}

/// For a worker process: a flag that turns true when its stdin reaches its end (the process
/// that started it closed it, or died). Must run inside a Tokio runtime.
pub fn stop_on_stdin_eof() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(_)) = lines.next_line().await {}
        let _ = tx.send(true);
    });
    rx
}
