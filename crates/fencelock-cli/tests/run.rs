//! End-to-end tests of `fencelock run`: the real binary against a real redis-server.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::time::{Duration, Instant};

use common::intervals::run_concurrently;
use common::*;
use nix::sys::signal::Signal;

#[test]
fn concurrent_runs_never_overlap_and_fences_grow() {
    let server = server();
    let url = server.url();
    let (mut intervals, text) = run_concurrently(8, &["--url", &url, "shared"], "0.05");
    assert_eq!(intervals.len(), 8, "{text}");
    intervals.sort_by_key(|i| i.start);
    for pair in intervals.windows(2) {
        let (first, second) = (&pair[0], &pair[1]);
        assert!(second.start > first.end, "overlapping holders: {text}");
        assert!(
            second.fence > first.fence,
            "fences must grow in start order: {text}"
        );
    }
    assert!(intervals.iter().all(|i| i.permits == "-"), "{text}");
    assert!(!exists(&server, &lock_key("shared")));
}

#[test]
fn the_command_gets_the_lock_in_its_environment_and_its_exit_code_is_kept() {
    let server = server();
    let url = server.url();
    let done = run(&[
        "run",
        "--url",
        &url,
        "jobs/env",
        "--",
        "sh",
        "-c",
        "echo \"$FENCELOCK_NAME $FENCELOCK_FENCE\"; exit 7",
    ]);
    assert_eq!(done.code, Some(7), "{}", done.explain());
    let (name, fence) = done.stdout.trim().split_once(' ').expect("name and fence");
    assert_eq!(name, "jobs/env");
    assert!(fence.parse::<u64>().is_ok_and(|f| f > 0), "{fence}");
    assert!(done.stderr.is_empty(), "{}", done.explain());

    let killed = run(&[
        "run",
        "--url",
        &url,
        "jobs/env",
        "--",
        "sh",
        "-c",
        "kill -9 $$",
    ]);
    assert_eq!(killed.code, Some(128 + 9), "{}", killed.explain());
    let ok = run(&["run", "--url", &url, "jobs/env", "--", "true"]);
    assert_eq!(ok.code, Some(0), "{}", ok.explain());
    assert!(!exists(&server, &lock_key("jobs/env")));
}

#[test]
fn no_wait_on_a_held_lock_fails_fast_and_wait_gives_up_after_its_limit() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let holder = hold(&url, "busy", dir.path(), &[], Some(0));
    let marker = file(dir.path(), "ran");
    let touch = format!("touch \"{marker}\"");

    let busy = run(&[
        "run",
        "--url",
        &url,
        "--no-wait",
        "busy",
        "--",
        "sh",
        "-c",
        &touch,
    ]);
    assert_eq!(busy.code, Some(73), "{}", busy.explain());
    assert!(busy.elapsed < Duration::from_secs(2), "{}", busy.explain());
    assert!(
        busy.stderr.contains("\"busy\"") && busy.stderr.contains(&server.addr().to_string()),
        "the message names the lock and the server: {}",
        busy.explain()
    );

    let waited = run(&[
        "run", "--url", &url, "--wait", "300ms", "busy", "--", "sh", "-c", &touch,
    ]);
    assert_eq!(waited.code, Some(73), "{}", waited.explain());
    assert!(
        waited.elapsed >= Duration::from_millis(300),
        "{}",
        waited.explain()
    );
    assert!(waited.stderr.contains("timed out"), "{}", waited.explain());
    assert!(
        !path(dir.path(), "ran").exists(),
        "the command must not run"
    );

    holder.signal(Signal::SIGTERM);
    let held = holder.finish();
    assert_eq!(held.code, Some(0), "{}", held.explain());
    assert!(!exists(&server, &lock_key("busy")));
}

