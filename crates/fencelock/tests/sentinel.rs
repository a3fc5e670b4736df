//! Sentinel: a master with two replicas and three sentinels, all real processes. The client
//! finds the master through the sentinels, follows a graceful `SENTINEL FAILOVER` and a master
//! killed with SIGKILL (its held lock stays held where the grant had replicated, waiters are
//! still woken, fences keep growing), and keeps the master's credentials apart from the
//! sentinels'.

use crate::common;

use std::time::{Duration, Instant};

use fencelock::{Client, Error};
use fencelock_testkit::{SENTINEL_MASTER, SentinelSet};

fn start_set() -> SentinelSet {
    match SentinelSet::start(2, 3) {
        Ok(set) => set,
        Err(e) => panic!("cannot start a Sentinel set: {e}"),
    }
}

fn sentinel_client(set: &SentinelSet) -> Client {
    match Client::sentinel(set.sentinel_urls(), SENTINEL_MASTER)
        .command_timeout(Duration::from_millis(500))
        .build()
    {
        Ok(client) => client,
        Err(e) => panic!("cannot build a Sentinel client: {e}"),
    }
}

/// Acquires `name` (retrying while the service is failing over, at most `limit`).
async fn acquire_within(client: &Client, name: &str, limit: Duration) -> fencelock::LockGuard {
    let started = Instant::now();
    loop {
        match client.lock(name).wait_up_to(limit).acquire().await {
            Ok(guard) => return guard,
            Err(e) if started.elapsed() < limit => {
                eprintln!("retrying: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{name}: no grant within {limit:?}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_follows_a_graceful_failover_with_its_holds_and_waiters() {
    let set = start_set();
    let first_master = set.master().unwrap_or_else(|e| panic!("{e}")).port();
    let client = sentinel_client(&set);
    let waiter_client = sentinel_client(&set);

    let warmup = client
        .lock("warmup")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let before = warmup.fence();
    assert!(warmup.release().await.unwrap_or_else(|e| panic!("{e}")));
    // The lock lives on the master the sentinels named.
    let master = set.master().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        master
            .cmd(&["EXISTS", "fencelock:{warmup}:fence"])
            .unwrap_or_else(|e| panic!("{e}")),
        redis::Value::Int(1)
    );

    // A hold whose renewals must carry it over the failover, and a waiter on it. The lease is
    // longer than the sentinels take to announce the promoted replica (about a second, by
    // their INFO polling): the key on the new master must not run out before the client
    // moves there.
    let ttl = Duration::from_secs(3);
    let held = client
        .lock("held")
        .ttl(ttl)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let waiter = tokio::spawn(async move {
        let result = waiter_client
            .lock("held")
            .ttl(Duration::from_secs(30))
            .wait_up_to(Duration::from_secs(60))
            .acquire()
            .await;
        (result, Instant::now())
    });

    let failover_started = Instant::now();
    let promoted = {
        let set = &set;
        tokio::task::block_in_place(|| set.failover().map(|m| m.port()))
            .unwrap_or_else(|e| panic!("SENTINEL FAILOVER: {e}"))
    };
    let failover_took = failover_started.elapsed();
    assert_ne!(promoted, first_master);

    // Two leases later, the hold is still held, now on the new master.
    tokio::time::sleep(ttl * 2).await;
    if !held.is_held() {
        let reason = held.lost().await;
        panic!("the hold was lost in a graceful failover: {reason}");
    }
    let new_master = set.master().unwrap_or_else(|e| panic!("{e}"));
    let pttl = common::integer_reply(new_master, &["PTTL", "fencelock:{held}"]);
    assert!(pttl > 0, "the hold is not on the new master: PTTL {pttl}");
    assert!(
        !waiter.is_finished(),
        "the waiter got in while the lock was held"
    );

    // Its release wakes the waiter, through the new master's pub/sub.
    let released_at = Instant::now();
    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
    let (result, granted_at) = waiter.await.unwrap_or_else(|e| panic!("{e}"));
    let next = result.unwrap_or_else(|e| panic!("waiter: {e}"));
    let woken_after = granted_at.saturating_duration_since(released_at);
    assert!(
        woken_after < Duration::from_secs(5),
        "the waiter was not woken by the release on the new master: {woken_after:?}"
    );
    assert!(next.fence() > before);
    assert!(next.release().await.unwrap_or_else(|e| panic!("{e}")));
    eprintln!(
        "sentinel graceful failover: took {failover_took:?}; hold kept; waiter woken \
         {woken_after:?} after the release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_is_replaced_and_fences_keep_growing() {
    let mut set = start_set();
    let client = sentinel_client(&set);
    let guard = client
        .lock("k")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let before = guard.fence();
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));

    let index = set.master_index().unwrap_or_else(|e| panic!("{e}"));
    let old = set.nodes[index].port();
    let killed_at = Instant::now();
    set.nodes[index].kill().unwrap_or_else(|e| panic!("{e}"));
    // The client's next operations fail until the sentinels promote a replica; then they go
    // to the new master without the client being rebuilt.
    let guard = acquire_within(&client, "k", Duration::from_secs(30)).await;
    let resumed_after = killed_at.elapsed();
    let promoted = {
        let set = &set;
        tokio::task::block_in_place(|| set.wait_new_master(old).map(|m| m.port()))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    assert_ne!(promoted, old);
    assert!(
        guard.fence() > before,
        "fence {before} -> {}",
        guard.fence()
    );
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    eprintln!("sentinel SIGKILL of the master: granted again {resumed_after:?} after the kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_credentials_are_separate_from_the_sentinels_and_never_shown() {
    let set = match SentinelSet::start(0, 1) {
        Ok(set) => set,
        Err(e) => panic!("cannot start a Sentinel set: {e}"),
    };
    let password = "m4ster-s3cret";
    let master = set.master().unwrap_or_else(|e| panic!("{e}"));
    for sentinel in &set.sentinels {
        sentinel
            .cmd(&["SENTINEL", "SET", SENTINEL_MASTER, "auth-pass", password])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    master
        .cmd(&["CONFIG", "SET", "requirepass", password])
        .unwrap_or_else(|e| panic!("{e}"));

    // Without the master's credentials: refused, as an authentication failure.
    let client = sentinel_client(&set);
    let err = client.lock("x").try_acquire().await.map(drop).unwrap_err();
    assert!(matches!(err, Error::AuthFailed { .. }), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(text.contains(SENTINEL_MASTER), "{text}");

    // With the wrong ones: refused too, and the password is nowhere in the message.
    let client = Client::sentinel(set.sentinel_urls(), SENTINEL_MASTER)
        .master_credentials(None, "wrong-s3cret")
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = client.lock("x").try_acquire().await.map(drop).unwrap_err();
    assert!(matches!(err, Error::AuthFailed { .. }), "{err:?}");
    let text = format!("{err} {err:?} {client:?}");
    assert!(!text.contains("wrong-s3cret"), "{text}");

    // With them: works (the sentinels need none).
    let client = Client::sentinel(set.sentinel_urls(), SENTINEL_MASTER)
        .master_credentials(None, password)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let guard = client
        .lock("x")
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("busy"));
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));

    // An unknown master name is a clear error naming it.
    let client = Client::sentinel(set.sentinel_urls(), "no-such-master")
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = client
        .lock("x")
        .try_acquire()
        .await
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no-such-master"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_lost_when_the_master_dies_is_reported_and_its_late_write_refused() {
    let mut set = start_set();
    let holder_client = sentinel_client(&set);
    let other_client = sentinel_client(&set);
    let index = set.master_index().unwrap_or_else(|e| panic!("{e}"));
    let old = set.nodes[index].port();

    // 1. Freeze the replicas until the master gives up on them: the grant reaches neither.
    common::drop_stopped_replicas_quickly(&set.nodes[index]);
    for replica in set.nodes.iter().filter(|n| n.port() != old) {
        replica.pause().unwrap_or_else(|e| panic!("{e}"));
    }
    common::wait_for_count(
        "replicas connected to the master",
        0,
        Duration::from_secs(10),
        || common::connected_replicas(&set.nodes[index]),
    )
    .await;

    // 2. The grant, on the master alone.
    let guard = holder_client
        .lock("lost")
        .ttl(Duration::from_secs(3))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let old_fence = guard.fence();

    // 3. The master dies; the replicas come back and one is promoted, without the grant.
    set.nodes[index].kill().unwrap_or_else(|e| panic!("{e}"));
    let killed_at = Instant::now();
    for replica in set.nodes.iter().filter(|n| n.port() != old) {
        replica.resume().unwrap_or_else(|e| panic!("{e}"));
    }
    let promoted = {
        let set = &set;
        tokio::task::block_in_place(|| set.wait_new_master(old).map(|m| m.port()))
            .unwrap_or_else(|e| panic!("{e}"))
    };

    // Another owner gets the lock at once (the old lease would still run for seconds), with a
    // larger fence.
    let next = loop {
        match other_client.lock("lost").try_acquire().await {
            Ok(Some(next)) => break next,
            Ok(None) => panic!("the lock survived the failover; the recipe did not lose it"),
            Err(e) if killed_at.elapsed() < Duration::from_secs(30) => {
                eprintln!("retrying after the failover: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no service after the failover: {e}"),
        }
    };
    let granted_after = killed_at.elapsed();
    assert!(
        next.fence() > old_fence,
        "fence went backwards across the failover: {old_fence} -> {}",
        next.fence()
    );
    let reason = tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .unwrap_or_else(|_| panic!("the holder of a lost lock was not told"));
    let told_after = killed_at.elapsed();
    let new_master = set
        .nodes
        .iter()
        .find(|n| n.port() == promoted)
        .unwrap_or_else(|| panic!("no node {promoted}"));
    assert!(common::fenced_write(
        new_master,
        "lost",
        next.fence(),
        "new holder"
    ));
    assert!(
        !common::fenced_write(new_master, "lost", old_fence, "old holder"),
        "the stale fence was accepted"
    );
    eprintln!(
        "sentinel lost-lock failover: another owner granted {granted_after:?} after the kill, \
         the old holder told after {told_after:?} ({reason}); stale write refused"
    );
    assert!(next.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A grant the promoted replica never saw (replication is asynchronous) is gone after a
/// graceful failover: the holder is told as soon as its client moves to the new master — the
/// watchdog checks every hold there at once — not at the next renewal, a third of a lease later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_the_new_master_never_saw_is_reported_when_the_client_moves() {
    let set = start_set();
    let client = sentinel_client(&set);
    let other_client = sentinel_client(&set);
    // Renewed every 20 s: a loss told sooner was told by the move, not by a renewal.
    let ttl = Duration::from_secs(60);
    let guard = client
        .lock("unseen")
        .ttl(ttl)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let granted_at = Instant::now();
    let old = set.master().unwrap_or_else(|e| panic!("{e}")).port();
    let key = common::lock_key("unseen");

    // The replicas lose the grant, as if it had not reached them before the failover: each
    // takes its copy (once replicated) and deletes it locally.
    for replica in set.nodes.iter().filter(|n| n.port() != old) {
        common::wait_for_count("the grant on a replica", 1, Duration::from_secs(10), || {
            common::integer_reply(replica, &["EXISTS", &key])
        })
        .await;
        replica
            .cmd(&["CONFIG", "SET", "replica-read-only", "no"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(common::integer_reply(replica, &["DEL", &key]), 1);
    }

    let promoted = {
        let set = &set;
        tokio::task::block_in_place(|| set.failover().map(|m| m.port()))
            .unwrap_or_else(|e| panic!("SENTINEL FAILOVER: {e}"))
    };
    assert_ne!(promoted, old);
    let reason = tokio::time::timeout(ttl / 6, guard.lost())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the holder was not told within {:?} of the grant that the new master does not \
                 have its lock",
                ttl / 6
            )
        });
    let told_after = granted_at.elapsed();
    assert!(!guard.is_held());
    assert!(
        reason.to_string().contains("another owner has it"),
        "{reason}"
    );
    // Another owner takes it on the new master, with a larger fence.
    let next = other_client
        .lock("unseen")
        .ttl(Duration::from_secs(5))
        .wait_up_to(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(next.fence() > guard.fence());
    assert!(next.release().await.unwrap_or_else(|e| panic!("{e}")));
    // The old holder's release finds nothing of its own, and deletes nothing.
    assert!(!guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    eprintln!("sentinel: a grant the new master never saw was reported {told_after:?} after it");
}

/// `Client::close` on a Sentinel client: the followed master's command connection, the
/// release listener's connection to it, and the connection to a sentinel that announces
/// failovers all close, though a guard and a waiting request still exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_drops_the_masters_and_the_sentinels_connections() {
    let set = match SentinelSet::start(1, 1) {
        Ok(set) => set,
        Err(e) => panic!("cannot start a Sentinel set: {e}"),
    };
    let client = sentinel_client(&set);
    let servers: Vec<_> = set.nodes.iter().chain(&set.sentinels).collect();
    // The master's command and listener connections, and the announcements' on the sentinel.
    common::close_drops_every_connection(client, &servers, "sentinel-closing", 3).await;
}
