//! Faults: a paused process, a paused or sleeping server, lost scripts and data.

use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::{CMD_TIMEOUT, RedisServer};
use crate::proc::signal;

impl RedisServer {
    /// Suspend the server with `SIGSTOP`: it stops answering (connections
    /// stay open, requests queue in the kernel). Dropping or killing a paused
    /// server still works.
    pub fn pause(&self) -> io::Result<()> {
        self.ensure_running()?;
        crate::proc::stop_and_wait(self.pid)
    }

    /// Continue a paused server with `SIGCONT`.
    pub fn resume(&self) -> io::Result<()> {
        self.ensure_running()?;
        signal(self.pid, Signal::SIGCONT)
    }

    fn ensure_running(&self) -> io::Result<()> {
        if self.is_running() {
            return Ok(());
        }
        Err(io::Error::other(format!(
            "redis-server (pid {}) is not running",
            self.pid
        )))
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
}
