//! ACL users: the minimal rule set of docs/deployments.md is enough for every operation of every kind, and a
//! user that lacks a permission is refused with `PermissionDenied` naming the missing rule,
//! with nothing changed (no lock half released).

use crate::common;

use std::time::Duration;

use fencelock::Error;
use fencelock_testkit::RedisServer;

use common::{client, dumps, keys, request, server};

/// The ACL rules of docs/deployments.md for a fencelock user (the key prefix `fencelock`), after `on` and the
/// password. Keep them in step with its "ACL users" section.
const MINIMAL_RULES: &[&str] = &[
    "resetkeys",
    "~fencelock:*",
    "resetchannels",
    "&fencelock:*",
    "-@all",
    "+evalsha",
    "+eval",
    "+script|load",
    "+subscribe",
    "+unsubscribe",
    "+ping",
    "+scan",
    "+get",
    "+set",
    "+del",
    "+exists",
    "+type",
    "+time",
    "+pexpire",
    "+pttl",
    "+hget",
    "+hset",
    "+hdel",
    "+hlen",
    "+hexists",
    "+hgetall",
    "+zadd",
    "+zrem",
    "+zrange",
    "+zrangebyscore",
    "+zremrangebyscore",
    "+zscore",
    "+zcard",
    "+zrank",
    "+publish",
];

/// Creates (or resets) ACL user `name` with password `pw-of-<name>` and `rules`, and returns a
/// URL for it. Servers that know `CLIENT SETINFO` (Redis 7.2+, Valkey), which the `redis` crate
/// sends when it connects, also get `+client|setinfo` (docs/deployments.md says so).
fn acl_user(redis: &RedisServer, name: &str, rules: &[&str]) -> String {
    let password = format!(">pw-of-{name}");
    let mut command = vec!["ACL", "SETUSER", name, "reset", "on", password.as_str()];
    command.extend_from_slice(rules);
    command.push("+client|setinfo");
    if redis.cmd(&command).is_err() {
        command.pop();
        if let Err(err) = redis.cmd(&command) {
            panic!("cannot create ACL user {name}: {err}");
        }
    }
    format!("redis://{name}:pw-of-{name}@127.0.0.1:{}", redis.port())
}

/// The minimal rules less the release channels: a user that may not publish (or subscribe).
fn rules_without_channels() -> Vec<&'static str> {
    MINIMAL_RULES
        .iter()
        .copied()
        .filter(|rule| *rule != "&fencelock:*")
        .collect()
}

const KINDS: [&str; 6] = ["lock", "fair", "reentrant", "read", "write", "semaphore"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_minimal_acl_rules_are_enough_for_every_operation_of_every_kind() {
    let redis = server();
    let url = acl_user(&redis, "locker", MINIMAL_RULES);
    let a = client(&url);
    let b = client(&url);
    for kind in KINDS {
        let name = format!("acl-{kind}");
        // Held by one client, waited for by the other (a subscription), woken by the release.
        let first = request(&a, kind, &name)
            .ttl(Duration::from_millis(600))
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        let exclusive = kind != "read" && kind != "semaphore";
        let waiter = {
            let b = b.clone();
            let name = name.clone();
            tokio::spawn(async move {
                let second = request(&b, kind, &name)
                    .wait_up_to(Duration::from_secs(10))
                    .acquire()
                    .await?;
                second.release().await
            })
        };
        // Renewed by the watchdog past its lease, extended by hand, inspected, listed.
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(first.is_held(), "{kind}: renewal failed");
        first
            .extend(Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("{kind}: extend: {e}"));
        let info = a.inspect(&name).await.unwrap();
        assert!(info.is_held(), "{kind}: {info:?}");
        let listing = a.list("acl-*").await.unwrap();
        assert!(
            listing.locks.iter().any(|l| l.name == name),
            "{kind}: {listing:?}"
        );
        if exclusive {
            assert!(!waiter.is_finished(), "{kind}: the waiter got in");
        }
        assert!(first.release().await.unwrap(), "{kind}");
        let woken = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap_or_else(|_| panic!("{kind}: the waiter was not woken"))
            .unwrap();
        assert!(woken.unwrap_or_else(|e| panic!("{kind}: {e}")), "{kind}");
        // An operator's release.
        let held = request(&a, kind, &name).acquire().await.unwrap();
        assert!(a.force_release(&name).await.unwrap(), "{kind}");
        assert!(!held.release().await.unwrap(), "{kind}");
    }
    // Work done once, and the operator's read of its records.
    let ran = a
        .once("acl-once")
        .run(|fence| async move { Ok::<u64, String>(fence) })
        .await
        .unwrap_or_else(|e| panic!("once: {e}"));
    assert!(matches!(ran, fencelock::once::Outcome::Ran(_)), "{ran:?}");
    let records = a
        .once_records("acl-once")
        .await
        .unwrap_or_else(|e| panic!("once_records: {e}"));
    let keys: Vec<&str> = records.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["acl-once"]);
    let denied = redis.cmd(&["ACL", "LOG"]).unwrap();
    assert_eq!(
        denied,
        redis::Value::Array(vec![]),
        "the ACL log shows a refusal"
    );
}

