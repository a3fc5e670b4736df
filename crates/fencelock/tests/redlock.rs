//! Redlock: the same fenced lock over five independent redis-server processes.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fencelock::{Client, Error};
use fencelock_testkit::{RedisServer, require_test_child, spawn_test_child};
use futures_util::StreamExt;
use tokio::time::Instant;

const INSTANCE_TIMEOUT: Duration = Duration::from_millis(50);

/// A Redlock client with the short instance timeout of these tests.
fn redlock(urls: &[String]) -> Client {
    common::redlock_client(urls, INSTANCE_TIMEOUT)
}

fn holds(server: &RedisServer, name: &str) -> bool {
    common::keys(server).contains(&common::lock_key(name))
}

/// Waits (at most 2 s) until `check` holds on every server: with early decision, the slowest
/// instances answer after the caller has moved on.
async fn eventually_all(servers: &[RedisServer], check: impl Fn(&RedisServer) -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if servers.iter().all(&check) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn all_up_the_lock_is_held_on_every_instance_and_fences_grow() {
    let (servers, urls) = common::redlock_servers(5);
    // "All up" means every instance answers within its limit. With 50 ms, a loaded 2-core CI
    // machine sometimes let one instance's call (a first connection, a NOSCRIPT reload) run
    // out, and that instance then rightly did not count; a majority still held the lock. The
    // early decision means the caller never waits for this limit when all are up.
    let client = common::redlock_client(&urls, Duration::from_secs(1));
    let other = common::redlock_client(&urls, Duration::from_secs(1));
    let mut last = 0;
    for _ in 0..5 {
        let guard = client.lock("r").acquire().await.unwrap();
        assert!(guard.fence() > last);
        last = guard.fence();
        // Early decision: the grant may come before the slowest instance answered. (Checked
        // before the other client tries: a try that reached the slowest instance first would
        // hold it until it gives it back, and the key would come and go under this check.)
        assert!(eventually_all(&servers, |s| holds(s, "r")).await);
        assert!(other.try_lock("r").await.unwrap().is_none());
        // Over Redlock, inspect reports the largest fence any instance handed this holder; the
        // guard's fence is the largest of its granting majority's.
        let info = other.inspect("r").await.unwrap();
        let seen = info.holder.and_then(|h| h.fence).unwrap();
        assert!(seen >= guard.fence(), "{seen} < {}", guard.fence());
        assert!(guard.release().await.unwrap());
        // The release, too, returns at a majority; the next acquisition could reach a slow
        // instance before this release does there (and then be undone by it), which a majority
        // tolerates but this test's "held on every instance" would not.
        assert!(eventually_all(&servers, |s| !holds(s, "r")).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_idle_lets_the_slowest_instance_hear_a_release() {
    let (servers, urls) = common::redlock_servers(3);
    let client = common::redlock_client(&urls, Duration::from_secs(2));
    let guard = client
        .lock("slow")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    assert!(eventually_all(&servers, |s| holds(s, "slow")).await);
    // The first instance stops answering for a while (DEBUG SLEEP blocks the whole server).
    let sleeper = redis::Client::open(servers[0].url()).unwrap();
    let mut sleeper = sleeper.get_multiplexed_async_connection().await.unwrap();
    let sleeping = tokio::spawn(async move {
        redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg("0.6")
            .query_async::<()>(&mut sleeper)
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The release returns once the other two confirmed it; the first is still to hear it.
    assert!(guard.release().await.unwrap());
    assert!(
        !client.wait_idle(Duration::from_millis(1)).await,
        "nothing under way while an instance sleeps"
    );
    assert!(client.wait_idle(Duration::from_secs(3)).await);
    // (The sleeper's own reply may time out on its side; only the sleep matters.)
    let _ = sleeping.await;
    // Once idle, every instance has heard the release: no waiting for it.
    for s in &servers {
        assert!(!holds(s, "slow"));
    }
    // With one server nothing runs in the background.
    let single = common::client(&servers[1].url());
    let guard = single.lock("single").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
    assert!(single.wait_idle(Duration::ZERO).await);
}

#[tokio::test]
async fn one_or_two_stopped_instances_cost_at_most_the_instance_timeout() {
    let (servers, urls) = common::redlock_servers(5);
    let client = redlock(&urls);
    for stopped in [1, 2] {
        for s in &servers[..stopped] {
            s.pause().unwrap();
        }
        let mut worst = Duration::ZERO;
        let mut fences = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            let guard = client
                .lock("degraded")
                .ttl(Duration::from_secs(2))
                .no_wait()
                .acquire()
                .await
                .unwrap();
            fences.push(guard.fence());
            assert!(guard.release().await.unwrap());
            worst = worst.max(started.elapsed());
        }
        for s in &servers[..stopped] {
            s.resume().unwrap();
        }
        assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
        // Acquire and release each decide at a majority: a stopped instance is never waited for
        // longer than the per-instance timeout (generous margin for a loaded 2-core machine).
        assert!(
            worst < INSTANCE_TIMEOUT * 2 + Duration::from_millis(150),
            "{stopped} stopped: a cycle took {worst:?}"
        );
    }
}

/// Over Redlock an acquire and a release return at a majority: the slowest instance's share is
/// still on its way when the caller moves on. A client's calls must still reach each instance
/// in the order it made them, or a release that arrives after its own acquire leaves the
/// instance holding a lock nobody holds (and refusing its vote to everyone for a lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_instance_hears_each_clients_calls_in_the_order_they_were_made() {
    const TASKS: usize = 16;
    const CYCLES: usize = 8;
    let (servers, urls) = common::redlock_servers(3);
    // The order is the point here, not the timeout: the two live instances answer every call,
    // also on a loaded machine where 16 tasks on 2 threads take longer than 50 ms to be heard.
    let client = common::redlock_client(&urls, Duration::from_millis(500));
    // Scripts loaded everywhere first: a first call answered NOSCRIPT is sent again by source,
    // which is not what this test is about.
    common::warm_up(&client).await;
    assert!(client.wait_idle(Duration::from_secs(2)).await);
    let slow = &servers[0];
    let monitor = redis::Client::open(slow.url())
        .unwrap()
        .get_async_monitor()
        .await
        .unwrap();
    let mut heard = Box::pin(monitor.into_on_message::<String>());
    slow.pause().unwrap();
    // Several tasks of one client at once, each taking and releasing its own lock again and
    // again, while one instance hears nothing: its calls pile up on its connection.
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                for _ in 0..CYCLES {
                    let guard = client
                        .lock(format!("order-{t}"))
                        .ttl(Duration::from_secs(30))
                        .no_wait()
                        .acquire()
                        .await
                        .unwrap();
                    assert!(guard.release().await.unwrap());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    slow.resume().unwrap();
    assert!(client.wait_idle(Duration::from_secs(5)).await);
    // Every call the slow instance ran, in its order: a token's release must come after its
    // acquire.
    let mut seen: Vec<(String, bool)> = Vec::new();
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_millis(500), heard.next()).await
    {
        // An acquire sends the token and the 30 s lease; a release the token and its fence.
        for args in common::script_calls(&line) {
            if let [token, second, ..] = args.as_slice() {
                seen.push((token.clone(), second != "30000"));
            }
        }
    }
    let releases = seen.iter().filter(|(_, release)| *release).count();
    assert!(releases > 0, "the slow instance heard no release: {seen:?}");
    for (at, (token, release)) in seen.iter().enumerate() {
        if *release {
            continue;
        }
        let released_before = seen[..at].iter().any(|(t, r)| *r && t == token);
        assert!(
            !released_before,
            "the slow instance heard a release before its acquire ({token})"
        );
    }
    // And so it holds no lock: nobody does.
    let held: Vec<String> = common::keys(slow)
        .into_iter()
        .filter(|k| !k.ends_with(":fence"))
        .collect();
    assert!(held.is_empty(), "left held on the slow instance: {held:?}");
}

/// A stopped instance is asked for new holds by one acquisition at a time (a probe) until it
/// answers: the others count it as unanswered at once instead of each leaving a call on its
/// connection. Releases still reach it, after its acquires: it is left holding nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_instance_is_asked_for_new_holds_by_one_acquisition_at_a_time() {
    const CYCLES: usize = 1000;
    let (servers, urls) = common::redlock_servers(3);
    let client = redlock(&urls);
    common::warm_up(&client).await;
    assert!(client.wait_idle(Duration::from_secs(2)).await);
    let stopped = &servers[0];
    let monitor = redis::Client::open(stopped.url())
        .unwrap()
        .get_async_monitor()
        .await
        .unwrap();
    let mut heard = Box::pin(monitor.into_on_message::<String>());
    stopped.pause().unwrap();
    let started = Instant::now();
    for i in 0..CYCLES {
        let guard = client
            .lock(format!("probe-{i}"))
            .ttl(Duration::from_secs(30))
            .no_wait()
            .acquire()
            .await
            .unwrap();
        assert!(guard.release().await.unwrap());
    }
    let elapsed = started.elapsed();
    stopped.resume().unwrap();
    assert!(client.wait_idle(Duration::from_secs(5)).await);
    let mut acquires = 0u128;
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_millis(500), heard.next()).await
    {
        // An acquire sends the token and the 30 s lease.
        acquires += common::script_calls(&line)
            .iter()
            .filter(|args| args.get(1).is_some_and(|a| a == "30000"))
            .count() as u128;
    }
    // Every acquisition until its first call timed out (one instance timeout in), then one
    // probe at a time: far fewer than one per hold.
    assert!(
        acquires < CYCLES as u128 / 4,
        "the stopped instance was asked for {acquires} of {CYCLES} holds in {elapsed:?}"
    );
    let held: Vec<String> = common::keys(stopped)
        .into_iter()
        .filter(|k| !k.ends_with(":fence"))
        .collect();
    assert!(
        held.is_empty(),
        "left held on the stopped instance: {held:?}"
    );
}

#[tokio::test]
async fn three_stopped_instances_give_a_clean_no_quorum_error() {
    let (servers, urls) = common::redlock_servers(5);
    let client = redlock(&urls);
    for s in &servers[..3] {
        s.pause().unwrap();
    }
    let started = Instant::now();
    let err = client
        .lock("minority")
        .wait_up_to(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap_err();
    let took = started.elapsed();
    let text = err.to_string();
    match &err {
        Error::NoQuorum {
            agreed,
            needed,
            total,
            ..
        } => {
            assert_eq!((*agreed, *needed, *total), (2, 3, 5), "{text}");
        }
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    for s in &servers[..3] {
        assert!(
            text.contains(&format!("127.0.0.1:{} did not answer in time", s.port()))
                || text.contains(&format!("127.0.0.1:{} timed out", s.port())),
            "{text}"
        );
    }
    assert!(took < Duration::from_secs(2), "{took:?}");
    // Nothing of ours is left on the live instances.
    for s in &servers[3..] {
        assert!(!holds(s, "minority"), "a partial grant was left behind");
    }
    for s in &servers[..3] {
        s.resume().unwrap();
    }
}

#[tokio::test]
async fn an_instance_restarted_empty_during_a_hold_is_survived_and_repaired() {
    let (mut servers, urls) = common::redlock_servers(5);
    let client = redlock(&urls);
    let ttl = Duration::from_millis(1500);
    let guard = client
        .lock("restart")
        .ttl(ttl)
        .label("the restart test")
        .acquire()
        .await
        .unwrap();
    servers[0].cmd(&["SET", "marker", "1"]).unwrap();
    // The restart waits for the new process: off the test's runtime, whose one thread also
    // renews the hold (a loaded machine took longer than a 600 ms lease to restart it).
    let servers = tokio::task::spawn_blocking(move || {
        servers[0].restart().unwrap();
        servers
    })
    .await
    .unwrap();
    // It came back empty (renewals may have put the hold back already, not the marker).
    assert!(!common::keys(&servers[0]).contains(&"marker".to_owned()));
    // Renewals go on with four instances, and put the hold back on the restarted one.
    tokio::time::sleep(ttl * 2).await;
    assert!(guard.is_held());
    assert!(
        holds(&servers[0], "restart"),
        "the hold was not re-asserted on the restarted instance"
    );
    // With its label.
    let labels: Vec<redis::Value> = common::keys(&servers[0])
        .iter()
        .filter(|k| k.starts_with("fencelock:{restart}:label:"))
        .map(|k| servers[0].cmd(&["GET", k]).unwrap())
        .collect();
    assert_eq!(
        labels,
        [redis::Value::BulkString(b"the restart test".to_vec())],
        "the label was not put back with the hold"
    );
    let fence = guard.fence();
    assert!(guard.release().await.unwrap());
    let next = client.lock("restart").acquire().await.unwrap();
    assert!(next.fence() > fence);
    next.release().await.unwrap();
}

#[tokio::test]
async fn the_fence_grows_even_when_the_largest_came_from_an_instance_not_in_the_next_majority() {
    let (servers, urls) = common::redlock_servers(3);
    let client = redlock(&urls);
    // Instance 0 hands out much larger fences than the others (a clock far ahead, say), and the
    // first majority is {0, 2}.
    servers[0]
        .cmd(&["SET", "fencelock:{far}:fence", "8000000000000000"])
        .unwrap();
    servers[1].pause().unwrap();
    let first = client.lock("far").acquire().await.unwrap();
    let first_fence = first.fence();
    assert!(
        first_fence > 8_000_000_000_000_000,
        "first fence {first_fence}"
    );
    assert!(first.release().await.unwrap());
    servers[1].resume().unwrap();
    // The next majority, {1, 2}, leaves instance 0 out; the release wrote the fence back on 2.
    servers[0].pause().unwrap();
    let second = client.lock("far").acquire().await.unwrap();
    servers[0].resume().unwrap();
    assert!(
        second.fence() > first_fence,
        "{first_fence} then {}",
        second.fence()
    );
    second.release().await.unwrap();
}

#[tokio::test]
async fn a_partial_extension_does_not_delete_the_lock() {
    let (servers, urls) = common::redlock_servers(5);
    // Every instance must take the lock: a loaded machine's first call to an instance (its
    // connection, the script's load) took longer than the suite's 50 ms per instance, and that
    // instance never held it.
    let client = common::redlock_client(&urls, Duration::from_secs(1));
    let guard = client
        .lock("partial")
        .ttl(Duration::from_secs(5))
        .auto_renew(false)
        .acquire()
        .await
        .unwrap();
    // With early decision the slowest instances take the lock after the caller has it: every
    // instance holds it before the extension is tried.
    assert!(
        eventually_all(&servers, |s| holds(s, "partial")).await,
        "the lock never reached every instance"
    );
    for s in &servers[..3] {
        s.pause().unwrap();
    }
    let err = guard.extend(Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(err, Error::NoQuorum { .. }), "{err:?}");
    for s in &servers[..3] {
        s.resume().unwrap();
    }
    // A deleted key stays deleted; one still being written (an extension that reached a
    // resumed instance late) shows within the wait.
    assert!(
        eventually_all(&servers, |s| holds(s, "partial")).await,
        "a failed extension deleted keys"
    );
    assert!(guard.is_held());
    guard.extend(Duration::from_secs(5)).await.unwrap();
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn a_thousand_acquisitions_across_three_clients_with_random_stalls() {
    let (servers, all) = common::redlock_servers(5);
    let servers = Arc::new(servers);
    let clients: Vec<Client> = (0..3).map(|_| redlock(&all)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    // Stall up to two random instances at a time, for a few milliseconds each.
    let staller = {
        let servers = servers.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut seed = 0x9e3779b97f4a7c15u64;
            let mut next = || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            // A stall that fails to happen fails the test (unnoticed, the run would go on
            // without any stall and pass).
            let mut stalls = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let a = (next() % 5) as usize;
                let b = (next() % 5) as usize;
                servers[a].pause().unwrap();
                servers[b].pause().unwrap();
                std::thread::sleep(Duration::from_millis(next() % 30));
                servers[a].resume().unwrap();
                servers[b].resume().unwrap();
                stalls += 1;
                std::thread::sleep(Duration::from_millis(next() % 20));
            }
            stalls
        })
    };
    let inside = Arc::new(AtomicBool::new(false));
    let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for client in clients {
        let inside = inside.clone();
        let fences = fences.clone();
        tasks.push(tokio::spawn(async move {
            let mut granted = 0;
            while granted < 334 {
                let guard = match client
                    .lock("stalls")
                    .ttl(Duration::from_secs(2))
                    .wait_up_to(Duration::from_secs(10))
                    .acquire()
                    .await
                {
                    Ok(guard) => guard,
                    Err(Error::NoQuorum { .. }) => continue,
                    Err(e) => panic!("{e}"),
                };
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                fences.lock().unwrap().push(guard.fence());
                tokio::task::yield_now().await;
                inside.store(false, Ordering::SeqCst);
                let _ = guard.release().await;
                granted += 1;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let stalls = staller.join().unwrap();
    assert!(stalls > 0, "no instance was ever stalled");
    for s in servers.iter() {
        let _ = s.resume();
    }
    let fences = fences.lock().unwrap().clone();
    assert!(fences.len() >= 1000);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences went backwards under stalls"
    );
}

// A client process that holds a Redlock lock and reports what happens to it.

#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_redlock_holder() {
    require_test_child();
    let urls: Vec<String> = common::child_var(common::URL_ENV)
        .split(',')
        .map(str::to_owned)
        .collect();
    common::hold_and_report(
        || redlock(&urls),
        "paused-client",
        Duration::from_millis(600),
    );
}

#[tokio::test]
async fn a_paused_client_loses_its_lock_to_a_larger_fence() {
    let (_servers, all) = common::redlock_servers(5);
    let mut child = spawn_test_child(
        "redlock::child_redlock_holder",
        &[(common::URL_ENV, &all.join(","))],
    )
    .unwrap();
    let line = child
        .wait_for_line("ACQUIRED", Duration::from_secs(20))
        .unwrap();
    let paused_fence = common::fence_of(&line);
    child.pause().unwrap();
    let client = redlock(&all);
    let guard = client
        .lock("paused-client")
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    assert!(guard.fence() > paused_fence);
    child.resume().unwrap();
    let lost = child.wait_for_line("LOST", Duration::from_secs(5)).unwrap();
    assert!(
        lost.contains("lease ran out") || lost.contains("another owner"),
        "{lost}"
    );
    assert_eq!(
        child
            .wait_for_line("RELEASED", Duration::from_secs(5))
            .unwrap(),
        "RELEASED false"
    );
    assert!(guard.is_held());
    assert!(guard.release().await.unwrap());
}

/// Over Redlock no server keeps a line of waiters: two requests of one client wait for a lock
/// held for a minute. The grant of the first is marked as waited for while the second waits
/// (the grant marks itself, and the second's tries mark it), so that its release wakes the
/// second rather than leaving it to sleep out the lease it was told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_waiters_of_one_client_are_each_woken_by_the_release_before_them() {
    let (servers, urls) = common::redlock_servers(3);
    let holder = common::redlock_client(&urls, Duration::from_secs(1));
    let waiters = common::redlock_client(&urls, Duration::from_secs(1));
    let name = "marked";
    let key = common::lock_key(name);
    let lease = Duration::from_secs(60);
    let marked = |value: &Option<String>| value.as_deref().is_some_and(|v| v.ends_with('+'));
    let held = holder.lock(name).ttl(lease).acquire().await;
    let held = held.unwrap_or_else(|e| panic!("the holder: {e}"));
    let (granted, mut grants) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..2 {
        let request = waiters.lock(name).ttl(lease).wait_up_to(lease);
        let granted = granted.clone();
        tokio::spawn(async move {
            let _ = granted.send(request.acquire().await);
        });
    }
    // Both wait: their tries marked the holder's value.
    assert!(
        eventually_all(&servers, |s| marked(&common::string_at(s, &key))).await,
        "the waiters' tries did not mark the holder's value"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        held.release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"))
    );

    let first = next_grant(&mut grants, "first").await;
    // The grant of the first, while the second waits, is marked on every instance it holds.
    let values: Vec<Option<String>> = servers.iter().map(|s| common::string_at(s, &key)).collect();
    assert!(
        values.iter().filter(|v| marked(v)).count() >= 2,
        "the grant of a request whose client has another waiting is not marked as waited for \
         on a majority: {values:?}"
    );
    assert!(
        first
            .release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"))
    );
    let second = next_grant(&mut grants, "second").await;
    assert!(
        second
            .release()
            .await
            .unwrap_or_else(|e| panic!("release: {e}"))
    );
}

/// A release over Redlock of a hold nobody waited for publishes nothing: an uncontended cycle
/// costs no message on any instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_nobody_waited_for_publishes_nothing() {
    let (servers, urls) = common::redlock_servers(3);
    let client = common::redlock_client(&urls, Duration::from_secs(1));
    let name = "quiet";
    let mut heard = common::release_messages(&servers[0], name).await;
    let guard = client.lock(name).acquire().await;
    let guard = guard.unwrap_or_else(|e| panic!("{e}"));
    assert!(eventually_all(&servers, |s| holds(s, name)).await);
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert!(eventually_all(&servers, |s| !holds(s, name)).await);
    // A message of the test's own after the release: the first one heard, unless the release
    // published before it.
    let channel = format!("{}:released", common::lock_key(name));
    servers[0]
        .cmd(&["PUBLISH", &channel, "marker"])
        .unwrap_or_else(|e| panic!("PUBLISH: {e}"));
    let (_, payload) = common::next_message(&mut heard, "the test's marker").await;
    assert_eq!(
        payload, "marker",
        "a release nobody waited for published a message"
    );
}

/// The next waiter's guard, at most 10 s after the release before it (a waiter that no release
/// wakes sleeps out the 60 s lease it was told).
async fn next_grant(
    grants: &mut tokio::sync::mpsc::UnboundedReceiver<fencelock::Result<fencelock::LockGuard>>,
    which: &str,
) -> fencelock::LockGuard {
    match tokio::time::timeout(Duration::from_secs(10), grants.recv()).await {
        Ok(Some(Ok(guard))) => guard,
        Ok(Some(Err(e))) => panic!("the {which} waiter: {e}"),
        Ok(None) => panic!("the {which} waiter's task ended"),
        Err(_) => panic!(
            "the {which} waiter was not granted within 10 s of the release before it (it sleeps \
             out the 60 s lease it was told unless a release wakes it)"
        ),
    }
}
