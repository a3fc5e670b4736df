//! Lock passing (the plain lock on one server): a waiter takes a place in line, and a release
//! hands the lock straight to the waiter first in line, which takes it without sending an
//! acquire. The corner cases: a waiter that gave up or was cancelled, a waiter that died, a
//! passed lease confirmed at once, a waiter that renews by hand, and Redlock, where nobody
//! queues.

use crate::common;

use std::time::Duration;

use fencelock::Error;
use futures_util::StreamExt;

use common::{calls, client, integer_reply, keys, monitor, server};

/// What the lock key holds (`<token>:<fence>[+]`), or `None` when it is free.
fn value(redis: &fencelock_testkit::RedisServer, name: &str) -> Option<String> {
    match redis.cmd(&["GET", &format!("fencelock:{{{name}}}")]) {
        Ok(redis::Value::BulkString(v)) => Some(String::from_utf8_lossy(&v).into_owned()),
        Ok(redis::Value::Nil) => None,
        other => panic!("GET: {other:?}"),
    }
}

/// How many places the lock's line of waiters holds.
fn in_line(redis: &fencelock_testkit::RedisServer, name: &str) -> i64 {
    integer_reply(redis, &["ZCARD", &format!("fencelock:{{{name}}}:waiters")])
}

/// `a` holds lock `name` (10 s), and a request of `b` waits for it (up to 10 s), in line.
async fn held_with_a_waiter_in_line(
    redis: &fencelock_testkit::RedisServer,
    a: &fencelock::Client,
    b: &fencelock::Client,
    name: &str,
) -> (
    fencelock::LockGuard,
    tokio::task::JoinHandle<fencelock::Result<fencelock::LockGuard>>,
) {
    let held = a
        .lock(name)
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("the holder's acquire: {e}"));
    let waiter = tokio::spawn(b.lock(name).wait_up_to(Duration::from_secs(10)).acquire());
    common::wait_for_count("places in line", 1, Duration::from_secs(5), || {
        in_line(redis, name)
    })
    .await;
    (held, waiter)
}

/// The script calls heard until `MONITOR` falls quiet (300 ms), each as its arguments (see
/// `common::script_calls`), and a check that the calls `acquire` picks out (the waiter's tries)
/// were heard before the first one `release` picks out (the holder's release) and not after.
async fn assert_no_acquire_after_the_release(
    heard: &mut (impl futures_util::Stream<Item = String> + Unpin),
    release: impl Fn(&Vec<String>) -> bool,
    acquire: impl Fn(&Vec<String>) -> bool,
) {
    let mut calls = Vec::new();
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_millis(300), heard.next()).await
    {
        calls.extend(common::script_calls(&line));
    }
    let at = calls
        .iter()
        .position(release)
        .unwrap_or_else(|| panic!("no release heard: {calls:#?}"));
    assert!(
        calls[..at].iter().any(&acquire),
        "the waiter's tries were not heard: {calls:#?}"
    );
    assert!(
        !calls[at..].iter().any(&acquire),
        "the waiter sent an acquire after the release: {calls:#?}"
    );
}

