//! Every signal from 1 to 31 sent to `fencelock run` (and `elect`) in each phase of a run,
//! checked against the table of `docs/command.md` (and `src/run/signals.rs`), with the invariant
//! that a process of the command lives only while the lock is held (read from Redis and
//! `/proc`); job control (Ctrl-Z) past the lease; a Ctrl-C right after the start; the launcher
//! kept a zombie while its group may still be signalled; and the short kill after a loss.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::proc::{alive, children_of, state, stopped};
use common::*;
use fencelock_testkit::RedisServer;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The command of these tests: writes its PID, then a tick every 20 ms; on any signal it can
/// catch but the job-control ones it writes the signal's number and exits 3, but for the one
/// given as its fourth argument (a release request's), which it writes and ignores.
const PROGRAM: &str = r#"
import os, signal, sys, time
pid_file, got_file, ticks_file, asked = sys.argv[1:5]
def got(n, frame):
    with open(got_file, "a") as f:
        f.write(f"{n}\n")
    if n != int(asked):
        os._exit(3)
skip = {signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT, signal.SIGTSTP, signal.SIGTTIN,
        signal.SIGTTOU, signal.SIGCHLD}
for n in range(1, 32):
    if n not in skip:
        signal.signal(n, got)
with open(pid_file + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(pid_file + ".tmp", pid_file)
while True:
    with open(ticks_file, "a") as f:
        f.write(f"{time.monotonic()}\n")
    time.sleep(0.02)
"#;

/// What the table says the supervisor does with a signal (`docs/command.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Ends a wait; passed on to the command.
    Ending,
    /// Passed on to the command (kept while waiting).
    Passed,
    /// Job control: the command's tree stops, then fencelock.
    Stop,
    /// Nothing visible while nothing is stopped.
    Continue,
    /// Ends fencelock as the signal says (KILL, the faults); the launcher kills the tree.
    Fatal,
    /// BUS, SEGV: the first is taken by the Rust runtime's stack-overflow handler, which puts
    /// the default action back; the second is `Fatal`.
    FatalSecond,
    /// Stops fencelock (SIGSTOP); the launcher stops the command's tree.
    Stopped,
    /// Ignored (PIPE, CHLD).
    Ignored,
}

fn expected(number: i32) -> Expect {
    match number {
        1 | 2 | 3 | 15 => Expect::Ending,
        6 | 10 | 12 | 14 | 16 | 23..=30 => Expect::Passed,
        20..=22 => Expect::Stop,
        18 => Expect::Continue,
        4 | 5 | 8 | 9 | 31 => Expect::Fatal,
        7 | 11 => Expect::FatalSecond,
        19 => Expect::Stopped,
        13 | 17 => Expect::Ignored,
        _ => unreachable!("{number}"),
    }
}

/// The files of one run's command.
struct Files {
    pid: std::path::PathBuf,
    got: std::path::PathBuf,
    ticks: std::path::PathBuf,
}

impl Files {
    fn new(dir: &Path, tag: &str) -> Files {
        Files {
            pid: path(dir, &format!("{tag}.pid")),
            got: path(dir, &format!("{tag}.got")),
            ticks: path(dir, &format!("{tag}.ticks")),
        }
    }

    fn command(&self) -> Vec<String> {
        self.command_asked(0)
    }

    /// The command, ignoring signal `asked` (after it writes it down).
    fn command_asked(&self, asked: i32) -> Vec<String> {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "python3".into(),
            "-c".into(),
            PROGRAM.into(),
            s(&self.pid),
            s(&self.got),
            s(&self.ticks),
            asked.to_string(),
        ]
    }

    fn pid(&self) -> Option<Pid> {
        let text = std::fs::read_to_string(&self.pid).ok()?;
        text.trim().parse().ok().map(Pid::from_raw)
    }

    fn wait_pid(&self) -> Pid {
        wait_for_pid(&self.pid)
    }

    fn got(&self) -> Vec<i32> {
        std::fs::read_to_string(&self.got)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    fn ticks(&self) -> usize {
        std::fs::read_to_string(&self.ticks)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        if let Some(pid) = self.pid()
            && alive(pid)
        {
            let _ = kill(pid, Signal::SIGKILL);
        }
    }
}

