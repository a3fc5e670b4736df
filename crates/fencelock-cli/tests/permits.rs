//! End-to-end tests of `fencelock run --permits N`: the real binary against a real redis-server,
//! holding one permit of a semaphore of N.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::time::Duration;

use common::intervals::{Interval, max_overlap, run_concurrently};
use common::*;
use fencelock_testkit::RedisServer;
use nix::sys::signal::Signal;

/// `(start, end)` pairs as intervals (of no fence).
fn spans(pairs: &[(u128, u128)]) -> Vec<Interval> {
    pairs
        .iter()
        .map(|&(start, end)| Interval {
            fence: 0,
            permits: "-".into(),
            start,
            end,
        })
        .collect()
}

#[test]
fn the_overlap_count_is_right() {
    assert_eq!(max_overlap(&spans(&[(0, 10), (10, 20), (20, 30)])), 1);
    assert_eq!(
        max_overlap(&spans(&[(0, 10), (5, 15), (9, 20), (16, 30)])),
        3
    );
    assert_eq!(max_overlap(&spans(&[(0, 10), (5, 15), (11, 20)])), 2);
}

#[test]
fn concurrent_runs_never_exceed_the_permits_and_reach_them() {
    let server = server();
    let url = server.url();
    let args = ["--url", &url, "--permits", "2", "--ttl", "3s", "pool"];
    let (intervals, text) = run_concurrently(6, &args, "0.5");
    assert_eq!(intervals.len(), 6, "{text}");
    assert!(
        intervals.iter().all(|i| i.permits == "2"),
        "FENCELOCK_PERMITS: {text}"
    );
    assert_eq!(
        max_overlap(&intervals),
        2,
        "at most 2 at once, and 2 were reached: {text}"
    );
    let mut fences: Vec<u64> = intervals.iter().map(|i| i.fence).collect();
    fences.sort_unstable();
    fences.dedup();
    assert_eq!(
        fences.len(),
        6,
        "every permit has a fence of its own: {text}"
    );
    assert!(fences[0] > 0, "{text}");
    assert!(
        !exists(&server, &lock_key("pool")),
        "every permit went back"
    );
}

#[test]
fn the_command_gets_the_permits_and_its_fence_in_its_environment() {
    let server = server();
    let url = server.url();
    let done = run(&[
        "run",
        "--url",
        &url,
        "--permits",
        "3",
        "jobs/pool",
        "--",
        "sh",
        "-c",
        "echo \"$FENCELOCK_NAME $FENCELOCK_PERMITS $FENCELOCK_FENCE\"; exit 7",
    ]);
    assert_eq!(done.code, Some(7), "{}", done.explain());
    let fields: Vec<&str> = done.stdout.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{}", done.explain());
    assert_eq!(fields[..2], ["jobs/pool", "3"], "{}", done.explain());
    assert!(
        fields[2].parse::<u64>().is_ok_and(|f| f > 0),
        "{}",
        done.explain()
    );
    assert!(done.stderr.is_empty(), "{}", done.explain());
    assert!(!exists(&server, &lock_key("jobs/pool")), "released");

    // A plain lock inside an outer `run --permits` does not pass the outer number on.
    let mut command = fencelock(&[
        "run",
        "--url",
        &url,
        "plain",
        "--",
        "sh",
        "-c",
        "echo \"${FENCELOCK_PERMITS-unset}\"",
    ]);
    command.env("FENCELOCK_PERMITS", "9");
    let plain = Running::start(command).finish();
    assert_eq!(plain.code, Some(0), "{}", plain.explain());
    assert_eq!(plain.stdout.trim(), "unset", "{}", plain.explain());
}

#[test]
fn a_permit_is_renewed_and_a_lost_permit_stops_the_command_with_74() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let extra = ["--permits", "2", "--ttl", "600ms"];
    let mut first = hold(&url, "renewed", dir.path(), &extra, Some(0));
    // Well past two leases: only renewal keeps the first permit alive.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(first.child.try_wait().unwrap().is_none(), "still running");
    // Its own directory: `hold` names its marker files after the lock.
    let second_dir = scratch();
    let second = hold(
        &url,
        "renewed",
        second_dir.path(),
        &["--permits", "2"],
        Some(0),
    );
    // Both permits are live: a third is refused (an expired permit would have been dropped).
    let third = run(&[
        "run",
        "--url",
        &url,
        "--permits",
        "2",
        "--no-wait",
        "renewed",
        "--",
        "true",
    ]);
    assert_eq!(third.code, Some(73), "{}", third.explain());
    assert!(
        third.stderr.contains("all 2 permits are held") && third.stderr.contains("\"renewed\""),
        "{}",
        third.explain()
    );
    second.signal(Signal::SIGTERM);
    let second = second.finish();
    assert_eq!(second.code, Some(0), "{}", second.explain());

    server.cmd(&["DEL", &lock_key("renewed")]).expect("DEL");
    let done = first.finish_within(Duration::from_secs(10));
    assert_eq!(done.code, Some(74), "{}", done.explain());
    let marker = std::fs::read_to_string(path(dir.path(), "renewed.term")).expect("TERM marker");
    assert_eq!(marker.trim(), "term");
    assert!(
        done.stderr.contains("permit of semaphore \"renewed\"") && done.stderr.contains("lost"),
        "{}",
        done.explain()
    );
}

