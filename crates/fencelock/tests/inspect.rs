//! The operator's view of what waits and holds: `inspect` of a plain lock's line and of a fair
//! lock's queue (held or free), in their order, without the places that lapsed or have no
//! liveness; of a semaphore's and a read-write lock's waiters by arrival, without a lapsed
//! permit; of a reentrant lock's owner; and of a fence key that holds something else.

use crate::common;

use std::time::Duration;

use fencelock::Error;
use fencelock::admin::{LockInfo, Side};
use fencelock_testkit::RedisServer;

use common::{client, server, server_ms};

/// A waiter's token: `c` 32 times.
pub(crate) fn token(c: char) -> String {
    std::iter::repeat_n(c, 32).collect()
}

/// Each waiter of `info` as (place, how long it waited in whole tenths of a second, the start of
/// its token).
fn waiters(info: &LockInfo) -> Vec<(Option<u32>, Option<u128>, String)> {
    info.waiters
        .iter()
        .map(|w| {
            (
                w.place,
                w.waited.map(|d| (d.as_millis() + 50) / 100),
                w.token_prefix.clone(),
            )
        })
        .collect()
}

pub(crate) fn zadd(redis: &RedisServer, key: &str, score: u64, member: &str) {
    redis
        .cmd(&["ZADD", key, &score.to_string(), member])
        .unwrap_or_else(|e| panic!("ZADD {key}: {e}"));
}

