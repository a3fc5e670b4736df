//! The fair (FIFO) lock against real redis-server processes.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, Error};
use fencelock_testkit::{RedisServer, require_test_child, spawn_test_child};
use tokio::time::Instant;

use common::{
    NAME_ENV, TTL_ENV, URL_ENV, calls, client, fence_of, integer_reply, keys, members, server,
    wait_for_count,
};

fn queue_key(name: &str) -> String {
    common::lock_subkey(name, "queue")
}

fn alive_key(name: &str) -> String {
    common::lock_subkey(name, "alive")
}

/// How many waiters the queue of `name` holds.
fn queued(redis: &RedisServer, name: &str) -> i64 {
    integer_reply(redis, &["ZCARD", &queue_key(name)])
}

/// Waits (at most `limit`) until the queue of `name` holds `count` waiters.
async fn wait_for_queue(redis: &RedisServer, name: &str, count: i64, limit: Duration) {
    let what = format!("waiters in the queue of {name}");
    wait_for_count(&what, count, limit, || queued(redis, name)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_on_several_clients_are_granted_in_request_order_with_growing_fences() {
    const WAITERS: usize = 6;
    let redis = server();
    let clients: Vec<Client> = (0..3).map(|_| client(&redis.url())).collect();
    let ttl = Duration::from_secs(10);
    let holder = clients[0]
        .fair_lock("fifo")
        .ttl(ttl)
        .acquire()
        .await
        .unwrap();
    let grants = Arc::new(Mutex::new(vec![(usize::MAX, holder.fence())]));
    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        // Interleave the clients: 0, 2, 1, 0, 2, 1.
        let client = clients[(i * 2) % clients.len()].clone();
        let grants = grants.clone();
        waiters.push(tokio::spawn(async move {
            let guard = client
                .fair_lock("fifo")
                .ttl(ttl)
                .wait_up_to(Duration::from_secs(15))
                .acquire()
                .await
                .unwrap();
            grants.lock().unwrap().push((i, guard.fence()));
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert!(guard.release().await.unwrap());
        }));
        // The next waiter starts only once this one has its place.
        wait_for_queue(&redis, "fifo", i as i64 + 1, Duration::from_secs(5)).await;
    }
    // Let the waiters settle into their waits (and refresh their places) for a while.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(queued(&redis, "fifo"), WAITERS as i64);
    assert!(holder.release().await.unwrap());
    for waiter in waiters {
        waiter.await.unwrap();
    }
    let grants = grants.lock().unwrap().clone();
    let order: Vec<usize> = grants.iter().skip(1).map(|(i, _)| *i).collect();
    assert_eq!(
        order,
        (0..WAITERS).collect::<Vec<_>>(),
        "not granted in request order"
    );
    assert!(
        grants.windows(2).all(|w| w[0].1 < w[1].1),
        "fences do not grow in grant order: {grants:?}"
    );
    assert_eq!(
        keys(&redis),
        vec!["fencelock:{fifo}:fence"],
        "a queue was left behind"
    );
}

/// Script runs on the server so far (EVALSHA, and EVAL should a script ever be sent whole).
fn script_runs(redis: &RedisServer) -> u64 {
    calls(redis, "evalsha") + calls(redis, "eval")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_only_the_head_of_the_queue() {
    const WAITERS: usize = 5;
    let redis = server();
    let clients: Vec<Client> = (0..2).map(|_| client(&redis.url())).collect();
    // Long leases and queue timeouts: no waiter comes back on its own timer during the test, so
    // every script run after the release was caused by a release message.
    let ttl = Duration::from_secs(20);
    let queue_timeout = Duration::from_secs(30);
    // Load the scripts: a script's first EVALSHA answers NOSCRIPT, and counts as a call.
    let warm_up = clients[0].fair_lock("herd").acquire().await.unwrap();
    assert!(warm_up.release().await.unwrap());
    let holder = clients[0]
        .fair_lock("herd")
        .ttl(ttl)
        .acquire()
        .await
        .unwrap();
    let (granted, mut grants) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let client = clients[i % clients.len()].clone();
        let granted = granted.clone();
        waiters.push(tokio::spawn(async move {
            let guard = client
                .fair_lock("herd")
                .ttl(ttl)
                .queue_timeout(queue_timeout)
                .wait_up_to(Duration::from_secs(15))
                .acquire()
                .await
                .unwrap();
            granted.send(i).unwrap();
            guard
        }));
        wait_for_queue(&redis, "herd", i as i64 + 1, Duration::from_secs(5)).await;
    }
    // Every waiter has subscribed and is asleep (its subscribe-then-retry run is over).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = script_runs(&redis);
    assert!(holder.release().await.unwrap());
    let first = tokio::time::timeout(Duration::from_secs(5), grants.recv())
        .await
        .unwrap();
    assert_eq!(
        first,
        Some(0),
        "the lock did not go to the head of the queue"
    );
    // Time for any other waiter that was woken to run its acquire script.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let runs = script_runs(&redis) - before;
    assert_eq!(
        runs, 1,
        "a handoff to the head of a queue of {WAITERS} ran {runs} scripts (the release passes \
         the lock to the head, which runs none): others were woken for nothing, or the head sent \
         an acquire"
    );
    assert_eq!(queued(&redis, "herd"), WAITERS as i64 - 1);
    // The rest still go in order, each woken by its predecessor's release.
    let mut holder = waiters.remove(0).await.unwrap();
    for (next, waiter) in waiters.into_iter().enumerate() {
        assert!(holder.release().await.unwrap());
        holder = waiter.await.unwrap();
        let granted = tokio::time::timeout(Duration::from_secs(5), grants.recv()).await;
        assert_eq!(granted.unwrap(), Some(next + 1));
    }
    assert!(holder.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{herd}:fence"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_release_message_is_missed_between_a_try_and_the_wait() {
    // Two workers on two clients take turns as fast as they can. A release that reaches a
    // waiter after its last try and before it listens for its own token would leave it asleep
    // until it refreshes its place: 10 s with this queue timeout, past the 5 s limit.
    let redis = server();
    let clients: Vec<Client> = (0..2).map(|_| client(&redis.url())).collect();
    let until = Instant::now() + Duration::from_secs(2);
    let workers: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, client)| {
            tokio::spawn(async move {
                let mut grants = 0;
                while Instant::now() < until {
                    let guard = client
                        .fair_lock("turns")
                        .queue_timeout(Duration::from_secs(30))
                        .wait_up_to(Duration::from_secs(5))
                        .acquire()
                        .await
                        .unwrap_or_else(|e| panic!("worker {i} after {grants} grants: {e}"));
                    if grants % 2 == 1 {
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    }
                    assert!(guard.release().await.unwrap());
                    grants += 1;
                }
                grants
            })
        })
        .collect();
    for worker in workers {
        assert!(worker.await.unwrap() > 0);
    }
}

