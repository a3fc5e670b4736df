//! Redlock with the client's own limits: `server()` names every instance, and an instance that
//! does not answer is given up after 5 % of the lease (no instance timeout set).

use crate::common;

use std::time::Duration;

use fencelock::{Client, Error};
use tokio::time::Instant;

#[tokio::test]
async fn a_silent_instance_costs_a_twentieth_of_the_lease() {
    let (servers, urls) = common::redlock_servers(5);
    // A command timeout far above 5 % of the lease: the per-instance limit is the lease's.
    let client = Client::redlock(&urls)
        .command_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let addrs: Vec<String> = servers
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port()))
        .collect();
    assert_eq!(client.server(), addrs.join(", "));
    // Another owner holds the lock on instance 3.
    let other = common::client(&urls[3]);
    let held = other
        .lock("quiet")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // Instances 0, 1 and 2 do not answer: each is given up after 200 ms, not the command
    // timeout (10 s), and a call that timed out may have been granted: busy.
    for s in &servers[..3] {
        s.pause().unwrap_or_else(|e| panic!("{e}"));
    }
    let started = Instant::now();
    let got = client
        .lock("quiet")
        .ttl(Duration::from_secs(4))
        .no_wait()
        .acquire()
        .await;
    let took = started.elapsed();
    for s in &servers[..3] {
        s.resume().unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(took < Duration::from_secs(5), "{took:?}: {got:?}");
    assert!(matches!(got, Err(Error::Busy { .. })), "{got:?}");

    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A renewal that can no longer find a majority names each instance that failed and says how
/// many another owner holds.
#[tokio::test]
async fn a_renewal_without_a_majority_names_the_failed_instances_and_the_other_owner() {
    let (mut servers, urls) = common::redlock_servers(5);
    let client = common::redlock_client(&urls, Duration::from_millis(100));
    let guard = client
        .lock("renewed")
        .ttl(Duration::from_secs(30))
        .auto_renew(false)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Instance 3 is taken by another owner; instances 0, 1 and 2 are stopped.
    let other = common::client(&urls[3]);
    assert!(
        other
            .force_release("renewed")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    let taken = other
        .lock("renewed")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addrs: Vec<String> = servers
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port()))
        .collect();
    for s in &mut servers[..3] {
        s.kill().unwrap_or_else(|e| panic!("{e}"));
    }
    match guard.extend(Duration::from_secs(30)).await {
        Err(Error::NoQuorum {
            agreed, details, ..
        }) => {
            assert_eq!(agreed, 1, "{details}");
            for addr in &addrs[..3] {
                assert!(details.contains(&format!("{addr} ")), "{details}");
            }
            assert!(details.contains("1 held by another owner"), "{details}");
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    // Instance 3 free again: nobody else holds it, and the error does not say so.
    assert!(taken.release().await.unwrap_or_else(|e| panic!("{e}")));
    match guard.extend(Duration::from_secs(30)).await {
        Err(Error::NoQuorum { details, .. }) => {
            assert!(!details.contains("held by another owner"), "{details}");
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
}

/// The same count for every kind's renewal by hand: over three instances, one stopped, one
/// with the lock's key replaced by something that is not this lock (another owner's string)
/// counts as "held by another owner"; the key gone there does not.
#[tokio::test]
async fn every_kinds_renewal_counts_a_key_not_its_lock_apart_from_a_key_gone() {
    let (mut servers, urls) = common::redlock_servers(3);
    let client = common::redlock_client(&urls, Duration::from_millis(100));
    let lease = Duration::from_secs(30);
    // (A semaphore is never held over Redlock.)
    let kinds = [("reentrant", "renew-reentrant"), ("write", "renew-write")];
    let mut guards = Vec::new();
    for (kind, name) in kinds {
        let request = match kind {
            "reentrant" => client.reentrant_lock(name).request(),
            _ => client.read_write_lock(name).write(),
        };
        let guard = request
            .ttl(lease)
            .auto_renew(false)
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        guards.push((kind, name, guard));
    }
    servers[0].kill().unwrap_or_else(|e| panic!("{e}"));
    for (kind, name, guard) in &guards {
        let key = common::lock_key(name);
        servers[2]
            .cmd(&["SET", &key, "another owner's"])
            .unwrap_or_else(|e| panic!("{e}"));
        let details = one_agreed(guard.extend(lease).await, kind);
        assert!(
            details.contains("1 held by another owner"),
            "{kind}: {details}"
        );
        servers[2]
            .cmd(&["DEL", &key])
            .unwrap_or_else(|e| panic!("{e}"));
        let details = one_agreed(guard.extend(lease).await, kind);
        assert!(
            !details.contains("held by another owner"),
            "{kind}: {details}"
        );
    }
}

/// The details of a `NoQuorum` error that one instance agreed to.
fn one_agreed(result: fencelock::Result<()>, kind: &str) -> String {
    match result {
        Err(Error::NoQuorum {
            agreed, details, ..
        }) => {
            assert_eq!(agreed, 1, "{kind}: {details}");
            details
        }
        other => panic!("{kind}: expected NoQuorum, got {other:?}"),
    }
}