/// A user allowed the locks' channels (`fencelock:{NAME}:released`) but not the waiters' own
/// (`…:released:<token>`): its waiters cannot subscribe their own channel, the release's
/// message there is refused, and the pass goes on the lock's channel, where the waiter hears it
/// (docs/deployments.md says so).
#[tokio::test]
async fn a_user_without_the_waiters_own_channels_is_passed_the_lock_on_the_locks_channel() {
    let redis = server();
    let rules: Vec<&str> = MINIMAL_RULES
        .iter()
        .map(|rule| {
            if *rule == "&fencelock:*" {
                "&fencelock:{narrow}:released"
            } else {
                rule
            }
        })
        .collect();
    let url = acl_user(&redis, "narrow", &rules);
    let (a, b) = (client(&url), client(&url));
    let held = a
        .lock("narrow")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(async move {
        b.lock("narrow")
            .ttl(Duration::from_secs(30))
            .queue_timeout(Duration::from_secs(30))
            .wait_up_to(Duration::from_secs(20))
            .acquire()
            .await
    });
    // In line, with its own channel refused.
    let mut in_line = false;
    for _ in 0..100 {
        if matches!(
            redis.cmd(&["ZCARD", "fencelock:{narrow}:waiters"]),
            Ok(redis::Value::Int(1))
        ) {
            in_line = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(in_line, "the waiter took no place in line");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = std::time::Instant::now();
    assert!(held.release().await.unwrap());
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not passed the lock on the lock's channel")
        .unwrap()
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(5));
    next.release().await.unwrap();
    // The waiter's own channel was never subscribed: the server refused it.
    match redis.cmd(&["PUBSUB", "CHANNELS", "fencelock:{narrow}:released:*"]) {
        Ok(redis::Value::Array(channels)) => assert!(channels.is_empty(), "{channels:?}"),
        other => panic!("PUBSUB CHANNELS: {other:?}"),
    }
}

#[tokio::test]
async fn the_release_message_reaches_a_waiter_of_a_user_with_the_minimal_rules() {
    let redis = server();
    let url = acl_user(&redis, "listener", MINIMAL_RULES);
    let (a, b) = (client(&url), client(&url));
    // A lease and a place in line far longer than the wait allowed below (the waiter would
    // otherwise come back at a third of its place's time to refresh it, and find the lock
    // passed to it): only the release message (over RESP3, with its HELLO, on a connection of
    // this user) can wake the waiter in time.
    let held = a
        .lock("acl-message")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(async move {
        b.lock("acl-message")
            .ttl(Duration::from_secs(30))
            .queue_timeout(Duration::from_secs(30))
            .wait_up_to(Duration::from_secs(20))
            .acquire()
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "the waiter got a held lock");
    let released = std::time::Instant::now();
    assert!(held.release().await.unwrap());
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken by the release message")
        .unwrap()
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(5));
    next.release().await.unwrap();
}

#[tokio::test]
async fn a_user_that_may_not_publish_is_refused_a_release_and_nothing_changes() {
    let redis = server();
    let without_channels = rules_without_channels();
    let url = acl_user(&redis, "mute", &without_channels);
    let mute = client(&url);
    let admin = client(&redis.url());
    // The plain lock's release publishes only when someone waited, so it tries and releases
    // either way (the next test); every other kind's release always publishes, first.
    for kind in KINDS.into_iter().filter(|kind| *kind != "lock") {
        let name = format!("mute-{kind}");
        // Taking a lock publishes nothing: it works.
        let guard = request(&mute, kind, &name)
            .no_wait()
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        let stored: Vec<String> = keys(&redis)
            .into_iter()
            .filter(|k| k.contains(&name))
            .collect();
        let stored: Vec<&str> = stored.iter().map(String::as_str).collect();
        let before = dumps(&redis, &stored);
        let err = guard.release().await.unwrap_err();
        match &err {
            Error::PermissionDenied {
                lock,
                command: "release",
                rule,
                ..
            } => {
                assert_eq!(lock, &name);
                assert!(rule.contains("&<key prefix>:*"), "{kind}: {rule}");
            }
            other => panic!("{kind}: expected PermissionDenied, got {other:?}"),
        }
        assert!(!err.to_string().contains("pw-of-mute"), "{err}");
        // The refusal changed nothing: the lock is still held, exactly as it was.
        assert_eq!(dumps(&redis, &stored), before, "{kind}: half released");
        assert!(admin.inspect(&name).await.unwrap().is_held(), "{kind}");
        assert!(admin.force_release(&name).await.unwrap(), "{kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_that_may_not_publish_releases_a_plain_lock_and_its_waiter_wakes_by_its_timer() {
    let redis = server();
    let without_channels = rules_without_channels();
    let mute = client(&acl_user(&redis, "mute", &without_channels));
    let other = client(&redis.url());
    // Uncontended, a release publishes nothing: nothing is refused.
    let guard = mute.lock("mute-plain").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
    assert_eq!(
        redis.cmd(&["ACL", "LOG"]).unwrap(),
        redis::Value::Array(vec![])
    );
    // Contended: the waiter marked the value and took a place in line; the release passes the
    // lock to it, tries to tell it, is refused, and passes it all the same; the waiter finds
    // the lock its own when it next tries (when the lease it was told runs out, or its place's
    // refresh, whichever comes first).
    let guard = mute
        .lock("mute-plain")
        .ttl(Duration::from_millis(1500))
        .acquire()
        .await
        .unwrap();
    let waiter = {
        let other = other.clone();
        tokio::spawn(async move {
            other
                .lock("mute-plain")
                .wait_up_to(Duration::from_secs(10))
                .acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let key = "fencelock:{mute-plain}";
    let held_value = redis.cmd(&["GET", key]).unwrap();
    assert!(
        matches!(&held_value, redis::Value::BulkString(v) if v.ends_with(b"+")),
        "the waiter did not mark the value: {held_value:?}"
    );
    assert!(guard.release().await.unwrap(), "the release was refused");
    assert_ne!(
        redis.cmd(&["GET", key]).unwrap(),
        held_value,
        "the holder's value is still there after its release"
    );
    let granted = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap_or_else(|_| panic!("the waiter never took the lock"))
        .unwrap()
        .unwrap_or_else(|e| panic!("the waiter: {e}"));
    assert!(granted.release().await.unwrap());
    let denied = redis.cmd(&["ACL", "LOG"]).unwrap();
    assert_ne!(
        denied,
        redis::Value::Array(vec![]),
        "the wake-up was not refused: this test tests nothing"
    );
}

/// Calls of one batch (the group commit: a client's concurrent calls of one script go in one
/// `EVALSHA`) are kept apart: a call that raises an error gets that error, and the others in the
/// batch go on, each run once. The user may touch every lock key but the fence keys of `no-*`
/// names, which the acquire script names itself (after it has taken the lock key, which it
/// deletes again before it refuses): those acquisitions are refused as the server refused them
/// (`PermissionDenied`), the others granted, and released (a call run twice would find its lock
/// released already, and say it was not held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_call_in_a_batch_gets_its_own_error_and_the_others_run_once() {
    let redis = server();
    let mut rules = MINIMAL_RULES.to_vec();
    rules.retain(|rule| *rule != "~fencelock:*");
    rules.extend(["~fencelock:{*}", "~fencelock:{ok-*}:*"]);
    let url = acl_user(&redis, "batched", &rules);
    let batched = client(&url);
    // The scripts loaded first.
    let warm = batched.lock("ok-warm").acquire().await.unwrap();
    assert!(warm.release().await.unwrap());
    common::log_every_command(&redis);
    for round in 0..3 {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..16 {
            let name = format!("{}-{round}-{i}", if i % 2 == 0 { "ok" } else { "no" });
            let client = batched.clone();
            tasks.spawn(async move {
                let result = client.lock(&name).no_wait().acquire().await;
                (name, result)
            });
        }
        let mut guards = Vec::new();
        while let Some(done) = tasks.join_next().await {
            let (name, result) = done.unwrap();
            if name.starts_with("ok") {
                guards.push((
                    name.clone(),
                    result.unwrap_or_else(|e| panic!("{name}: {e}")),
                ));
            } else {
                let err = result.map(|_| ()).unwrap_err();
                assert!(
                    matches!(&err, Error::PermissionDenied { lock, command: "acquire", .. } if *lock == name),
                    "{name}: {err:?}"
                );
            }
        }
        // Released together: their calls go in batches too.
        let mut releases = tokio::task::JoinSet::new();
        for (name, guard) in guards {
            releases.spawn(async move { (name, guard.release_outcome().await) });
        }
        while let Some(done) = releases.join_next().await {
            let (name, outcome) = done.unwrap();
            let outcome = outcome.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(outcome.is_released(), "{name}: {outcome:?}");
        }
    }
    // Some batch held calls of both kinds (the server's slow log has every command).
    let Ok(redis::Value::Array(log)) = redis.cmd(&["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET");
    };
    let mixed = log.iter().any(|entry| {
        let text = format!("{entry:?}");
        text.contains("{ok-") && text.contains("{no-")
    });
    assert!(mixed, "no batch held an allowed and a refused acquisition");
    // Nothing of a refused acquisition is left.
    let keys = redis.keys().unwrap();
    assert!(keys.iter().all(|k| !k.contains("{no-")), "{keys:?}");
}

/// Releases that pass their locks on but whose wake-up the server refuses (a user that may not
/// publish) answer "released, untold" (2), in a batch too, where the replies come as one string
/// of a character per call: each is read as released, and each waiter takes its lock when it
/// next looks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_in_one_batch_whose_wake_ups_are_refused_are_each_released() {
    let redis = server();
    let mute = client(&acl_user(&redis, "mute-batch", &rules_without_channels()));
    let other = client(&redis.url());
    let names: Vec<String> = (0..16).map(|i| format!("mute-batch-{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        let guard = mute
            .lock(name)
            .ttl(Duration::from_millis(1500))
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        guards.push((name.clone(), guard));
    }
    let mut waiters = tokio::task::JoinSet::new();
    for name in &names {
        let (other, name) = (other.clone(), name.clone());
        waiters.spawn(async move {
            let granted = other
                .lock(&name)
                .wait_up_to(Duration::from_secs(10))
                .acquire()
                .await;
            (name, granted)
        });
    }
    // Every waiter has marked its lock's value: each release passes the lock on.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    for name in &names {
        let key = format!("fencelock:{{{name}}}");
        loop {
            let value = redis.cmd(&["GET", &key]).unwrap();
            if matches!(&value, redis::Value::BulkString(v) if v.ends_with(b"+")) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name}'s waiter did not mark the value: {value:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    common::log_every_command(&redis);
    let mut releases = tokio::task::JoinSet::new();
    for (name, guard) in guards {
        releases.spawn(async move { (name, guard.release().await) });
    }
    while let Some(done) = releases.join_next().await {
        let (name, released) = done.unwrap();
        assert!(
            released.unwrap_or_else(|e| panic!("{name}: {e}")),
            "{name}: a release whose wake-up was refused said the lock was not held"
        );
    }
    // Some call of the releasing user's held two of the releases (a batch: the server's slow log
    // has every command), and the wake-ups were refused.
    let Ok(redis::Value::BulkString(clients)) = redis.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST");
    };
    let mute_addrs: Vec<String> = String::from_utf8_lossy(&clients)
        .lines()
        .filter(|line| line.contains(" user=mute-batch "))
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("addr=")))
        .map(str::to_owned)
        .collect();
    let Ok(redis::Value::Array(log)) = redis.cmd(&["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET");
    };
    let batched = log.iter().any(|entry| {
        let text = format!("{entry:?}");
        let names = names
            .iter()
            .filter(|name| text.contains(&format!("{{{name}}}")))
            .count();
        names >= 2 && mute_addrs.iter().any(|addr| text.contains(addr.as_str()))
    });
    assert!(
        batched,
        "no batch held two releases: this test tests nothing"
    );
    assert_ne!(
        redis.cmd(&["ACL", "LOG"]).unwrap(),
        redis::Value::Array(vec![]),
        "no wake-up was refused: this test tests nothing"
    );
    while let Some(done) = waiters.join_next().await {
        let (name, granted) = done.unwrap();
        let granted = granted.unwrap_or_else(|e| panic!("{name}'s waiter: {e}"));
        assert!(granted.release().await.unwrap(), "{name}");
    }
}
