//! Throwaway servers for integration tests (made for `fencelock`, useful to any Redis user):
//! real `redis-server` processes on free ports, Redis Cluster and Sentinel sets, PostgreSQL,
//! fault injection (pause, kill, restart, `CLIENT PAUSE`, `DEBUG SLEEP`), a
//! user-space TCP fault proxy, a server whose clock the test sets
//! ([`ClockedServer`]), and re-running the current test binary as a child
//! process.
//!
//! # Rules this crate follows
//!
//! * Every `redis-server` is started by the test process itself, in the
//!   foreground, on a free `127.0.0.1` port, with its own temporary directory
//!   and no persistence. Nothing assumes a fixed port.
//! * Servers are stopped when their [`RedisServer`] handle is dropped, also
//!   when the test panics. Each server runs under a tiny `sh` wrapper that
//!   holds a pipe from the test process on its stdin: if the test process
//!   dies (even by `SIGKILL`), the pipe closes and the wrapper kills the
//!   server, so orphans cannot survive. The wrapper runs in a process group
//!   of its own: a Ctrl-C in a terminal reaches the test process only.
//! * Only processes this crate started are ever signalled, by PID.
//! * All traffic goes to `127.0.0.1`.
//!
//! Fallible operations return [`std::io::Result`] or [`redis::RedisResult`];
//! nothing here panics on conditions the OS or Redis controls.
//!
//! # Example
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use fencelock_testkit::RedisServer;
//!
//! let server = RedisServer::start()?;
//! server.cmd(&["SET", "k", "v"])?;
//! let client = redis::Client::open(server.url())?;
//! # let _ = client;
//! server.pause()?; // SIGSTOP: the server stops answering
//! server.resume()?; // SIGCONT
//! // Dropping `server` kills the process.
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod child;
mod clocked;
mod cluster;
mod postgres;
mod proc;
mod proxy;
mod sentinel;
mod server;
mod tls;
mod wrapper;

pub use child::{CHILD_ENV, ChildGuard, is_test_child, require_test_child, spawn_test_child};
pub use clocked::{CLOCKED_SERVER_ENV, ClockedServer, LIBFAKETIME_ENV};
pub use cluster::RedisCluster;
pub use postgres::{PG_BIN_ENV, PostgresServer};
pub use proc::pid_alive;
pub use proxy::FaultProxy;
pub use sentinel::{MASTER_NAME as SENTINEL_MASTER, SentinelSet};
pub use server::{RedisServer, SERVER_ENV, redis_server_available, redis_server_in_path};
pub use tls::TlsFiles;

/// A free TCP port on `127.0.0.1`: binds a listener on port 0 and drops it.
///
/// The port is free at the moment of the call; another process may take it
/// before the caller binds it, so callers must be ready to retry (as
/// [`RedisServer::start`] does).
pub fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}
