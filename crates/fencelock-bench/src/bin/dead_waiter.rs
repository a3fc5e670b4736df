//! `fencelock-dead-waiter [--trials N] [LABEL=PATH ...]`: how long a lock stays idle after the
//! waiter first in line was SIGKILLed, with `fencelock run` processes on a `redis-server` of
//! its own.
//!
//! Each trial, for each `fencelock` binary given (default: the one built beside this program),
//! in turns: a holder (`fencelock run NAME -- sh -c 'read _'`), a waiter that will die
//! (`fencelock run NAME -- true`), then a live waiter behind it (`fencelock run --wait 60s
//! NAME -- echo granted`). The first waiter is SIGKILLed in line (it cannot leave it), then the
//! holder's command ends and it releases: the lock is passed to the dead waiter. The idle time is
//! from the holder's end to the live waiter's `granted`. Before/after a change: give the old
//! build's binary and the new one side by side (`old=/path/to/old/fencelock new=target/...`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use fencelock_testkit::RedisServer;

fn main() -> ExitCode {
    let mut trials = 10usize;
    let mut binaries: Vec<(String, PathBuf)> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--trials" {
            match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => trials = n,
                None => return usage("--trials takes a number"),
            }
        } else if let Some((label, path)) = arg.split_once('=') {
            binaries.push((label.to_owned(), PathBuf::from(path)));
        } else {
            return usage(&format!("unknown argument {arg:?}"));
        }
    }
    if binaries.is_empty() {
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join("fencelock")));
        match beside {
            Some(path) => binaries.push(("fencelock".to_owned(), path)),
            None => return usage("no fencelock binary beside this program: give LABEL=PATH"),
        }
    }
    for (label, path) in &binaries {
        if !path.exists() {
            return usage(&format!("{label}: {} does not exist", path.display()));
        }
    }
    let redis = match RedisServer::start() {
        Ok(redis) => redis,
        Err(e) => {
            eprintln!("fencelock-dead-waiter: no redis-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut idle: Vec<Vec<Duration>> = vec![Vec::new(); binaries.len()];
    for trial in 0..trials {
        // Turns rotate, so that neither binary always goes first.
        for k in 0..binaries.len() {
            let i = (trial + k) % binaries.len();
            let (label, path) = &binaries[i];
            match once(&redis, path, &format!("idle/{label}/{trial}")) {
                Ok(d) => idle[i].push(d),
                Err(e) => {
                    eprintln!("fencelock-dead-waiter: {label}, trial {trial}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    println!("| binary | trials | idle after a killed waiter: median | p90 | max |");
    println!("|---|---|---|---|---|");
    for ((label, _), mut times) in binaries.iter().zip(idle) {
        times.sort();
        let at = |q: f64| {
            let index = ((times.len() as f64 - 1.0) * q).round() as usize;
            times.get(index).map_or(0.0, |d| d.as_secs_f64())
        };
        println!(
            "| {label} | {} | {:.2} s | {:.2} s | {:.2} s |",
            times.len(),
            at(0.5),
            at(0.9),
            at(1.0)
        );
    }
    ExitCode::SUCCESS
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("fencelock-dead-waiter: {problem}");
    eprintln!("usage: fencelock-dead-waiter [--trials N] [LABEL=PATH ...]");
    ExitCode::from(2)
}

/// Stops a child process of ours (by its PID) when dropped, if it still runs.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(binary: &Path, url: &str, args: &[&str], stdout: bool) -> Result<Running, String> {
    Command::new(binary)
        .arg("run")
        .args(args)
        .env("FENCELOCK_URL", url)
        .stdin(Stdio::piped())
        .stdout(if stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::null())
        .spawn()
        .map(Running)
        .map_err(|e| format!("{}: {e}", binary.display()))
}

/// Waits (at most 20 s) until `ready` says yes.
fn until(what: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
    let give_up = Instant::now() + Duration::from_secs(20);
    while !ready() {
        if Instant::now() > give_up {
            return Err(format!("{what} did not happen within 20 s"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn integer(redis: &RedisServer, args: &[&str]) -> i64 {
    match redis.cmd(args) {
        Ok(redis::Value::Int(n)) => n,
        _ => -1,
    }
}

/// One trial: the idle time after a release passed the lock to a killed waiter.
fn once(redis: &RedisServer, binary: &Path, name: &str) -> Result<Duration, String> {
    let url = redis.url();
    let key = format!("fencelock:{{{name}}}");
    let line = format!("{key}:waiters");
    let mut holder = run(
        binary,
        &url,
        &["--ttl", "30s", name, "--", "sh", "-c", "read _"],
        false,
    )?;
    until("the holder's grant", || {
        integer(redis, &["EXISTS", &key]) == 1
    })?;
    let mut dead = run(binary, &url, &[name, "--", "true"], false)?;
    until("the first waiter's place", || {
        integer(redis, &["ZCARD", &line]) == 1
    })?;
    let mut live = run(
        binary,
        &url,
        &["--wait", "60s", name, "--", "echo", "granted"],
        true,
    )?;
    until("the second waiter's place", || {
        integer(redis, &["ZCARD", &line]) == 2
    })?;
    dead.0.kill().map_err(|e| format!("SIGKILL: {e}"))?;
    let _ = dead.0.wait();
    let released_at = Instant::now();
    // The holder's command reads its end of stdin: closing it ends the command, and `run`
    // releases.
    drop(holder.0.stdin.take());
    let stdout = live.0.stdout.take().ok_or("the live waiter's output")?;
    let mut granted = String::new();
    BufReader::new(stdout)
        .read_line(&mut granted)
        .map_err(|e| format!("the live waiter's output: {e}"))?;
    let idle = released_at.elapsed();
    if granted.trim() != "granted" {
        return Err(format!("the live waiter said {granted:?}"));
    }
    let _ = holder.0.wait();
    let _ = live.0.wait();
    let _ = std::io::stdout().flush();
    Ok(idle)
}
