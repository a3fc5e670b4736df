//! The fenced lock against real redis-server processes.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use fencelock::{Client, Error, LostReason, WaitPolicy};
use fencelock_testkit::{require_test_child, spawn_test_child};
use tokio::time::Instant;

use common::{TTL_ENV, URL_ENV, calls, client, fence_of, keys, server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_tasks_are_mutually_exclusive_and_fences_grow_in_grant_order() {
    let redis = server();
    let clients: Vec<_> = (0..4).map(|_| client(&redis.url())).collect();
    let counter_client = redis::Client::open(redis.url()).unwrap();
    let counter = counter_client
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let fences = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for task in 0..16 {
        let client = clients[task % 4].clone();
        let mut counter = counter.clone();
        let fences = fences.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..8 {
                let guard = client
                    .lock("exclusive")
                    .ttl(Duration::from_secs(5))
                    .acquire()
                    .await
                    .unwrap();
                fences.lock().unwrap().push(guard.fence());
                // Read, yield, write: two holders at once would lose an increment.
                let n: i64 = redis::cmd("GET")
                    .arg("counter")
                    .query_async::<Option<i64>>(&mut counter)
                    .await
                    .unwrap()
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _: () = redis::cmd("SET")
                    .arg("counter")
                    .arg(n + 1)
                    .query_async(&mut counter)
                    .await
                    .unwrap();
                assert!(guard.release().await.unwrap(), "the lock was lost mid-way");
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
    let fences = fences.lock().unwrap().clone();
    assert_eq!(count, 16 * 8, "lost updates: mutual exclusion broken");
    assert_eq!(fences.len(), 16 * 8);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences not strictly increasing in grant order: {fences:?}"
    );
}

#[tokio::test]
async fn fences_grow_across_flushall_restart_and_a_lost_counter() {
    let mut redis = server();
    let client = client(&redis.url());
    let mut fences = Vec::new();
    let take = async |client: &fencelock::Client| {
        let guard = client.lock("fenced").acquire().await.unwrap();
        let fence = guard.fence();
        assert!(guard.release().await.unwrap());
        fence
    };
    fences.push(take(&client).await);
    fences.push(take(&client).await);
    redis.flushall().unwrap();
    fences.push(take(&client).await);
    // Only the counter is lost (an eviction, say).
    redis.cmd(&["DEL", "fencelock:{fenced}:fence"]).unwrap();
    fences.push(take(&client).await);
    redis.restart().unwrap();
    // The client reconnects by itself; a fresh client sees the same.
    fences.push(take(&client).await);
    fences.push(take(&common::client(&redis.url())).await);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences went backwards: {fences:?}"
    );
}

/// The fence is max(last + 1, the server's clock in µs): a counter ahead of the clock (a burst
/// of grants, a clock stepped back) is followed, and a stale one (a replica promoted before it
/// caught up) is skipped. The lock's value carries the same fence as the reply.
#[tokio::test]
async fn fences_follow_a_counter_ahead_of_the_clock_and_skip_a_stale_one() {
    let redis = server();
    let client = client(&redis.url());
    let fence_key = "fencelock:{ahead}:fence";
    let first = client.lock("ahead").acquire().await.unwrap();
    let clock_fence = first.fence();
    assert!(first.release().await.unwrap());

    // Ahead of the clock by about a day.
    let ahead = clock_fence + 86_400_000_000;
    redis.cmd(&["SET", fence_key, &ahead.to_string()]).unwrap();
    let guard = client.lock("ahead").acquire().await.unwrap();
    assert_eq!(guard.fence(), ahead + 1);
    let info = client.inspect("ahead").await.unwrap();
    assert_eq!(info.holder.and_then(|h| h.fence), Some(ahead + 1));
    assert_eq!(info.last_fence, Some(ahead + 1));
    assert!(guard.release().await.unwrap());

    // A stale counter: below fences already handed out.
    redis
        .cmd(&["SET", fence_key, &(clock_fence - 1000).to_string()])
        .unwrap();
    let guard = client.lock("ahead").acquire().await.unwrap();
    assert!(
        guard.fence() > clock_fence,
        "fence {} reused (an earlier grant had {clock_fence})",
        guard.fence()
    );
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn only_the_owner_can_release_or_extend() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let first = a
        .lock("owned")
        .ttl(Duration::from_millis(200))
        .auto_renew(false)
        .acquire()
        .await
        .unwrap();
    assert!(b.try_lock("owned").await.unwrap().is_none());
    // The lease runs out; another owner takes the lock.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!first.is_held());
    let second = b.lock("owned").no_wait().acquire().await.unwrap();
    assert!(second.fence() > first.fence());
    // The first owner can neither extend nor release the second owner's lock.
    match first.extend(Duration::from_secs(5)).await {
        Err(Error::NotHeld { lock, .. }) => assert_eq!(lock, "owned"),
        other => panic!("expected NotHeld, got {other:?}"),
    }
    assert!(!first.release().await.unwrap());
    let info = b.inspect("owned").await.unwrap();
    let holder = info.holder.expect("still held by the second owner");
    assert_eq!(holder.fence, Some(second.fence()));
    assert!(second.is_held());
    second.extend(Duration::from_secs(2)).await.unwrap();
    assert!(second.release().await.unwrap());
    assert!(b.inspect("owned").await.unwrap().holder.is_none());
}

#[tokio::test]
async fn the_watchdog_keeps_a_lock_for_three_times_its_lease() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let ttl = Duration::from_millis(300);
    let guard = a.lock("kept").ttl(ttl).acquire().await.unwrap();
    let until = Instant::now() + ttl * 4;
    while Instant::now() < until {
        assert!(guard.is_held());
        assert!(
            b.try_lock("kept").await.unwrap().is_none(),
            "someone else got a renewed lock"
        );
        tokio::time::sleep(ttl / 4).await;
    }
    assert!(guard.release().await.unwrap());
}

