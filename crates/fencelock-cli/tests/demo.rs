//! End-to-end tests of `fencelock demo`: the real binary, real worker processes and a real
//! throwaway `redis-server`, with stdout and stderr piped (not a terminal).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_fencelock");
/// The demo takes about 5 s; this leaves room for a loaded machine.
const DEMO_LIMIT: Duration = Duration::from_secs(90);

/// A running `fencelock` whose stdout arrives line by line.
struct Run {
    child: Child,
    lines: mpsc::Receiver<Vec<u8>>,
    stdout: Vec<u8>,
    stderr: JoinHandle<Vec<u8>>,
}

impl Run {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .env_remove("FENCELOCK_URL")
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("start the fencelock binary");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stderr.read_to_end(&mut bytes);
            bytes
        });
        Run {
            child,
            lines,
            stdout: Vec::new(),
            stderr,
        }
    }

    /// Reads stdout until a line contains `needle`; panics after `limit`.
    fn wait_for_line(&mut self, needle: &str, limit: Duration) {
        let give_up = Instant::now() + limit;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = String::from_utf8_lossy(&line).contains(needle);
                    self.stdout.extend_from_slice(&line);
                    if found {
                        return;
                    }
                }
                Err(_) => {
                    self.stop();
                    panic!(
                        "no line with {needle:?} within {limit:?}; stdout so far:\n{}",
                        String::from_utf8_lossy(&self.stdout)
                    );
                }
            }
        }
    }

    /// Waits for the process to exit; after `limit`, stops it and panics with its output.
    fn finish(mut self, limit: Duration) -> Finished {
        let give_up = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= give_up {
                self.stop();
                let (stdout, stderr) = self.collect();
                panic!("still running after {limit:?}; stdout:\n{stdout}\nstderr:\n{stderr}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let elapsed_ok = Instant::now() < give_up;
        assert!(elapsed_ok);
        let (stdout, stderr) = self.collect();
        Finished {
            status,
            stdout,
            stderr,
        }
    }

    /// SIGTERM (the demo then stops everything it started), then SIGKILL if need be.
    fn stop(&mut self) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        let _ = kill(pid, Signal::SIGTERM);
        for _ in 0..250 {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn collect(&mut self) -> (String, String) {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stdout.extend_from_slice(&line);
        }
        let stderr = std::mem::replace(&mut self.stderr, std::thread::spawn(Vec::new));
        let stderr = stderr.join().unwrap_or_default();
        (
            String::from_utf8_lossy(&self.stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        )
    }
}

struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Finished {
    fn explain(&self) -> String {
        format!(
            "status: {}\nstdout:\n{}\nstderr:\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// The demo starts its own redis-server: a test of it that cannot find one fails, saying what
/// to install (it never passes without having run).
fn require_redis_server() {
    let found = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("redis-server").is_file())
    });
    assert!(
        found,
        "redis-server is not installed: install it (Debian: apt-get install redis-server, or run \
         scripts/ensure-redis)"
    );
}

/// The process ids the demo printed: the throwaway server's and the workers'.
fn started_pids(stdout: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("redis:") || l.starts_with("workers:"))
    {
        for part in line.split("(pid ").skip(1) {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            pids.push(digits.parse().unwrap());
        }
    }
    pids
}

/// Panics if a process the demo started is still there (running, stopped, or an unreaped
/// zombie).
fn assert_all_gone(pids: &[u32], context: &str) {
    #[cfg(target_os = "linux")]
    for pid in pids {
        let gone = (0..100).any(|_| {
            let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists();
            if !gone {
                std::thread::sleep(Duration::from_millis(20));
            }
            gone
        });
        assert!(gone, "process {pid} is still there\n{context}");
    }
}

#[test]
fn demo_fences_off_the_frozen_holder_in_plain_output() {
    require_redis_server();
    let run = Run::start(&["demo"], &[]).finish(DEMO_LIMIT);
    let explain = run.explain();
    assert!(run.status.success(), "{explain}");
    assert!(
        !run.stdout.contains('\x1b') && !run.stderr.contains('\x1b'),
        "escape codes in piped output\n{explain}"
    );
    for expected in [
        "2. A holder freezes",
        "SIGSTOP",
        "SIGCONT",
        "REFUSED",
        "is_held() = false",
        "lost() signal has fired",
        "strictly increasing   yes",
        "overlapping holders   none",
        "OK: the frozen holder was fenced off",
    ] {
        assert!(
            run.stdout.contains(expected),
            "{expected:?} missing\n{explain}"
        );
    }
    let stale: u32 = run
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("stale writes refused"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(stale >= 1, "no stale write refused\n{explain}");

    // Each worker's grants, as printed, carry strictly increasing fences.
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let mut grants = 0;
    for line in run.stdout.lines() {
        let Some((who, fence)) = line.trim().split_once(" acquired the lock: fence ") else {
            continue;
        };
        let fence: u64 = fence.split_whitespace().next().unwrap().parse().unwrap();
        if let Some(previous) = last.insert(who.to_owned(), fence) {
            assert!(
                fence > previous,
                "{who}: fence {fence} after {previous}\n{explain}"
            );
        }
        grants += 1;
    }
    assert!(grants >= 9, "too few grants shown\n{explain}");

    let pids = started_pids(&run.stdout);
    assert_eq!(
        pids.len(),
        5,
        "expected redis-server and 4 workers\n{explain}"
    );
    assert_all_gone(&pids, &explain);
}

#[test]
fn sigterm_while_a_holder_is_frozen_stops_every_process() {
    require_redis_server();
    let mut run = Run::start(&["demo", "--workers", "2", "--rounds", "2"], &[]);
    run.wait_for_line("SIGSTOP", DEMO_LIMIT);
    let pid = Pid::from_raw(i32::try_from(run.child.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    let run = run.finish(Duration::from_secs(15));
    let explain = run.explain();
    assert_eq!(run.status.code(), Some(143), "{explain}");
    assert!(run.stderr.contains("interrupted by SIGTERM"), "{explain}");
    let pids = started_pids(&run.stdout);
    assert_eq!(
        pids.len(),
        3,
        "expected redis-server and 2 workers\n{explain}"
    );
    assert_all_gone(&pids, &explain);
}

#[test]
fn an_unreachable_server_fails_fast_and_names_it() {
    let started = Instant::now();
    let run =
        Run::start(&["demo", "--url", "redis://127.0.0.1:1"], &[]).finish(Duration::from_secs(30));
    let explain = run.explain();
    assert!(!run.status.success(), "{explain}");
    assert!(
        run.stderr.contains("cannot reach Redis at 127.0.0.1:1"),
        "{explain}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}\n{explain}",
        started.elapsed()
    );
}

#[test]
fn a_password_in_the_url_is_never_printed() {
    let secret = "s3cret-pw";
    let url = format!("redis://demo:{secret}@127.0.0.1:1");
    let on_command_line = Run::start(&["demo", "--url", &url], &[]).finish(Duration::from_secs(30));
    let from_env =
        Run::start(&["demo"], &[("FENCELOCK_URL", &url)]).finish(Duration::from_secs(30));
    let help =
        Run::start(&["demo", "--help"], &[("FENCELOCK_URL", &url)]).finish(Duration::from_secs(30));
    for run in [on_command_line, from_env] {
        let explain = run.explain();
        assert!(!run.status.success(), "{explain}");
        assert!(run.stderr.contains("127.0.0.1:1"), "{explain}");
        assert!(!explain.contains(secret), "password printed\n{explain}");
    }
    assert!(help.status.success(), "{}", help.explain());
    assert!(
        !help.explain().contains(secret),
        "password printed\n{}",
        help.explain()
    );
}

#[test]
fn a_missing_redis_server_says_what_to_install() {
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().to_str().unwrap();
    let run = Run::start(&["demo"], &[("PATH", path)]).finish(Duration::from_secs(30));
    let explain = run.explain();
    assert!(!run.status.success(), "{explain}");
    for expected in [
        "redis-server not found in PATH",
        "sudo apt-get install -y redis-server",
        "brew install redis",
        "--url redis://HOST:PORT",
    ] {
        assert!(
            run.stderr.contains(expected),
            "{expected:?} missing\n{explain}"
        );
    }
}

#[test]
fn help_shows_examples() {
    let run = Run::start(&["--help"], &[]).finish(Duration::from_secs(30));
    assert!(run.status.success(), "{}", run.explain());
    assert!(run.stdout.contains("Examples:"), "{}", run.explain());
    assert!(!run.stdout.contains("demo-worker"), "{}", run.explain());
    let run = Run::start(&["demo", "--help"], &[]).finish(Duration::from_secs(30));
    for expected in ["--workers", "--rounds", "--ttl", "--url", "Examples:"] {
        assert!(
            run.stdout.contains(expected),
            "{expected:?} missing\n{}",
            run.explain()
        );
    }
}
