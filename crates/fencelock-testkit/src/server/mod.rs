//! Real `redis-server` processes for tests.
//!
//! - this file: the handle, starting, killing and restarting;
//! - [`launch`]: one start (the command line, waiting for `PING`);
//! - [`locate`]: finding the server binary;
//! - [`faults`]: pausing the process or the server, forgetting scripts and data;
//! - [`commands`]: commands, keys and the log.

mod commands;
mod faults;
mod launch;
mod locate;

use std::ffi::OsString;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::proc::{pid_alive, pid_alive_as, signal};
use crate::wrapper::Wrapper;
use launch::StartError;
pub use locate::{SERVER_ENV, redis_server_available, redis_server_in_path};

/// Attempts with a fresh port when the picked port was taken meanwhile.
const PORT_ATTEMPTS: usize = 20;
/// How long [`RedisServer::restart`] retries binding the same port.
const REBIND_TIMEOUT: Duration = Duration::from_secs(5);
/// Timeout for connect, read and write of [`RedisServer::cmd`] and friends.
const CMD_TIMEOUT: Duration = Duration::from_secs(5);
/// The server's log (`--logfile`), in its directory; kept across restarts.
const LOG_FILE: &str = "redis.log";
/// What the server process writes to stdout and stderr (command-line errors, before its log is
/// open), in its directory; each start overwrites it.
const OUT_FILE: &str = "redis.out";

