//! The lock through a fault proxy: lost replies and cut pub/sub connections.

use crate::common;

use std::time::Duration;

use fencelock::Error;
use fencelock_testkit::FaultProxy;
use tokio::time::Instant;

use common::{client, keys, server, wait_for_count};

/// Waits (at most 5 s) until the fence key of lock `name` exists: an acquire of it reached Redis
/// and was granted (the fence key is written by a grant and never deleted by a release). Without
/// this, a request lost on its way would leave nothing to give back, and the tests below would
/// pass without testing anything.
async fn wait_until_granted_on_the_server(redis: &fencelock_testkit::RedisServer, name: &str) {
    let key = common::lock_subkey(name, "fence");
    let what = format!("{key} exists");
    wait_for_count(&what, true, Duration::from_secs(5), || {
        keys(redis).contains(&key)
    })
    .await;
}

#[tokio::test]
async fn an_acquire_whose_reply_is_lost_leaves_nothing_held() {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let through_proxy = client(&proxy.url());
    // Warm the connection and the script cache up, so that the request really goes out and is
    // run when it arrives (an EVALSHA of a script the server has not loaded yet would only be
    // answered NOSCRIPT, granting nothing), then swallow everything.
    let warm = through_proxy.lock("warm-up").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    proxy.set_blackhole(true);
    let err = through_proxy
        .lock("lost-reply")
        .ttl(Duration::from_secs(30))
        .no_wait()
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    // The network heals: the queued acquire reaches Redis after all, and so does the background
    // release that the failed call scheduled. The 30 s lock must not be stranded.
    proxy.set_blackhole(false);
    wait_until_granted_on_the_server(&redis, "lost-reply").await;
    let direct = client(&redis.url());
    let started = Instant::now();
    let guard = direct
        .lock("lost-reply")
        .wait_up_to(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the lock stayed held for {:?} after the failed acquire",
        started.elapsed()
    );
    guard.release().await.unwrap();
    assert_eq!(
        keys(&redis),
        vec!["fencelock:{lost-reply}:fence", "fencelock:{warm-up}:fence"]
    );
}

#[tokio::test]
async fn a_waiter_survives_a_cut_pubsub_connection() {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let holder = client(&redis.url());
    let waiter_client = client(&proxy.url());
    let held = holder
        .lock("cut")
        .ttl(Duration::from_secs(20))
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(async move {
        let guard = waiter_client.lock("cut").acquire().await.unwrap();
        let at = Instant::now();
        guard.release().await.unwrap();
        at
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Every connection of the waiter's client is cut; its release listener must reconnect and
    // resubscribe, or at least wake the waiter to look again.
    assert!(
        proxy.connections() >= 2,
        "the waiter should be connected (commands and subscription) through the proxy: {}",
        proxy.connections()
    );
    proxy.cut_all();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    held.release().await.unwrap();
    let granted_at = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter hung after its connection was cut")
        .unwrap();
    let delay = granted_at - released_at;
    assert!(
        delay < Duration::from_secs(2),
        "woken only after {delay:?} (the lease is 20 s)"
    );
}

#[tokio::test]
async fn latency_does_not_break_exclusion_or_fences() {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    proxy.set_latency(Duration::from_millis(5));
    let slow = client(&proxy.url());
    let fast = client(&redis.url());
    let mut fences = Vec::new();
    for round in 0..10 {
        let c = if round % 2 == 0 { &slow } else { &fast };
        let guard = c
            .lock("latency")
            .ttl(Duration::from_millis(500))
            .acquire()
            .await
            .unwrap();
        fences.push(guard.fence());
        assert!(guard.release().await.unwrap());
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[tokio::test]
async fn a_cancelled_acquire_gives_back_what_it_was_granted() {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr()).await.unwrap();
    let slow = client(&proxy.url());
    // Warm the connection and the script cache (a NOSCRIPT round trip would hide the grant).
    let warm = slow.lock("warm-up").acquire().await.unwrap();
    warm.release().await.unwrap();
    proxy.set_latency(Duration::from_millis(150));
    // The request goes out; the caller gives up before the grant comes back.
    let attempt = slow
        .lock("cancelled")
        .ttl(Duration::from_secs(30))
        .acquire();
    assert!(
        tokio::time::timeout(Duration::from_millis(100), attempt)
            .await
            .is_err()
    );
    // Let the request (and whatever follows it) reach Redis.
    tokio::time::sleep(Duration::from_millis(500)).await;
    wait_until_granted_on_the_server(&redis, "cancelled").await;
    let direct = client(&redis.url());
    let started = Instant::now();
    let guard = direct
        .lock("cancelled")
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the cancelled acquire's grant stayed held for {:?}",
        started.elapsed()
    );
    guard.release().await.unwrap();
}