/// An idle watchdog sleeps for its tick (a quarter of the command timeout, at most a second):
/// with a command timeout of 8 s, longer than these leases. A new hold due sooner must wake it,
/// or its lease runs out before the task looks again.
#[tokio::test]
async fn a_new_hold_wakes_the_idle_watchdog_in_time_for_its_first_renewal() {
    let redis = server();
    let a = Client::builder(&redis.url())
        .command_timeout(Duration::from_secs(8))
        .build()
        .unwrap();
    let ttl = Duration::from_millis(400);
    for i in 0..3 {
        let guard = a
            .lock(format!("woken-{i}"))
            .ttl(ttl)
            .acquire()
            .await
            .unwrap();
        tokio::time::sleep(ttl * 2).await;
        assert!(guard.is_held(), "hold {i}: not renewed within its lease");
        assert!(guard.release().await.unwrap());
        // The next hold starts at another point of the task's tick.
        tokio::time::sleep(Duration::from_millis(170)).await;
    }
}

/// Between renewals the watchdog sleeps: with a hold kept alive for a second, the thread that
/// runs the client's tasks (the test's own: a current-thread runtime) uses a small part of it.
/// A task that woke in a loop would use all of it; a hold renewed again at once after each
/// renewal would be renewed hundreds of times.
#[tokio::test]
async fn the_watchdog_sleeps_between_renewals() {
    /// This thread's CPU time so far (user and system, `/proc/thread-self/stat`, in clock
    /// ticks of 10 ms).
    fn thread_cpu() -> Duration {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // After the command name (in parentheses): state is the first field, utime the 12th.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }
    let redis = server();
    let a = client(&redis.url());
    let guard = a
        .lock("idle")
        .ttl(Duration::from_millis(600))
        .acquire()
        .await
        .unwrap();
    common::log_every_command(&redis);
    let sent = || lock_commands(&redis);
    let (before, sent_before) = (thread_cpu(), sent());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = thread_cpu() - before;
    let renewals = sent() - sent_before;
    assert!(guard.is_held());
    // One renewal a third of a lease (200 ms) after the last: five in the second (a loaded
    // machine's late ones, fewer), not one after the other.
    assert!(
        (1..=8).contains(&renewals),
        "{renewals} renewals of one hold in one second"
    );
    assert!(
        used < Duration::from_millis(100),
        "the client's tasks used {used:?} of CPU in one idle second"
    );
    assert!(guard.release().await.unwrap());
}

/// How many of the commands since `log_every_command` were a hold's acquire, renewals and
/// release: scripts, and a lone renewal's `SET IFEQ` where the server has it.
fn lock_commands(redis: &fencelock_testkit::RedisServer) -> u64 {
    let Ok(redis::Value::Array(entries)) = redis.cmd(&["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET: not a list");
    };
    let text = |value: &redis::Value| match value {
        redis::Value::BulkString(text) => String::from_utf8_lossy(text).to_lowercase(),
        other => panic!("a slow log entry's argument: {other:?}"),
    };
    // An entry: id, time, duration, the command's arguments, ... A script's own calls are in
    // the log too (no script of the plain lock sends `SET IFEQ`).
    let sent = |entry: &redis::Value| match entry {
        redis::Value::Array(fields) => match fields.get(3) {
            Some(redis::Value::Array(args)) => {
                let args: Vec<String> = args.iter().map(text).collect();
                match args.first().map(String::as_str) {
                    Some("evalsha" | "eval") => true,
                    Some("set") => args.iter().any(|a| a == "ifeq"),
                    _ => false,
                }
            }
            other => panic!("a slow log entry's arguments: {other:?}"),
        },
        other => panic!("a slow log entry: {other:?}"),
    };
    entries.iter().filter(|entry| sent(entry)).count() as u64
}

/// A hold extended by hand is renewed a third of a lease after that extension, not when its
/// grant would have had it renewed.
#[tokio::test]
async fn a_hold_extended_by_hand_is_renewed_on_its_new_schedule() {
    let redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_secs(3);
    common::log_every_command(&redis);
    let guard = a.lock("by-hand").ttl(ttl).acquire().await.unwrap();
    // The grant's schedule: a renewal a second in. Extended by hand half a second in.
    tokio::time::sleep(Duration::from_millis(500)).await;
    guard.extend(ttl).await.unwrap();
    let (extended_at, sent_then) = (Instant::now(), lock_commands(&redis));
    tokio::time::sleep_until(extended_at + Duration::from_millis(700)).await;
    assert_eq!(
        lock_commands(&redis) - sent_then,
        0,
        "renewed on the grant's schedule, though extended by hand since"
    );
    tokio::time::sleep_until(extended_at + Duration::from_secs(2)).await;
    assert!(
        lock_commands(&redis) > sent_then,
        "not renewed a third of a lease after the extension"
    );
    assert!(guard.release().await.unwrap());
}

/// A released hold leaves the watchdog's schedule: nothing is sent for it afterwards (a renewal
/// would find the key gone, and report a loss to a guard that gave the lock back).
#[tokio::test]
async fn a_released_hold_is_never_renewed() {
    let redis = server();
    let a = client(&redis.url());
    common::warm_up(&a).await;
    let ttl = Duration::from_millis(300);
    common::log_every_command(&redis);
    let sent = || lock_commands(&redis);
    let before = sent();
    let guard = a.lock("released").ttl(ttl).acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
    // Two leases: a hold still scheduled would have come up for renewal at least once.
    tokio::time::sleep(ttl * 2).await;
    assert_eq!(
        sent() - before,
        2,
        "the acquire and the release, and nothing after"
    );
}

/// A renewal that fails (Redis stopped past the command timeout) is tried again: a hold whose
/// server comes back before the deadline is kept, though a renewal failed on the way.
#[tokio::test]
async fn a_hold_survives_an_outage_shorter_than_its_lease() {
    let redis = server();
    // A command timeout of 500 ms.
    let a = client(&redis.url());
    let ttl = Duration::from_secs(3);
    let guard = a.lock("outage").ttl(ttl).acquire().await.unwrap();
    // Stopped from before the first renewal (a second in) until after that renewal's time
    // limit ran out (half a second later).
    tokio::time::sleep(Duration::from_millis(700)).await;
    redis.pause().unwrap();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    redis.resume().unwrap();
    // Past the deadline the first grant set.
    tokio::time::sleep(ttl).await;
    assert!(
        guard.is_held(),
        "lost after an outage shorter than its lease"
    );
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn the_lost_signal_fires_when_the_key_is_deleted_behind_the_holders_back() {
    let redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_millis(600);
    let guard = a.lock("deleted").ttl(ttl).acquire().await.unwrap();
    let lost = guard.lost();
    assert!(!lost.is_lost());
    redis.cmd(&["DEL", "fencelock:{deleted}"]).unwrap();
    // The next renewal (a third of the lease after the last) finds the key gone.
    let reason = tokio::time::timeout(ttl, lost.wait())
        .await
        .expect("lost signal did not fire");
    assert_eq!(reason, LostReason::NotOwner);
    assert!(!guard.is_held());
    assert!(!guard.release().await.unwrap());
}

#[tokio::test]
async fn the_lost_signal_fires_when_redis_stays_unreachable_past_the_deadline() {
    let redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_millis(800);
    let guard = a.lock("stalled").ttl(ttl).acquire().await.unwrap();
    redis.pause().unwrap();
    let started = Instant::now();
    let reason = tokio::time::timeout(ttl * 2, guard.lost()).await;
    let waited = started.elapsed();
    redis.resume().unwrap();
    let reason = reason.expect("lost signal did not fire while Redis was stopped");
    // The reason names the last renewal's failure, with the server it failed on.
    let addr = format!("127.0.0.1:{}: ", redis.port());
    assert!(
        matches!(&reason, LostReason::Expired { last_error: Some(e) } if e.contains(&addr)),
        "{reason:?}"
    );
    // The last confirmed renewal happened at most a third of a lease before the pause, and the
    // deadline is a lease (less the drift margin) after it.
    assert!(
        waited <= ttl + ttl / 3,
        "the lost signal fired late: {waited:?}"
    );
    assert!(!guard.is_held());
}

#[tokio::test]
async fn the_max_hold_cap_stops_renewal() {
    let redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_millis(200);
    let guard = a
        .lock("capped")
        .ttl(ttl)
        .max_hold(Duration::from_millis(400))
        .acquire()
        .await
        .unwrap();
    let reason = tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("a capped lock must be lost");
    assert_eq!(reason, LostReason::MaxHoldReached);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(a.try_lock("capped").await.unwrap().is_some());
}

#[tokio::test]
async fn script_flush_and_a_restart_are_survived() {
    let mut redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_millis(300);
    let guard = a.lock("flushed").ttl(ttl).acquire().await.unwrap();
    redis.script_flush().unwrap();
    // Renewals (pipelined EVALSHA) must reload the script and keep the lock.
    tokio::time::sleep(ttl * 3).await;
    assert!(guard.is_held(), "renewal did not survive SCRIPT FLUSH");
    redis.script_flush().unwrap();
    assert!(guard.release().await.unwrap());
    redis.script_flush().unwrap();
    let guard = a.lock("flushed").acquire().await.unwrap();
    guard.release().await.unwrap();

    redis.restart().unwrap();
    let guard = a.lock("restarted").ttl(ttl).acquire().await.unwrap();
    assert!(guard.is_held());
    tokio::time::sleep(ttl * 2).await;
    assert!(guard.is_held());
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn a_restart_during_a_hold_is_reported_as_lost() {
    let mut redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_millis(600);
    let guard = a.lock("forgotten").ttl(ttl).acquire().await.unwrap();
    redis.restart().unwrap();
    let reason = tokio::time::timeout(ttl * 2, guard.lost())
        .await
        .expect("the holder must learn that the restarted server forgot its lock");
    assert!(
        matches!(reason, LostReason::NotOwner | LostReason::Expired { .. }),
        "{reason:?}"
    );
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    let redis = server();
    let a = client(&redis.url());
    let cases = [
        (a.lock(""), "empty"),
        (a.lock("x").ttl(Duration::ZERO), "shorter than the minimum"),
        (
            a.lock("x").ttl(Duration::from_secs(u64::MAX / 4)),
            "longer than the maximum",
        ),
        (a.lock("x{y}"), "braces"),
        (
            a.lock("x").queue_timeout(Duration::from_millis(1)),
            "queue timeout 1ms is shorter",
        ),
        (a.lock("x").queue_timeout(Duration::MAX), "queue timeout"),
        (
            a.lock("x")
                .ttl(Duration::from_secs(10))
                .max_hold(Duration::from_secs(1)),
            "max_hold",
        ),
    ];
    for (request, expected) in cases {
        let err = request.acquire().await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(
            err.to_string().contains(expected),
            "{err} lacks {expected:?}"
        );
    }
    let err = fencelock::Client::builder(&redis.url())
        .key_prefix("")
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err:?}");
    assert!(keys(&redis).is_empty(), "something was written");
}

#[tokio::test]
async fn an_unreachable_server_is_a_prompt_error_naming_lock_and_server() {
    let port = fencelock_testkit::free_port().unwrap();
    let a = client(&format!("redis://127.0.0.1:{port}"));
    let started = Instant::now();
    let err = a.lock("nowhere").acquire().await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("nowhere") && text.contains(&format!("127.0.0.1:{port}")),
        "{text}"
    );
}

#[tokio::test]
async fn a_waiter_is_woken_promptly_by_a_release() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    for _ in 0..5 {
        let held = a
            .lock("handoff")
            .ttl(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move {
                // A place in line that lasts 30 s is refreshed every 10 s: no timer of the
                // waiter's comes back before the holder's 10 s lease would run out.
                let guard = b
                    .lock("handoff")
                    .queue_timeout(Duration::from_secs(30))
                    .acquire()
                    .await
                    .unwrap();
                let at = Instant::now();
                guard.release().await.unwrap();
                at
            })
        };
        // The waiter was refused and has put itself in line: from here on it waits (on the
        // release message or the holder's lease), it does not get the lock by its first try.
        common::wait_for_count("waiters in line", 1, Duration::from_secs(5), || {
            common::integer_reply(&redis, &["ZCARD", "fencelock:{handoff}:waiters"])
        })
        .await;
        assert!(
            !waiter.is_finished(),
            "the waiter got in while the lock was held"
        );
        let released_at = Instant::now();
        assert!(held.release().await.unwrap());
        let granted_at = waiter.await.unwrap();
        let delay = granted_at - released_at;
        // A behaviour check, not a benchmark: the waiter was woken by the release message, not
        // by a timer (the holder's 10 s lease running out, or its place's refresh after 10 s).
        // Woken by the message it takes milliseconds; a loaded machine gets all of the 2 s.
        assert!(
            delay < Duration::from_secs(2),
            "waiter woke after {delay:?}"
        );
    }
}

