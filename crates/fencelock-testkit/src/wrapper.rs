//! The `sh` wrapper every server process of the test kit runs under.

use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How long [`Wrapper::stop`] waits for the wrapper to exit before it kills it.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The wrapper script (each `redis-server`, and PostgreSQL's `postgres`): `$1` is the file for
/// the command's stdout and stderr, the rest is the command line. It starts the command in the
/// background (its stdin `/dev/null`), prints its PID, then reads its own stdin, a pipe from the
/// test process: when that pipe closes (the handle is dropped, or the test process dies, even
/// by `SIGKILL`) it kills the command with `SIGKILL` and waits for it.
const WRAPPER: &str = r#"out=$1
shift
"$@" >"$out" 2>&1 </dev/null &
pid=$!
echo "$pid"
read _ignored
kill -9 "$pid" 2>/dev/null
wait "$pid"
"#;

/// One wrapped server process: the `sh` wrapper (a child of the test process) and the pipe
/// that keeps the server alive.
#[derive(Debug)]
pub(crate) struct Wrapper {
    child: Child,
    /// Closing this makes the wrapper kill the server and exit.
    stdin: Option<ChildStdin>,
}

impl Wrapper {
    /// The wrapper's own process number.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Runs `program args` under the wrapper, its stdout and stderr written to `out`, and
    /// returns the wrapper and the program's PID. `sh` is the `/bin/sh` command to use (set a
    /// user on it to run the server as that user). The wrapper gets a process group of its
    /// own, so that a Ctrl-C in a terminal reaches the test process only, which then stops its
    /// servers itself. On failure nothing is left running.
    pub(crate) fn spawn<I, S>(
        mut sh: Command,
        label: &str,
        out: &Path,
        program: &Path,
        args: I,
    ) -> io::Result<(Wrapper, u32)>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = sh
            .arg("-c")
            .arg(WRAPPER)
            .arg(label)
            .arg(out)
            .arg(program)
            .args(args)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take();
        let pid = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("wrapper has no stdout"))
            .and_then(|out| {
                let mut line = String::new();
                BufReader::new(out).read_line(&mut line)?;
                line.trim().parse::<u32>().map_err(|_| {
                    io::Error::other(format!("wrapper printed {line:?} instead of a PID"))
                })
            });
        let wrapper = Wrapper { child, stdin };
        match pid {
            Ok(pid) => Ok((wrapper, pid)),
            Err(e) => {
                let _ = wrapper.stop();
                Err(e)
            }
        }
    }

    /// Closes the wrapper's stdin (it then `kill -9`s and reaps the server) and waits for the
    /// wrapper to exit; if it does not within a few seconds, kills it. Always reaps it.
    pub(crate) fn stop(mut self) -> io::Result<()> {
        drop(self.stdin.take());
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                // The wrapper is our direct child; std's kill targets only it.
                let _ = self.child.kill();
                self.child.wait()?;
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
