//! The counting semaphore against real redis-server processes.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, Conflict, Error, LostReason};
use fencelock_testkit::{RedisServer, require_test_child, spawn_test_child};
use tokio::time::Instant;

use common::{
    TTL_ENV, URL_ENV, client, fence_of, fields_starting, hash_fields, integer_reply, keys, server,
};

/// The semaphore's hash (for "nothing changed" checks).
fn snapshot(redis: &RedisServer, name: &str) -> BTreeMap<String, String> {
    hash_fields(redis, &common::lock_key(name))
}

/// How many permits the semaphore's hash records (live or not yet dropped).
fn permit_entries(redis: &RedisServer, name: &str) -> usize {
    fields_starting(redis, &common::lock_key(name), "p:").len()
}

/// One grant seen by a task: when its `acquire` was called, when it returned, and the fence.
#[derive(Debug, Clone, Copy)]
struct Grant {
    called: Instant,
    granted: Instant,
    fence: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_n_holders_all_n_used_and_fences_follow_grant_order() {
    const N: usize = 3;
    const TASKS: usize = 12;
    const ROUNDS: usize = 6;
    let redis = server();
    let clients: Vec<Client> = (0..3).map(|_| client(&redis.url())).collect();
    let holders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let client = clients[task % clients.len()].clone();
        let (holders, most, grants) = (holders.clone(), most.clone(), grants.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let called = Instant::now();
                let permit = client
                    .semaphore("pool", N as u32)
                    .ttl(Duration::from_secs(2))
                    .wait_up_to(Duration::from_secs(10))
                    .acquire()
                    .await
                    .unwrap();
                let granted = Instant::now();
                // Counted after the grant and uncounted before the release, so the local count
                // never exceeds what Redis granted.
                let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                assert!(now <= N, "{now} holders of a semaphore of {N}");
                grants.lock().unwrap().push(Grant {
                    called,
                    granted,
                    fence: permit.fence(),
                });
                tokio::time::sleep(Duration::from_millis(5 + ((task + round) % 4) as u64 * 5))
                    .await;
                holders.fetch_sub(1, Ordering::SeqCst);
                assert!(permit.release().await.unwrap(), "the permit was lost");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        N,
        "the N permits were never all in use at once"
    );
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), TASKS * ROUNDS);
    let mut fences: Vec<u64> = grants.iter().map(|g| g.fence).collect();
    fences.sort_unstable();
    fences.dedup();
    assert_eq!(fences.len(), grants.len(), "a fence was handed out twice");
    // Grant order as far as it can be observed: a grant that returned before another acquire
    // was even called came first in Redis, so its fence is smaller.
    for a in &grants {
        for b in &grants {
            if a.granted < b.called {
                assert!(
                    a.fence < b.fence,
                    "grant {a:?} came before {b:?} but has the larger fence"
                );
            }
        }
    }
    // The fence counter in Redis stands at the last (largest) grant.
    assert_eq!(
        common::string_at(&redis, "fencelock:{pool}:fence"),
        fences.last().map(u64::to_string)
    );
    // Every permit was given back: only the fence counter is left.
    assert_eq!(keys(&redis), vec!["fencelock:{pool}:fence"]);
}

// ---------------------------------------------------------------------------------------------
// A permit holder in a child process (the test binary re-runs itself).

const PERMITS_ENV: &str = "FENCELOCK_TEST_PERMITS";

/// Child role: take one permit of "leased" (N from the environment), print `ACQUIRED <fence>`,
/// hold it (renewed) for at most 30 s.
#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_permit_holder() {
    require_test_child();
    let url = common::child_var(URL_ENV);
    let ttl = common::child_millis(TTL_ENV);
    let permits: u32 = common::child_value(PERMITS_ENV);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = client(&url);
        let permit = client
            .semaphore("leased", permits)
            .ttl(ttl)
            .acquire()
            .await
            .unwrap();
        println!("ACQUIRED {}", permit.fence());
        let reason = tokio::time::timeout(Duration::from_secs(30), permit.lost()).await;
        println!("LOST {reason:?}");
    });
}

