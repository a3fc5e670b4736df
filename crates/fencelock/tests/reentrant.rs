//! The reentrant lock against real redis-server processes.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fencelock::{Conflict, Error, LockGuard};
use tokio::time::Instant;

use common::{client, fields_starting, hash_fields, keys, server};

/// The lock key of `name`.
fn lock_key(name: &str) -> String {
    common::lock_key(name)
}

/// How many holds the reentrant lock `name` records.
fn holds(redis: &fencelock_testkit::RedisServer, name: &str) -> usize {
    fields_starting(redis, &lock_key(name), "h:").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_re_enters_from_anywhere_with_one_fence_until_the_last_hold_goes() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let lock = a.reentrant_lock("re");
    let other = b.reentrant_lock("re");

    let first = lock.acquire().await.unwrap();
    // Every re-entry is asked for with `no_wait`: one that had to wait would fail with Busy.
    let second = lock.request().no_wait().acquire().await.unwrap();
    // A clone is the same owner, also from another task...
    let in_task = {
        let clone = lock.clone();
        tokio::spawn(async move { clone.request().no_wait().acquire().await })
            .await
            .unwrap()
            .unwrap()
    };
    // ... and from a plain OS thread.
    let in_thread = {
        let clone = lock.clone();
        let runtime = tokio::runtime::Handle::current();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(runtime.block_on(clone.request().no_wait().acquire()));
        });
        rx.await.unwrap().unwrap()
    };
    let fence = first.fence();
    assert!(fence > 0);
    for guard in [&second, &in_task, &in_thread] {
        assert_eq!(guard.fence(), fence, "a re-entry got another fence");
    }
    assert_eq!(holds(&redis, "re"), 4);
    assert!(other.try_acquire().await.unwrap().is_none());

    // Released in no particular order: the lock stays held until the last hold goes.
    let mut remaining: Vec<LockGuard> = vec![first, second, in_thread];
    for (released, guard) in remaining.drain(..).enumerate() {
        assert!(guard.release().await.unwrap());
        assert_eq!(holds(&redis, "re"), 3 - released);
        assert!(
            other.try_acquire().await.unwrap().is_none(),
            "another owner got in after {} of 4 releases",
            released + 1
        );
        assert!(in_task.is_held());
    }
    assert!(in_task.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{re}:fence"]);

    // Another owner gets it now, with a larger fence, and now the first owner is refused.
    let theirs = other.request().no_wait().acquire().await.unwrap();
    let their_fence = theirs.fence();
    assert!(their_fence > fence);
    assert!(lock.try_acquire().await.unwrap().is_none());
    assert!(theirs.release().await.unwrap());
    // A new free-to-held transition of the first owner gets a larger fence again.
    let again = lock.acquire().await.unwrap();
    assert!(again.fence() > their_fence);
    assert!(again.release().await.unwrap());
}

#[tokio::test]
async fn the_reentry_limit_refuses_one_more_hold_and_changes_nothing() {
    let redis = server();
    let a = client(&redis.url());
    let lock = a.reentrant_lock("limited").max_reentry(2);
    let outer = lock.acquire().await.unwrap();
    let inner = lock.clone().acquire().await.unwrap(); // a clone keeps the limit
    let before = hash_fields(&redis, &lock_key("limited"));
    assert_eq!(before.keys().filter(|f| f.starts_with("h:")).count(), 2);
    // Waiting as long as it takes would not help: the refusal must come at once.
    let third = tokio::time::timeout(Duration::from_secs(5), lock.acquire())
        .await
        .expect("the third hold hung instead of being refused");
    match third {
        Err(Error::Conflict {
            lock,
            conflict: Conflict::ReentryLimit { limit: 2 },
        }) => assert_eq!(lock, "limited"),
        other => panic!("expected the re-entry limit, got {other:?}"),
    }
    assert_eq!(hash_fields(&redis, &lock_key("limited")), before);
    // One hold given back makes room for one more, with the same fence.
    let fence = inner.fence();
    assert!(inner.release().await.unwrap());
    let replaced = lock.request().no_wait().acquire().await.unwrap();
    assert_eq!(replaced.fence(), fence);
    assert!(replaced.release().await.unwrap());
    assert!(outer.release().await.unwrap());

    let err = a
        .reentrant_lock("unlimited")
        .max_reentry(0)
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert_eq!(keys(&redis), vec!["fencelock:{limited}:fence"]);
}

