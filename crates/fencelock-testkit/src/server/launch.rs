//! Starting one `redis-server` process and waiting until it answers.

use std::ffi::OsString;
use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{LOG_FILE, OUT_FILE, RedisServer};
use crate::proc::pid_alive;
use crate::wrapper::Wrapper;

/// How long to wait for a freshly started server to answer `PING`.
const READY_TIMEOUT: Duration = Duration::from_secs(5);
/// Poll interval while waiting for `PING`.
const READY_POLL: Duration = Duration::from_millis(5);

/// Why one start attempt failed.
pub(super) enum StartError {
    /// The port was taken (redis logged "Address already in use").
    PortInUse,
    Other(io::Error),
}

impl RedisServer {
    /// One attempt: spawn the wrapper on `self.port` and wait for `PING`.
    /// On failure nothing is left running.
    pub(super) fn spawn_and_wait(&mut self) -> Result<(), StartError> {
        let log = self.dir.path().join(LOG_FILE);
        let log_offset = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let mut sh = Command::new("/bin/sh");
        sh.envs(self.env.iter().map(|(k, v)| (k, v)));
        let (wrapper, pid) = Wrapper::spawn(
            sh,
            "fencelock-redis-wrapper",
            &self.dir.path().join(OUT_FILE),
            &self.bin,
            self.command_line(),
        )
        .map_err(StartError::Other)?;
        self.wrapper = Some(wrapper);
        self.pid = pid;
        match self.wait_ready(log_offset) {
            Ok(()) => Ok(()),
            Err(e) => {
                if let Err(kill_err) = self.kill() {
                    tracing::warn!(%kill_err, "cleaning up a failed redis-server start");
                }
                Err(e)
            }
        }
    }

    /// The server's arguments (see the type's docs).
    fn command_line(&self) -> Vec<OsString> {
        let dir = self.dir.path();
        let mut args: Vec<OsString> = Vec::new();
        if let Some(config) = &self.sentinel_config {
            args.push(config.into());
            args.push("--sentinel".into());
        }
        let port = self.port.to_string();
        for arg in ["--port", &port, "--bind", "127.0.0.1", "--save", ""] {
            args.push(arg.into());
        }
        for arg in ["--appendonly", "no", "--enable-debug-command", "local"] {
            args.push(arg.into());
        }
        args.push("--dir".into());
        args.push(dir.into());
        args.push("--logfile".into());
        args.push(dir.join(LOG_FILE).into());
        args.push("--daemonize".into());
        args.push("no".into());
        args.extend(self.extra_args.iter().map(OsString::from));
        args
    }

    fn wait_ready(&self, log_offset: u64) -> Result<(), StartError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let client =
            redis::Client::open(self.url()).map_err(|e| StartError::Other(io::Error::other(e)))?;
        loop {
            if !pid_alive(self.pid) {
                return Err(self.exited_during_startup(log_offset));
            }
            if self.answers_as_ours(&client) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(StartError::Other(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "redis-server (pid {}) on port {} did not answer PING within {READY_TIMEOUT:?}; log tail:\n{}",
                        self.pid,
                        self.port,
                        self.log_tail(20)
                    ),
                )));
            }
            std::thread::sleep(READY_POLL);
        }
    }

    /// Why the server exited during its start: the port was taken (its log says so, after
    /// `log_offset`), or something the log tail tells.
    fn exited_during_startup(&self, log_offset: u64) -> StartError {
        let log = std::fs::read(self.dir.path().join(LOG_FILE)).unwrap_or_default();
        let new_part = log.get(log_offset as usize..).unwrap_or_default();
        if String::from_utf8_lossy(new_part).contains("Address already in use") {
            return StartError::PortInUse;
        }
        StartError::Other(io::Error::other(format!(
            "redis-server on port {} exited during startup; log tail:\n{}",
            self.port,
            self.log_tail(20)
        )))
    }

    /// Whether the port answers `PING`, and the answer came from our process, not from someone
    /// else who holds the port.
    fn answers_as_ours(&self, client: &redis::Client) -> bool {
        let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(250)) else {
            return false;
        };
        let _ = con.set_read_timeout(Some(Duration::from_millis(250)));
        let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut con);
        if pong.is_err() {
            return false;
        }
        let info: redis::RedisResult<String> = redis::cmd("INFO").arg("server").query(&mut con);
        let ours = format!("process_id:{}", self.pid);
        info.is_ok_and(|info| info.lines().any(|l| l.trim() == ours))
    }
}