/// A release wakes one waiter of each client (the value says someone waited); the one woken
/// takes the lock marked as waited for while others of its client still wait, so that its own
/// release wakes the next, and none of them sleeps until the first holder's lease would have
/// run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiters_of_one_client_are_woken_one_after_another() {
    const WAITERS: usize = 3;
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let held = a
        .lock("queue-of-three")
        .ttl(Duration::from_secs(20))
        .acquire()
        .await
        .unwrap();
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move {
                let guard = b
                    .lock("queue-of-three")
                    .ttl(Duration::from_secs(20))
                    .wait_up_to(Duration::from_secs(8))
                    .acquire()
                    .await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.release().await
            })
        })
        .collect();
    // Let the waiters subscribe and settle into their wait.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    assert!(held.release().await.unwrap());
    for waiter in waiters {
        let released = waiter
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("a waiter of the same client was not woken: {e}"));
        assert!(released);
    }
    // A behaviour check, not a benchmark: each was woken by a release message, not by a 20 s
    // lease running out.
    let took = released_at.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // The first holder's release and each waiter's but the last's (the last one's value was
    // not marked, nobody waited for it), each on the channel of the waiter passed to and of
    // the one behind it.
    let published = calls(&redis, "publish");
    assert!(published < 2 * WAITERS as u64, "{published} wake-ups");
}

