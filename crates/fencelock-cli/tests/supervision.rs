//! End-to-end tests of what `fencelock run` (and `elect`) guarantee about the command's process
//! tree: the lock is never free while anything the command started is alive, whichever way the
//! run ends, and nothing of the command outlives `fencelock`.
//!
//! Each command writes the PIDs of its processes to files; the test watches the lock key while
//! any of them lives, and checks after `fencelock` exits that none does. A guard kills those
//! PIDs when a test fails half-way.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::proc::{alive, children_of, group};
use common::*;
use fencelock_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The PIDs the command writes (one per file, written to `NAME.tmp` and renamed), killed by PID
/// when the test ends, if any is still alive then.
struct Pids {
    files: Vec<PathBuf>,
}

impl Pids {
    fn new(dir: &Path, names: &[&str]) -> Pids {
        Pids {
            files: names.iter().map(|n| path(dir, n)).collect(),
        }
    }

    /// Waits for every file; its PIDs.
    fn wait(&self) -> Vec<Pid> {
        self.files
            .iter()
            .map(|file| {
                wait_for_file(file, LIMIT);
                let text = std::fs::read_to_string(file).unwrap();
                Pid::from_raw(text.trim().parse().expect("a pid in the file"))
            })
            .collect()
    }

    fn read(&self) -> Vec<Pid> {
        self.files
            .iter()
            .filter_map(|file| std::fs::read_to_string(file).ok())
            .filter_map(|text| text.trim().parse().ok())
            .map(Pid::from_raw)
            .collect()
    }
}

impl Drop for Pids {
    fn drop(&mut self) {
        for pid in self.read() {
            if alive(pid) {
                let _ = kill(pid, Signal::SIGKILL);
            }
        }
    }
}

/// Watches `key` on `server` until none of `pids` is alive (at most `LIMIT`): the key must
/// exist whenever one of them is. The key is read first: a process alive after a read that
/// found the key missing was alive at that read too.
fn held_while_alive(server: &RedisServer, key: &str, pids: &[Pid]) {
    let give_up = Instant::now() + LIMIT;
    loop {
        let held = exists(server, key);
        let living: Vec<Pid> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if living.is_empty() {
            return;
        }
        assert!(
            held,
            "{key} is free while {living:?} of the command still run"
        );
        assert!(
            Instant::now() < give_up,
            "{living:?} still run after {LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// After `fencelock` exited: nothing of the command runs, and the lock is free.
fn nothing_left(server: &RedisServer, key: &str, pids: &[Pid], done: &Finished) {
    let living: Vec<Pid> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        living.is_empty(),
        "{living:?} of the command outlived fencelock: {}",
        done.explain()
    );
    assert!(!exists(server, key), "not released: {}", done.explain());
}

/// `sh` lines that write `$pid_expr` into `file` at once (write, then rename).
fn write_pid(pid_expr: &str, file: &str) -> String {
    format!("echo {pid_expr} > \"{file}.tmp\" && mv \"{file}.tmp\" \"{file}\"")
}

#[test]
fn a_background_process_left_by_the_command_is_stopped_before_the_release() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let pids = Pids::new(dir.path(), &["sleeper"]);
    // The sleeper ignores SIGTERM: it lives through --kill-after, until SIGKILL.
    let script = format!(
        "(trap '' TERM; exec sleep 600) & {}; exit 0",
        write_pid("$!", &file(dir.path(), "sleeper"))
    );
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--kill-after",
        "1s",
        "jobs/background",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let sleeper = pids.wait();
    held_while_alive(&server, &lock_key("jobs/background"), &sleeper);
    let done = running.finish();
    assert_eq!(done.code, Some(0), "the command's code: {}", done.explain());
    nothing_left(&server, &lock_key("jobs/background"), &sleeper, &done);
    assert!(done.stderr.contains("left 1 process"), "{}", done.explain());
}

#[test]
fn a_process_that_left_the_group_with_setsid_is_stopped_before_the_release() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let pids = Pids::new(dir.path(), &["daemon"]);
    let daemon = file(dir.path(), "daemon");
    let daemon_script = file(dir.path(), "daemon.sh");
    std::fs::write(
        &daemon_script,
        format!(
            "trap '' TERM; {}; exec sleep 600\n",
            write_pid("$$", &daemon)
        ),
    )
    .unwrap();
    // In a session (and process group) of its own; the command waits for its PID, then exits.
    let script = format!(
        "setsid sh \"{daemon_script}\" & \
         while [ ! -s \"{daemon}\" ]; do sleep 0.01; done; exit 0"
    );
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--kill-after",
        "1s",
        "jobs/setsid",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let daemon = pids.wait();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", daemon[0])).unwrap_or_default();
    let session = stat.rsplit_once(')').map(|(_, rest)| {
        rest.split_whitespace()
            .nth(3)
            .unwrap_or_default()
            .to_owned()
    });
    assert!(
        alive(daemon[0]) && session == Some(daemon[0].to_string()),
        "the daemon should lead a session of its own: {stat}"
    );
    held_while_alive(&server, &lock_key("jobs/setsid"), &daemon);
    let done = running.finish();
    assert_eq!(done.code, Some(0), "{}", done.explain());
    nothing_left(&server, &lock_key("jobs/setsid"), &daemon, &done);
}