#[tokio::test]
async fn a_free_lock_with_nobody_queued_is_taken_without_a_place_in_the_queue() {
    let redis = server();
    let a = client(&redis.url());
    for _ in 0..3 {
        let guard = a.fair_lock("fast").acquire().await.unwrap();
        assert!(guard.release().await.unwrap());
    }
    assert_eq!(
        calls(&redis, "zadd"),
        0,
        "an uncontended acquire queued itself"
    );
    assert_eq!(keys(&redis), vec!["fencelock:{fast}:fence"]);
    // The count does see a place taken (else the checks of 0 above and elsewhere prove nothing).
    let held = a.fair_lock("fast").acquire().await.unwrap();
    let waiter = a
        .fair_lock("fast")
        .wait_up_to(Duration::from_millis(300))
        .acquire()
        .await;
    assert!(matches!(waiter, Err(Error::TimedOut { .. })), "{waiter:?}");
    assert!(
        calls(&redis, "zadd") > 0,
        "a waiter took no place in the queue"
    );
    assert!(held.release().await.unwrap());
}

// ---------------------------------------------------------------------------------------------
// A fair-lock user in a child process (the test binary re-runs itself).

const QUEUE_TIMEOUT_ENV: &str = "FENCELOCK_TEST_QUEUE_TIMEOUT_MS";

/// Child role: ask for the fair lock (waiting as long as it takes), print `ACQUIRED <fence>` when
/// granted, and hold it (renewed) for at most 30 s.
#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_fair_user() {
    require_test_child();
    let url = common::child_var(URL_ENV);
    let name = common::child_var(NAME_ENV);
    let (ttl, queue_timeout) = (
        common::child_millis(TTL_ENV),
        common::child_millis(QUEUE_TIMEOUT_ENV),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = client(&url);
        let guard = client
            .fair_lock(name)
            .ttl(ttl)
            .queue_timeout(queue_timeout)
            .acquire()
            .await
            .unwrap();
        println!("ACQUIRED {}", guard.fence());
        let reason = tokio::time::timeout(Duration::from_secs(30), guard.lost()).await;
        println!("LOST {reason:?}");
    });
}

