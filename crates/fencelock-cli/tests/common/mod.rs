//! Helpers for the end-to-end tests of the lock commands: the real `fencelock` binary against a
//! real `redis-server` from the testkit, with every wait bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)] // a test fails by panicking

pub mod intervals;
pub mod proc;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use fencelock_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub const BIN: &str = env!("CARGO_BIN_EXE_fencelock");
/// The longest any single `fencelock` process in these tests may take.
pub const LIMIT: Duration = Duration::from_secs(30);

/// A fresh redis-server. A test that cannot have one fails, saying what to install: it never
/// passes without having run.
pub fn server() -> RedisServer {
    match RedisServer::start() {
        Ok(server) => server,
        Err(err) => panic!(
            "cannot start redis-server ({err}); install it (Debian: apt-get install redis-server, \
             or run scripts/ensure-redis)"
        ),
    }
}

/// `fencelock ARGS` with a clean environment (no URL, no log settings), stdin closed.
pub fn fencelock(args: &[&str]) -> Command {
    fencelock_at(Path::new(BIN), args)
}

/// [`fencelock`] from the binary at `program` (a copy of it).
pub fn fencelock_at(program: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_remove("FENCELOCK_URL")
        .env_remove("FENCELOCK_URL_FILE")
        .env_remove("FENCELOCK_TLS_CA")
        .env_remove("FENCELOCK_TLS_CERT")
        .env_remove("FENCELOCK_TLS_KEY")
        .env_remove("FENCELOCK_CLUSTER")
        .env_remove("FENCELOCK_SENTINEL")
        .env_remove("FENCELOCK_MASTER_USER")
        .env_remove("FENCELOCK_MASTER_PASSWORD")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// A started `fencelock` whose output is collected in the background.
pub struct Running {
    pub child: Child,
    pub started: Instant,
    stdout: Option<Receiver<String>>,
    stderr: Option<Receiver<String>>,
}

/// How a `fencelock` process ended.
#[derive(Debug)]
pub struct Finished {
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// From the start of the process.
    pub elapsed: Duration,
}

impl Finished {
    pub fn explain(&self) -> String {
        format!(
            "exit {:?} (signal {:?}) after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.signal, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Reads a pipe to its end in a thread; the text arrives on the channel.
fn collect(pipe: Option<impl Read + Send + 'static>) -> Option<Receiver<String>> {
    pipe.map(|mut pipe| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
        });
        rx
    })
}

/// The collected text; a process left behind holding the pipe open must not hang the test.
fn collected(rx: Option<Receiver<String>>) -> String {
    rx.and_then(|rx| rx.recv_timeout(Duration::from_secs(5)).ok())
        .unwrap_or_else(|| "(output not closed within 5s)".to_owned())
}

impl Running {
    pub fn start(mut command: Command) -> Running {
        let started = Instant::now();
        let mut child = command.spawn().expect("start the fencelock binary");
        let stdout = collect(child.stdout.take());
        let stderr = collect(child.stderr.take());
        Running {
            child,
            started,
            stdout,
            stderr,
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal fencelock");
    }

    /// Waits up to `limit` for the exit; kills the process and panics after that.
    pub fn finish_within(mut self, limit: Duration) -> Finished {
        let give_up = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for fencelock") {
                break Some(status);
            }
            if Instant::now() >= give_up {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        let stdout = collected(self.stdout.take());
        let stderr = collected(self.stderr.take());
        let finished = Finished {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
            stdout,
            stderr,
            elapsed,
        };
        assert!(
            status.is_some(),
            "fencelock did not exit within {limit:?}: {}",
            finished.explain()
        );
        finished
    }

    pub fn finish(self) -> Finished {
        self.finish_within(LIMIT)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `fencelock ARGS` to the end.
pub fn run(args: &[&str]) -> Finished {
    Running::start(fencelock(args)).finish()
}

/// Waits until `path` exists; panics after `limit`.
pub fn wait_for_file(path: &Path, limit: Duration) {
    let give_up = Instant::now() + limit;
    while !path.exists() {
        assert!(
            Instant::now() < give_up,
            "{} did not appear within {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `ready()` holds, checking every 5 ms; panics after `limit`, naming `what`.
pub fn wait_until(limit: Duration, what: &str, mut ready: impl FnMut() -> bool) {
    let give_up = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < give_up, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether process `pid` has a handler for each of `signals` (its `SigCgt` mask in
/// `/proc/PID/status`): a signal sent before then takes its default action instead.
pub fn catches(pid: Pid, signals: &[Signal]) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let caught = status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0);
    signals
        .iter()
        .all(|&signal| caught & (1 << (signal as i32 - 1)) != 0)
}

/// How many connections wait for a release of lock `name` on `server` (a waiter subscribes to
/// the lock's release channel, `fencelock:{NAME}:released`, while it waits).
pub fn waiters(server: &RedisServer, name: &str) -> i64 {
    let channel = format!("fencelock:{{{name}}}:released");
    match server
        .cmd(&["PUBSUB", "NUMSUB", &channel])
        .expect("PUBSUB NUMSUB")
    {
        redis::Value::Array(reply) => match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("PUBSUB NUMSUB answered {other:?}"),
        },
        other => panic!("PUBSUB NUMSUB answered {other:?}"),
    }
}

/// The lock key of `name` under the default prefix.
pub fn lock_key(name: &str) -> String {
    format!("fencelock:{{{name}}}")
}

/// Whether `key` exists on `server`.
pub fn exists(server: &RedisServer, key: &str) -> bool {
    match server.cmd(&["EXISTS", key]).expect("EXISTS") {
        redis::Value::Int(n) => n > 0,
        other => panic!("EXISTS answered {other:?}"),
    }
}

/// A temporary directory for markers and scripts.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("fencelock-cli-test-")
        .tempdir()
        .expect("temporary directory")
}

/// `dir/name` as a `String` (for shell scripts).
pub fn file(dir: &Path, name: &str) -> String {
    path(dir, name).to_string_lossy().into_owned()
}

pub fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// A `fencelock run` holding `name` with a command that writes its fence into `NAME.ready` once
/// it runs (`/` in the name replaced by `_`), writes `term` into `NAME.term` when it gets SIGTERM (then exits with `term_code`, or ignores SIGTERM
/// when `term_code` is `None`), and otherwise runs for at most a minute.
pub fn hold(url: &str, name: &str, dir: &Path, extra: &[&str], term_code: Option<u8>) -> Running {
    let safe = name.replace('/', "_");
    let ready = file(dir, &format!("{safe}.ready"));
    let marker = file(dir, &format!("{safe}.term"));
    let trap = match term_code {
        Some(code) => format!("trap 'echo term > \"{marker}\"; exit {code}' TERM"),
        None => "trap '' TERM".to_owned(),
    };
    let script = format!(
        "{trap}; echo \"$FENCELOCK_FENCE\" > \"{ready}.tmp\"; mv \"{ready}.tmp\" \"{ready}\"; \
         i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"
    );
    let mut args = vec!["run", "--url", url];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[name, "--", "sh", "-c", &script]);
    let running = Running::start(fencelock(&args));
    wait_for_file(&path(dir, &format!("{safe}.ready")), LIMIT);
    running
}
