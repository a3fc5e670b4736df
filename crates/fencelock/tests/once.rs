//! Run once: exactly one run does the work across concurrent runs, a failed run records
//! nothing, and a holder that lost its lock cannot record.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fencelock::Error;
use fencelock::once::{Begun, Outcome};

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