#[tokio::test]
async fn a_killed_holders_permit_comes_back_after_its_lease_while_the_others_stay_held() {
    let redis = server();
    let ttl = Duration::from_millis(600);
    let mut child = spawn_test_child(
        "semaphore::child_permit_holder",
        &[
            (URL_ENV, &redis.url()),
            (TTL_ENV, &common::millis_var(ttl)),
            (PERMITS_ENV, "3"),
        ],
    )
    .unwrap();
    let child_fence = fence_of(
        &child
            .wait_for_line("ACQUIRED", Duration::from_secs(20))
            .unwrap(),
    );
    let a = client(&redis.url());
    let b = client(&redis.url());
    let held_since = Instant::now();
    let mine = [
        a.semaphore("leased", 3).ttl(ttl).acquire().await.unwrap(),
        a.semaphore("leased", 3).ttl(ttl).acquire().await.unwrap(),
    ];
    assert!(
        b.semaphore("leased", 3)
            .ttl(ttl)
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a fourth permit of three"
    );

    child.kill().unwrap();
    let killed_at = Instant::now();
    let taken = b
        .semaphore("leased", 3)
        .ttl(ttl)
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    let waited = killed_at.elapsed();
    assert!(taken.fence() > child_fence);
    // The dead holder renewed at most a third of a lease before it died: its permit came back
    // when that lease ran out, not before and not much after.
    assert!(
        waited >= ttl / 3 && waited < ttl + Duration::from_millis(700),
        "the dead holder's permit came back after {waited:?} (lease {ttl:?})"
    );

    // The two live permits are renewed by the watchdog, each on its own lease, far past their
    // first lease.
    while held_since.elapsed() < ttl * 4 {
        for permit in &mine {
            assert!(permit.is_held(), "a renewed permit was lost");
        }
        assert_eq!(permit_entries(&redis, "leased"), 3);
        assert!(
            b.semaphore("leased", 3)
                .ttl(ttl)
                .try_acquire()
                .await
                .unwrap()
                .is_none(),
            "a renewed permit was handed out again"
        );
        tokio::time::sleep(ttl / 4).await;
    }
    for permit in mine {
        assert!(permit.release().await.unwrap());
    }
    assert!(taken.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{leased}:fence"]);
}

/// The number of permits is the holders' to agree on: with none held and only a request
/// waiting, a request with another number takes a permit, and its number is the semaphore's
/// from then on.
#[tokio::test]
async fn another_number_of_permits_is_accepted_while_only_requests_wait() {
    let redis = server();
    let a = client(&redis.url());
    let name = "waited-n";
    let key = common::lock_key(name);
    let now = common::server_ms(&redis);
    let waiter = (
        format!("w:{}", "0".repeat(32)),
        format!("{}:1:{now}", now + 60_000),
    );
    redis
        .cmd(&[
            "HSET",
            &key,
            "kind",
            "semaphore",
            "permits",
            "2",
            &waiter.0,
            &waiter.1,
        ])
        .unwrap_or_else(|e| panic!("HSET {key}: {e}"));
    let guard = match a.semaphore(name, 3).try_acquire().await {
        Ok(Some(guard)) => guard,
        other => panic!("a request for 3 permits with none held: {other:?}"),
    };
    assert_eq!(
        snapshot(&redis, name).get("permits").map(String::as_str),
        Some("3")
    );
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
}

#[tokio::test]
async fn another_number_of_permits_is_refused_while_any_is_held_and_accepted_after() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let ttl = Duration::from_secs(10);
    let first = a.semaphore("n", 2).ttl(ttl).acquire().await.unwrap();
    let second = a.semaphore("n", 2).ttl(ttl).acquire().await.unwrap();

    for requested in [3, 1] {
        let before = (
            snapshot(&redis, "n"),
            common::string_at(&redis, "fencelock:{n}:fence"),
        );
        // Also while waiting: a mismatch is an error at once, not a wait.
        let started = Instant::now();
        let err = b
            .semaphore("n", requested)
            .wait_up_to(Duration::from_secs(5))
            .acquire()
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "it waited");
        match &err {
            Error::Conflict {
                lock,
                conflict:
                    Conflict::PermitsMismatch {
                        requested: r,
                        held_with,
                    },
            } => {
                assert_eq!(lock, "n");
                assert_eq!(*r, requested);
                assert_eq!(held_with, "2");
            }
            other => panic!("expected a permits mismatch, got {other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.contains('2') && text.contains(&requested.to_string()),
            "{text}"
        );
        assert_eq!(
            (
                snapshot(&redis, "n"),
                common::string_at(&redis, "fencelock:{n}:fence")
            ),
            before,
            "a refused request changed the semaphore"
        );
    }

    // One permit left held (fewer holders than the stored N): still a mismatch.
    assert!(first.release().await.unwrap());
    let err = b.semaphore("n", 3).try_acquire().await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Conflict {
                conflict: Conflict::PermitsMismatch { requested: 3, held_with },
                ..
            } if held_with == "2"
        ),
        "{err:?}"
    );
    assert_eq!(permit_entries(&redis, "n"), 1);

    // Once every permit is given back, the new N is accepted and enforced.
    assert!(second.release().await.unwrap());
    let three: Vec<_> = {
        let mut permits = Vec::new();
        for _ in 0..3 {
            permits.push(b.semaphore("n", 3).ttl(ttl).acquire().await.unwrap());
        }
        permits
    };
    assert_eq!(
        snapshot(&redis, "n").get("permits").map(String::as_str),
        Some("3")
    );
    assert!(b.semaphore("n", 3).try_acquire().await.unwrap().is_none());
    let err = a.semaphore("n", 2).try_acquire().await.unwrap_err();
    assert!(
        matches!(&err, Error::Conflict { conflict: Conflict::PermitsMismatch { requested: 2, held_with }, .. } if held_with == "3"),
        "{err:?}"
    );
    for permit in three {
        assert!(permit.release().await.unwrap());
    }

    // Permits whose leases ran out (holders gone) do not pin N either.
    let stale = a
        .semaphore("n", 3)
        .ttl(Duration::from_millis(100))
        .auto_renew(false)
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    let renumbered = b.semaphore("n", 5).try_acquire().await.unwrap();
    assert!(renumbered.is_some(), "a lapsed permit kept the old N");
    assert_eq!(
        snapshot(&redis, "n").get("permits").map(String::as_str),
        Some("5")
    );
    assert!(!stale.release().await.unwrap());
    assert!(renumbered.unwrap().release().await.unwrap());
}

