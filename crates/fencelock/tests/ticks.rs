//! A scheduled job's ticks: the starts of one tick (by the Redis server's clock, or planned by
//! the scheduler) do the work once, its record is kept as asked and then expires, a start too
//! late for its tick runs nothing, and settings that would break "never twice" are refused.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use fencelock::Error;
use fencelock::once::{Outcome, Tick};
use fencelock_testkit::RedisServer;

use common::server;

const HOUR: Duration = Duration::from_secs(3600);

/// The server's clock (`TIME`).
fn server_time(redis: &RedisServer) -> SystemTime {
    let Ok(redis::Value::Array(parts)) = redis.cmd(&["TIME"]) else {
        panic!("TIME did not answer");
    };
    let part = |i: usize| match parts.get(i) {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b)
            .parse::<u64>()
            .unwrap_or_else(|e| panic!("TIME: {e}")),
        other => panic!("TIME: {other:?}"),
    };
    SystemTime::UNIX_EPOCH + Duration::from_secs(part(0)) + Duration::from_micros(part(1))
}

/// The keys on the server.
fn keys(redis: &RedisServer) -> Vec<String> {
    match redis.cmd(&["KEYS", "*"]) {
        Ok(redis::Value::Array(keys)) => keys
            .iter()
            .map(|k| match k {
                redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("KEYS: {other:?}"),
            })
            .collect(),
        other => panic!("KEYS: {other:?}"),
    }
}