#[tokio::test]
async fn waiting_is_bounded_by_the_callers_limit() {
    let redis = server();
    let a = client(&redis.url());
    let held = a.lock("busy").acquire().await.unwrap();
    let err = a.lock("busy").no_wait().acquire().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Busy {
                remaining: Some(_),
                ..
            }
        ),
        "{err:?}"
    );
    let started = Instant::now();
    let err = a
        .lock("busy")
        .wait(WaitPolicy::UpTo(Duration::from_millis(300)))
        .acquire()
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, Error::TimedOut { .. }), "{err:?}");
    assert!(err.to_string().contains("\"busy\""), "{err}");
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    held.release().await.unwrap();
}

#[tokio::test]
async fn a_waiter_gets_an_abandoned_lock_when_its_lease_runs_out() {
    let redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_millis(400);
    let held = a
        .lock("abandoned")
        .ttl(ttl)
        .auto_renew(false)
        .acquire()
        .await
        .unwrap();
    let started = Instant::now();
    let next = a.lock("abandoned").acquire().await.unwrap();
    let waited = started.elapsed();
    assert!(next.fence() > held.fence());
    // It did wait for the lease (the lock was held), and not much longer.
    assert!(
        waited >= ttl / 2 && waited < ttl + Duration::from_millis(200),
        "{waited:?}"
    );
    std::mem::forget(held); // as if the holder had vanished
    next.release().await.unwrap();
}