/// The lock key must exist whenever the command runs, until it has ended (at most `LIMIT`).
fn held_while_alive(server: &RedisServer, key: &str, pid: Pid) {
    let give_up = Instant::now() + LIMIT;
    loop {
        let held = exists(server, key);
        if !alive(pid) {
            return;
        }
        assert!(held, "{key} is free while the command {pid} runs");
        assert!(Instant::now() < give_up, "{pid} still runs after {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The ticks do not grow for `span` (the command does not run).
fn no_ticks_for(files: &Files, span: Duration, what: &str) {
    let before = files.ticks();
    std::thread::sleep(span);
    assert_eq!(files.ticks(), before, "the command ticked while {what}");
}

/// The ticks grow (the command runs).
fn ticks_again(files: &Files, what: &str) {
    let before = files.ticks();
    wait_until(LIMIT, what, || files.ticks() > before);
}

fn start_run(url: &str, name: &str, ttl: &str, files: &Files) -> Running {
    let command = files.command();
    let mut args = vec!["run", "--url", url, "--ttl", ttl, name, "--"];
    args.extend(command.iter().map(String::as_str));
    Running::start(fencelock(&args))
}

/// Ends a run whose command still runs with SIGTERM (passed on: the command writes 15 and exits
/// 3), and checks that.
fn end_with_term(running: Running, files: &Files, what: &str) -> Finished {
    running.signal(Signal::SIGTERM);
    let done = running.finish();
    assert_eq!(done.code, Some(3), "{what}: {}", done.explain());
    assert_eq!(files.got().last(), Some(&15), "{what}: {}", done.explain());
    done
}

/// Runs `check(number)` for every signal from 1 to 31, four at a time.
fn each_signal(check: impl Fn(i32) + Sync) {
    let numbers: Vec<i32> = (1..=31).collect();
    for chunk in numbers.chunks(4) {
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&n| {
                    let check = &check;
                    (n, scope.spawn(move || check(n)))
                })
                .collect();
            for (n, handle) in handles {
                if let Err(panic) = handle.join() {
                    let text = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_default();
                    panic!("signal {n}: {text}");
                }
            }
        });
    }
}

#[test]
fn every_signal_while_the_command_runs_has_the_outcome_the_table_states() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    each_signal(|n| {
        let signal = Signal::try_from(n).unwrap();
        let name = format!("signals/running/{n}");
        let key = lock_key(&name);
        let files = Files::new(dir.path(), &format!("running{n}"));
        let running = start_run(&url, &name, "10s", &files);
        let command = files.wait_pid();
        ticks_again(&files, "the command runs");
        running.signal(signal);
        after_signal(n, running, &files, &server, &key, command, &[]);
    });
}