#[tokio::test]
async fn bad_arguments_are_refused_before_anything_is_sent() {
    // Another kind under the name, and keys of another type: the table tests in kinds.rs, for
    // every kind.
    let redis = server();
    let a = client(&redis.url());

    let err = a.semaphore("zero", 0).acquire().await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(err.to_string().contains("at least 1 permit"), "{err}");
    let err = a.semaphore("zero", 0).try_acquire().await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let long = "x".repeat(fencelock::MAX_NAME_LEN + 1);
    for name in ["", "a{b}", "tab\there", long.as_str()] {
        let err = a.semaphore(name, 2).acquire().await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument { .. }),
            "{name:?}: {err:?}"
        );
    }
    let err = a
        .semaphore("ttl", 2)
        .ttl(Duration::ZERO)
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(
        keys(&redis).is_empty(),
        "an invalid request wrote something"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_on_a_full_semaphore_is_woken_promptly_by_a_release() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let ttl = Duration::from_secs(10);
    let mut held = vec![
        a.semaphore("full", 2).ttl(ttl).acquire().await.unwrap(),
        a.semaphore("full", 2).ttl(ttl).acquire().await.unwrap(),
    ];
    for _ in 0..3 {
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move {
                let permit = b.semaphore("full", 2).ttl(ttl).acquire().await.unwrap();
                (Instant::now(), permit)
            })
        };
        // Let the waiter subscribe and settle into its wait.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished(), "a third permit of two");
        let released_at = Instant::now();
        assert!(held.remove(0).release().await.unwrap());
        let (granted_at, permit) = waiter.await.unwrap();
        let delay = granted_at - released_at;
        // Woken by the release message, not by a 10 s lease running out.
        assert!(
            delay < Duration::from_secs(1),
            "waiter woke after {delay:?}"
        );
        held.push(permit);
    }
    for permit in held {
        assert!(permit.release().await.unwrap());
    }
}