#[tokio::test]
async fn dropping_a_guard_releases_the_lock_in_the_background() {
    let redis = server();
    let a = client(&redis.url());
    let guard = a.lock("dropped").acquire().await.unwrap();
    drop(guard);
    let started = Instant::now();
    let again = a
        .lock("dropped")
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the 30 s lease was waited out"
    );
    again.release().await.unwrap();
    assert_eq!(keys(&redis), vec!["fencelock:{dropped}:fence"]);
}

#[tokio::test]
async fn a_custom_prefix_keeps_locks_apart() {
    let redis = server();
    let a = fencelock::Client::builder(&redis.url())
        .key_prefix("app1")
        .build()
        .unwrap();
    let b = fencelock::Client::builder(&redis.url())
        .key_prefix("app2")
        .build()
        .unwrap();
    let one = a.lock("shared-name").acquire().await.unwrap();
    let two = b.lock("shared-name").no_wait().acquire().await.unwrap();
    assert!(keys(&redis).contains(&"app1:{shared-name}".to_string()));
    assert!(keys(&redis).contains(&"app2:{shared-name}".to_string()));
    one.release().await.unwrap();
    two.release().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Holder processes: the test binary re-runs itself as a child that holds a lock.

/// Child role: acquire, report the fence, report when the lock is lost, then try to release.
#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_holder() {
    require_test_child();
    let url = common::child_var(URL_ENV);
    let ttl = common::child_millis(TTL_ENV);
    common::hold_and_report(|| client(&url), "process-held", ttl);
}