/// A plain lock's line, soonest lapse first (the order a release passes the lock on), with no
/// time waited (the line keeps none), and without the place that lapsed; shown the same once
/// the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_locks_line_is_shown_soonest_lapse_first_without_lapsed_places() {
    let redis = server();
    let a = client(&redis.url());
    let name = "i-line";
    let held = a
        .lock(name)
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let line = common::lock_subkey(name, "waiters");
    let now = server_ms(&redis);
    zadd(&redis, &line, now + 20_000, &token('a'));
    zadd(&redis, &line, now + 10_000, &token('b'));
    zadd(&redis, &line, now - 1_000, &token('c'));
    let expected = vec![
        (Some(1), None, "bbbbbbbb".to_owned()),
        (Some(2), None, "aaaaaaaa".to_owned()),
    ];
    let info = a.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(info.is_held());
    assert_eq!(waiters(&info), expected, "held");
    // The holder's lease ran out (its key gone) before the first in line came back.
    redis
        .cmd(&["DEL", &common::lock_key(name)])
        .unwrap_or_else(|e| panic!("{e}"));
    let info = a.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!info.is_held());
    assert_eq!(waiters(&info), expected, "free");
    // A line key of another type is no line (the scripts that use it report it).
    redis.cmd(&["DEL", &line]).unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["SET", &line, "not a line"])
        .unwrap_or_else(|e| panic!("{e}"));
    let info = a.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(waiters(&info), vec![], "a line of another type");
    assert!(!held.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A fair lock's queue, in ticket order, each waiter with the time it waited (from its ticket,
/// the server millisecond it arrived at; none for a ticket that is no such instant); without a
/// place whose liveness lapsed or is missing; shown the same once the lock is free; and no
/// queue at all when its liveness set is something else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_locks_queue_is_shown_in_ticket_order_with_the_time_waited() {
    let redis = server();
    let a = client(&redis.url());
    let name = "i-queue";
    let held = a
        .fair_lock(name)
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (queue, alive) = (
        common::lock_subkey(name, "queue"),
        common::lock_subkey(name, "alive"),
    );
    let now = server_ms(&redis);
    // Waited 5 s, and live.
    zadd(&redis, &queue, now - 5_000, &token('1'));
    zadd(&redis, &alive, now + 20_000, &token('1'));
    // No liveness.
    zadd(&redis, &queue, now - 3_000, &token('2'));
    // Its liveness lapsed.
    zadd(&redis, &queue, now - 2_000, &token('3'));
    zadd(&redis, &alive, now - 100, &token('3'));
    // A ticket that is no server millisecond (below 10^12): no arrival instant.
    zadd(&redis, &queue, 7, &token('5'));
    zadd(&redis, &alive, now + 20_000, &token('5'));
    // A ticket ahead of the clock: no arrival instant either.
    zadd(&redis, &queue, now + 60_000, &token('4'));
    zadd(&redis, &alive, now + 20_000, &token('4'));
    let within = |info: &LockInfo, what: &str| {
        let seen = waiters(info);
        assert_eq!(seen.len(), 3, "{what}: {seen:?}");
        assert_eq!(seen[0], (Some(1), None, "55555555".to_owned()), "{what}");
        assert_eq!(seen[1].0, Some(2), "{what}: {seen:?}");
        assert_eq!(seen[1].2, "11111111", "{what}: {seen:?}");
        let waited = seen[1]
            .1
            .unwrap_or_else(|| panic!("{what}: no time waited: {seen:?}"));
        // 5 s when it was written, and at most a few seconds later on a slow machine.
        assert!((50..=80).contains(&waited), "{what}: {seen:?}");
        assert_eq!(seen[2], (Some(3), None, "44444444".to_owned()), "{what}");
    };
    within(
        &a.inspect(name).await.unwrap_or_else(|e| panic!("{e}")),
        "held",
    );
    redis
        .cmd(&["DEL", &common::lock_key(name)])
        .unwrap_or_else(|e| panic!("{e}"));
    within(
        &a.inspect(name).await.unwrap_or_else(|e| panic!("{e}")),
        "free",
    );
    redis
        .cmd(&["DEL", &alive])
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["SET", &alive, "not a set"])
        .unwrap_or_else(|e| panic!("{e}"));
    let info = a.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(waiters(&info), vec![], "a liveness set of another type");
    assert!(!held.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A fence key that is not a string is named (its key and what it holds) and left as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_key_of_another_type_is_named() {
    let redis = server();
    let a = client(&redis.url());
    let name = "i-fence";
    let fence_key = common::lock_subkey(name, "fence");
    redis
        .cmd(&["RPUSH", &fence_key, "1"])
        .unwrap_or_else(|e| panic!("{e}"));
    match a.inspect(name).await {
        Err(Error::WrongType { lock, key, found }) => {
            assert_eq!((lock.as_str(), key.as_str()), (name, fence_key.as_str()));
            assert!(found.contains("list"), "found {found:?}");
        }
        other => panic!("expected WrongType, got {other:?}"),
    }
    assert_eq!(common::keys(&redis), vec![fence_key]);
}

pub(crate) fn hset(redis: &RedisServer, key: &str, field: &str, value: &str) {
    redis
        .cmd(&["HSET", key, field, value])
        .unwrap_or_else(|e| panic!("HSET {key}: {e}"));
}

/// A semaphore's waiting requests, by arrival (one whose arrival is not known first), each with
/// the time it waited; a permit whose lease ran out is shown neither as a holder nor as a
/// waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphores_waiters_are_shown_by_arrival_and_a_lapsed_permit_not_at_all() {
    let redis = server();
    let a = client(&redis.url());
    let name = "i-sem";
    let held = a
        .semaphore(name, 2)
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let key = common::lock_key(name);
    let now = server_ms(&redis);
    hset(
        &redis,
        &key,
        &format!("p:{}", token('d')),
        &format!("{}:7", now - 1_000),
    );
    hset(
        &redis,
        &key,
        &format!("w:{}", token('e')),
        &format!("{}:1:{}", now + 20_000, now - 4_000),
    );
    hset(
        &redis,
        &key,
        &format!("w:{}", token('f')),
        &format!("{}:1:0", now + 20_000),
    );
    let info = a.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(info.shared.len(), 1, "holders: {:?}", info.shared);
    assert_ne!(info.shared[0].token_prefix, "dddddddd", "{info:?}");
    let seen = waiters(&info);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        info.waiters.iter().all(|w| w.side.is_none()),
        "a semaphore's waiter shown with a side: {:?}",
        info.waiters
    );
    assert_eq!(seen[0], (Some(1), None, "ffffffff".to_owned()));
    assert_eq!((seen[1].0, seen[1].2.as_str()), (Some(2), "eeeeeeee"));
    let waited = seen[1]
        .1
        .unwrap_or_else(|| panic!("no time waited: {seen:?}"));
    // 4 s when it was written, and at most a few seconds later on a slow machine.
    assert!((40..=70).contains(&waited), "{seen:?}");
    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A reentrant lock's holder is its owner (the start of the owner's token, as stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentrant_locks_holder_is_its_owner() {
    let redis = server();
    let a = client(&redis.url());
    let name = "i-owner";
    let handle = a.reentrant_lock(name);
    let held = handle
        .request()
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let owner: Option<String> = redis::from_redis_value(
        redis
            .cmd(&["HGET", &common::lock_key(name), "owner"])
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let owner = owner.unwrap_or_else(|| panic!("no owner recorded"));
    let info = a.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    let holder = info
        .holder
        .unwrap_or_else(|| panic!("no holder shown: {:?}", info.shared));
    assert_eq!(holder.token_prefix, owner[..8]);
    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A read-write lock's waiters, in arrival order (an entry without an arrival first), each with
/// what it waits for and how long it has waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_locks_waiters_are_shown_by_arrival_with_their_side() {
    let redis = server();
    let [a, b, c] = [(); 3].map(|_| client(&redis.url()));
    let name = "i-rw";
    let writer = a
        .read_write_lock(name)
        .write()
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let key = common::lock_key(name);
    let waiting = |count: usize| {
        let (redis, key) = (&redis, &key);
        common::wait_for_count(
            "waiting entries",
            count,
            Duration::from_secs(10),
            move || {
                common::fields_starting(redis, key, "i:").len()
                    + common::fields_starting(redis, key, "q:").len()
            },
        )
    };
    let wait = |client: fencelock::Client, write: bool| {
        let lock = client.read_write_lock(name);
        let request = if write { lock.write() } else { lock.read() };
        let request = request
            .ttl(Duration::from_secs(30))
            .queue_timeout(Duration::from_secs(30))
            .wait_up_to(Duration::from_secs(30));
        tokio::spawn(async move { request.acquire().await })
    };
    let next_writer = wait(b, true);
    waiting(1).await;
    // Arrivals are server milliseconds: the reader comes in a later one.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let reader = wait(c, false);
    waiting(2).await;
    // A waiting reader's entry without an arrival (as an implementation that records none
    // writes it): first, with no time waited known.
    let now = server_ms(&redis);
    hset(
        &redis,
        &key,
        &format!("q:{}", token('9')),
        &(now + 20_000).to_string(),
    );
    let info = a.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    let seen: Vec<(Option<u32>, Option<Side>, bool)> = info
        .waiters
        .iter()
        .map(|w| (w.place, w.side, w.waited.is_some()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (Some(1), Some(Side::Reader), false),
            (Some(2), Some(Side::Writer), true),
            (Some(3), Some(Side::Reader), true)
        ],
        "{:?}",
        info.waiters
    );
    next_writer.abort();
    reader.abort();
    waiting(1).await;
    assert!(writer.release().await.unwrap_or_else(|e| panic!("{e}")));
}