/// Checks what follows signal `n` sent to a run whose command runs (`pid`), or whose tree is
/// being stopped: the command noted `before` first.
fn after_signal(
    n: i32,
    running: Running,
    files: &Files,
    server: &RedisServer,
    key: &str,
    pid: Pid,
    before: &[i32],
) {
    let signal = Signal::try_from(n).unwrap();
    let with = |last: &[i32]| [before, last].concat();
    let end_with_term = |running: Running| {
        running.signal(Signal::SIGTERM);
        let done = running.finish();
        assert_eq!(done.code, Some(3), "{}", done.explain());
        done
    };
    match expected(n) {
        Expect::Ending | Expect::Passed if before.contains(&n) => {
            // The request's signal again: noted and ignored as the request was.
            wait_until(LIMIT, "noted again", || files.got() == with(&[n]));
            let done = end_with_term(running);
            assert_eq!(files.got(), with(&[n, 15]), "{}", done.explain());
            assert!(!exists(server, key), "released: {}", done.explain());
        }
        Expect::Ending | Expect::Passed => {
            held_while_alive(server, key, pid);
            let done = running.finish();
            assert_eq!(done.code, Some(3), "{}", done.explain());
            assert_eq!(files.got(), with(&[n]), "{}", done.explain());
            assert!(!exists(server, key), "released: {}", done.explain());
        }
        Expect::Stop | Expect::Stopped => {
            wait_until(LIMIT, "fencelock stops", || stopped(running.pid()));
            wait_until(LIMIT, "the command stops", || stopped(pid));
            no_ticks_for(files, Duration::from_millis(300), "fencelock was stopped");
            assert!(exists(server, key), "the lease outlives a short stop");
            running.signal(Signal::SIGCONT);
            ticks_again(files, "the command runs again, the lock still held");
            let done = end_with_term(running);
            assert_eq!(files.got(), with(&[15]), "{}", done.explain());
            assert!(!exists(server, key), "released: {}", done.explain());
        }
        Expect::Continue | Expect::Ignored => {
            ticks_again(files, "the command runs on");
            assert!(alive(running.pid()));
            let done = end_with_term(running);
            assert_eq!(files.got(), with(&[15]), "{}", done.explain());
        }
        Expect::Fatal | Expect::FatalSecond => {
            if expected(n) == Expect::FatalSecond {
                // Delivered (two signals sent while the first is pending would be one).
                wait_until(LIMIT, "the first is taken by the runtime", || {
                    !catches(running.pid(), &[signal])
                });
                ticks_again(files, "the command runs on after the first");
                assert!(alive(running.pid()), "the first is taken by the runtime");
                running.signal(signal);
            }
            held_while_alive(server, key, pid);
            let done = running.finish();
            assert_eq!(done.signal, Some(n), "{}", done.explain());
            assert_eq!(files.got(), before, "{}", done.explain());
        }
    }
}

/// On the ladder: a release was asked for (`--on-request USR1`, which the command notes and
/// ignores, with a long grace), and the tree is being stopped when the signal comes.
#[test]
fn every_signal_on_the_ladder_has_the_outcome_the_table_states() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    each_signal(|n| {
        let signal = Signal::try_from(n).unwrap();
        let name = format!("signals/ladder/{n}");
        let key = lock_key(&name);
        let files = Files::new(dir.path(), &format!("ladder{n}"));
        let command = files.command_asked(10);
        let mut args = vec![
            "run",
            "--url",
            &url,
            "--ttl",
            "10s",
            "--on-request",
            "USR1",
            "--grace",
            "600s",
            &name,
            "--",
        ];
        args.extend(command.iter().map(String::as_str));
        let running = Running::start(fencelock(&args));
        let pid = files.wait_pid();
        ticks_again(&files, "the command runs");
        let ask = run(&["release", "--url", &url, "--ask", &name]);
        assert_eq!(ask.code, Some(0), "{}", ask.explain());
        wait_until(LIMIT, "the request reaches the command", || {
            files.got() == [10]
        });
        running.signal(signal);
        after_signal(n, running, &files, &server, &key, pid, &[10]);
    });
}