#[tokio::test]
async fn a_paused_holder_loses_to_a_larger_fence_and_learns_it_on_waking() {
    let redis = server();
    let ttl = Duration::from_millis(600);
    let ttl_ms = common::millis_var(ttl);
    let mut child = spawn_test_child(
        "lock::child_holder",
        &[(URL_ENV, &redis.url()), (TTL_ENV, &ttl_ms)],
    )
    .unwrap();
    let paused_fence = fence_of(
        &child
            .wait_for_line("ACQUIRED", Duration::from_secs(20))
            .unwrap(),
    );
    child.pause().unwrap();
    let a = client(&redis.url());
    let guard = a
        .lock("process-held")
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    assert!(
        guard.fence() > paused_fence,
        "the new holder must carry a larger fence"
    );
    child.resume().unwrap();
    let lost = child.wait_for_line("LOST", Duration::from_secs(5)).unwrap();
    // Whichever it noticed first: its deadline had passed, or Redis said the key is not its own.
    assert!(
        lost.contains("lease ran out") || lost.contains("another owner"),
        "{lost}"
    );
    let released = child
        .wait_for_line("RELEASED", Duration::from_secs(5))
        .unwrap();
    assert_eq!(
        released, "RELEASED false",
        "the stale holder must not release the new holder's lock"
    );
    assert!(guard.is_held());
    let info = a.inspect("process-held").await.unwrap();
    assert_eq!(info.holder.and_then(|h| h.fence), Some(guard.fence()));
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn fences_grow_across_processes() {
    let redis = server();
    let a = client(&redis.url());
    let mut fences = Vec::new();
    for _ in 0..3 {
        let guard = a.lock("process-held").acquire().await.unwrap();
        fences.push(guard.fence());
        guard.release().await.unwrap();
        let mut child = spawn_test_child(
            "lock::child_holder",
            &[(URL_ENV, &redis.url()), (TTL_ENV, "5000")],
        )
        .unwrap();
        fences.push(fence_of(
            &child
                .wait_for_line("ACQUIRED", Duration::from_secs(20))
                .unwrap(),
        ));
        assert!(a.force_release("process-held").await.unwrap());
        child.wait_for_line("LOST", Duration::from_secs(5)).unwrap();
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[tokio::test]
async fn an_uncontended_cycle_costs_two_commands_and_no_subscription() {
    let redis = server();
    let a = client(&redis.url());
    // Warm up: the first call loads the scripts (NOSCRIPT, SCRIPT LOAD) and connects.
    common::warm_up(&a).await;
    redis.cmd(&["CONFIG", "RESETSTAT"]).unwrap();
    for i in 0..100 {
        let guard = a.lock(format!("cycle-{i}")).acquire().await.unwrap();
        assert!(guard.release().await.unwrap());
    }
    assert_eq!(
        calls(&redis, "evalsha"),
        200,
        "one script call to acquire, one to release"
    );
    assert_eq!(
        calls(&redis, "subscribe"),
        0,
        "nobody waited, so nobody subscribed"
    );
    assert_eq!(
        calls(&redis, "publish"),
        0,
        "nobody waited, so no release published"
    );
    assert_eq!(calls(&redis, "script|load") + calls(&redis, "eval"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_thousands_of_locks_alive_on_one_client() {
    let redis = server();
    let a = client(&redis.url());
    // A 2 s lease leaves the renewals of thousands of locks room on a loaded 2-core machine
    // (the other tests of this binary run alongside, in a debug build): the test is about the
    // watchdog keeping thousands of locks, not about a tight deadline.
    let ttl = Duration::from_millis(2000);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..3000 {
        let a = a.clone();
        tasks.spawn(async move { a.lock(format!("many-{i}")).ttl(ttl).acquire().await });
    }
    let mut guards = Vec::new();
    while let Some(guard) = tasks.join_next().await {
        guards.push(guard.unwrap().unwrap());
    }
    tokio::time::sleep(ttl * 3).await;
    let lost = guards.iter().filter(|g| !g.is_held()).count();
    assert_eq!(lost, 0, "{lost} of {} locks were lost", guards.len());
    let keys = keys(&redis);
    assert_eq!(
        keys.len(),
        2 * guards.len(),
        "every lock key and fence key is there"
    );
    for guard in guards {
        assert!(guard.release().await.unwrap());
    }
}

#[tokio::test]
async fn wait_until_gives_up_at_the_instant_and_a_past_instant_tries_once() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let held = a.lock("until").acquire().await.unwrap();

    // A deadline ahead: the request waits for it, then times out (no sooner).
    let started = std::time::Instant::now();
    let deadline = started + Duration::from_millis(300);
    match b.lock("until").wait_until(deadline).acquire().await {
        Err(Error::TimedOut { lock, .. }) => assert_eq!(lock, "until"),
        other => panic!("expected TimedOut, got {other:?}"),
    }
    assert!(std::time::Instant::now() >= deadline);

    // A deadline already past: one try, refused at once.
    let past = std::time::Instant::now();
    match b.lock("until").wait_until(past).acquire().await {
        Err(Error::TimedOut { .. }) => {}
        other => panic!("expected TimedOut, got {other:?}"),
    }

    // A deadline ahead and a release before it: granted.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.lock("until").wait_until(deadline).acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fence = held.fence();
    assert!(held.release().await.unwrap());
    let granted = waiter.await.unwrap().unwrap();
    assert!(granted.fence() > fence);
    assert!(granted.release().await.unwrap());
}

#[tokio::test]
async fn a_read_only_replica_refuses_with_its_own_error_and_nothing_is_written() {
    let primary = server();
    let port = primary.port().to_string();
    let replica =
        fencelock_testkit::RedisServer::start_with_args(&["--replicaof", "127.0.0.1", &port])
            .unwrap();
    let err = client(&replica.url())
        .lock("on-a-replica")
        .no_wait()
        .acquire()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Redis { lock, .. } if lock == "on-a-replica")
            && err.to_string().contains("read only replica"),
        "{err}"
    );
}
