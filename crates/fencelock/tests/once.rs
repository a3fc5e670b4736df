//! Run once: exactly one run does the work across concurrent runs, a failed run records
//! nothing, and a holder that lost its lock cannot record.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fencelock::once::{Begun, Outcome};
use fencelock::{Client, Error};
use fencelock_testkit::FaultProxy;

use common::server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_runs_do_the_work_once() {
    let redis = server();
    let done = Arc::new(AtomicUsize::new(0));
    let mut runs = Vec::new();
    for _ in 0..8 {
        let client = common::client(&redis.url());
        let done = done.clone();
        runs.push(tokio::spawn(async move {
            client
                .once("migrate/42")
                .run(|fence| async move {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    done.fetch_add(1, Ordering::SeqCst);
                    Ok::<u64, std::io::Error>(fence)
                })
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }));
    }
    let mut ran = 0;
    let mut skipped = 0;
    for run in runs {
        match run.await.unwrap_or_else(|e| panic!("{e}")) {
            Outcome::Ran(_) => ran += 1,
            Outcome::AlreadyDone(_) => skipped += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((ran, skipped), (1, 7));
    assert_eq!(done.load(Ordering::SeqCst), 1);
    let client = common::client(&redis.url());
    assert!(
        client
            .once("migrate/42")
            .done()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_records_nothing_and_the_next_one_does_it() {
    let redis = server();
    let client = common::client(&redis.url());
    let failed = client
        .once("flaky")
        .run(|_| async { Err::<(), &str>("no") })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(failed, Outcome::Failed("no")));
    assert!(
        client
            .once("flaky")
            .done()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none()
    );
    let ran = client
        .once("flaky")
        .run(|fence| async move { Ok::<u64, &str>(fence) })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Outcome::Ran(fence) = ran else {
        panic!("{ran:?}");
    };
    let done = client
        .once("flaky")
        .done()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(done.map(|d| d.fence), Some(fence));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_lost_its_lock_cannot_record() {
    let redis = server();
    let stale_client = common::client(&redis.url());
    let other = common::client(&redis.url());
    let Begun::Run(stale) = stale_client
        .once("job")
        .begin()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    else {
        panic!("done already");
    };
    // Its lease lapses (an operator's release stands in for a long pause), and a newer run
    // begins the work.
    assert!(
        other
            .force_release("job")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    let Begun::Run(newer) = other
        .once("job")
        .begin()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    else {
        panic!("done already");
    };
    assert!(newer.fence() > stale.fence());
    let refused = stale.done().await.unwrap_err();
    assert!(matches!(refused, Error::Fenced { .. }), "{refused:?}");
    assert!(
        other
            .once("job")
            .done()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none()
    );
    newer.done().await.unwrap_or_else(|e| panic!("{e}"));
    let done = other
        .once("job")
        .done()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(done.is_some());
}

/// A run paused past its lease records just after a newer run has taken the lock and looked for
/// the record: the stale run is refused and told ([`Error::Fenced`]), the newer run does the
/// work, and the record is the newer run's. The newer run's client reaches the server through a
/// proxy that delays every message by `LATENCY`, so that the stale run's record lands between
/// the newer run's acquisition and whatever it sends after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_run_recording_while_a_newer_one_begins_is_refused() {
    const LATENCY: Duration = Duration::from_millis(400);
    let redis = server();
    let proxy = FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("proxy: {e}"));
    let stale_client = common::client(&redis.url());
    let newer_client = Client::builder(&proxy.url())
        .command_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    // The newer client's connection made and every script of a run loaded.
    let warm = newer_client
        .once("warm")
        .run(|_| async { Ok::<(), std::io::Error>(()) })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(warm, Outcome::Ran(())), "{warm:?}");

    let Begun::Run(stale) = stale_client
        .once("job")
        .begin()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    else {
        panic!("done already");
    };
    // Its lease lapses while it is paused (an operator's release stands in for the pause).
    assert!(
        stale_client
            .force_release("job")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    proxy.set_latency(LATENCY);
    let begin = tokio::spawn(newer_client.once("job").begin());
    // The newer run's acquisition ran on the server ...
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let held = redis
            .cmd(&["EXISTS", "fencelock:{job}"])
            .unwrap_or_else(|e| panic!("{e}"));
        if held == redis::Value::Int(1) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the newer run never took the lock"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // ... its next message reached the server (one round trip later), the one after that has
    // not: the stale run wakes and records.
    tokio::time::sleep(LATENCY * 3).await;
    let stale_fence = stale.fence();
    let recorded = stale.done().await;
    let begun = begin
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    proxy.set_latency(Duration::ZERO);

    assert!(
        matches!(recorded, Err(Error::Fenced { .. })),
        "the stale run was not refused: {recorded:?}"
    );
    let Begun::Run(newer) = begun else {
        panic!("the newer run found a record: {begun:?}");
    };
    assert!(newer.fence() > stale_fence);
    let newer_fence = newer.fence();
    newer.done().await.unwrap_or_else(|e| panic!("{e}"));
    let done = stale_client
        .once("job")
        .done()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(done.map(|d| d.fence), Some(newer_fence));
}

/// A record, or a count of failed runs, that is not a string by the time a run that waited for
/// the lock begins (it read nothing wrong before it took the lock): `begin.lua` refuses it
/// before it writes anything, the run answers [`Error::FencedWrongType`] naming the key, and
/// the lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_or_count_of_another_type_found_in_the_begin_writes_nothing() {
    let redis = server();
    let client = common::client(&redis.url());
    for key in [
        "fencelock:once:{job}:job",
        "fencelock:once-failed:{job}:job",
    ] {
        // Another holder: the run reads the record and the count, and waits in the line.
        let holder = client
            .lock("job")
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let begin = tokio::spawn(client.once("job").attempts(3).begin());
        common::wait_for_count("runs waiting", 1, Duration::from_secs(10), || {
            common::integer_reply(&redis, &["ZCARD", "fencelock:{job}:waiters"])
        })
        .await;
        redis
            .cmd(&["HSET", key, "not", "ours"])
            .unwrap_or_else(|e| panic!("{e}"));
        holder.release().await.unwrap_or_else(|e| panic!("{e}"));
        let begun = begin.await.unwrap_or_else(|e| panic!("{e}"));
        match &begun {
            Err(Error::FencedWrongType { key: found, .. }) => assert_eq!(found, key),
            other => panic!("{key}: {:?}", other.as_ref().map(|_| ())),
        }
        // Nothing written: no fence floor, the key as it was; the lock released.
        assert_eq!(
            common::integer_reply(&redis, &["EXISTS", "fencelock:fenced:{job}"]),
            0,
            "{key}: the floor was raised"
        );
        assert_eq!(common::hash_fields(&redis, key).len(), 1, "{key}");
        common::wait_for_count("the lock released", 0, Duration::from_secs(10), || {
            common::integer_reply(&redis, &["EXISTS", "fencelock:{job}"])
        })
        .await;
        redis.cmd(&["DEL", key]).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A count of failed runs that is not a count: a run begins as if none had failed (one failure
/// allowed), and its failure is not counted over it (`fail.lua` refuses it, the key stays as
/// it was, and the run answers `None`); one of another type is refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_of_failed_runs_that_is_not_a_count_is_left_as_it_is() {
    let redis = server();
    let client = common::client(&redis.url());
    let key = "fencelock:once-failed:{job}:job";
    for (kind, write) in [
        ("a string", vec!["SET", key, "many"]),
        ("a hash", vec!["HSET", key, "not", "ours"]),
    ] {
        redis.cmd(&["DEL", key]).unwrap_or_else(|e| panic!("{e}"));
        let Begun::Run(run) = client
            .once("job")
            .attempts(1)
            .begin()
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"))
        else {
            panic!("{kind}: the run did not begin");
        };
        redis.cmd(&write).unwrap_or_else(|e| panic!("{e}"));
        let dump = common::dumps(&redis, &[key]);
        let counted = run.failed().await.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(counted, None, "{kind}");
        assert_eq!(
            common::dumps(&redis, &[key]),
            dump,
            "{kind}: the count was written"
        );
        assert_eq!(
            common::integer_reply(&redis, &["EXISTS", "fencelock:{job}"]),
            0,
            "{kind}: the lock is still held"
        );
    }
    // Begun over a count that is not a number: none counted (`begin.lua` reads it as 0).
    redis
        .cmd(&["SET", key, "many"])
        .unwrap_or_else(|e| panic!("{e}"));
    let begun = client
        .once("job")
        .attempts(1)
        .begin()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Begun::Run(run) = begun else {
        panic!("a count that is not a number gave up: {begun:?}");
    };
    run.give_up().await.unwrap_or_else(|e| panic!("{e}"));
}