#[test]
fn every_signal_while_waiting_has_the_outcome_the_table_states() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    each_signal(|n| {
        let signal = Signal::try_from(n).unwrap();
        let name = format!("signals/waiting/{n}");
        let key = lock_key(&name);
        let holder_dir = path(dir.path(), &format!("holder{n}"));
        std::fs::create_dir_all(&holder_dir).unwrap();
        let holder = hold(&url, &name, &holder_dir, &[], Some(0));
        let files = Files::new(dir.path(), &format!("waiting{n}"));
        let waiting = start_run(&url, &name, "10s", &files);
        wait_until(LIMIT, "the run waits", || waiters(&server, &name) >= 1);
        waiting.signal(signal);
        let free = |holder: Running| {
            holder.signal(Signal::SIGTERM);
            assert_eq!(holder.finish().code, Some(0));
        };
        match expected(n) {
            Expect::Ending => {
                let done = waiting.finish();
                assert_eq!(done.code, Some(128 + n), "{}", done.explain());
                assert!(files.pid().is_none(), "nothing started: {}", done.explain());
                free(holder);
                assert!(!exists(&server, &key), "nothing held: {}", done.explain());
            }
            Expect::Passed => {
                std::thread::sleep(Duration::from_millis(200));
                assert!(alive(waiting.pid()), "still waiting");
                free(holder);
                // Delivered as the command starts: caught (3) or, before its handler, its
                // default action (128 + N, or nothing for a signal ignored by default).
                if matches!(n, 23 | 28) {
                    // Ignored by default: caught, or ignored and the command runs on (its
                    // handlers are set up once it has written its PID).
                    wait_until(LIMIT, "the command runs, or the run ended", || {
                        files.pid().is_some() || !alive(waiting.pid())
                    });
                    if alive(waiting.pid()) {
                        waiting.signal(Signal::SIGTERM);
                    }
                    let done = waiting.finish();
                    let got = files.got();
                    assert!(
                        done.code == Some(3) && (got == [n] || got == [15]),
                        "{}",
                        done.explain()
                    );
                } else {
                    // (The command may end before it writes its PID.)
                    let done = waiting.finish();
                    if let Some(command) = files.pid() {
                        assert!(!alive(command), "{}", done.explain());
                    }
                    let got = files.got();
                    assert!(
                        (done.code == Some(3) && got == [n]) || done.code == Some(128 + n),
                        "{}",
                        done.explain()
                    );
                    assert!(!exists(&server, &key), "released: {}", done.explain());
                }
            }
            Expect::Stop | Expect::Stopped => {
                wait_until(LIMIT, "fencelock stops", || stopped(waiting.pid()));
                waiting.signal(Signal::SIGCONT);
                wait_until(LIMIT, "fencelock runs again", || !stopped(waiting.pid()));
                free(holder);
                files.wait_pid();
                ticks_again(&files, "the command runs");
                let done = end_with_term(waiting, &files, signal.as_str());
                assert!(!exists(&server, &key), "released: {}", done.explain());
            }
            Expect::Continue | Expect::Ignored => {
                std::thread::sleep(Duration::from_millis(200));
                assert!(alive(waiting.pid()), "still waiting");
                free(holder);
                files.wait_pid();
                ticks_again(&files, "the command runs");
                end_with_term(waiting, &files, signal.as_str());
            }
            Expect::Fatal | Expect::FatalSecond => {
                if expected(n) == Expect::FatalSecond {
                    // Delivered (two signals sent while the first is pending would be one).
                    wait_until(LIMIT, "the first is taken by the runtime", || {
                        !catches(waiting.pid(), &[signal])
                    });
                    assert!(alive(waiting.pid()), "the first is taken by the runtime");
                    waiting.signal(signal);
                }
                let done = waiting.finish();
                assert_eq!(done.signal, Some(n), "{}", done.explain());
                assert!(files.pid().is_none(), "nothing started: {}", done.explain());
                free(holder);
            }
        }
    });
}

/// Ctrl-Z (and the other job-control stops) for longer than the lease: another run takes the
/// lock meanwhile, the first command does not run while it holds it, and once continued the
/// first run kills its command without letting it run again, and exits 74.
#[test]
fn a_job_control_stop_past_the_lease_never_lets_the_command_run_unlocked() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    for signal in [Signal::SIGTSTP, Signal::SIGTTIN, Signal::SIGTTOU] {
        let name = format!("signals/ctrl-z/{}", signal.as_str());
        let key = lock_key(&name);
        let files = Files::new(dir.path(), signal.as_str());
        let running = start_run(&url, &name, "1s", &files);
        let command = files.wait_pid();
        ticks_again(&files, "the command runs");
        running.signal(signal);
        wait_until(LIMIT, "fencelock stops", || stopped(running.pid()));
        let ticks = files.ticks();
        // The lease runs out; another run takes the lock and runs while this one is stopped.
        wait_until(LIMIT, "the lease runs out", || !exists(&server, &key));
        let other = run(&[
            "run",
            "--url",
            &url,
            "--no-wait",
            &name,
            "--",
            "sleep",
            "0.5",
        ]);
        assert_eq!(other.code, Some(0), "{}", other.explain());
        assert_eq!(
            files.ticks(),
            ticks,
            "the command ran while another held the lock"
        );
        running.signal(Signal::SIGCONT);
        let done = running.finish();
        assert_eq!(done.code, Some(74), "{}", done.explain());
        assert!(
            done.stderr.contains("does not run again"),
            "{}",
            done.explain()
        );
        assert!(!alive(command), "{}", done.explain());
        assert_eq!(files.ticks(), ticks, "the command ran again after the loss");
        // Killed stopped: it never ran to handle the ladder's SIGTERM either.
        assert_eq!(files.got(), Vec::<i32>::new(), "{}", done.explain());
    }
}

