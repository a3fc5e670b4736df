//! Small helpers around `/proc` and signals (Linux).

use std::io;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// State letter and command name (`comm`) of a process, from `/proc/PID/stat`.
pub(crate) fn proc_state(pid: u32) -> Option<(char, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Format: "PID (comm) S ...": comm may contain spaces and parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let state = stat.get(close + 1..)?.trim_start().chars().next()?;
    Some((state, comm))
}

/// Whether process `pid` exists and is not a zombie (or dead).
///
/// Reads `/proc/PID/stat` (Linux). Useful for assertions such as "the server
/// process is gone after the handle was dropped".
pub fn pid_alive(pid: u32) -> bool {
    matches!(proc_state(pid), Some((state, _)) if !matches!(state, 'Z' | 'X' | 'x'))
}

/// Whether `pid` is alive and runs the program named `comm`.
pub(crate) fn pid_alive_as(pid: u32, comm: &str) -> bool {
    matches!(proc_state(pid), Some((state, c)) if !matches!(state, 'Z' | 'X' | 'x') && c == comm)
}

/// Send `sig` to `pid`.
pub(crate) fn signal(pid: u32, sig: Signal) -> io::Result<()> {
    let raw = i32::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("bad pid {pid}")))?;
    if raw <= 0 {
        // Never signal process groups or "all processes".
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal pid {pid}"),
        ));
    }
    kill(Pid::from_raw(raw), sig).map_err(io::Error::from)
}

/// Send `SIGSTOP` to `pid` and wait until the kernel reports it stopped (state `T`), at most
/// 2 s. `kill(2)` returns before the target has actually stopped: a process running on another
/// CPU can go on for a moment (serve a few more requests) unless we wait.
pub(crate) fn stop_and_wait(pid: u32) -> io::Result<()> {
    signal(pid, Signal::SIGSTOP)?;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match proc_state(pid) {
            Some(('T' | 't', _)) => return Ok(()),
            Some(_) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            Some((state, _)) => {
                return Err(io::Error::other(format!(
                    "pid {pid} did not stop after SIGSTOP (state {state})"
                )));
            }
            None => return Err(io::Error::other(format!("pid {pid} is gone"))),
        }
    }
}