#[test]
fn another_number_of_permits_or_another_kind_is_refused_at_once_with_exit_2() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let marker = file(dir.path(), "ran");
    let touch = format!("touch \"{marker}\"");
    let pool = hold(&url, "pool", dir.path(), &["--permits", "2"], Some(0));
    let solo = hold(&url, "solo", dir.path(), &["--permits", "1"], Some(0));
    let plain = hold(&url, "plain", dir.path(), &[], Some(0));

    // None of these may wait (no --no-wait is given): a conflict does not go away by waiting.
    let cases: [(&[&str], i32, &[&str]); 5] = [
        (
            &["--permits", "3", "pool"],
            2,
            &[
                "\"pool\"",
                "held with 2 permits",
                "asks for 3",
                "--permits 2",
            ],
        ),
        (&["pool"], 2, &["\"pool\"", "semaphore", "--permits"]),
        // --permits 1 is a semaphore of one permit, not the plain lock.
        (&["solo"], 2, &["\"solo\"", "semaphore"]),
        (
            &["--permits", "1", "plain"],
            2,
            &["\"plain\"", "drop --permits"],
        ),
        (
            &["--permits", "1", "--no-wait", "solo"],
            73,
            &["\"solo\"", "its only permit is held"],
        ),
    ];
    for (args, code, needles) in cases {
        let mut all = vec!["run", "--url", &url];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "sh", "-c", &touch]);
        let done = Running::start(fencelock(&all)).finish_within(Duration::from_secs(10));
        assert_eq!(done.code, Some(code), "{args:?}: {}", done.explain());
        assert!(
            done.elapsed < Duration::from_secs(3),
            "{args:?}: {}",
            done.explain()
        );
        assert!(
            done.stderr.starts_with("fencelock: error: "),
            "{args:?}: {}",
            done.explain()
        );
        for needle in needles {
            assert!(
                done.stderr.contains(needle),
                "{args:?}: no {needle:?} in {}",
                done.explain()
            );
        }
    }
    assert!(
        !path(dir.path(), "ran").exists(),
        "no refused command may run"
    );
    for holder in [pool, solo, plain] {
        holder.signal(Signal::SIGTERM);
        let done = holder.finish();
        assert_eq!(done.code, Some(0), "{}", done.explain());
    }
    for name in ["pool", "solo", "plain"] {
        assert!(!exists(&server, &lock_key(name)), "{name} released");
    }
}

/// How many connections `server` has accepted so far (this query's own included).
fn connections_received(server: &RedisServer) -> u64 {
    let info = match server.cmd(&["INFO", "stats"]).expect("INFO") {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO answered {other:?}"),
    };
    info.lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .expect("total_connections_received")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn permits_over_several_servers_and_zero_permits_are_refused_before_anything_is_sent() {
    let a = server();
    let b = server();
    let dir = scratch();
    let marker = file(dir.path(), "ran");
    let touch = format!("touch \"{marker}\"");
    let before = [connections_received(&a), connections_received(&b)];
    let (url_a, url_b) = (a.url(), b.url());
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--url", &url_a, "--url", &url_b, "--permits", "2"],
            &[
                "\"pool\"",
                "Redlock",
                "--permits",
                "2 independent servers were given",
            ],
        ),
        (
            &["--url", &url_a, "--url", &url_b, "--permits", "1"],
            &["\"pool\"", "Redlock"],
        ),
        (&["--url", &url_a, "--permits", "0"], &["at least 1 permit"]),
    ];
    for (args, needles) in cases {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["pool", "--", "sh", "-c", &touch]);
        let done = run(&all);
        assert_eq!(done.code, Some(2), "{args:?}: {}", done.explain());
        for needle in needles {
            assert!(
                done.stderr.contains(needle),
                "{args:?}: no {needle:?} in {}",
                done.explain()
            );
        }
    }
    assert!(!path(dir.path(), "ran").exists(), "no command may run");
    // Nothing connected to either server but this test's own INFO queries.
    let after = [connections_received(&a), connections_received(&b)];
    assert_eq!(after, [before[0] + 1, before[1] + 1], "fencelock connected");
    for server in [&a, &b] {
        assert!(server.keys().unwrap().is_empty(), "nothing is written");
    }
}
