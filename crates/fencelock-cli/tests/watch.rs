//! `fencelock watch NAME`: one JSON object per change as a job takes and gives back the lock,
//! and a clean exit 0 on Ctrl-C (SIGINT).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;

/// The JSON objects the watcher has printed so far.
fn objects(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect()
}

fn wait_for(path: &std::path::Path, what: &str, ready: impl Fn(&[serde_json::Value]) -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = objects(path);
        if ready(&seen) {
            return;
        }
        assert!(Instant::now() < until, "{what}; watch printed {seen:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn watch_prints_each_change_and_ends_cleanly_on_ctrl_c() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let out = path(dir.path(), "watch.jsonl");
    let mut watch = fencelock(&["watch", "--json", "--url", &url, "watched"]);
    watch.stdout(std::fs::File::create(&out).unwrap());
    let watch = Running::start(watch);
    wait_for(&out, "the free lock was not printed", |seen| {
        seen.first().is_some_and(|o| o["held"] == false)
    });

    // A job takes the lock for a moment and gives it back.
    let job = run(&["run", "--url", &url, "watched", "--", "sleep", "2"]);
    assert_eq!(job.code, Some(0), "{}", job.explain());
    wait_for(&out, "the release was not printed", |seen| {
        seen.len() >= 3 && seen.last().is_some_and(|o| o["held"] == false)
    });
    let seen = objects(&out);
    let held: Vec<&serde_json::Value> = seen.iter().filter(|o| o["held"] == true).collect();
    assert_eq!(
        held.len(),
        1,
        "one change to held, not one line per second: {seen:#?}"
    );
    let fence = held[0]["fence"].as_u64().expect("the holder's fence");
    assert!(held[0]["holder"].as_str().is_some_and(|h| h.len() == 8));
    assert!(held[0]["at"].as_u64().is_some());
    assert_eq!(seen.last().unwrap()["last_fence"].as_u64(), Some(fence));

    watch.signal(Signal::SIGINT);
    let finished = watch.finish_within(Duration::from_secs(5));
    assert_eq!(finished.code, Some(0), "{}", finished.explain());
}

#[test]
fn watch_shows_a_lock_passed_to_a_waiter() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let out = path(dir.path(), "watch.jsonl");
    let mut watch = fencelock(&["watch", "--json", "--url", &url, "passed"]);
    watch.stdout(std::fs::File::create(&out).unwrap());
    let watch = Running::start(watch);
    wait_for(&out, "the free lock was not printed", |seen| {
        seen.first().is_some_and(|o| o["held"] == false)
    });

    let holder = hold(&url, "passed", dir.path(), &[], Some(0));
    let taken = path(dir.path(), "waiter.fence");
    let script = format!(
        "echo \"$FENCELOCK_FENCE\" > '{t}.tmp'; mv '{t}.tmp' '{t}'; sleep 2",
        t = taken.display()
    );
    let waiter = Running::start(fencelock(&[
        "run", "--url", &url, "passed", "--", "sh", "-c", &script,
    ]));
    wait_for(&out, "the waiter in line was not printed", |seen| {
        seen.last()
            .is_some_and(|o| o["waiters"].as_array().is_some_and(|w| !w.is_empty()))
    });
    // The release passes the lock to the waiter, on the waiter's own channel.
    holder.signal(Signal::SIGTERM);
    wait_for_file(&taken, LIMIT);
    let fence: u64 = std::fs::read_to_string(&taken)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_for(&out, "the waiter's hold was not printed", |seen| {
        seen.iter()
            .any(|o| o["held"] == true && o["fence"].as_u64() == Some(fence))
    });
    assert_eq!(waiter.finish().code, Some(0));
    watch.signal(Signal::SIGINT);
    let finished = watch.finish_within(Duration::from_secs(5));
    assert_eq!(finished.code, Some(0), "{}", finished.explain());
}