fn spawn_fair_user(
    redis: &RedisServer,
    name: &str,
    ttl: Duration,
    queue_timeout: Duration,
) -> fencelock_testkit::ChildGuard {
    match spawn_test_child(
        "fair::child_fair_user",
        &[
            (URL_ENV, &redis.url()),
            (NAME_ENV, name),
            (TTL_ENV, &common::millis_var(ttl)),
            (QUEUE_TIMEOUT_ENV, &common::millis_var(queue_timeout)),
        ],
    ) {
        Ok(child) => child,
        Err(e) => panic!("cannot spawn a child: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_waiter_leaves_the_queue_after_its_queue_timeout() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let queue_timeout = Duration::from_millis(500);
    let holder = a
        .fair_lock("dead-waiter")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let mut child = spawn_fair_user(
        &redis,
        "dead-waiter",
        Duration::from_secs(10),
        queue_timeout,
    );
    wait_for_queue(&redis, "dead-waiter", 1, Duration::from_secs(20)).await;
    let behind = {
        let b = b.clone();
        tokio::spawn(async move {
            let guard = b
                .fair_lock("dead-waiter")
                .wait_up_to(Duration::from_secs(8))
                .acquire()
                .await
                .unwrap();
            (Instant::now(), guard)
        })
    };
    wait_for_queue(&redis, "dead-waiter", 2, Duration::from_secs(5)).await;

    child.kill().unwrap();
    let released_at = Instant::now();
    assert!(holder.release().await.unwrap());
    let (granted_at, guard) = behind.await.unwrap();
    let waited = granted_at - released_at;
    // The dead waiter ahead held its place at most one queue timeout (500 ms) after its last
    // refresh. Had its place lasted the default queue timeout (5 s, refreshed every third of
    // it), the waiter behind would have waited at least 3.3 s; had it lasted for good, the
    // waiter would have given up after 8 s. The bound leaves a loaded machine 2 s.
    assert!(
        waited < Duration::from_millis(2500),
        "the waiter behind a dead one got the lock after {waited:?}"
    );
    assert!(guard.fence() > 0);
    assert_eq!(
        queued(&redis, "dead-waiter"),
        0,
        "the dead waiter is still queued"
    );
    assert_eq!(
        integer_reply(&redis, &["EXISTS", &alive_key("dead-waiter")]),
        0
    );
    assert!(guard.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{dead-waiter}:fence"]);
}

/// A head of the queue killed after its last refresh (its place, 5 s, still live) is passed the
/// lock for the claim only (1 s, as the plain lock's dead waiter), and the pass names the waiter
/// behind it, which tries again when the claim runs out rather than at its next refresh (a
/// third of its queue timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_head_is_passed_the_lock_for_the_claim_and_names_the_waiter_behind_it() {
    use futures_util::StreamExt;

    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let name = "dead-head";
    let holder = a
        .fair_lock(name)
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let mut child = spawn_fair_user(
        &redis,
        name,
        Duration::from_secs(10),
        Duration::from_secs(5),
    );
    wait_for_queue(&redis, name, 1, Duration::from_secs(20)).await;
    let behind = tokio::spawn(
        b.fair_lock(name)
            .ttl(Duration::from_secs(10))
            .wait_up_to(Duration::from_secs(20))
            .acquire(),
    );
    wait_for_queue(&redis, name, 2, Duration::from_secs(5)).await;
    let queue = members(&redis, &queue_key(name));
    let [dead, live] = &queue[..] else {
        panic!("two places expected: {queue:?}");
    };
    child.kill().unwrap();
    // Its connection is gone: nobody hears its own channel, so the pass goes on the lock's.
    let own = format!("fencelock:{{{name}}}:released:{dead}");
    wait_for_count(
        "subscribers of the dead head's channel",
        0,
        Duration::from_secs(5),
        || match redis.cmd(&["PUBSUB", "NUMSUB", &own]) {
            Ok(redis::Value::Array(reply)) => match reply.get(1) {
                Some(redis::Value::Int(n)) => *n,
                other => panic!("PUBSUB NUMSUB: {other:?}"),
            },
            other => panic!("PUBSUB NUMSUB: {other:?}"),
        },
    )
    .await;
    let listener = redis::Client::open(redis.url()).unwrap();
    let mut on_lock_channel = listener.get_async_pubsub().await.unwrap();
    on_lock_channel
        .subscribe(format!("fencelock:{{{name}}}:released"))
        .await
        .unwrap();

    assert!(holder.release().await.unwrap());
    let lock_key = format!("fencelock:{{{name}}}");
    let pttl = integer_reply(&redis, &["PTTL", &lock_key]);
    let passed = match redis.cmd(&["GET", &lock_key]) {
        Ok(redis::Value::BulkString(v)) => String::from_utf8(v).unwrap(),
        other => panic!("GET: {other:?}"),
    };
    assert!(passed.starts_with(dead.as_str()), "passed to {passed}");
    // The claim (PASS_CLAIM, 1000 ms), not what was left of the dead head's place.
    assert!((1..=1000).contains(&pttl), "the passed lease is {pttl} ms");
    let message = tokio::time::timeout(Duration::from_secs(5), on_lock_channel.on_message().next())
        .await
        .expect("no pass on the lock's channel")
        .unwrap();
    let payload: String = message.get_payload().unwrap();
    assert!(
        payload.starts_with(&format!("to:{dead}:")),
        "heard {payload}"
    );
    assert!(
        payload.ends_with(&format!(":{live}")),
        "the pass does not name the waiter behind the head: {payload}"
    );
    let guard = tokio::time::timeout(Duration::from_secs(15), behind)
        .await
        .expect("the waiter behind the dead head never got the lock")
        .unwrap()
        .unwrap();
    let passed_fence: u64 = passed.split_once(':').unwrap().1.parse().unwrap();
    assert!(guard.fence() > passed_fence, "{passed}");
    assert_eq!(queued(&redis, name), 0);
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_or_is_cancelled_leaves_the_queue_at_once() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let c = client(&redis.url());
    let ttl = Duration::from_secs(10);
    let mut holder = a.fair_lock("quitter").ttl(ttl).acquire().await.unwrap();

    for cancel in [false, true] {
        // A first waiter that will give up (its limit expires, or its future is dropped), and a
        // second one behind it that waits (with the default 5 s queue timeout).
        let quitter = {
            let b = b.clone();
            tokio::spawn(async move {
                let request = b.fair_lock("quitter").ttl(ttl);
                if cancel {
                    let outcome =
                        tokio::time::timeout(Duration::from_secs(1), request.acquire()).await;
                    assert!(outcome.is_err(), "the cancelled waiter got the lock");
                } else {
                    let err = request
                        .wait_up_to(Duration::from_secs(1))
                        .acquire()
                        .await
                        .unwrap_err();
                    assert!(matches!(err, Error::TimedOut { .. }), "{err:?}");
                }
                Instant::now()
            })
        };
        wait_for_queue(&redis, "quitter", 1, Duration::from_secs(5)).await;
        let patient = {
            let c = c.clone();
            tokio::spawn(async move {
                let guard = c
                    .fair_lock("quitter")
                    .ttl(ttl)
                    .wait_up_to(Duration::from_secs(8))
                    .acquire()
                    .await
                    .unwrap();
                (Instant::now(), guard)
            })
        };
        wait_for_queue(&redis, "quitter", 2, Duration::from_secs(5)).await;
        let gave_up_at = quitter.await.unwrap();
        // Its place goes at once (a background give-back), not one queue timeout later.
        wait_for_queue(&redis, "quitter", 1, Duration::from_millis(500)).await;
        assert!(gave_up_at.elapsed() < Duration::from_secs(1));
        assert_eq!(integer_reply(&redis, &["ZCARD", &alive_key("quitter")]), 1);

        let released_at = Instant::now();
        assert!(holder.release().await.unwrap());
        let (granted_at, guard) = patient.await.unwrap();
        let waited = granted_at - released_at;
        assert!(
            waited < Duration::from_secs(1),
            "the waiter behind one that gave up got the lock after {waited:?} (cancel: {cancel})"
        );
        assert_eq!(queued(&redis, "quitter"), 0);
        holder = guard;
    }
    assert!(holder.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{quitter}:fence"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_contention_every_task_gets_its_turn_and_holds_alone() {
    const TASKS: usize = 6;
    let redis = server();
    let clients: Vec<Client> = (0..3).map(|_| client(&redis.url())).collect();
    let holders = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let until = Instant::now() + Duration::from_secs(3);
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let client = clients[task % clients.len()].clone();
        let (holders, fences) = (holders.clone(), fences.clone());
        tasks.push(tokio::spawn(async move {
            let mut grants = 0u32;
            while Instant::now() < until {
                let guard = client
                    .fair_lock("contended")
                    .ttl(Duration::from_secs(2))
                    .wait_up_to(Duration::from_secs(10))
                    .acquire()
                    .await
                    .unwrap();
                assert_eq!(
                    holders.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                fences.lock().unwrap().push(guard.fence());
                grants += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
                holders.fetch_sub(1, Ordering::SeqCst);
                assert!(guard.release().await.unwrap(), "the lock was lost");
            }
            grants
        }));
    }
    let mut counts = Vec::new();
    for task in tasks {
        counts.push(task.await.unwrap());
    }
    let (least, most) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    println!("grants per task: {counts:?}");
    assert!(least > 0, "a task never got the lock: {counts:?}");
    assert!(
        most <= least * 2,
        "grants are spread unevenly over the tasks: {counts:?}"
    );
    let fences = fences.lock().unwrap().clone();
    assert_eq!(fences.len() as u32, counts.iter().sum::<u32>());
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences do not grow in grant order"
    );
    assert_eq!(keys(&redis), vec!["fencelock:{contended}:fence"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_lock_goes_to_the_head_of_the_queue_after_its_lease() {
    let redis = server();
    let ttl = Duration::from_millis(800);
    let mut child = spawn_fair_user(&redis, "crashed", ttl, Duration::from_secs(5));
    let child_fence = fence_of(
        &child
            .wait_for_line("ACQUIRED", Duration::from_secs(20))
            .unwrap(),
    );
    let clients = [client(&redis.url()), client(&redis.url())];
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let (client, order) = (client.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let guard = client
                .fair_lock("crashed")
                .ttl(ttl)
                .wait_up_to(Duration::from_secs(8))
                .acquire()
                .await
                .unwrap();
            order
                .lock()
                .unwrap()
                .push((i, Instant::now(), guard.fence()));
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(guard.release().await.unwrap());
        }));
        wait_for_queue(&redis, "crashed", i as i64 + 1, Duration::from_secs(5)).await;
    }
    child.kill().unwrap();
    let killed_at = Instant::now();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order.iter().map(|g| g.0).collect::<Vec<_>>(), vec![0, 1]);
    let waited = order[0].1 - killed_at;
    assert!(
        waited >= ttl / 3 && waited < ttl + Duration::from_millis(700),
        "the head waiter got the dead holder's lock after {waited:?} (lease {ttl:?})"
    );
    assert!(child_fence < order[0].2 && order[0].2 < order[1].2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_acquire_takes_a_free_lock_only_when_nobody_is_queued() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());

    // Free, nobody queued: granted, and nothing is left after the release.
    let guard = a.fair_lock("try").try_acquire().await.unwrap().unwrap();
    assert_eq!(queued(&redis, "try"), 0);
    // Busy: a request that does not wait takes no place in the queue.
    assert!(b.fair_lock("try").try_acquire().await.unwrap().is_none());
    assert_eq!(queued(&redis, "try"), 0);
    assert!(guard.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{try}:fence"]);

    // Held, with a waiter (a child process) queued; then the waiter is frozen and the lock
    // released: the release passes the lock to the head of the queue, for no longer than what
    // was left of its place.
    let queue_timeout = Duration::from_secs(2);
    let holder = a.fair_lock("try").acquire().await.unwrap();
    let mut child = spawn_fair_user(&redis, "try", Duration::from_secs(10), queue_timeout);
    wait_for_queue(&redis, "try", 1, Duration::from_secs(20)).await;
    child.pause().unwrap();
    assert!(holder.release().await.unwrap());
    let pttl = integer_reply(&redis, &["PTTL", "fencelock:{try}"]);
    assert!(pttl > 0 && pttl <= 2_000, "the passed lease is {pttl} ms");
    let err = b.fair_lock("try").no_wait().acquire().await.unwrap_err();
    assert!(matches!(err, Error::Busy { .. }), "{err:?}");
    assert!(b.fair_lock("try").try_acquire().await.unwrap().is_none());
    // The head left the queue with the lock; the refused requests took no place in it.
    assert_eq!(queued(&redis, "try"), 0);

    // The lock passed to the frozen waiter lapses when its place would have, one queue timeout
    // after its last refresh at the latest.
    child.kill().unwrap();
    let killed_at = Instant::now();
    let guard = b
        .fair_lock("try")
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    assert!(
        killed_at.elapsed() < queue_timeout + Duration::from_secs(1),
        "{:?}",
        killed_at.elapsed()
    );
    assert_eq!(queued(&redis, "try"), 0);
    assert!(guard.release().await.unwrap());
}

/// The fair lock's own keys (its queue and liveness entries) holding something else, and a
/// lease-shaped value with no expiry at the lock key. Foreign values at the lock key and the
/// fence key, and another kind under the name, for every kind, are the table tests in kinds.rs.
#[tokio::test]
async fn foreign_queue_keys_and_a_lease_without_expiry_are_refused_and_left_untouched() {
    let redis = server();
    let a = client(&redis.url());
    redis
        .cmd(&["SET", &queue_key("q1"), "not a queue"])
        .unwrap();
    redis.cmd(&["RPUSH", &alive_key("q2"), "x"]).unwrap();
    for (name, key, found) in [
        ("q1", queue_key("q1"), "a string"),
        ("q2", alive_key("q2"), "a list"),
    ] {
        let started = Instant::now();
        let err = a
            .fair_lock(name)
            .wait_up_to(Duration::from_secs(5))
            .acquire()
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{name}: it waited"
        );
        match &err {
            Error::WrongType {
                lock,
                key: k,
                found: f,
            } => {
                assert_eq!(lock, name);
                assert_eq!(k, &key);
                assert_eq!(f, found);
            }
            other => panic!("{name}: expected WrongType, got {other:?}"),
        }
    }
    // A bad queue key is reported also while another owner holds the lock.
    let held = a.lock("q4").acquire().await.unwrap();
    redis.cmd(&["HSET", &queue_key("q4"), "f", "v"]).unwrap();
    let err = a.fair_lock("q4").try_acquire().await.unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key, .. } if *key == queue_key("q4")),
        "{err:?}"
    );
    assert!(held.release().await.unwrap());

    // A lock key that looks like a lease but has no expiry (nobody's lease): refused, without
    // taking a place in the queue, not even for a moment.
    redis.cmd(&["SET", "fencelock:{q7}", "0123abcd:5"]).unwrap();
    let err = a
        .fair_lock("q7")
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { key, found, .. }
            if *key == common::lock_key("q7") && found.contains("no expiry")),
        "{err:?}"
    );
    assert_eq!(calls(&redis, "zadd"), 0, "a refused request queued itself");

    // Nothing was written or changed.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        keys(&redis),
        vec![
            "fencelock:{q1}:queue",
            "fencelock:{q2}:alive",
            "fencelock:{q4}:fence",
            "fencelock:{q4}:queue",
            "fencelock:{q7}",
        ]
    );
    assert_eq!(
        redis.cmd(&["GET", &queue_key("q1")]).unwrap(),
        redis::Value::BulkString(b"not a queue".to_vec())
    );
    assert_eq!(integer_reply(&redis, &["LLEN", &alive_key("q2")]), 1);
    assert_eq!(integer_reply(&redis, &["HLEN", &queue_key("q4")]), 1);
    assert_eq!(
        redis.cmd(&["GET", "fencelock:{q7}"]).unwrap(),
        redis::Value::BulkString(b"0123abcd:5".to_vec())
    );
}

#[tokio::test]
async fn a_queued_entry_without_liveness_does_not_block_the_lock() {
    // A place in the queue with no liveness entry (left by a client that died between an
    // acquire that failed and its clean-up, or by an eviction) counts as lapsed.
    let redis = server();
    let a = client(&redis.url());
    redis
        .cmd(&["ZADD", &queue_key("ghost"), "1", "0123456789abcdef"])
        .unwrap();
    let started = Instant::now();
    let guard = a
        .fair_lock("ghost")
        .wait_up_to(Duration::from_secs(3))
        .acquire()
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(guard.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{ghost}:fence"]);
}
