//! A throwaway PostgreSQL server: `initdb` into a temporary directory, `postgres` in the
//! foreground on a free `127.0.0.1` port (trust authentication, user `postgres`, no fsync), run
//! as the `postgres` user when the tests run as root (PostgreSQL refuses to run as root). Like
//! [`RedisServer`](crate::RedisServer), it runs under a small `sh` wrapper that kills it when
//! the test process goes away, and dropping the handle stops it.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::wrapper::Wrapper;

/// The environment variable naming PostgreSQL's `bin` directory, if it is not found by itself.
pub const PG_BIN_ENV: &str = "FENCELOCK_TEST_PG_BIN";

/// How long `postgres` may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A running PostgreSQL server; stopped (and its data removed) when dropped.
pub struct PostgresServer {
    port: u16,
    pid: u32,
    bin: PathBuf,
    wrapper: Option<Wrapper>,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for PostgresServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresServer")
            .field("port", &self.port)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// PostgreSQL's `bin` directory: `FENCELOCK_TEST_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian's layout), else the directory of `initdb` on `PATH`.
fn bin_dir() -> io::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(PG_BIN_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("postgres").is_file() {
                return Ok(dir);
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "PostgreSQL is not installed (no initdb): run scripts/ensure-postgres, or \
         apt-get install postgresql, or set FENCELOCK_TEST_PG_BIN to its bin directory",
    ))
}

/// The uid and gid to run PostgreSQL as: the `postgres` user when running as root.
fn run_as() -> io::Result<Option<(u32, u32)>> {
    if !nix::unistd::Uid::effective().is_root() {
        return Ok(None);
    }
    match nix::unistd::User::from_name("postgres").map_err(io::Error::other)? {
        Some(user) => Ok(Some((user.uid.as_raw(), user.gid.as_raw()))),
        None => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "running as root, and there is no `postgres` user to run PostgreSQL as \
             (apt-get install postgresql creates it)",
        )),
    }
}

fn command(bin: &Path, name: &str, user: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(bin.join(name));
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid);
    }
    command
}

impl PostgresServer {
    /// Creates a cluster with `initdb` and starts `postgres` on a free port, waiting until it
    /// accepts connections.
    pub fn start() -> io::Result<PostgresServer> {
        let bin = bin_dir()?;
        let user = run_as()?;
        let dir = tempfile::Builder::new()
            .prefix("fencelock-postgres-")
            .tempdir()?;
        if let Some((uid, gid)) = user {
            nix::unistd::chown(
                dir.path(),
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            )
            .map_err(io::Error::other)?;
        }
        let data = dir.path().join("data");
        let initdb = command(&bin, "initdb", user)
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .stdin(Stdio::null())
            .output()?;
        if !initdb.status.success() {
            return Err(io::Error::other(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&initdb.stderr)
            )));
        }
        let port = crate::free_port()?;
        let mut sh = Command::new("/bin/sh");
        {
            use std::os::unix::process::CommandExt;
            if let Some((uid, gid)) = user {
                sh.uid(uid).gid(gid);
            }
        }
        let mut args: Vec<OsString> = vec!["-D".into(), data.into(), "-p".into()];
        args.extend([port.to_string().into(), "-k".into(), dir.path().into()]);
        args.extend(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"].map(OsString::from));
        let (wrapper, pid) = Wrapper::spawn(
            sh,
            "fencelock-postgres-wrapper",
            &dir.path().join("postgres.log"),
            &bin.join("postgres"),
            args,
        )?;
        let server = PostgresServer {
            port,
            pid,
            bin: bin.clone(),
            wrapper: Some(wrapper),
            dir,
        };
        server.wait_ready(&bin)?;
        Ok(server)
    }

    fn wait_ready(&self, bin: &Path) -> io::Result<()> {
        let started = Instant::now();
        loop {
            let ready = Command::new(bin.join("pg_isready"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()?;
            if ready.success() {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                let log = std::fs::read_to_string(self.dir.path().join("postgres.log"))
                    .unwrap_or_default();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("postgres did not accept connections in time; log:\n{log}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The TCP port (on `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PID of `postgres`.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A program of this PostgreSQL's `bin` directory (`psql`, `pg_isready`, ...).
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// A connection string for `tokio-postgres` or `psql`: user `postgres`, database
    /// `postgres`, no password (trust).
    pub fn conninfo(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if let Some(wrapper) = self.wrapper.take() {
            // An immediate shutdown first (SIGQUIT): the postmaster stops its backends and reaps
            // them itself, so that none is left for an init that may not reap.
            if let Ok(pid) = i32::try_from(self.pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGQUIT,
                );
                let until = Instant::now() + Duration::from_secs(5);
                while crate::pid_alive(self.pid) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            // Closing its stdin makes the wrapper `kill -9` postgres if it is still there and
            // reap it.
            let _ = wrapper.stop();
        }
    }
}