#[test]
fn a_lost_lock_stops_the_command_with_sigterm_and_exits_74() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    // A short lease: the watchdog renews every 200 ms and sees the deleted key then.
    let holder = hold(&url, "lost", dir.path(), &["--ttl", "600ms"], Some(0));
    server.cmd(&["DEL", &lock_key("lost")]).expect("DEL");
    let done = holder.finish_within(Duration::from_secs(10));
    assert_eq!(done.code, Some(74), "{}", done.explain());
    let marker = std::fs::read_to_string(path(dir.path(), "lost.term")).expect("TERM marker");
    assert_eq!(marker.trim(), "term");
    assert!(done.stderr.contains("lost"), "{}", done.explain());
}

#[test]
fn a_command_that_ignores_sigterm_gets_sigkill_after_the_grace_period() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let holder = hold(
        &url,
        "stubborn",
        dir.path(),
        &["--ttl", "600ms", "--kill-after", "500ms"],
        None,
    );
    let deleted_at = Instant::now();
    let released = run(&["release", "--url", &url, "--force", "stubborn"]);
    assert_eq!(released.code, Some(0), "{}", released.explain());
    let done = holder.finish_within(Duration::from_secs(10));
    let after_delete = deleted_at.elapsed();
    assert_eq!(done.code, Some(74), "{}", done.explain());
    assert!(done.stderr.contains("SIGKILL"), "{}", done.explain());
    assert!(
        after_delete >= Duration::from_millis(500),
        "the grace period was not given: {after_delete:?}"
    );
    assert!(
        after_delete < Duration::from_secs(5),
        "SIGKILL came late: {after_delete:?}"
    );
}

#[test]
fn sigterm_reaches_the_command_and_the_lock_is_released_after_it() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let holder = hold(&url, "term", dir.path(), &[], Some(3));
    assert!(exists(&server, &lock_key("term")));
    holder.signal(Signal::SIGTERM);
    let done = holder.finish_within(Duration::from_secs(10));
    assert_eq!(
        done.code,
        Some(3),
        "the command's own code: {}",
        done.explain()
    );
    let marker = std::fs::read_to_string(path(dir.path(), "term.term")).expect("TERM marker");
    assert_eq!(marker.trim(), "term");
    assert!(!exists(&server, &lock_key("term")), "released");
}

#[test]
fn a_forwarded_signal_is_caught_by_the_time_the_command_runs_and_reaches_it() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let ready = file(dir.path(), "ready");
    let marker = file(dir.path(), "usr1");
    let script = format!(
        "trap 'echo usr1 > \"{marker}\"; exit 5' USR1; touch \"{ready}\"; \
         i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"
    );
    let holder = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "forwarded",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    wait_for_file(&path(dir.path(), "ready"), LIMIT);
    // Caught before the command started: a signal sent now cannot end fencelock instead.
    let forwarded = [Signal::SIGQUIT, Signal::SIGUSR1, Signal::SIGUSR2];
    assert!(catches(holder.pid(), &forwarded), "handlers set");
    holder.signal(Signal::SIGUSR1);
    let done = holder.finish_within(Duration::from_secs(10));
    assert_eq!(
        done.code,
        Some(5),
        "the command's own code: {}",
        done.explain()
    );
    let marker = std::fs::read_to_string(path(dir.path(), "usr1")).expect("USR1 marker");
    assert_eq!(marker.trim(), "usr1");
    assert!(!exists(&server, &lock_key("forwarded")), "released");
}

#[test]
fn a_signal_while_waiting_stops_the_wait_at_once_with_nothing_held() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let holder = hold(&url, "queue", dir.path(), &[], Some(0));
    let marker = file(dir.path(), "ran");
    for (signal, code) in [(Signal::SIGTERM, 143), (Signal::SIGINT, 130)] {
        // The previous waiter's subscription is gone with its connection.
        wait_until(LIMIT, "no waiter left", || waiters(&server, "queue") == 0);
        let waiter = Running::start(fencelock(&[
            "run",
            "--url",
            &url,
            "queue",
            "--",
            "sh",
            "-c",
            &format!("touch \"{marker}\""),
        ]));
        // Let it get as far as waiting (it cannot acquire: the holder has it), its handlers set.
        let (pid, stops) = (
            waiter.pid(),
            [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP],
        );
        wait_until(LIMIT, "the waiter waits, its handlers set", || {
            catches(pid, &stops) && waiters(&server, "queue") >= 1
        });
        let sent = Instant::now();
        waiter.signal(signal);
        let done = waiter.finish_within(Duration::from_secs(10));
        assert_eq!(done.code, Some(code), "{}", done.explain());
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "{}",
            done.explain()
        );
        assert!(done.stderr.contains("waiting"), "{}", done.explain());
    }
    holder.signal(Signal::SIGTERM);
    assert_eq!(holder.finish().code, Some(0));
    assert!(
        !path(dir.path(), "ran").exists(),
        "the command must not run"
    );
    assert!(!exists(&server, &lock_key("queue")), "nothing is held");
}