/// A command stopped on its own (SIGSTOP to it, not to `fencelock`) while the lock is held, when
/// a release is asked for: the ladder continues it, so that it gets the request's SIGTERM and
/// can end as it chooses, long before the grace runs out.
#[test]
fn a_command_stopped_while_held_is_continued_to_get_the_release_request() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let name = "signals/stopped-asked";
    let files = Files::new(dir.path(), "stopped-asked");
    let command = files.command();
    let mut args = vec![
        "run", "--url", &url, "--ttl", "10s", "--grace", "600s", name, "--",
    ];
    args.extend(command.iter().map(String::as_str));
    let running = Running::start(fencelock(&args));
    let pid = files.wait_pid();
    ticks_again(&files, "the command runs");
    kill(pid, Signal::SIGSTOP).unwrap();
    wait_until(LIMIT, "the command stops", || stopped(pid));
    let ask = run(&["release", "--url", &url, "--ask", name]);
    assert_eq!(ask.code, Some(0), "{}", ask.explain());
    wait_until(LIMIT, "the stopped command gets the request", || {
        files.got() == [15]
    });
    let done = running.finish();
    assert!(!alive(pid), "{}", done.explain());
    assert!(!exists(&server, &lock_key(name)), "{}", done.explain());
}

/// The same for `elect`: a leader stopped past its lease never leads again.
#[test]
fn an_election_stopped_past_its_lease_never_lets_the_command_run_again() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let files = Files::new(dir.path(), "elect");
    let command = files.command();
    let mut args = vec![
        "elect", "--url", &url, "--value", "a", "--ttl", "1s", "primary", "--",
    ];
    args.extend(command.iter().map(String::as_str));
    let running = Running::start(fencelock(&args));
    let pid = files.wait_pid();
    ticks_again(&files, "the command runs");
    running.signal(Signal::SIGTSTP);
    wait_until(LIMIT, "fencelock stops", || stopped(running.pid()));
    let ticks = files.ticks();
    wait_until(LIMIT, "the lease runs out", || {
        !exists(&server, &lock_key("primary"))
    });
    running.signal(Signal::SIGCONT);
    let done = running.finish();
    assert_eq!(done.code, Some(74), "{}", done.explain());
    assert!(!alive(pid), "{}", done.explain());
    assert_eq!(files.ticks(), ticks, "the command ran again after the loss");
}

/// SIGINT 0 to 62 ms after the start: the run never exits 125 (a launcher ended by it), and
/// ends with nothing running and nothing held: the signal ended the wait, or reached the command.
#[test]
fn a_ctrl_c_right_after_the_start_ends_the_run_and_never_the_launcher() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    for attempt in 0..32u64 {
        let name = format!("signals/early/{attempt}");
        let marker = file(dir.path(), &format!("early{attempt}"));
        let script = format!("echo $$ > \"{marker}\"; exec sleep 60");
        let running = Running::start(fencelock(&[
            "run", "--url", &url, &name, "--", "sh", "-c", &script,
        ]));
        std::thread::sleep(Duration::from_millis(attempt * 2));
        running.signal(Signal::SIGINT);
        let done = running.finish();
        assert!(
            done.code == Some(130) || done.signal == Some(2),
            "attempt {attempt}: {}",
            done.explain()
        );
        if let Ok(text) = std::fs::read_to_string(&marker)
            && let Ok(pid) = text.trim().parse::<i32>()
        {
            assert!(!alive(Pid::from_raw(pid)), "{}", done.explain());
        }
        assert!(!exists(&server, &lock_key(&name)), "{}", done.explain());
    }
}

