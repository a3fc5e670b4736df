//! Real `redis-server` processes for tests.

use std::io::{self, BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::proc::{pid_alive, pid_alive_as, signal};

/// How long to wait for a freshly started server to answer `PING`.
const READY_TIMEOUT: Duration = Duration::from_secs(5);
/// Poll interval while waiting for `PING`.
const READY_POLL: Duration = Duration::from_millis(5);
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

const NOT_FOUND: &str =
    "redis-server not found: install it with `apt-get install -y redis-server` (Debian/Ubuntu)";

/// The `sh` wrapper every server process of the test kit runs under (each `redis-server`, and
/// PostgreSQL's `postgres`): `$1` is the file for the command's stdout and stderr, the rest is
/// the command line. It starts the command in the background (its stdin `/dev/null`), prints its
/// PID, then reads its own stdin, a pipe from the test process: when that pipe closes (the
/// handle is dropped, or the test process dies, even by `SIGKILL`) it kills the command with
/// `SIGKILL` and waits for it.
pub(crate) const WRAPPER: &str = r#"out=$1
shift
"$@" >"$out" 2>&1 </dev/null &
pid=$!
echo "$pid"
read _ignored
kill -9 "$pid" 2>/dev/null
wait "$pid"
"#;

/// The environment variable naming the server binary the tests run instead of `redis-server`
/// (for instance a `valkey-server`; see `scripts/test`).
pub const SERVER_ENV: &str = "FENCELOCK_TEST_SERVER";

/// Whether a server binary can be found: the one named by [`SERVER_ENV`], else
/// `/usr/bin/redis-server` or `redis-server` in `PATH`.
pub fn redis_server_available() -> bool {
    find_redis_server().is_ok()
}

fn find_redis_server() -> io::Result<PathBuf> {
    if let Some(chosen) = std::env::var_os(SERVER_ENV).filter(|v| !v.is_empty()) {
        let chosen = PathBuf::from(chosen);
        if chosen.is_file() {
            return Ok(chosen);
        }
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{SERVER_ENV} names {}, which is not a file",
                chosen.display()
            ),
        ));
    }
    let default = Path::new("/usr/bin/redis-server");
    if default.is_file() {
        return Ok(default.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("redis-server");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(io::Error::new(io::ErrorKind::NotFound, NOT_FOUND))
}

/// The `sh` wrapper of one server process; see [`WRAPPER`].
struct Wrapper {
    child: Child,
    /// Closing this makes the wrapper kill redis and exit.
    stdin: Option<ChildStdin>,
}

/// Why one start attempt failed.
enum StartError {
    /// The port was taken (redis logged "Address already in use").
    PortInUse,
    Other(io::Error),
}

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
        Self::start_inner(args, None)
    }

    /// A Redis Sentinel (`redis-server <config> --sentinel`) on a free port, its configuration
    /// file holding `config` (the `sentinel monitor ...` lines; Sentinel rewrites the file as
    /// it learns).
    pub fn start_sentinel(config: &str) -> io::Result<RedisServer> {
        Self::start_inner(&[], Some(config))
    }

    fn start_inner(args: &[&str], sentinel: Option<&str>) -> io::Result<RedisServer> {
        let bin = find_redis_server()?;
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

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Suspend the server with `SIGSTOP`: it stops answering (connections
    /// stay open, requests queue in the kernel). Dropping or killing a paused
    /// server still works.
    pub fn pause(&self) -> io::Result<()> {
        if !self.is_running() {
            return Err(io::Error::other(format!(
                "redis-server (pid {}) is not running",
                self.pid
            )));
        }
        crate::proc::stop_and_wait(self.pid)
    }

    /// Continue a paused server with `SIGCONT`.
    pub fn resume(&self) -> io::Result<()> {
        self.signal_running(Signal::SIGCONT)
    }

    fn signal_running(&self, sig: Signal) -> io::Result<()> {
        if !self.is_running() {
            return Err(io::Error::other(format!(
                "redis-server (pid {}) is not running",
                self.pid
            )));
        }
        signal(self.pid, sig)
    }

    /// Kill the server with `SIGKILL` and wait until the process is gone
    /// (reaped). Idempotent: does nothing if it is not running.
    pub fn kill(&mut self) -> io::Result<()> {
        let Some(mut wrapper) = self.wrapper.take() else {
            return Ok(());
        };
        if pid_alive_as(self.pid, &self.comm()) {
            // SIGKILL also ends a stopped process; SIGCONT is belt and braces.
            let _ = signal(self.pid, Signal::SIGKILL);
            let _ = signal(self.pid, Signal::SIGCONT);
        }
        // Closing stdin makes the wrapper `kill -9` and `wait` (reap) redis.
        drop(wrapper.stdin.take());
        reap_wrapper(&mut wrapper.child)?;
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

    /// One attempt: spawn the wrapper on `self.port` and wait for `PING`.
    /// On failure nothing is left running.
    fn spawn_and_wait(&mut self) -> Result<(), StartError> {
        let log = self.dir.path().join(LOG_FILE);
        let log_offset = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let (wrapper, pid) = self.spawn_wrapper().map_err(StartError::Other)?;
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

    fn spawn_wrapper(&self) -> io::Result<(Wrapper, u32)> {
        let dir = self.dir.path();
        let port = self.port.to_string();
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(WRAPPER)
            .arg("fencelock-redis-wrapper")
            .arg(dir.join(OUT_FILE))
            .arg(&self.bin)
            .args(
                self.sentinel_config
                    .iter()
                    .flat_map(|c| [c.as_os_str(), "--sentinel".as_ref()]),
            )
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--enable-debug-command", "local"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join(LOG_FILE))
            .args(["--daemonize", "no"])
            .args(&self.extra_args)
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
        let mut wrapper = Wrapper { child, stdin };
        match pid {
            Ok(pid) => Ok((wrapper, pid)),
            Err(e) => {
                drop(wrapper.stdin.take());
                let _ = reap_wrapper(&mut wrapper.child);
                Err(e)
            }
        }
    }

    fn wait_ready(&self, log_offset: u64) -> Result<(), StartError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let client =
            redis::Client::open(self.url()).map_err(|e| StartError::Other(io::Error::other(e)))?;
        loop {
            if !pid_alive(self.pid) {
                let log = std::fs::read(self.dir.path().join(LOG_FILE)).unwrap_or_default();
                let new_part = log.get(log_offset as usize..).unwrap_or_default();
                if String::from_utf8_lossy(new_part).contains("Address already in use") {
                    return Err(StartError::PortInUse);
                }
                return Err(StartError::Other(io::Error::other(format!(
                    "redis-server on port {} exited during startup; log tail:\n{}",
                    self.port,
                    self.log_tail(20)
                ))));
            }
            if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(250)) {
                let _ = con.set_read_timeout(Some(Duration::from_millis(250)));
                let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut con);
                if pong.is_ok() {
                    // Make sure the answer came from our process, not from
                    // someone else who holds the port.
                    let info: redis::RedisResult<String> =
                        redis::cmd("INFO").arg("server").query(&mut con);
                    let ours = format!("process_id:{}", self.pid);
                    if let Ok(info) = info
                        && info.lines().any(|l| l.trim() == ours)
                    {
                        return Ok(());
                    }
                }
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

    fn connect(&self, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let con = client.get_connection_with_timeout(timeout)?;
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        Ok(con)
    }

    /// Run one command on a fresh synchronous connection (5 s connect, read
    /// and write timeouts) and return the reply. `args[0]` is the command
    /// name. Redis error replies are returned as `Err`.
    pub fn cmd(&self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        let (name, rest) = args.split_first().ok_or_else(|| {
            redis::RedisError::from(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cmd: empty command",
            ))
        })?;
        let mut con = self.connect(CMD_TIMEOUT)?;
        redis::cmd(name).arg(rest).query(&mut con)
    }

    /// `SCRIPT FLUSH`: forget all cached Lua scripts (so the next `EVALSHA`
    /// gets `NOSCRIPT`).
    pub fn script_flush(&self) -> redis::RedisResult<()> {
        self.cmd(&["SCRIPT", "FLUSH"]).map(drop)
    }

    /// `FLUSHALL`: delete every key.
    pub fn flushall(&self) -> redis::RedisResult<()> {
        self.cmd(&["FLUSHALL"]).map(drop)
    }

    /// `CLIENT PAUSE <ms> ALL`: the server holds all client commands for `d`
    /// (rounded down to whole milliseconds). Returns at once.
    pub fn client_pause(&self, d: Duration) -> redis::RedisResult<()> {
        let ms = d.as_millis().to_string();
        self.cmd(&["CLIENT", "PAUSE", &ms, "ALL"]).map(drop)
    }

    /// `DEBUG SLEEP <secs>`, sent from a background thread: the server is
    /// blocked for `d`, the caller is not.
    ///
    /// Returns once the command has been written to the server's socket (plus
    /// a ~5 ms settle time), so commands the caller sends afterwards normally
    /// arrive while the server sleeps. Join the handle to learn when the
    /// sleep is over and whether the command succeeded.
    pub fn debug_sleep(&self, d: Duration) -> JoinHandle<redis::RedisResult<()>> {
        let url = self.url();
        let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || -> redis::RedisResult<()> {
            let client = redis::Client::open(url)?;
            let mut con = client.get_connection_with_timeout(CMD_TIMEOUT)?;
            con.set_write_timeout(Some(CMD_TIMEOUT))?;
            con.set_read_timeout(Some(d + CMD_TIMEOUT))?;
            let secs = format!("{:.6}", d.as_secs_f64());
            let packed = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(secs)
                .get_packed_command();
            con.send_packed_command(&packed)?;
            let _ = sent_tx.send(());
            con.recv_response()?.extract_error().map(drop)
        });
        // An error in the thread drops the sender: no need to wait then.
        if sent_rx.recv_timeout(CMD_TIMEOUT * 2).is_ok() {
            std::thread::sleep(Duration::from_millis(5));
        }
        handle
    }

    /// Every key in the server (all of database 0, via `SCAN`), sorted and
    /// deduplicated; non-UTF-8 bytes are replaced. Meant for "nothing of ours
    /// is left" assertions.
    pub fn keys(&self) -> redis::RedisResult<Vec<String>> {
        let mut con = self.connect(CMD_TIMEOUT)?;
        let mut cursor: u64 = 0;
        let mut keys = Vec::new();
        loop {
            let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query(&mut con)?;
            keys.extend(
                batch
                    .iter()
                    .map(|k| String::from_utf8_lossy(k).into_owned()),
            );
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// The last `lines` lines of the server log (across restarts), preceded by
    /// anything the process printed to stdout/stderr (e.g. command-line
    /// errors). Never fails: unreadable files yield a note instead.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut out = String::new();
        if let Ok(early) = std::fs::read_to_string(self.dir.path().join(OUT_FILE))
            && !early.trim().is_empty()
        {
            out.push_str("[stdout/stderr]\n");
            out.push_str(early.trim_end());
            out.push('\n');
        }
        match std::fs::read(self.dir.path().join(LOG_FILE)) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let all: Vec<&str> = text.lines().collect();
                let start = all.len().saturating_sub(lines);
                for line in &all[start..] {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            Err(e) => out.push_str(&format!("(no redis log: {e})\n")),
        }
        out
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Err(e) = self.kill() {
            tracing::warn!(pid = self.pid, error = %e, "failed to stop redis-server");
        }
    }
}

/// Wait for the wrapper to exit (it does once its stdin is closed); if it
/// does not within a few seconds, kill it. Always reaps it.
fn reap_wrapper(child: &mut Child) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            // The wrapper is our direct child; std's kill targets only it.
            let _ = child.kill();
            child.wait()?;
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