#[test]
fn bad_input_is_refused_with_a_clear_message_and_nothing_is_held() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let marker = file(dir.path(), "ran");
    let touch = format!("touch \"{marker}\"");
    let cases: [(&[&str], i32, &[&str]); 7] = [
        (
            &["--url", &url, "--ttl", "5parsecs", "n"],
            2,
            &["not a duration"],
        ),
        (&["--url", &url, ""], 2, &["empty"]),
        (&["--url", &url, "a{b}"], 2, &["a{b}", "braces"]),
        (
            &["--url", "redis://127.0.0.1:1", "n"],
            69,
            &["127.0.0.1:1", "\"n\""],
        ),
        (&["--url", "not a url", "n"], 2, &["invalid Redis URL"]),
        (
            &["--url", "redis://me:s3cret@127.0.0.1:1", "n"],
            2,
            &["password", "FENCELOCK_URL"],
        ),
        (
            &["--url", &url, "--wait", "1s", "--no-wait", "n"],
            2,
            &["--no-wait"],
        ),
    ];
    for (args, code, needles) in cases {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "sh", "-c", &touch]);
        let done = run(&all);
        assert_eq!(done.code, Some(code), "{args:?}: {}", done.explain());
        for needle in needles {
            assert!(done.stderr.contains(needle), "{args:?}: {}", done.explain());
        }
        assert!(!done.stderr.contains("s3cret"), "{}", done.explain());
    }
    let missing = run(&["run", "--url", &url, "n", "--", "no-such-command-here"]);
    assert_eq!(missing.code, Some(127), "{}", missing.explain());
    assert!(missing.stderr.contains("no-such-command-here"));
    let not_executable = file(dir.path(), "plain-file");
    std::fs::write(&not_executable, "echo hi\n").unwrap();
    let refused = run(&["run", "--url", &url, "n", "--", &not_executable]);
    assert_eq!(refused.code, Some(126), "{}", refused.explain());

    assert!(!path(dir.path(), "ran").exists(), "no command may run");
    let leftovers: Vec<String> = server
        .keys()
        .unwrap()
        .into_iter()
        .filter(|k| !k.ends_with(":fence"))
        .collect();
    assert!(leftovers.is_empty(), "held: {leftovers:?}");
}

#[test]
fn urls_come_from_the_environment_or_a_file() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let url_file = file(dir.path(), "url");
    std::fs::write(&url_file, format!("# the lock server\n{url}\n")).unwrap();
    for (var, value) in [
        ("FENCELOCK_URL", url.as_str()),
        ("FENCELOCK_URL_FILE", url_file.as_str()),
    ] {
        let mut command = fencelock(&["run", "from-env", "--", "true"]);
        command.env(var, value);
        let done = Running::start(command).finish();
        assert_eq!(done.code, Some(0), "{var}: {}", done.explain());
    }
    let mut command = fencelock(&["run", "from-env", "--", "true"]);
    command.env("FENCELOCK_URL_FILE", file(dir.path(), "missing"));
    let done = Running::start(command).finish();
    assert_eq!(done.code, Some(2), "{}", done.explain());
    assert!(
        done.stderr.contains("FENCELOCK_URL_FILE"),
        "{}",
        done.explain()
    );
}