/// A `redis-server` child process listening on `127.0.0.1:<port>`, with its
/// own temporary directory and no persistence.
///
/// The server runs in the foreground under a small `sh` wrapper (see the
/// crate docs), so it dies with the test process. Dropping the handle kills
/// the server with `SIGKILL` and reaps it, also during a panic; it never
/// panics itself.
///
/// The server is started with
/// `--port P --bind 127.0.0.1 --save "" --appendonly no --enable-debug-command local
/// --dir <tempdir> --logfile <tempdir>/redis.log --daemonize no`, followed by any
/// extra arguments given to [`RedisServer::start_with_args`].
pub struct RedisServer {
    port: u16,
    pid: u32,
    wrapper: Option<Wrapper>,
    bin: PathBuf,
    extra_args: Vec<String>,
    /// A Sentinel's configuration file (in `dir`), given first on the command line.
    sentinel_config: Option<PathBuf>,
    /// Variables added to the server's environment (a clocked server's libfaketime).
    env: Vec<(OsString, OsString)>,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisServer")
            .field("port", &self.port)
            .field("pid", &self.pid)
            .field("running", &self.wrapper.is_some())
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl RedisServer {
    /// Start a fresh `redis-server` on a free `127.0.0.1` port and wait until
    /// it answers `PING` (polling every ~5 ms for up to ~5 s).
    ///
    /// If the picked port is taken between picking and binding, another port
    /// is tried. Errors carry the tail of the server log. If no
    /// `redis-server` binary exists, the error (kind `NotFound`) says how to
    /// install it.
    pub fn start() -> io::Result<RedisServer> {
        Self::start_with_args(&[])
    }

    /// Like [`RedisServer::start`], with extra command-line arguments
    /// appended, e.g. `&["--maxmemory", "1mb"]`. They are kept for
    /// [`RedisServer::restart`].
    pub fn start_with_args(args: &[&str]) -> io::Result<RedisServer> {
        Self::start_inner(locate::find_redis_server()?, args, None)
    }

    /// Like [`RedisServer::start_with_args`], with the server binary `program` (for instance
    /// the one [`redis_server_in_path`] found) instead of the one [`redis_server_available`]
    /// looks for.
    pub fn start_binary(program: &Path, args: &[&str]) -> io::Result<RedisServer> {
        Self::start_inner(program.to_path_buf(), args, None)
    }

    /// A Redis Sentinel (`redis-server <config> --sentinel`) on a free port, its configuration
    /// file holding `config` (the `sentinel monitor ...` lines; Sentinel rewrites the file as
    /// it learns).
    pub fn start_sentinel(config: &str) -> io::Result<RedisServer> {
        Self::start_inner(locate::find_redis_server()?, &[], Some(config))
    }

    fn start_inner(bin: PathBuf, args: &[&str], sentinel: Option<&str>) -> io::Result<RedisServer> {
        Self::start_with_env(bin, args, sentinel, Vec::new())
    }

    /// Starts `bin` with `env` added to its environment.
    pub(crate) fn start_with_env(
        bin: PathBuf,
        args: &[&str],
        sentinel: Option<&str>,
        env: Vec<(OsString, OsString)>,
    ) -> io::Result<RedisServer> {
        let dir = tempfile::Builder::new()
            .prefix("fencelock-redis-")
            .tempdir()?;
        let sentinel_config = match sentinel {
            Some(config) => {
                let path = dir.path().join("sentinel.conf");
                std::fs::write(&path, config)?;
                Some(path)
            }
            None => None,
        };
        let mut server = RedisServer {
            port: 0,
            pid: 0,
            wrapper: None,
            bin,
            extra_args: args.iter().map(|a| (*a).to_string()).collect(),
            sentinel_config,
            env,
            dir,
        };
        let mut last_err = None;
        for _ in 0..PORT_ATTEMPTS {
            server.port = crate::free_port()?;
            match server.spawn_and_wait() {
                Ok(()) => return Ok(server),
                Err(StartError::PortInUse) => {
                    last_err = Some(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("port {} was taken before redis could bind it", server.port),
                    ));
                }
                Err(StartError::Other(e)) => return Err(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("could not start redis-server")))
    }

    /// The TCP port the server listens on (on `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PID of the `redis-server` process itself (not of its wrapper).
    /// After [`RedisServer::kill`] this is the PID the server had.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process number of the `sh` wrapper the server runs under, while it runs.
    pub(crate) fn wrapper_pid(&self) -> Option<u32> {
        self.wrapper.as_ref().map(Wrapper::pid)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Kill the server with `SIGKILL` and wait until the process is gone
    /// (reaped). Idempotent: does nothing if it is not running.
    pub fn kill(&mut self) -> io::Result<()> {
        let Some(wrapper) = self.wrapper.take() else {
            return Ok(());
        };
        if pid_alive_as(self.pid, &self.comm()) {
            // SIGKILL also ends a stopped process; SIGCONT is belt and braces.
            let _ = signal(self.pid, Signal::SIGKILL);
            let _ = signal(self.pid, Signal::SIGCONT);
        }
        // Closing its stdin makes the wrapper `kill -9` and `wait` (reap) redis.
        wrapper.stop()?;
        // The wrapper has reaped redis; if the wrapper had to be killed, redis
        // was reparented and is reaped by init. Give that a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        while pid_alive(self.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if pid_alive(self.pid) {
            return Err(io::Error::other(format!(
                "redis-server (pid {}) still alive after SIGKILL",
                self.pid
            )));
        }
        Ok(())
    }

    /// The server's process name as `/proc/PID/comm` shows it: the binary's file name
    /// (`redis-server`, `valkey-server`), cut to the kernel's 15 bytes.
    fn comm(&self) -> String {
        let name = self
            .bin
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        name.chars().take(15).collect()
    }

    /// Whether the server process is alive (running or paused).
    pub fn is_running(&self) -> bool {
        self.wrapper.is_some() && pid_alive_as(self.pid, &self.comm())
    }

    /// Kill the server (if running) and start it again on the same port with
    /// an empty dataset (persistence files in its directory are removed
    /// first), waiting for `PING`. Binding is retried for up to ~5 s if the
    /// port is not yet free. The PID changes.
    pub fn restart(&mut self) -> io::Result<()> {
        self.kill()?;
        self.remove_data_files()?;
        let deadline = Instant::now() + REBIND_TIMEOUT;
        loop {
            match self.spawn_and_wait() {
                Ok(()) => return Ok(()),
                Err(StartError::PortInUse) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(StartError::PortInUse) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!(
                            "restart: port {} still in use after {REBIND_TIMEOUT:?}",
                            self.port
                        ),
                    ));
                }
                Err(StartError::Other(e)) => return Err(e),
            }
        }
    }

    fn remove_data_files(&self) -> io::Result<()> {
        for entry in std::fs::read_dir(self.dir.path())? {
            let entry = entry?;
            let name = entry.file_name();
            if name == LOG_FILE || name == OUT_FILE {
                continue;
            }
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Err(e) = self.kill() {
            tracing::warn!(pid = self.pid, error = %e, "failed to stop redis-server");
        }
    }
}