#[test]
fn a_killed_launcher_leaves_nothing_running_and_exits_125() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let pids = Pids::new(dir.path(), &["command"]);
    let script = format!(
        "trap '' TERM; {}; exec sleep 600",
        write_pid("$$", &file(dir.path(), "command"))
    );
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--kill-after",
        "1s",
        "jobs/launcher",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let command = pids.wait();
    let launchers = children_of(running.pid());
    assert_eq!(launchers.len(), 1, "one launcher: {launchers:?}");
    assert_ne!(launchers[0], command[0]);
    // Not `fencelock` to `pkill`: a `pkill -9 fencelock` leaves the launcher to stop the tree.
    // (It takes the name once the command runs: the command may write its PID first.)
    let comm = format!("/proc/{}/comm", launchers[0]);
    wait_until(LIMIT, "the launcher is named fl-launcher", || {
        std::fs::read_to_string(&comm).is_ok_and(|name| name.trim() == "fl-launcher")
    });
    kill(launchers[0], Signal::SIGKILL).unwrap();
    held_while_alive(&server, &lock_key("jobs/launcher"), &command);
    let done = running.finish();
    assert_eq!(done.code, Some(125), "{}", done.explain());
    assert!(done.stderr.contains("launcher"), "{}", done.explain());
    nothing_left(&server, &lock_key("jobs/launcher"), &command, &done);
}

#[test]
fn a_release_request_with_any_signal_reaches_the_command_and_not_the_launcher() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let pids = Pids::new(dir.path(), &["command"]);
    let asked = file(dir.path(), "asked");
    let script = format!(
        "trap 'echo alrm > \"{asked}\"; exit 3' ALRM; {}; \
         i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done",
        write_pid("$$", &file(dir.path(), "command"))
    );
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--on-request",
        "ALRM",
        "--grace",
        "20s",
        "jobs/alarm",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let command = pids.wait();
    let ask = run(&["release", "--url", &url, "--ask", "jobs/alarm"]);
    assert_eq!(ask.code, Some(0), "{}", ask.explain());
    held_while_alive(&server, &lock_key("jobs/alarm"), &command);
    let done = running.finish();
    assert_eq!(
        done.code,
        Some(3),
        "the command's own code: {}",
        done.explain()
    );
    assert!(path(dir.path(), "asked").exists(), "{}", done.explain());
    nothing_left(&server, &lock_key("jobs/alarm"), &command, &done);
}

#[test]
fn a_ctrl_c_during_the_grace_of_a_request_reaches_the_command() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let pids = Pids::new(dir.path(), &["command"]);
    let asked = file(dir.path(), "asked");
    // SIGTERM (the request) is noted and ignored; SIGINT ends the command.
    let script = format!(
        "trap 'echo term > \"{asked}\"' TERM; {}; \
         i=0; while [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done",
        write_pid("$$", &file(dir.path(), "command"))
    );
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--grace",
        "600s",
        "jobs/interrupted",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let command = pids.wait();
    let ask = run(&["release", "--url", &url, "--ask", "jobs/interrupted"]);
    assert_eq!(ask.code, Some(0), "{}", ask.explain());
    wait_for_file(&path(dir.path(), "asked"), LIMIT);
    running.signal(Signal::SIGINT);
    held_while_alive(&server, &lock_key("jobs/interrupted"), &command);
    // Far less than the grace: the SIGINT was passed on.
    let done = running.finish_within(Duration::from_secs(120));
    assert_eq!(done.code, Some(130), "{}", done.explain());
    nothing_left(&server, &lock_key("jobs/interrupted"), &command, &done);
}