#[test]
fn several_urls_hold_the_lock_on_a_majority() {
    let a = server();
    let (b, c) = (server(), server());
    let urls = [a.url(), b.url(), c.url()];
    let done = run(&[
        "run",
        "--url",
        &urls[0],
        "--url",
        &urls[1],
        "--url",
        &urls[2],
        "redlocked",
        "--",
        "sh",
        "-c",
        "test -n \"$FENCELOCK_FENCE\" && exit 5",
    ]);
    assert_eq!(done.code, Some(5), "{}", done.explain());
    for server in [&a, &b, &c] {
        assert!(!exists(server, &lock_key("redlocked")));
    }
}

#[test]
fn a_killed_holders_lock_delay_holds_the_next_run_back_and_a_release_ends_it() {
    let server = server();
    let url = server.url();
    let holder = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--ttl",
        "1s",
        "--lock-delay",
        "2s",
        "jobs/delayed",
        "--",
        "sleep",
        "5",
    ]));
    wait_until(Duration::from_secs(10), "the holder took the lock", || {
        exists(&server, &lock_key("jobs/delayed"))
    });
    let killed_at = Instant::now();
    holder.signal(Signal::SIGKILL);
    let next = run(&[
        "run",
        "--url",
        &url,
        "--wait",
        "20s",
        "jobs/delayed",
        "--",
        "true",
    ]);
    let waited = killed_at.elapsed();
    assert_eq!(next.code, Some(0), "{}", next.explain());
    // The server keeps the hold for the lease and the delay from the last renewal, at most a
    // third of the lease before the kill: no sooner than 1 s + 2 s - 1/3 s after it.
    assert!(
        waited >= Duration::from_millis(2600),
        "the next run got the lock {waited:?} after the holder was killed"
    );
    drop(holder.finish_within(Duration::from_secs(5)));

    // A run that ends releases: the delay ends with it.
    let first = run(&[
        "run",
        "--url",
        &url,
        "--ttl",
        "1s",
        "--lock-delay",
        "20s",
        "jobs/released",
        "--",
        "true",
    ]);
    assert_eq!(first.code, Some(0), "{}", first.explain());
    let next = run(&[
        "run",
        "--url",
        &url,
        "--no-wait",
        "jobs/released",
        "--",
        "true",
    ]);
    assert_eq!(next.code, Some(0), "{}", next.explain());
}

#[test]
fn a_release_request_is_passed_on_and_the_lock_released_when_the_command_ends() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    // The command ends with 3 on SIGTERM (the default signal of --on-request).
    let holder = hold(&url, "jobs/asked", dir.path(), &["--grace", "5s"], Some(3));
    let asked = run(&["release", "--url", &url, "--ask", "jobs/asked"]);
    assert_eq!(asked.code, Some(0), "{}", asked.explain());
    assert!(
        asked.stdout.contains("asked the holder"),
        "{}",
        asked.explain()
    );
    let done = holder.finish_within(Duration::from_secs(10));
    assert_eq!(done.code, Some(3), "{}", done.explain());
    assert!(
        path(dir.path(), "jobs_asked.term").exists(),
        "the command got no SIGTERM"
    );
    assert!(
        !exists(&server, &lock_key("jobs/asked")),
        "the lock was not released"
    );

    // A command that ignores the request gets SIGKILL after --grace, and the lock goes back.
    let stubborn = hold(
        &url,
        "jobs/stubborn",
        dir.path(),
        &["--grace", "500ms"],
        None,
    );
    let asked_at = Instant::now();
    assert_eq!(
        run(&["release", "--url", &url, "--ask", "jobs/stubborn"]).code,
        Some(0)
    );
    let done = stubborn.finish_within(Duration::from_secs(10));
    assert_eq!(done.code, Some(137), "{}", done.explain());
    assert!(asked_at.elapsed() >= Duration::from_millis(500));
    assert!(!exists(&server, &lock_key("jobs/stubborn")));

    // Nobody holds it: nothing to ask, nothing changes.
    let nobody = run(&["release", "--url", &url, "--ask", "jobs/free"]);
    assert_eq!(nobody.code, Some(0), "{}", nobody.explain());
    assert!(
        nobody.stdout.contains("nobody to ask"),
        "{}",
        nobody.explain()
    );
}
