//! A throwaway `redis-server` for the demo: on a free port of 127.0.0.1, without persistence,
//! in a temporary directory, a direct child of this process, killed and reaped when dropped.

use std::fs::File;
use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::error::CliError;
use crate::process::ChildProcess;

/// How long a fresh server may take to answer `PING`.
const READY_LIMIT: Duration = Duration::from_secs(10);
/// Attempts with another port when the chosen one was taken in the meantime.
const PORT_ATTEMPTS: usize = 5;
const LOG_FILE: &str = "redis.log";

/// A running throwaway `redis-server`.
#[derive(Debug)]
pub struct ThrowawayRedis {
    // Field order matters: the process is killed before its directory is removed.
    process: ChildProcess,
    port: u16,
    _dir: tempfile::TempDir,
}

impl ThrowawayRedis {
    /// Starts `redis-server` from `PATH` and waits until it answers `PING`.
    pub async fn start() -> Result<Self, CliError> {
        let program = find_in_path("redis-server").ok_or(CliError::RedisServerNotFound)?;
        let mut last_problem = String::new();
        for _ in 0..PORT_ATTEMPTS {
            match start_once(&program).await? {
                Ok(server) => return Ok(server),
                Err(problem) => {
                    tracing::debug!(%problem, "redis-server did not start; trying another port");
                    last_problem = problem;
                }
            }
        }
        Err(CliError::RedisServerStart(last_problem))
    }

    /// The URL of the server.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// One attempt: `Ok(Err(_))` when the port was taken and another port may work.
async fn start_once(program: &Path) -> Result<Result<ThrowawayRedis, String>, CliError> {
    let dir = tempfile::Builder::new()
        .prefix("fencelock-demo-redis-")
        .tempdir()
        .map_err(|e| CliError::io("cannot create a temporary directory for redis-server", e))?;
    let port = free_port().map_err(|e| CliError::io("cannot find a free port on 127.0.0.1", e))?;
    let log_path = dir.path().join(LOG_FILE);
    let log = File::create(&log_path)
        .map_err(|e| CliError::io(format!("cannot create {}", log_path.display()), e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| CliError::io(format!("cannot open {}", log_path.display()), e))?;
    let mut command = Command::new(program);
    command
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .args(["--daemonize", "no", "--protected-mode", "yes", "--dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    let mut process = ChildProcess::spawn("redis-server", &mut command).map_err(|e| {
        CliError::RedisServerStart(format!("cannot run {}: {e}", program.display()))
    })?;
    tracing::debug!(pid = process.pid(), port, "redis-server started");

    let give_up = Instant::now() + READY_LIMIT;
    loop {
        match process.try_status() {
            Ok(Some(status)) => {
                let log = read_log_tail(&log_path);
                let problem = format!("redis-server exited ({status}): {log}");
                if log.contains("Address already in use") {
                    return Ok(Err(problem));
                }
                return Err(CliError::RedisServerStart(problem));
            }
            Ok(None) => {}
            Err(e) => return Err(CliError::io("cannot check on redis-server", e)),
        }
        if answers_ping(port).await {
            return Ok(Ok(ThrowawayRedis {
                process,
                port,
                _dir: dir,
            }));
        }
        if Instant::now() >= give_up {
            let log = read_log_tail(&log_path);
            return Err(CliError::RedisServerStart(format!(
                "it did not answer PING on 127.0.0.1:{port} within {READY_LIMIT:?}: {log}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a Redis server on 127.0.0.1:`port` answers `PING` with `+PONG`.
async fn answers_ping(port: u16) -> bool {
    let exchange = async {
        let mut stream = TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
        stream.write_all(b"PING\r\n").await?;
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).await?;
        Ok::<bool, io::Error>(&reply == b"+PONG\r\n")
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), exchange).await,
        Ok(Ok(true))
    )
}

/// A port that was free a moment ago (the OS picks it).
fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// The last lines of the server's log, on one line.
fn read_log_tail(path: &Path) -> String {
    let mut text = String::new();
    if File::open(path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .is_err()
    {
        return "(no log)".into();
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        "(empty log)".into()
    } else {
        tail.join(" | ")
    }
}

/// The first executable file called `name` in `PATH`.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