#[test]
fn a_run_that_waited_through_an_upgrade_of_its_binary_still_runs_the_command() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let installed = path(dir.path(), "fencelock");
    std::fs::copy(BIN, &installed).unwrap();
    let holder = hold(&url, "jobs/upgrade", dir.path(), &[], Some(0));
    let ran = file(dir.path(), "ran");
    // The same command line and environment as `fencelock(...)`, from the installed copy.
    let line = fencelock(&[
        "run",
        "--url",
        &url,
        "jobs/upgrade",
        "--",
        "sh",
        "-c",
        &format!("echo ran > \"{ran}\""),
    ]);
    let mut command = std::process::Command::new(&installed);
    command
        .args(line.get_args())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (name, value) in line.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let waiter = Running::start(command);
    wait_until(LIMIT, "the run waits for the lock", || {
        waiters(&server, "jobs/upgrade") >= 1
    });
    // The upgrade: the file is replaced by another program.
    std::fs::remove_file(&installed).unwrap();
    std::fs::write(&installed, "#!/bin/sh\nexit 99\n").unwrap();
    holder.signal(Signal::SIGTERM);
    assert_eq!(holder.finish().code, Some(0));
    let done = waiter.finish();
    assert_eq!(done.code, Some(0), "{}", done.explain());
    assert!(path(dir.path(), "ran").exists(), "{}", done.explain());
    assert!(!exists(&server, &lock_key("jobs/upgrade")));
}

#[test]
fn a_lost_lock_reports_a_command_that_ended_on_sigterm_as_such() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    for round in 0..4 {
        let name = format!("jobs/lost{round}");
        let sleeper = format!("sleeper{round}");
        let pids = Pids::new(dir.path(), &[&sleeper]);
        // On SIGTERM the shell exits at once, before it collects its sleep (killed by the same
        // SIGTERM): a zombie that must not count as a process that ignored SIGTERM.
        let script = format!(
            "trap 'exit 0' TERM; sleep 600 & {}; wait",
            write_pid("$!", &file(dir.path(), &sleeper))
        );
        let running = Running::start(fencelock(&[
            "run",
            "--url",
            &url,
            "--ttl",
            "600ms",
            "--kill-after",
            "1s",
            &name,
            "--",
            "sh",
            "-c",
            &script,
        ]));
        let sleeper = pids.wait();
        server.cmd(&["DEL", &lock_key(&name)]).expect("DEL");
        let done = running.finish();
        assert_eq!(done.code, Some(74), "{}", done.explain());
        let last = done.stderr.trim_end().lines().last().unwrap_or_default();
        assert!(
            last.contains("got SIGTERM and exited with status 0"),
            "round {round}: {}",
            done.explain()
        );
        assert!(!alive(sleeper[0]), "{}", done.explain());
    }
}

#[test]
fn an_election_resigns_only_after_what_its_command_left_is_stopped() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let pids = Pids::new(dir.path(), &["sleeper"]);
    let script = format!(
        "(trap '' TERM; exec sleep 600) & {}; exit 0",
        write_pid("$!", &file(dir.path(), "sleeper"))
    );
    let running = Running::start(fencelock(&[
        "elect",
        "--url",
        &url,
        "--value",
        "node-a",
        "--kill-after",
        "1s",
        "primary",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let sleeper = pids.wait();
    held_while_alive(&server, &lock_key("primary"), &sleeper);
    let done = running.finish();
    assert_eq!(done.code, Some(0), "{}", done.explain());
    nothing_left(&server, &lock_key("primary"), &sleeper, &done);
}

#[test]
fn a_killed_fencelock_leaves_nothing_of_its_command_running() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let pids = Pids::new(dir.path(), &["command", "daemon"]);
    let daemon = file(dir.path(), "daemon");
    let daemon_script = file(dir.path(), "daemon.sh");
    std::fs::write(
        &daemon_script,
        format!(
            "trap '' TERM; {}; exec sleep 600\n",
            write_pid("$$", &daemon)
        ),
    )
    .unwrap();
    // The command ignores SIGTERM and has started a daemon in a session of its own.
    let script = format!(
        "trap '' TERM; setsid sh \"{daemon_script}\" & {}; exec sleep 600",
        write_pid("$$", &file(dir.path(), "command"))
    );
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "jobs/killed",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let all = pids.wait();
    running.signal(Signal::SIGKILL);
    let done = running.finish();
    assert_eq!(done.code, None, "killed: {}", done.explain());
    wait_until(LIMIT, "nothing of the command runs", || {
        all.iter().all(|&p| !alive(p))
    });
}

#[test]
fn a_loss_during_the_grace_of_a_request_cuts_it_short_and_exits_74() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let pids = Pids::new(dir.path(), &["command"]);
    let asked = file(dir.path(), "asked");
    // The request's SIGTERM is noted and ignored.
    let script = format!(
        "trap 'echo term > \"{asked}\"' TERM; {}; \
         i=0; while [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done",
        write_pid("$$", &file(dir.path(), "command"))
    );
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--ttl",
        "600ms",
        "--grace",
        "600s",
        "jobs/lost-in-grace",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let command = pids.wait();
    let ask = run(&["release", "--url", &url, "--ask", "jobs/lost-in-grace"]);
    assert_eq!(ask.code, Some(0), "{}", ask.explain());
    wait_for_file(&path(dir.path(), "asked"), LIMIT);
    let released = run(&["release", "--url", &url, "--force", "jobs/lost-in-grace"]);
    assert_eq!(released.code, Some(0), "{}", released.explain());
    // Far less than the grace: the loss was seen during it.
    let done = running.finish_within(Duration::from_secs(120));
    assert_eq!(done.code, Some(74), "{}", done.explain());
    assert!(done.stderr.contains("was lost"), "{}", done.explain());
    nothing_left(&server, &lock_key("jobs/lost-in-grace"), &command, &done);
}