fn pttl(redis: &RedisServer, key: &str) -> i64 {
    match redis.cmd(&["PTTL", key]) {
        Ok(redis::Value::Int(ms)) => ms,
        other => panic!("PTTL {key}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_starts_of_one_tick_by_the_servers_clock_do_the_work_once() {
    let redis = server();
    let done = Arc::new(AtomicUsize::new(0));
    let before = server_time(&redis);
    let mut runs = Vec::new();
    for _ in 0..6 {
        let client = common::client(&redis.url());
        let done = done.clone();
        runs.push(tokio::spawn(async move {
            client
                .once("report")
                .tick(Tick::every(HOUR))
                .run(|_| async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    done.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), std::io::Error>(())
                })
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }));
    }
    let mut ticks = Vec::new();
    let mut ran = 0;
    for run in runs {
        match run.await.unwrap_or_else(|e| panic!("{e}")) {
            Outcome::Ran(()) => ran += 1,
            Outcome::AlreadyDone(done) => ticks.push(done.tick),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((ran, ticks.len()), (1, 5));
    assert_eq!(done.load(Ordering::SeqCst), 1);
    // The hour the server's clock was in (or the next one, within 5 s of it).
    let since = (before + Tick::EARLY)
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_else(|e| panic!("{e}"))
        .as_secs();
    let hour = SystemTime::UNIX_EPOCH + Duration::from_secs(since - since % 3600);
    assert!(ticks.iter().all(|t| *t == Some(hour)), "{ticks:?}");
    let record = format!(
        "fencelock:once:{{report}}:report@{}",
        humantime::format_rfc3339_millis(hour)
    );
    let mut found = keys(&redis);
    found.sort();
    let expected = [
        "fencelock:fenced:{report}".to_owned(),
        record.clone(),
        "fencelock:{report}:fence".to_owned(),
    ];
    assert_eq!(found, expected);
    // Kept 7 days by default.
    let kept = pttl(&redis, &record);
    let keep = i64::try_from(Tick::KEEP.as_millis()).unwrap_or(i64::MAX);
    assert!(keep - 60_000 < kept && kept <= keep, "{kept}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_tick_runs_once_while_its_record_is_kept_and_again_after() {
    let redis = server();
    let client = common::client(&redis.url());
    let planned = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_910_400_000);
    let run = |at: SystemTime| {
        client
            .once("beat")
            .tick(Tick::planned(at))
            .keep(Duration::from_millis(1500))
            .run(|fence| async move { Ok::<u64, std::io::Error>(fence) })
    };
    let first = run(planned).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(first, Outcome::Ran(_)), "{first:?}");
    // A retry of the same tick (to the millisecond) finds it done; the next tick runs.
    let again = run(planned + Duration::from_micros(300)).await;
    let again = again.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(&again, Outcome::AlreadyDone(d) if d.tick == Some(planned)),
        "{again:?}"
    );
    let next = run(planned + HOUR).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(next, Outcome::Ran(_)), "{next:?}");
    let record = "fencelock:once:{beat}:beat@2026-11-29T00:00:00.000Z";
    let kept = pttl(&redis, record);
    assert!(0 < kept && kept <= 1500, "{kept}");
    // After the record expired the same tick runs again: "never twice" holds within the keep.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(pttl(&redis, record), -2);
    let late = run(planned).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(late, Outcome::Ran(_)), "{late:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_too_late_for_its_tick_runs_nothing_and_holds_nothing() {
    let redis = server();
    let client = common::client(&redis.url());
    let ran = Arc::new(AtomicUsize::new(0));
    let tick = Tick::every(HOUR)
        .early(Duration::from_millis(1))
        .late(Duration::from_millis(1));
    let counter = ran.clone();
    let outcome = client
        .once("hourly")
        .tick(tick)
        .run(|_| async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<(), std::io::Error>(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Outcome::TooLate(late) = outcome else {
        panic!("{outcome:?}");
    };
    assert!(late.late > Duration::from_millis(1) && late.late < HOUR);
    let since = late.tick.duration_since(SystemTime::UNIX_EPOCH);
    assert_eq!(since.map(|d| d.as_secs() % 3600).ok(), Some(0));
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(keys(&redis), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_that_would_break_never_twice_are_refused_before_anything_is_sent() {
    let redis = server();
    let client = common::client(&redis.url());
    let refusals = [
        // A record that expires while a start of its tick may still come.
        client
            .once("nightly")
            .tick(Tick::every(HOUR))
            .keep(HOUR)
            .begin()
            .await,
        client
            .once("nightly")
            .tick(Tick::every(HOUR).early(HOUR / 2))
            .begin()
            .await,
        client
            .once("nightly")
            .tick(Tick::every(Duration::ZERO))
            .begin()
            .await,
        client.once("nightly").keep(Duration::ZERO).begin().await,
    ];
    for refused in refusals {
        match refused {
            Err(Error::InvalidArgument { lock, .. }) => assert_eq!(lock, "nightly"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(keys(&redis), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_whose_runs_fail_is_tried_as_often_as_allowed_then_given_up() {
    let redis = server();
    let client = common::client(&redis.url());
    let planned = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_910_400_000);
    let calls = Arc::new(AtomicUsize::new(0));
    let run = |at: SystemTime, fails: bool, attempts: Option<u32>| {
        let calls = calls.clone();
        let mut once = client.once("flaky").tick(Tick::planned(at));
        if let Some(attempts) = attempts {
            once = once.attempts(attempts);
        }
        once.run(move |_| async move {
            calls.fetch_add(1, Ordering::SeqCst);
            if fails { Err("no") } else { Ok(()) }
        })
    };
    let failures = "fencelock:once-failed:{flaky}:flaky@2026-11-29T00:00:00.000Z";
    // By default a tick's runs may fail three times.
    for n in 1..=Tick::ATTEMPTS {
        let failed = run(planned, true, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(failed, Outcome::Failed("no")), "{failed:?}");
        assert_eq!(
            redis.cmd(&["GET", failures]).ok(),
            Some(redis::Value::BulkString(n.to_string().into_bytes()))
        );
    }
    // Given up, read before the lock is asked for: no grant (the fence counter stands still).
    let counter = "fencelock:{flaky}:fence";
    let fence_before = redis.cmd(&["GET", counter]).ok();
    assert!(
        matches!(fence_before, Some(redis::Value::BulkString(_))),
        "{fence_before:?}"
    );
    let gave_up = run(planned, false, None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Outcome::GaveUp(gave_up) = gave_up else {
        panic!("{gave_up:?}");
    };
    assert_eq!(redis.cmd(&["GET", counter]).ok(), fence_before);
    assert_eq!((gave_up.failures, gave_up.tick), (3, Some(planned)));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // The count lives as long as the record would (7 days for a tick).
    let kept = pttl(&redis, failures);
    assert!(kept > 0 && kept <= i64::try_from(Tick::KEEP.as_millis()).unwrap_or(i64::MAX));
    // Another tick is not held back; with more attempts allowed, the tick runs, and its
    // success clears the count.
    let next = run(planned + HOUR, false, None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(next, Outcome::Ran(())), "{next:?}");
    let again = run(planned, false, Some(4))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(again, Outcome::Ran(())), "{again:?}");
    assert_eq!(pttl(&redis, failures), -2);
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_that_lost_its_lock_is_not_counted() {
    let redis = server();
    let client = common::client(&redis.url());
    let once = || {
        client
            .once("lost")
            .tick(Tick::planned(SystemTime::UNIX_EPOCH))
            .ttl(Duration::from_millis(300))
    };
    let Ok(fencelock::once::Begun::Run(stale)) = once().begin().await else {
        panic!("not begun");
    };
    // Its lease runs out without renewals (as if paused), and a newer run takes the lock.
    redis
        .cmd(&["DEL", "fencelock:{lost}"])
        .unwrap_or_else(|e| panic!("{e}"));
    let Ok(fencelock::once::Begun::Run(newer)) = once().begin().await else {
        panic!("not begun");
    };
    assert_eq!(stale.failed().await.unwrap_or_else(|e| panic!("{e}")), None);
    assert_eq!(
        newer.failed().await.unwrap_or_else(|e| panic!("{e}")),
        Some(1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_knows_its_tick_and_one_given_up_frees_the_lock_and_counts_nothing() {
    let redis = server();
    let client = common::client(&redis.url());
    let planned = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_910_400_000);
    let once = || client.once("stopped").tick(Tick::planned(planned));
    let Ok(fencelock::once::Begun::Run(run)) = once().begin().await else {
        panic!("not begun");
    };
    assert_eq!(run.tick(), Some(planned));
    // Given up (stopped, not failed): the lock is free at once, nothing is recorded, and no
    // failure is counted, so the next start runs the tick.
    run.give_up().await.unwrap_or_else(|e| panic!("{e}"));
    let free = client
        .lock("stopped")
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Some(free) = free else {
        panic!("the lock of a run given up is still held");
    };
    assert!(free.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert!(
        keys(&redis).iter().all(|k| !k.contains("once")),
        "{:?}",
        keys(&redis)
    );
    let again = once()
        .run(|_| async { Ok::<_, std::io::Error>(()) })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(again, Outcome::Ran(())), "{again:?}");
}