/// The server's clock in milliseconds (`TIME`).
fn server_ms(redis: &fencelock_testkit::RedisServer) -> f64 {
    let seconds_and_micros = match redis.cmd(&["TIME"]) {
        Ok(redis::Value::Array(t)) => t
            .into_iter()
            .map(|v| redis::from_redis_value::<f64>(v).unwrap_or(f64::NAN))
            .collect::<Vec<_>>(),
        other => panic!("TIME: {other:?}"),
    };
    match seconds_and_micros.as_slice() {
        [seconds, micros] => seconds * 1000.0 + micros / 1000.0,
        other => panic!("TIME: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_passes_the_lock_to_a_waiter_that_sends_no_acquire_after_it() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    common::warm_up(&a).await;
    common::warm_up(&b).await;
    let mut heard = monitor(&redis).await;
    let held = a
        .lock("pass")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(
        b.lock("pass")
            .ttl(Duration::from_secs(10))
            .wait_up_to(Duration::from_secs(5))
            .acquire(),
    );
    // Let the waiter subscribe and take its place in line.
    common::wait_for_count("places in line", 1, Duration::from_secs(5), || {
        in_line(&redis, "pass")
    })
    .await;
    let first = held.fence();
    assert!(held.release().await.unwrap());
    let guard = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the waiter was not passed the lock")
        .unwrap()
        .unwrap();
    // The lock is the waiter's, with the fence the release gave it; nobody is left in line.
    let stored = value(&redis, "pass").expect("the passed lock is gone");
    let (token, fence) = stored.split_once(':').unwrap();
    assert_eq!(fence.parse::<u64>().unwrap(), guard.fence(), "{stored}");
    assert!(guard.fence() > first);
    assert_eq!(in_line(&redis, "pass"), 0);
    assert!(guard.release().await.unwrap());
    // The server's own record: after the release, the waiter sent no acquire of its own. The
    // holder's release sends the token alone; a waiting try sends four arguments (token, lease,
    // whether others of its client wait, and how long its place lasts).
    assert_no_acquire_after_the_release(
        &mut heard,
        |args| args.len() == 1 && args[0] != token,
        |args| args.len() == 4 && args[0] == token,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gave_up_or_was_cancelled_is_not_passed_the_lock() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let held = a
        .lock("gave-up")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    // One waiter times out, another is cancelled (its future dropped while it waits).
    let err = b
        .lock("gave-up")
        .wait_up_to(Duration::from_millis(400))
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TimedOut { .. }), "{err:?}");
    let cancelled = tokio::time::timeout(
        Duration::from_millis(400),
        b.lock("gave-up")
            .wait_up_to(Duration::from_secs(5))
            .acquire(),
    )
    .await;
    assert!(cancelled.is_err(), "the lock was free: {cancelled:?}");
    assert!(b.wait_idle(Duration::from_secs(5)).await);
    // Both took their places back: the release frees the lock, it hands it to nobody.
    assert_eq!(in_line(&redis, "gave-up"), 0);
    assert!(held.release().await.unwrap());
    assert_eq!(value(&redis, "gave-up"), None);
    let again = a.lock("gave-up").no_wait().acquire().await.unwrap();
    assert!(again.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_passed_to_a_waiter_that_died_lapses_with_its_place() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let held = a
        .lock("dead-waiter")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    // A waiter that died right after its last refresh: first in line, its place lapsing in
    // 1.5 s (the live waiter's lasts the default 5 s).
    let dead = "deadbeefdeadbeefdeadbeefdeadbeef";
    let now_ms = server_ms(&redis) as u64;
    let lapses = (now_ms + 1500).to_string();
    redis
        .cmd(&["ZADD", "fencelock:{dead-waiter}:waiters", &lapses, dead])
        .unwrap();
    let waiter = tokio::spawn(
        b.lock("dead-waiter")
            .wait_up_to(Duration::from_secs(10))
            .acquire(),
    );
    common::wait_for_count("places in line", 2, Duration::from_secs(5), || {
        in_line(&redis, "dead-waiter")
    })
    .await;
    assert!(held.release().await.unwrap());
    let passed = value(&redis, "dead-waiter").expect("the lock was not passed");
    assert!(
        passed.starts_with(dead),
        "passed to {passed}, not first in line"
    );
    let pttl = integer_reply(&redis, &["PTTL", "fencelock:{dead-waiter}"]);
    assert!(
        (1..=1500).contains(&pttl),
        "the passed lease outlasts the place: {pttl} ms"
    );
    // The live waiter gets the lock once the dead one's lease (its place) has lapsed, not after
    // the 30 s lease the holder had.
    let guard = tokio::time::timeout(Duration::from_secs(6), waiter)
        .await
        .expect("the live waiter waited past the dead one's place")
        .unwrap()
        .unwrap();
    let dead_fence: u64 = passed
        .trim_end_matches('+')
        .split_once(':')
        .unwrap()
        .1
        .parse()
        .unwrap();
    assert!(guard.fence() > dead_fence);
    assert!(guard.release().await.unwrap());
}

/// A waiter that died just after refreshing its place (5 s, the default) is passed the lock for
/// the claim only (1 s), and the live waiter behind it, named in the message, takes the lock
/// once the claim has run out: the lock is idle for the claim, not for the dead waiter's place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_passed_the_lock_keeps_it_for_the_claim_only() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let name = "dead-waiter-claim";
    let held = a
        .lock(name)
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let dead = "deadbeefdeadbeefdeadbeefdeadbeef";
    let lapses = (server_ms(&redis) as u64 + 5000).to_string();
    redis
        .cmd(&[
            "ZADD",
            &format!("fencelock:{{{name}}}:waiters"),
            &lapses,
            dead,
        ])
        .unwrap();
    let waiter = tokio::spawn(b.lock(name).wait_up_to(Duration::from_secs(20)).acquire());
    common::wait_for_count("places in line", 2, Duration::from_secs(5), || {
        in_line(&redis, name)
    })
    .await;
    let released_at = std::time::Instant::now();
    assert!(held.release().await.unwrap());
    let passed = value(&redis, name).expect("the lock was not passed");
    assert!(
        passed.starts_with(dead),
        "passed to {passed}, not first in line"
    );
    let pttl = integer_reply(&redis, &["PTTL", &format!("fencelock:{{{name}}}")]);
    assert!(
        (1..=1000).contains(&pttl),
        "the passed lease is {pttl} ms, not the claim"
    );
    let guard = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("the live waiter never got the lock")
        .unwrap()
        .unwrap();
    let idle = released_at.elapsed();
    // The claim (1 s), and the live waiter's try once it ran out; without the claim, the dead
    // waiter's place (5 s). Generous: the machine may be loaded.
    assert!(
        idle < Duration::from_millis(3500),
        "idle for {idle:?} after the pass"
    );
    assert!(
        idle >= Duration::from_millis(900),
        "taken after {idle:?}, inside the claim"
    );
    assert!(guard.release().await.unwrap());
}

/// A live waiter passed the lock confirms its full lease within the claim: it still holds the
/// lock well past the claim, with the lease it asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_waiter_passed_the_lock_keeps_it_past_the_claim() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let name = "live-claim";
    let held = a
        .lock(name)
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(
        b.lock(name)
            .ttl(Duration::from_secs(20))
            .wait_up_to(Duration::from_secs(20))
            .acquire(),
    );
    common::wait_for_count("places in line", 1, Duration::from_secs(5), || {
        in_line(&redis, name)
    })
    .await;
    // The pass comes well after the waiter's last refresh, so that its deadline is counted over
    // the gap between the two.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(held.release().await.unwrap());
    let guard = waiter.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(guard.is_held(), "lost after the claim");
    let pttl = integer_reply(&redis, &["PTTL", &format!("fencelock:{{{name}}}")]);
    assert!(pttl > 15_000, "the lease is {pttl} ms: not confirmed");
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_lock_is_confirmed_for_its_full_lease_before_its_place_lapses() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    for auto_renew in [true, false] {
        let name = format!("confirm-{auto_renew}");
        let held = a
            .lock(name.as_str())
            .ttl(Duration::from_secs(20))
            .acquire()
            .await
            .unwrap();
        let waiter = tokio::spawn(
            b.lock(name.as_str())
                .ttl(Duration::from_secs(20))
                .queue_timeout(Duration::from_millis(600))
                .auto_renew(auto_renew)
                .wait_up_to(Duration::from_secs(5))
                .acquire(),
        );
        common::wait_for_count("places in line", 1, Duration::from_secs(5), || {
            in_line(&redis, &name)
        })
        .await;
        assert!(held.release().await.unwrap());
        let guard = waiter.await.unwrap().unwrap();
        // The release gave the waiter no more than its place (600 ms); past that, the lock is
        // still its own, for the 20 s it asked for: confirmed by the watchdog a third of the
        // place after the try that set it, or at once by the waiter's own try when it renews
        // by hand.
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(guard.is_held(), "auto_renew {auto_renew}: lost");
        let pttl = integer_reply(&redis, &["PTTL", &format!("fencelock:{{{name}}}")]);
        assert!(
            pttl > 15_000,
            "auto_renew {auto_renew}: the lease is {pttl} ms"
        );
        assert!(
            guard.remaining() > Duration::from_secs(10),
            "auto_renew {auto_renew}"
        );
        assert!(guard.release().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redlock_nobody_takes_a_place_in_line() {
    let (servers, urls) = common::redlock_servers(3);
    let a = common::redlock_client(&urls, Duration::from_millis(200));
    let b = common::redlock_client(&urls, Duration::from_millis(200));
    let held = a
        .lock("no-line")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(
        b.lock("no-line")
            .wait_up_to(Duration::from_secs(5))
            .acquire(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(held.release().await.unwrap());
    let guard = waiter.await.unwrap().unwrap();
    assert!(guard.release().await.unwrap());
    for redis in &servers {
        assert!(
            !keys(redis).iter().any(|k| k.ends_with(":waiters")),
            "{:?}",
            keys(redis)
        );
        assert_eq!(calls(redis, "zadd"), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_key_that_is_not_ours_is_reported_and_left_as_it_is() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    redis
        .cmd(&["SET", "fencelock:{foreign-line}:waiters", "not a line"])
        .unwrap();
    let held = a
        .lock("foreign-line")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    // The waiter's first try takes no place; the one after it names the key and writes nothing.
    let err = b
        .lock("foreign-line")
        .wait_up_to(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap_err();
    match &err {
        Error::WrongType { lock, key, .. } => {
            assert_eq!(lock, "foreign-line");
            assert_eq!(key, "fencelock:{foreign-line}:waiters");
        }
        other => panic!("expected WrongType, got {other:?}"),
    }
    // The holder still releases (to nobody), and the key is as it was.
    assert!(held.release().await.unwrap());
    assert_eq!(value(&redis, "foreign-line"), None);
    assert_eq!(
        redis
            .cmd(&["GET", "fencelock:{foreign-line}:waiters"])
            .unwrap(),
        redis::Value::BulkString(b"not a line".to_vec())
    );
}

/// A lock contended again and again: its waiters' client subscribes its channel once, keeps it
/// while it is used, and unsubscribes it a little after the last waiter left. (Each waiter's
/// own channel comes and goes with its request.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_waited_on_again_and_again_is_subscribed_once() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    common::warm_up(&b).await;
    let mut heard = monitor(&redis).await;
    for _ in 0..10 {
        let held = a
            .lock("again")
            .ttl(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        let waiter = tokio::spawn(b.lock("again").wait_up_to(Duration::from_secs(5)).acquire());
        common::wait_for_count("places in line", 1, Duration::from_secs(5), || {
            in_line(&redis, "again")
        })
        .await;
        assert!(held.release().await.unwrap());
        let guard = waiter.await.unwrap().unwrap();
        assert!(guard.release().await.unwrap());
    }
    let mut subscribed = 0;
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_millis(300), heard.next()).await
    {
        let words: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        if words
            .first()
            .is_some_and(|w| w.eq_ignore_ascii_case("subscribe"))
        {
            subscribed += words
                .iter()
                .filter(|w| **w == "fencelock:{again}:released")
                .count();
        }
    }
    assert_eq!(
        subscribed, 1,
        "the lock's channel subscribed {subscribed} times"
    );
    let subscribers = || match redis.cmd(&["PUBSUB", "NUMSUB", "fencelock:{again}:released"]) {
        Ok(redis::Value::Array(reply)) => redis::from_redis_value::<i64>(reply[1].clone()).unwrap(),
        other => panic!("PUBSUB NUMSUB: {other:?}"),
    };
    assert_eq!(subscribers(), 1);
    common::wait_for_count("subscribers", 0, Duration::from_secs(5), subscribers).await;
}

/// A request whose client listens on the lock's channel already (another of its requests waits
/// there) takes its place in line with its first try: one script, not a try and then another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_whose_channel_is_subscribed_takes_its_place_with_its_first_try() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    common::warm_up(&a).await;
    common::warm_up(&b).await;
    let held = a
        .lock("first-try")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let first = tokio::spawn(
        b.lock("first-try")
            .wait_up_to(Duration::from_secs(10))
            .acquire(),
    );
    common::wait_for_count("places in line", 1, Duration::from_secs(5), || {
        in_line(&redis, "first-try")
    })
    .await;
    let mut heard = monitor(&redis).await;
    let second = tokio::spawn(
        b.lock("first-try")
            .wait_up_to(Duration::from_secs(10))
            .acquire(),
    );
    common::wait_for_count("places in line", 2, Duration::from_secs(5), || {
        in_line(&redis, "first-try")
    })
    .await;
    let mut tries = Vec::new();
    while let Ok(Some(line)) = tokio::time::timeout(Duration::from_millis(300), heard.next()).await
    {
        tries.extend(common::script_calls(&line));
    }
    // A waiting try sends four arguments (token, lease, whether others of its client wait, how
    // long its place lasts); a first try that does not wait, two or three.
    assert_eq!(tries.len(), 1, "the second waiter's tries: {tries:#?}");
    assert_eq!(tries[0].len(), 4, "the second waiter's try: {tries:#?}");
    // Both are served in turn.
    assert!(held.release().await.unwrap());
    let guard = first.await.unwrap().unwrap();
    assert!(guard.release().await.unwrap());
    let guard = second.await.unwrap().unwrap();
    assert!(guard.release().await.unwrap());
}

/// A pass goes on the channel of the waiter it is passed to, which only that waiter's client
/// listens to, and not on the lock's channel, which every client with a waiter listens to. A
/// waiter that does not listen on a channel of its own (a client of protocol 1) is passed the
/// lock on the lock's channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_goes_to_the_waiters_own_channel_or_else_to_the_locks() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let name = "own-channel";
    let (held, waiter) = held_with_a_waiter_in_line(&redis, &a, &b, name).await;
    // The waiter's own channel is subscribed once its request has a place.
    common::wait_for_count("own channels", 1, Duration::from_secs(5), || {
        match redis.cmd(&[
            "PUBSUB",
            "CHANNELS",
            &format!("fencelock:{{{name}}}:released:*"),
        ]) {
            Ok(redis::Value::Array(channels)) => channels.len(),
            other => panic!("PUBSUB CHANNELS: {other:?}"),
        }
    })
    .await;
    let lock_channel = format!("fencelock:{{{name}}}:released");
    let listener = redis::Client::open(redis.url()).unwrap();
    let mut on_lock_channel = listener.get_async_pubsub().await.unwrap();
    on_lock_channel.subscribe(&lock_channel).await.unwrap();
    assert!(held.release().await.unwrap());
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not passed the lock")
        .unwrap()
        .unwrap();
    {
        let mut messages = on_lock_channel.on_message();
        let heard = tokio::time::timeout(Duration::from_millis(500), messages.next()).await;
        assert!(
            heard.is_err(),
            "the pass went on the lock's channel too: {:?}",
            heard.ok().flatten().map(|m| m.get_payload::<String>())
        );
    }
    // A waiter of protocol 1: a place in line, and an ear on the lock's channel only.
    let old = "0123456789abcdef0123456789abcdef";
    let lapses = (server_ms(&redis) as u64 + 5000).to_string();
    redis
        .cmd(&[
            "ZADD",
            &format!("fencelock:{{{name}}}:waiters"),
            &lapses,
            old,
        ])
        .unwrap();
    // (A try marks the value as waited for, as that waiter's tries did.)
    assert!(a.lock(name).try_acquire().await.unwrap().is_none());
    assert!(guard.release().await.unwrap());
    let message = tokio::time::timeout(Duration::from_secs(5), on_lock_channel.on_message().next())
        .await
        .expect("no pass on the lock's channel")
        .unwrap();
    let payload: String = message.get_payload().unwrap();
    assert!(
        payload.starts_with(&format!("to:{old}:")),
        "heard {payload}"
    );
    assert!(value(&redis, name).is_some_and(|v| v.starts_with(old)));
}

/// A pass continues a fence counter that is ahead of the server's clock (a fence key raised by
/// a Redlock write-back, or a clock that went back): the passed fence is the counter's next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_continues_a_fence_counter_ahead_of_the_clock() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let name = "pass-ahead";
    let (held, waiter) = held_with_a_waiter_in_line(&redis, &a, &b, name).await;
    let ahead: u64 = 9_000_000_000_000_000;
    let fence_key = format!("fencelock:{{{name}}}:fence");
    redis.cmd(&["SET", &fence_key, &ahead.to_string()]).unwrap();
    assert!(held.release().await.unwrap());
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not passed the lock")
        .unwrap()
        .unwrap();
    assert_eq!(guard.fence(), ahead + 1);
    assert_eq!(
        redis.cmd(&["GET", &fence_key]).unwrap(),
        redis::Value::BulkString((ahead + 1).to_string().into_bytes())
    );
    assert!(guard.release().await.unwrap());
}

/// A release whose line holds only places that lapsed passes nothing: it takes the lapsed places
/// out, leaves the fence key as it was (the last fence handed out), and wakes one waiter of each
/// client (`one` on the lock's channel), as a release with nobody in line does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_line_has_only_lapsed_places_leaves_the_fence_key_as_it_was() {
    let redis = server();
    let a = client(&redis.url());
    let name = "lapsed-line";
    let held = a
        .lock(name)
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let fence_key = format!("fencelock:{{{name}}}:fence");
    let before = redis.cmd(&["GET", &fence_key]).unwrap();
    let lapsed = (server_ms(&redis) as u64 - 1000).to_string();
    redis
        .cmd(&[
            "ZADD",
            &format!("fencelock:{{{name}}}:waiters"),
            &lapsed,
            "0123456789abcdef0123456789abcdef",
        ])
        .unwrap();
    // (A try marks the value as waited for.)
    assert!(a.lock(name).try_acquire().await.unwrap().is_none());
    let mut heard = common::release_messages(&redis, name).await;
    assert!(held.release().await.unwrap());
    assert_eq!(value(&redis, name), None);
    assert_eq!(redis.cmd(&["GET", &fence_key]).unwrap(), before);
    assert_eq!(
        in_line(&redis, name),
        0,
        "the lapsed place was left in line"
    );
    assert_eq!(
        common::next_message(&mut heard, "the release").await,
        (format!("fencelock:{{{name}}}:released"), "one".to_owned())
    );
}

/// The fair lock passes the same way: its release hands the lock to the head of its queue, which
/// sends no acquire after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_release_passes_the_lock_to_the_head_of_the_queue() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let warm = b.fair_lock("warm").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    let mut heard = monitor(&redis).await;
    let held = a
        .fair_lock("fair-pass")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(
        b.fair_lock("fair-pass")
            .ttl(Duration::from_secs(10))
            .wait_up_to(Duration::from_secs(5))
            .acquire(),
    );
    let queue = "fencelock:{fair-pass}:queue";
    common::wait_for_count("queued", 1, Duration::from_secs(5), || {
        integer_reply(&redis, &["ZCARD", queue])
    })
    .await;
    // Past the waiter's try after its subscription.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first = held.fence();
    assert!(held.release().await.unwrap());
    let guard = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("the head was not passed the lock")
        .unwrap()
        .unwrap();
    let stored = value(&redis, "fair-pass").expect("the passed lock is gone");
    let (token, fence) = stored.split_once(':').unwrap();
    assert_eq!(fence.parse::<u64>().unwrap(), guard.fence(), "{stored}");
    assert!(guard.fence() > first);
    assert_eq!(integer_reply(&redis, &["ZCARD", queue]), 0);
    assert_eq!(
        integer_reply(&redis, &["ZCARD", "fencelock:{fair-pass}:alive"]),
        0
    );
    assert!(guard.release().await.unwrap());
    // An acquire sends the token, the 10 s lease and the queue timeout; a release the token,
    // the channel and the fence floor.
    assert_no_acquire_after_the_release(
        &mut heard,
        |args| args.len() == 3 && args[0] != token && args[1].ends_with(":released"),
        |args| args.len() == 3 && args[0] == token && args[1] == "10000",
    )
    .await;
}

/// A plain lock's waiter keeps a place no longer than its lease, so that the lock passed to a
/// waiter that died is held no longer than by a holder that died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_waiters_place_lasts_no_longer_than_its_lease() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let held = a
        .lock("short-place")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(
        b.lock("short-place")
            .ttl(Duration::from_millis(800))
            .queue_timeout(Duration::from_secs(5))
            .wait_up_to(Duration::from_secs(5))
            .acquire(),
    );
    common::wait_for_count("places in line", 1, Duration::from_secs(5), || {
        in_line(&redis, "short-place")
    })
    .await;
    let lapses = match redis
        .cmd(&[
            "ZRANGE",
            "fencelock:{short-place}:waiters",
            "0",
            "0",
            "WITHSCORES",
        ])
        .unwrap()
    {
        redis::Value::Array(reply) => redis::from_redis_value::<f64>(reply[1].clone()).unwrap(),
        other => panic!("ZRANGE: {other:?}"),
    };
    let now_ms = server_ms(&redis);
    assert!(
        lapses - now_ms <= 800.0,
        "the place lasts {} ms, longer than the 800 ms lease",
        lapses - now_ms
    );
    assert!(held.release().await.unwrap());
    let guard = waiter.await.unwrap().unwrap();
    assert!(guard.release().await.unwrap());
}