#[tokio::test]
async fn waiting_on_a_full_semaphore_is_bounded_and_leaves_nothing_behind() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let only = a.semaphore("one", 1).acquire().await.unwrap();
    let before = (
        snapshot(&redis, "one"),
        common::string_at(&redis, "fencelock:{one}:fence"),
    );

    assert!(b.semaphore("one", 1).try_acquire().await.unwrap().is_none());
    let err = b.semaphore("one", 1).no_wait().acquire().await.unwrap_err();
    assert!(
        matches!(err, Error::Busy { remaining: Some(r), .. } if r > Duration::from_secs(20)),
        "{err:?}"
    );
    let started = Instant::now();
    let err = b
        .semaphore("one", 1)
        .wait_up_to(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, Error::TimedOut { .. }), "{err:?}");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    // Give a background give-back (if any) the time to land, then check nothing changed.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        (
            snapshot(&redis, "one"),
            common::string_at(&redis, "fencelock:{one}:fence")
        ),
        before
    );
    assert!(only.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{one}:fence"]);
}

#[tokio::test]
async fn release_says_whether_the_permit_was_still_held_and_loss_is_signalled() {
    let redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_millis(600);

    // Released while held: true, and the semaphore is gone with its last permit.
    let permit = a.semaphore("r", 2).ttl(ttl).acquire().await.unwrap();
    assert!(permit.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{r}:fence"]);

    // Its entry deleted behind its back (the other permit untouched): the lost signal fires at
    // the next renewal, release says false, and the other permit is still held.
    let doomed = a.semaphore("r", 2).ttl(ttl).acquire().await.unwrap();
    let other = a.semaphore("r", 2).ttl(ttl).acquire().await.unwrap();
    let lost = doomed.lost();
    assert!(!lost.is_lost());
    let field = snapshot(&redis, "r")
        .into_iter()
        .find(|(f, value)| f.starts_with("p:") && value.ends_with(&format!(":{}", doomed.fence())))
        .map(|(f, _)| f)
        .unwrap();
    assert_eq!(integer_reply(&redis, &["HDEL", "fencelock:{r}", &field]), 1);
    let reason = tokio::time::timeout(ttl, lost.wait())
        .await
        .expect("the lost signal did not fire");
    assert_eq!(reason, LostReason::NotOwner);
    assert!(!doomed.is_held());
    assert!(!doomed.release().await.unwrap());
    assert!(other.is_held());
    assert_eq!(permit_entries(&redis, "r"), 1);

    // After an operator's force-release: false.
    assert!(a.force_release("r").await.unwrap());
    assert!(!other.release().await.unwrap());

    // After its lease ran out without renewal (its entry still there, next to a live permit
    // that keeps the semaphore's key alive): false, and the live permit is untouched.
    let keeper = a.semaphore("r", 2).ttl(ttl).acquire().await.unwrap();
    let lapsed = a
        .semaphore("r", 2)
        .ttl(Duration::from_millis(100))
        .auto_renew(false)
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(permit_entries(&redis, "r"), 2);
    assert!(!lapsed.is_held());
    assert!(!lapsed.release().await.unwrap());
    assert_eq!(permit_entries(&redis, "r"), 1);
    assert!(keeper.is_held());
    assert!(keeper.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{r}:fence"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weighted_hold_takes_k_permits_with_one_lease_and_one_fence() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let three = a
        .semaphore("weighted", 5)
        .take(3)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(permit_entries(&redis, "weighted"), 3);
    let info = b
        .inspect("weighted")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let shown: Vec<Option<u32>> = info.shared.iter().map(|h| h.permits).collect();
    assert_eq!(shown, [Some(3)], "one holder of 3 permits: {info:?}");
    let fields = snapshot(&redis, "weighted");
    let values: std::collections::BTreeSet<&String> = fields
        .iter()
        .filter(|(k, _)| k.starts_with("p:"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(values.len(), 1, "one lease and one fence: {fields:?}");
    assert!(
        values
            .iter()
            .all(|v| v.ends_with(&format!(":{}", three.fence())))
    );
    // 2 left: a request for 3 does not fit, one for 2 does.
    assert!(
        b.semaphore("weighted", 5)
            .take(3)
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    let two = b
        .semaphore("weighted", 5)
        .take(2)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("2 of the 5 were free"));
    three
        .extend(Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(three.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(permit_entries(&redis, "weighted"), 2);
    assert!(two.release().await.unwrap_or_else(|e| panic!("{e}")));
    for (request, why) in [
        (
            a.semaphore("weighted", 5).take(6),
            "more than the semaphore's",
        ),
        (a.semaphore("weighted", 5).take(0), "at least 1"),
        (a.lock("weighted").take(2), "semaphore"),
    ] {
        let err = request.acquire().await.map(|_| ()).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument { reason, .. } if reason.contains(why)),
            "{err:?}"
        );
    }
}

/// A stream of small requests, each let in as soon as a permit is free, would keep a request
/// for all the permits waiting; first come, first served lets it in once the small requests
/// that were waiting before it have had their turn: none that came after overtakes it. Grants
/// are told apart by their fences (in grant order on the server), counted from the fence
/// counter as it was once the large request's place was in line, so that a loaded machine's
/// delays between a grant and its caller's clock do not count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_request_is_not_starved_by_a_stream_of_small_ones() {
    let redis = server();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fences = Arc::new(Mutex::new(Vec::<u64>::new()));
    let mut small = Vec::new();
    // Three times as many small requests as permits: some always wait, ready to take a permit
    // given back.
    const SMALL: usize = 12;
    for _ in 0..SMALL {
        let client = client(&redis.url());
        let (stop, fences) = (stop.clone(), fences.clone());
        small.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let permit = client
                    .semaphore("stream", 4)
                    .ttl(Duration::from_secs(10))
                    .wait_up_to(Duration::from_secs(60))
                    .acquire()
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                fences
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(permit.fence());
                tokio::time::sleep(Duration::from_millis(20)).await;
                permit.release().await.unwrap_or_else(|e| panic!("{e}"));
            }
        }));
    }
    // The stream is flowing: the permits are never all free at once for long.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let large = client(&redis.url());
    let started = Instant::now();
    let request = tokio::spawn(async move {
        large
            .semaphore("stream", 4)
            .take(4)
            .ttl(Duration::from_secs(10))
            .wait_up_to(Duration::from_secs(60))
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("the large request: {e}"))
    });
    // Its place in line (a waiting entry for 4 permits), then the fence counter.
    let key = common::lock_key("stream");
    let in_line = || {
        common::hash_fields(&redis, &key)
            .iter()
            .any(|(field, value)| field.starts_with("w:") && value.split(':').nth(1) == Some("4"))
    };
    let mut counter = None;
    while !request.is_finished() {
        if in_line() {
            let value = redis
                .cmd(&["GET", &common::lock_subkey("stream", "fence")])
                .unwrap_or_else(|e| panic!("GET the fence counter: {e}"));
            counter = Some(redis::from_redis_value::<u64>(value).unwrap_or(0));
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let all = request
        .await
        .unwrap_or_else(|e| panic!("the large request: {e}"));
    let waited = started.elapsed();
    // Once granted, it holds every permit: nobody else is in.
    assert_eq!(permit_entries(&redis, "stream"), 4);
    let granted = all.fence();
    all.release().await.unwrap_or_else(|e| panic!("{e}"));
    stop.store(true, Ordering::Relaxed);
    for task in small {
        task.await.unwrap_or_else(|e| panic!("{e}"));
    }
    let fences = fences.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // (Granted at its first try, it never waited: no grant can have overtaken it.)
    let since = counter.unwrap_or(granted);
    let overtaking = fences
        .iter()
        .filter(|f| **f > since && **f < granted)
        .count();
    // At most the small requests already waiting when it arrived (each once): none that came
    // after it.
    assert!(
        overtaking <= SMALL,
        "{overtaking} small requests were let in while it waited {waited:?}"
    );
    assert!(
        fences.len() > 20,
        "the stream let in {} small requests only",
        fences.len()
    );
}

/// A hold of several permits extended by hand re-arms every one of its permits' leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_by_hand_re_arms_every_permit_of_the_hold() {
    let redis = server();
    let a = client(&redis.url());
    let held = a
        .semaphore("stretch", 3)
        .take(2)
        .ttl(Duration::from_secs(5))
        .auto_renew(false)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    held.extend(Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let now = common::server_ms(&redis);
    let fields = hash_fields(&redis, &common::lock_key("stretch"));
    let permits: Vec<(&String, &String)> =
        fields.iter().filter(|(f, _)| f.starts_with("p:")).collect();
    assert_eq!(permits.len(), 2, "{fields:?}");
    for (field, value) in permits {
        let expiry: u64 = value
            .split(':')
            .next()
            .and_then(|e| e.parse().ok())
            .unwrap_or_else(|| panic!("{field}: {value}"));
        assert!(
            expiry > now + 50_000,
            "{field} was not re-armed: {value}, now {now}"
        );
    }
    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
}