#[tokio::test]
async fn a_stale_hold_cannot_release_or_extend_what_another_hold_owns() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let mine = a.reentrant_lock("stale");
    let theirs = b.reentrant_lock("stale");

    // 1. An operator force-releases the lock; another owner takes it with two holds.
    let stale_outer = mine.acquire().await.unwrap();
    let stale_inner = mine.acquire().await.unwrap();
    assert!(a.force_release("stale").await.unwrap());
    let their_outer = theirs.request().no_wait().acquire().await.unwrap();
    let their_inner = theirs.request().no_wait().acquire().await.unwrap();
    assert!(their_outer.fence() > stale_outer.fence());
    let before = hash_fields(&redis, &lock_key("stale"));
    assert!(!stale_inner.release().await.unwrap());
    assert!(!stale_outer.release().await.unwrap());
    assert_eq!(hash_fields(&redis, &lock_key("stale")), before);
    assert_eq!(holds(&redis, "stale"), 2);
    assert!(mine.try_acquire().await.unwrap().is_none());
    assert!(their_inner.release().await.unwrap());
    assert!(mine.try_acquire().await.unwrap().is_none());
    assert!(their_outer.release().await.unwrap());

    // 2. A hold's lease runs out (no renewal) and another owner takes the lock.
    let expired = mine
        .request()
        .ttl(Duration::from_millis(200))
        .auto_renew(false)
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(!expired.is_held());
    let taken = theirs.request().no_wait().acquire().await.unwrap();
    assert!(taken.fence() > expired.fence());
    let before = hash_fields(&redis, &lock_key("stale"));
    let err = expired.extend(Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err:?}");
    assert!(!expired.release().await.unwrap());
    assert_eq!(hash_fields(&redis, &lock_key("stale")), before);
    assert!(taken.is_held());
    taken.extend(Duration::from_secs(2)).await.unwrap();
    assert!(taken.release().await.unwrap());

    // 3. The same owner: an expired hold must not count against a later hold of that owner.
    let old = mine
        .request()
        .ttl(Duration::from_millis(200))
        .auto_renew(false)
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    let new = mine.request().no_wait().acquire().await.unwrap();
    assert!(new.fence() > old.fence(), "a new free-to-held transition");
    assert!(!old.release().await.unwrap());
    assert_eq!(holds(&redis, "stale"), 1);
    assert!(theirs.try_acquire().await.unwrap().is_none());
    assert!(new.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{stale}:fence"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_holders_on_three_clients_are_mutually_exclusive() {
    let redis = server();
    let clients: Vec<_> = (0..3).map(|_| client(&redis.url())).collect();
    let counter = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for task in 0..8 {
        let lock = clients[task % 3].reentrant_lock("nested");
        let (inside, fences, mut counter) = (inside.clone(), fences.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..6 {
                let outer = lock
                    .request()
                    .ttl(Duration::from_secs(5))
                    .acquire()
                    .await
                    .unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two owners inside"
                );
                fences.lock().unwrap().push(outer.fence());
                let inner = lock.request().no_wait().acquire().await.unwrap();
                assert_eq!(inner.fence(), outer.fence());
                // Read, yield, write: a second owner inside would lose an increment.
                let n: Option<i64> = redis::cmd("GET")
                    .arg("counter")
                    .query_async(&mut counter)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _: () = redis::cmd("SET")
                    .arg("counter")
                    .arg(n.unwrap_or(0) + 1)
                    .query_async(&mut counter)
                    .await
                    .unwrap();
                assert!(inner.release().await.unwrap());
                // Still held by the outer hold: nobody else may come in now.
                tokio::time::sleep(Duration::from_millis(2)).await;
                assert_eq!(
                    inside.fetch_sub(1, Ordering::SeqCst),
                    1,
                    "two owners inside"
                );
                assert!(outer.release().await.unwrap(), "the lock was lost mid-way");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let count: i64 = redis::cmd("GET")
        .arg("counter")
        .query_async(&mut counter.clone())
        .await
        .unwrap();
    assert_eq!(count, 8 * 6, "lost updates: mutual exclusion broken");
    let fences = fences.lock().unwrap().clone();
    assert_eq!(fences.len(), 8 * 6);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences not strictly increasing across owners: {fences:?}"
    );
}

#[tokio::test]
async fn a_waiter_is_woken_when_the_last_hold_goes_not_before() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let lock = a.reentrant_lock("handoff");
    let ttl = Duration::from_secs(10);
    let outer = lock.request().ttl(ttl).acquire().await.unwrap();
    let inner = lock.request().ttl(ttl).acquire().await.unwrap();
    let waiter = {
        let other = b.reentrant_lock("handoff");
        tokio::spawn(async move {
            let guard = other
                .request()
                .wait_up_to(Duration::from_secs(8))
                .acquire()
                .await;
            (Instant::now(), guard)
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(inner.release().await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter got in while a hold remained"
    );
    let released_at = Instant::now();
    let fence = outer.fence();
    assert!(outer.release().await.unwrap());
    let (granted_at, guard) = waiter.await.unwrap();
    let guard = guard.unwrap();
    // Woken by the release message, not by the 10 s lease running out.
    assert!(
        granted_at - released_at < Duration::from_secs(1),
        "woken after {:?}",
        granted_at - released_at
    );
    assert!(guard.fence() > fence);
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn the_watchdog_keeps_two_holds_past_three_leases_and_one_after_the_other_goes() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let lock = a.reentrant_lock("kept");
    let other = b.reentrant_lock("kept");
    let ttl = Duration::from_millis(300);
    let first = lock.request().ttl(ttl).acquire().await.unwrap();
    let second = lock.request().ttl(ttl).acquire().await.unwrap();
    let until = Instant::now() + ttl * 4;
    while Instant::now() < until {
        assert!(first.is_held() && second.is_held());
        assert!(
            other.try_acquire().await.unwrap().is_none(),
            "another owner got a renewed lock"
        );
        tokio::time::sleep(ttl / 4).await;
    }
    drop(first); // released in the background
    let until = Instant::now() + ttl * 4;
    while Instant::now() < until {
        assert!(second.is_held());
        assert!(
            other.try_acquire().await.unwrap().is_none(),
            "another owner got in while one hold remained"
        );
        tokio::time::sleep(ttl / 4).await;
    }
    assert_eq!(holds(&redis, "kept"), 1);
    assert!(second.release().await.unwrap());
    let theirs = other.request().no_wait().acquire().await.unwrap();
    assert!(theirs.release().await.unwrap());
}

/// Bad names are refused before anything is sent. (Another kind under the name, and keys of
/// another type: the table tests in kinds.rs, for every kind.)
#[tokio::test]
async fn bad_names_are_refused_before_anything_is_sent() {
    let redis = server();
    let a = client(&redis.url());
    for name in [
        "",
        "a{b}",
        "line\nbreak",
        &"x".repeat(fencelock::MAX_NAME_LEN + 1),
    ] {
        let err = a.reentrant_lock(name).try_acquire().await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    }
    assert!(keys(&redis).is_empty(), "a refused request wrote something");
}
