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
