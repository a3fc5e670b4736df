//! The lock-delay (`LockRequest::lock_delay`): a holder whose lease runs out without a release
//! keeps the name from the next holder for the delay after its lease; a release ends the delay
//! at once.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use crate::common;

use std::time::Duration;

use fencelock::{Error, MAX_TTL};
use tokio::time::Instant;

use common::{client, server};

const LEASE: Duration = Duration::from_millis(1000);
const DELAY: Duration = Duration::from_millis(2000);

/// A holder that stops without releasing: no renewal, and its guard is never dropped (a
/// crashed process does neither).
async fn vanish(client: &fencelock::Client, name: &str, delay: Duration) -> Instant {
    let granted_before = Instant::now();
    let guard = client
        .lock(name)
        .ttl(LEASE)
        .lock_delay(delay)
        .auto_renew(false)
        .acquire()
        .await
        .unwrap();
    std::mem::forget(guard);
    granted_before
}

#[tokio::test]
async fn after_a_lease_runs_out_the_next_grant_waits_for_the_delay_too() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let start = vanish(&a, "delayed", DELAY).await;
    let guard = b
        .lock("delayed")
        .wait_up_to(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= LEASE + DELAY,
        "granted {waited:?} after the vanished holder's grant: sooner than its lease and delay"
    );
    assert!(
        waited < LEASE + DELAY + Duration::from_secs(2),
        "{waited:?}"
    );
    guard.release().await.unwrap();

    // Without a delay the same holder keeps it only for its lease.
    let start = vanish(&a, "undelayed", Duration::ZERO).await;
    let guard = b
        .lock("undelayed")
        .wait_up_to(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert!(start.elapsed() < LEASE + DELAY, "{:?}", start.elapsed());
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_release_ends_the_delay_at_once() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let long = Duration::from_secs(20);
    let guard = a
        .lock("released")
        .ttl(LEASE)
        .lock_delay(long)
        .acquire()
        .await
        .unwrap();
    assert!(guard.release().await.unwrap());
    let next = b.lock("released").no_wait().acquire().await.unwrap();
    next.release().await.unwrap();

    // A dropped guard's background release ends it too.
    let guard = a
        .lock("dropped")
        .ttl(LEASE)
        .lock_delay(long)
        .acquire()
        .await
        .unwrap();
    drop(guard);
    let next = b
        .lock("dropped")
        .wait_up_to(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    next.release().await.unwrap();
}

#[tokio::test]
async fn renewals_keep_the_delay_on_the_server_and_the_holder_keeps_its_lease() {
    let redis = server();
    let a = client(&redis.url());
    let guard = a
        .lock("renewed")
        .ttl(LEASE)
        .lock_delay(DELAY)
        .acquire()
        .await
        .unwrap();
    // The holder's own deadline follows the lease alone.
    assert!(guard.remaining() <= LEASE);
    tokio::time::sleep(LEASE * 2).await; // several renewals
    assert!(guard.is_held());
    let mut raw = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let pttl: i64 = redis::cmd("PTTL")
        .arg("fencelock:{renewed}")
        .query_async(&mut raw)
        .await
        .unwrap();
    let pttl = Duration::from_millis(u64::try_from(pttl).unwrap());
    assert!(
        pttl > LEASE && pttl <= LEASE + DELAY,
        "the server keeps {pttl:?}, not the lease and the delay"
    );
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_lease_and_delay_beyond_the_maximum_is_refused_naming_the_lock() {
    let redis = server();
    let a = client(&redis.url());
    let err = a
        .lock("too-long")
        .ttl(Duration::from_secs(10))
        .lock_delay(MAX_TTL)
        .acquire()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { lock, reason } if lock == "too-long" && reason.contains("lock-delay")),
        "{err}"
    );
}
