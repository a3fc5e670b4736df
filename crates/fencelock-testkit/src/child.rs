//! Re-running the current test binary as a child process.

use std::io::{self, BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::proc::signal;

/// Environment variable that [`spawn_test_child`] sets in the child to the
/// name of the test it runs. See [`is_test_child`].
pub const CHILD_ENV: &str = "FENCELOCK_TESTKIT_CHILD";

/// Whether this process was started by [`spawn_test_child`] (the
/// [`CHILD_ENV`] variable is set). Tests may also pass and check their own
/// variables through `envs`.
pub fn is_test_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// The first line of a child-role test. A child role is marked
/// `#[ignore = "..."]`, so that a normal test run neither runs it nor counts
/// it as passed; [`spawn_test_child`] runs it by name with
/// `--include-ignored`. Run any other way (`cargo test -- --ignored`), it
/// fails here, naming what it is.
///
/// # Panics
///
/// When this process was not started by [`spawn_test_child`].
pub fn require_test_child() {
    assert!(
        is_test_child(),
        "this is a child role, run by spawn_test_child from another test; it does nothing on its own"
    );
}

/// Re-run the current test binary as a child process that executes the single
/// test `test_name` (full path within the binary, e.g. `child_role` or
/// `module::child_role`):
/// `current_exe() <test_name> --exact --include-ignored --nocapture --test-threads=1`
/// (child roles are `#[ignore]`d; see [`require_test_child`]). A name that matches no test
/// runs nothing: the child exits at once, and waiting for its first line fails with
/// `UnexpectedEof` (listing libtest's `0 passed` summary among the skipped lines).
///
/// This works under `cargo test` and cargo-nextest (the binary is a libtest
/// harness either way). `envs` are set in the child in addition to
/// [`CHILD_ENV`]; stdin is null, stdout is piped (read it with
/// [`ChildGuard::read_line_timeout`] / [`ChildGuard::wait_for_line`]), stderr
/// is inherited. libtest writes its own lines to stdout too (`running 1 test`,
/// `test result: ...`), so match on a prefix; the `test NAME ... ` header that
/// libtest prints, without a newline, right before the test's own output is
/// removed, so a child's `println!("ACQUIRED 7")` reads as `ACQUIRED 7`.
///
/// The returned [`ChildGuard`] kills and reaps the child on drop. If the test
/// process itself dies, the child is *not* killed (a plain std `Child` is
/// never killed on drop either); servers the child started still die with it.
pub fn spawn_test_child(test_name: &str, envs: &[(&str, &str)]) -> io::Result<ChildGuard> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args([
            test_name,
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, test_name)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = match child.stdout.take() {
        Some(stdout) => stdout,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("child has no stdout"));
        }
    };
    let (tx, rx) = std::sync::mpsc::channel();
    // libtest prints "test NAME ... " without a newline before running the
    // test, so the test's first line of output would follow it: strip it.
    let header = format!("test {test_name} ... ");
    // The thread ends when the child's stdout closes or the guard is gone.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let failed = line.is_err();
            let line = line.map(|l| match l.strip_prefix(&header) {
                Some(rest) if !rest.is_empty() => rest.to_string(),
                _ => l,
            });
            if tx.send(line).is_err() || failed {
                break;
            }
        }
    });
    Ok(ChildGuard {
        child,
        lines: rx,
        status: None,
    })
}

/// A child process started by [`spawn_test_child`]. Dropping it kills
/// (`SIGKILL`) and reaps the child; it never panics.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    lines: Receiver<io::Result<String>>,
    status: Option<ExitStatus>,
}

impl ChildGuard {
    /// The child's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn ensure_running(&mut self) -> io::Result<()> {
        if self.status.is_none()
            && let Some(status) = self.child.try_wait()?
        {
            self.status = Some(status);
        }
        match self.status {
            None => Ok(()),
            Some(status) => Err(io::Error::other(format!(
                "child {} already exited: {status}",
                self.child.id()
            ))),
        }
    }

    /// Suspend the child with `SIGSTOP`. Fails if it has exited.
    pub fn pause(&mut self) -> io::Result<()> {
        self.ensure_running()?;
        crate::proc::stop_and_wait(self.child.id())
    }

    /// Continue the child with `SIGCONT`. Fails if it has exited.
    pub fn resume(&mut self) -> io::Result<()> {
        self.ensure_running()?;
        signal(self.child.id(), Signal::SIGCONT)
    }

    /// Kill the child with `SIGKILL` (works on a paused child too) and reap
    /// it. Idempotent; returns the exit status.
    pub fn kill(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        if self.child.try_wait()?.is_none() {
            self.child.kill()?;
        }
        let status = self.child.wait()?;
        self.status = Some(status);
        Ok(status)
    }

    /// Wait up to `timeout` for the child to exit by itself. `Ok(None)` if it
    /// is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.status {
                return Ok(Some(status));
            }
            self.status = self.child.try_wait()?;
            if self.status.is_none() {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Read the next line of the child's stdout (without the line ending),
    /// waiting up to `timeout`.
    ///
    /// * `Ok(Some(line))`: a line.
    /// * `Ok(None)`: no complete line arrived within `timeout`.
    /// * `Err` with kind `UnexpectedEof`: the child closed its stdout (it
    ///   exited) and every line has been read.
    pub fn read_line_timeout(&mut self, timeout: Duration) -> io::Result<Option<String>> {
        match self.lines.recv_timeout(timeout) {
            Ok(Ok(line)) => Ok(Some(line)),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("child {} closed its stdout", self.child.id()),
            )),
        }
    }

    /// Read lines until one starts with `prefix` and return it, skipping
    /// others (such as libtest's own output). Errors with kind `TimedOut` if
    /// none arrives within `timeout` and `UnexpectedEof` if the child's stdout
    /// closes first; both messages list the skipped lines.
    pub fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> io::Result<String> {
        let deadline = Instant::now() + timeout;
        let mut skipped = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.read_line_timeout(left) {
                Ok(Some(line)) if line.starts_with(prefix) => return Ok(line),
                Ok(Some(line)) => skipped.push(line),
                Ok(None) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "no line starting with {prefix:?} from child {} within {timeout:?}; skipped: {skipped:?}",
                            self.child.id()
                        ),
                    ));
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{e} before a line starting with {prefix:?}; skipped: {skipped:?}"),
                    ));
                }
            }
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Err(e) = self.kill() {
            tracing::warn!(pid = self.child.id(), error = %e, "failed to kill test child");
        }
    }
}