/// A process of the command's group that survives SIGKILL (here one `fencelock` cannot signal:
/// `fencelock` runs as `nobody`, and a process of root's joins the command's process group)
/// keeps the lock held, renewed past its lease, until it has ended; then the lock is released.
#[test]
fn a_survivor_of_sigkill_keeps_the_lock_held_until_it_ends() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let server = server();
    let url = server.url();
    // Where nobody can reach: in /tmp (the usual temporary directory may be inside one only
    // its owner can enter, as a CI checkout may be), with a copy of the binary.
    let dir = tempfile::Builder::new()
        .prefix("fencelock-cli-test-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o777)).unwrap();
    let binary = path(dir.path(), "fencelock");
    std::fs::copy(BIN, &binary).unwrap();
    std::fs::set_permissions(&binary, PermissionsExt::from_mode(0o755)).unwrap();
    let pids = Pids::new(dir.path(), &["command"]);
    let go = file(dir.path(), "go");
    let script = format!(
        "{}; while [ ! -e \"{go}\" ]; do sleep 0.01; done; exit 0",
        write_pid("$$", &file(dir.path(), "command"))
    );
    let mut line = fencelock_at(
        &binary,
        &[
            "run",
            "--url",
            &url,
            "--ttl",
            "2s",
            "--kill-after",
            "1s",
            "jobs/survivor",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    // As nobody, so that root's process cannot be signalled by it.
    line.uid(65534).gid(65534).current_dir(dir.path());
    let running = Running::start(line);
    let command = pids.wait();
    let group = group(command[0]).unwrap();
    // Root's process joins the command's group (the same session: the test's).
    let mut intruder = std::process::Command::new("python3")
        .args([
            "-c",
            &format!("import os, time; os.setpgid(0, {group}); time.sleep(600)"),
        ])
        .spawn()
        .unwrap();
    let intruder_pid = Pid::from_raw(i32::try_from(intruder.id()).unwrap());
    wait_until(LIMIT, "root's process is in the command's group", || {
        common::proc::group(intruder_pid).as_deref() == Some(group.as_str())
    });
    std::fs::write(&go, "").unwrap();
    // The command ends; the ladder cannot end root's process: past SIGKILL's limit (10 s) it is
    // reported, and the lock is kept, past several of its 2 s leases.
    let reported = Instant::now();
    held_while_alive(&server, &lock_key("jobs/survivor"), &[command[0]]);
    wait_until(
        Duration::from_secs(60),
        "the lock is kept past 12 s",
        || reported.elapsed() > Duration::from_secs(12),
    );
    assert!(
        exists(&server, &lock_key("jobs/survivor")),
        "released while a process of the command lives"
    );
    assert!(alive(intruder_pid));
    let _ = intruder.kill();
    let _ = intruder.wait();
    let done = running.finish();
    assert_eq!(done.code, Some(0), "{}", done.explain());
    assert!(
        done.stderr.contains("is kept until it has ended"),
        "{}",
        done.explain()
    );
    assert!(
        !exists(&server, &lock_key("jobs/survivor")),
        "{}",
        done.explain()
    );
}