/// The process number a shell writes to `path` (`echo $$ > path`), once the file holds one
/// whole: it exists, empty, for a moment before.
fn wait_for_pid(path: &Path) -> Pid {
    let read = || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse().ok())
    };
    wait_until(
        LIMIT,
        &format!("a process number in {}", path.display()),
        || read().is_some(),
    );
    Pid::from_raw(read().unwrap_or_else(|| panic!("{} lost its process number", path.display())))
}

/// While what the command left is being stopped, its launcher (the process group's leader) is a
/// zombie, not collected: its number, the group's, cannot be given to a new process group that
/// the ladder's signals would then reach.
#[test]
fn the_launcher_stays_uncollected_while_its_group_may_be_signalled() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let survivor = file(dir.path(), "survivor");
    let go = file(dir.path(), "go");
    // A survivor in a session of its own that ignores SIGTERM; the command exits on "go".
    let script = format!(
        "setsid sh -c 'trap \"\" TERM; echo $$ > \"{survivor}\"; exec sleep 600' & \
         while [ ! -s \"{survivor}\" ] || [ ! -e \"{go}\" ]; do sleep 0.01; done; exit 0"
    );
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--kill-after",
        "3s",
        "signals/zombie",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let survivor = wait_for_pid(Path::new(&survivor));
    let launcher = children_of(running.pid());
    assert_eq!(launcher.len(), 1, "{launcher:?}");
    let launcher = launcher[0];
    std::fs::write(&go, "").unwrap();
    wait_until(LIMIT, "the launcher ends", || {
        state(launcher).as_deref() == Some("Z")
    });
    // The survivor lives through --kill-after: the launcher stays a zombie all the while.
    let mut looked = 0;
    while alive(survivor) {
        assert_eq!(
            state(launcher).as_deref(),
            Some("Z"),
            "the launcher was collected while its group was still signalled"
        );
        looked += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(looked > 10, "the survivor lived {looked} looks");
    let done = running.finish();
    assert_eq!(done.code, Some(0), "{}", done.explain());
    let _ = kill(survivor, Signal::SIGKILL);
}

/// After a loss the command runs without the lock: it gets SIGTERM and, one second later by
/// default (`--kill-after-loss`), SIGKILL.
#[test]
fn after_a_loss_a_command_that_ignores_sigterm_is_killed_after_a_second() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let marker = file(dir.path(), "ignorer");
    let script = format!("trap '' TERM; echo $$ > \"{marker}\"; exec sleep 600");
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "signals/lost",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    wait_for_file(Path::new(&marker), LIMIT);
    let forced = run(&["release", "--url", &url, "--force", "signals/lost"]);
    assert_eq!(forced.code, Some(0), "{}", forced.explain());
    let done = running.finish();
    assert_eq!(done.code, Some(74), "{}", done.explain());
    assert!(
        done.stderr.contains("SIGKILL after 1s"),
        "{}",
        done.explain()
    );
    // What SIGKILL reached is waited for (up to ten seconds), not reported as outliving it.
    assert!(
        !done.stderr.contains("still alive after SIGKILL"),
        "{}",
        done.explain()
    );
    let pid: i32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!alive(Pid::from_raw(pid)), "{}", done.explain());
}

/// `fencelock` SIGKILLed while Ctrl-Z has it and its command stopped: the launcher, left
/// running for this, kills the command at once, within the lease, which is still held. (The
/// command's group, orphaned with stopped members, gets SIGHUP and SIGCONT from the kernel
/// meanwhile: it may run a moment, under the lease.)
#[test]
fn a_fencelock_killed_while_stopped_leaves_its_stopped_command_killed() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let files = Files::new(dir.path(), "killed-stopped");
    let running = start_run(&url, "signals/killed-stopped", "30s", &files);
    let command = files.wait_pid();
    ticks_again(&files, "the command runs");
    running.signal(Signal::SIGTSTP);
    wait_until(LIMIT, "fencelock stops", || stopped(running.pid()));
    wait_until(LIMIT, "the command stops", || stopped(command));
    running.signal(Signal::SIGKILL);
    held_while_alive(&server, &lock_key("signals/killed-stopped"), command);
    let done = running.finish();
    assert_eq!(done.signal, Some(9), "{}", done.explain());
    assert!(!alive(command));
}
