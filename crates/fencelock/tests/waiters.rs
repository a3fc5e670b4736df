//! The line of waiters in the operator's view (`Client::inspect` → `LockInfo::waiters`), for
//! each kind, against a real redis-server: waiters started one at a time are shown in the order
//! the lock will go to them, with their token's first 8 digits and, where the kind records an
//! arrival, how long they have waited.

use crate::common;

use std::time::Duration;

use fencelock::admin::{LockInfo, Side};
use fencelock::{Client, LockGuard, LockRequest};
use fencelock_testkit::RedisServer;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use common::{client, redlock_client, redlock_servers, server, wait_for_count};

/// Leases and places far longer than a test: no waiter refreshes its place (every third of its
/// duration) while the line is looked at, so the line stays in arrival order.
const LONG: Duration = Duration::from_secs(60);
const LIMIT: Duration = Duration::from_secs(10);

/// A request that waits, with a lease and a place that outlast the test.
fn patient(request: LockRequest) -> LockRequest {
    request.ttl(LONG).queue_timeout(LONG).wait_up_to(LONG)
}

fn spawn_acquire(request: LockRequest) -> JoinHandle<LockGuard> {
    tokio::spawn(async move {
        match request.acquire().await {
            Ok(guard) => guard,
            Err(e) => panic!("a waiter's acquire: {e}"),
        }
    })
}

/// How many clients subscribe `channel`.
fn subscribers(redis: &RedisServer, channel: &str) -> u64 {
    match redis.cmd(&["PUBSUB", "NUMSUB", channel]) {
        Ok(value) => {
            let (_, count): (String, u64) =
                redis::from_redis_value(value).unwrap_or_else(|e| panic!("{channel}: {e}"));
            count
        }
        Err(e) => panic!("PUBSUB NUMSUB {channel}: {e}"),
    }
}

/// The members of the sorted set `key`, lowest score first.
fn members(redis: &RedisServer, key: &str) -> Vec<String> {
    match redis.cmd(&["ZRANGE", key, "0", "-1"]) {
        Ok(value) => redis::from_redis_value(value).unwrap_or_else(|e| panic!("{key}: {e}")),
        Err(e) => panic!("ZRANGE {key}: {e}"),
    }
}

/// The hold tokens of the hash `key`'s fields that start with `role` (`i:`, `q:`).
fn entries(redis: &RedisServer, key: &str, role: &str) -> Vec<String> {
    common::fields_starting(redis, key, role)
        .into_iter()
        .map(|field| field[role.len()..].to_owned())
        .collect()
}

/// The one token in `now` that is not in `known`.
fn newcomer(known: &[String], now: &[String]) -> String {
    let new: Vec<&String> = now.iter().filter(|t| !known.contains(t)).collect();
    match new.as_slice() {
        [token] => (*token).clone(),
        _ => panic!("not one new waiter: {now:?} after {known:?}"),
    }
}

async fn inspect(client: &Client, name: &str) -> LockInfo {
    match client.inspect(name).await {
        Ok(info) => info,
        Err(e) => panic!("inspect {name}: {e}"),
    }
}

/// `info` shows exactly `tokens` waiting, in that order, places 1.., each by its first 8
/// digits, with `sides` where given.
fn assert_line(info: &LockInfo, tokens: &[String], sides: &[Option<Side>]) {
    assert_eq!(info.waiting, tokens.len() as u64, "{info:#?}");
    assert_eq!(info.waiters.len(), tokens.len(), "{info:#?}");
    for (i, (waiter, token)) in info.waiters.iter().zip(tokens).enumerate() {
        assert_eq!(waiter.place, Some(i as u32 + 1), "{info:#?}");
        assert_eq!(
            waiter.token_prefix,
            token[..8],
            "place {}: {info:#?}",
            i + 1
        );
        assert_eq!(waiter.side, sides[i], "place {}: {info:#?}", i + 1);
    }
}

/// Waits are known and not longer than the test has run, and an earlier place waited longer.
fn assert_waits(info: &LockInfo, started: Instant) {
    let mut previous = None;
    for waiter in &info.waiters {
        let waited = waiter
            .waited
            .unwrap_or_else(|| panic!("no wait: {info:#?}"));
        // (The server's clock against ours: a millisecond of rounding either way.)
        assert!(
            waited <= started.elapsed() + Duration::from_millis(5),
            "{info:#?}"
        );
        if let Some(previous) = previous {
            assert!(waited <= previous, "{info:#?}");
        }
        previous = Some(waited);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locks_line_shows_its_waiters_in_the_order_the_lock_is_passed_on() {
    const WAITERS: usize = 4;
    let redis = server();
    let clients: Vec<Client> = (0..3).map(|_| client(&redis.url())).collect();
    let holder = patient(clients[0].lock("line")).acquire().await.unwrap();
    let line = "fencelock:{line}:waiters";
    let (mut tokens, mut waiters) = (Vec::new(), Vec::new());
    for i in 0..WAITERS {
        let client = &clients[1 + i % 2];
        waiters.push(spawn_acquire(patient(client.lock("line"))));
        wait_for_count("places in line", i + 1, LIMIT, || {
            members(&redis, line).len()
        })
        .await;
        tokens.push(newcomer(&tokens, &members(&redis, line)));
    }
    // A plain lock's line is ordered by when each place lapses, and a waiter tries once more
    // (refreshing its place) once it listens on its own channel: on a loaded machine that can
    // come after a later arrival's place. The line is read once every waiter listens.
    wait_for_count("waiters listening", WAITERS, LIMIT, || {
        tokens
            .iter()
            .filter(|t| subscribers(&redis, &format!("fencelock:{{line}}:released:{t}")) > 0)
            .count()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let line_tokens = members(&redis, line);
    let info = inspect(&clients[0], "line").await;
    assert_line(&info, &line_tokens, &[None; WAITERS]);
    // A lock's line records no arrival.
    assert!(info.waiters.iter().all(|w| w.waited.is_none()), "{info:#?}");
    assert!(info.holder.is_some(), "{info:#?}");

    // The lock goes down the line in the order shown, which need not be the order the waiters
    // arrived in: each waiter is awaited where its token stands in the line.
    let mut waiters: Vec<_> = tokens.iter().zip(waiters).collect();
    waiters.sort_by_key(|(token, _)| line_tokens.iter().position(|t| t == *token));
    let waiters = waiters.into_iter().map(|(_, waiter)| waiter);
    let tokens = line_tokens;
    assert!(holder.release().await.unwrap());
    for (i, waiter) in waiters.enumerate() {
        let guard = tokio::time::timeout(LIMIT, waiter).await.unwrap().unwrap();
        let info = inspect(&clients[0], "line").await;
        let held = info.holder.as_ref().map(|h| h.token_prefix.clone());
        assert_eq!(held.as_deref(), Some(&tokens[i][..8]), "{info:#?}");
        assert_line(&info, &tokens[i + 1..], &[None; WAITERS][i + 1..]);
        assert!(guard.release().await.unwrap());
    }
    assert!(inspect(&clients[0], "line").await.waiters.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_locks_queue_shows_its_waiters_in_arrival_order_with_their_waits() {
    const WAITERS: usize = 4;
    let redis = server();
    let clients: Vec<Client> = (0..3).map(|_| client(&redis.url())).collect();
    let started = Instant::now();
    let holder = patient(clients[0].fair_lock("queue"))
        .acquire()
        .await
        .unwrap();
    let queue = "fencelock:{queue}:queue";
    let (mut tokens, mut waiters) = (Vec::new(), Vec::new());
    for i in 0..WAITERS {
        let client = &clients[1 + i % 2];
        waiters.push(spawn_acquire(patient(client.fair_lock("queue"))));
        wait_for_count("waiters queued", i + 1, LIMIT, || {
            members(&redis, queue).len()
        })
        .await;
        tokens.push(newcomer(&tokens, &members(&redis, queue)));
        // Arrivals a few milliseconds apart, so that their waits differ.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let info = inspect(&clients[0], "queue").await;
    assert_line(&info, &tokens, &[None; WAITERS]);
    assert_waits(&info, started);
    let (first, last) = (&info.waiters[0], &info.waiters[WAITERS - 1]);
    assert!(
        first.waited.unwrap() >= last.waited.unwrap() + Duration::from_millis(50),
        "{info:#?}"
    );

    assert!(holder.release().await.unwrap());
    for (i, waiter) in waiters.into_iter().enumerate() {
        let guard = tokio::time::timeout(LIMIT, waiter).await.unwrap().unwrap();
        let info = inspect(&clients[0], "queue").await;
        let held = info.holder.as_ref().map(|h| h.token_prefix.clone());
        assert_eq!(held.as_deref(), Some(&tokens[i][..8]), "{info:#?}");
        assert_line(&info, &tokens[i + 1..], &[None; WAITERS][i + 1..]);
        assert!(guard.release().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_write_locks_waiters_show_their_side_in_arrival_order() {
    let redis = server();
    let clients: Vec<Client> = (0..2).map(|_| client(&redis.url())).collect();
    let started = Instant::now();
    let writer = patient(clients[0].read_write_lock("rw").write())
        .acquire()
        .await
        .unwrap();
    let key = "fencelock:{rw}";
    let sides = [Side::Writer, Side::Reader, Side::Reader, Side::Writer];
    let (mut tokens, mut waiters) = (Vec::new(), Vec::new());
    for (i, side) in sides.iter().enumerate() {
        let handle = clients[i % 2].read_write_lock("rw");
        let request = match side {
            Side::Writer => handle.write(),
            _ => handle.read(),
        };
        waiters.push(spawn_acquire(patient(request)));
        let waiting = || [entries(&redis, key, "i:"), entries(&redis, key, "q:")].concat();
        wait_for_count("waiting entries", i + 1, LIMIT, || waiting().len()).await;
        tokens.push(newcomer(&tokens, &waiting()));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let info = inspect(&clients[0], "rw").await;
    assert_line(&info, &tokens, &sides.map(Some));
    assert_waits(&info, started);
    assert!(info.holder.is_some(), "{info:#?}");

    assert!(writer.release().await.unwrap());
    for waiter in waiters {
        let guard = tokio::time::timeout(LIMIT, waiter).await.unwrap().unwrap();
        assert!(guard.release().await.unwrap());
    }
    let info = inspect(&clients[0], "rw").await;
    assert_eq!((info.waiting, info.waiters.len()), (0, 0), "{info:#?}");
}

/// Over Redlock a read-write lock's waiter has a place on every instance; it is shown once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redlock_a_waiter_on_a_majority_is_shown_once() {
    let (servers, urls) = redlock_servers(3);
    let (a, b) = (
        redlock_client(&urls, Duration::from_millis(200)),
        redlock_client(&urls, Duration::from_millis(200)),
    );
    let writer = patient(a.read_write_lock("rw").write())
        .acquire()
        .await
        .unwrap();
    let reader = spawn_acquire(patient(b.read_write_lock("rw").read()));
    for redis in &servers {
        wait_for_count("waiting readers", 1, LIMIT, || {
            entries(redis, "fencelock:{rw}", "q:").len()
        })
        .await;
    }
    let token = entries(&servers[0], "fencelock:{rw}", "q:");
    let info = inspect(&a, "rw").await;
    assert_line(&info, &token, &[Some(Side::Reader)]);
    assert!(writer.release().await.unwrap());
    let guard = tokio::time::timeout(LIMIT, reader).await.unwrap().unwrap();
    assert!(guard.release().await.unwrap());
}

/// A semaphore's and a reentrant lock's waiters keep no place in Redis (they wait for a
/// release message): the view shows none, and says so with a count of 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentrant_waiter_keeps_no_place_and_a_semaphore_waiter_shows_its_place() {
    let redis = server();
    let (a, b) = (client(&redis.url()), client(&redis.url()));
    let permit = patient(a.semaphore("permits", 1)).acquire().await.unwrap();
    let held = patient(a.reentrant_lock("nested").request())
        .acquire()
        .await
        .unwrap();
    let waiters = [
        spawn_acquire(patient(b.semaphore("permits", 1))),
        spawn_acquire(patient(b.reentrant_lock("nested").request())),
    ];
    // Both wait: subscribed to their release channels.
    for name in ["permits", "nested"] {
        let channel = format!("fencelock:{{{name}}}:released");
        wait_for_count("subscribers", 1, LIMIT, || {
            match redis.cmd(&["PUBSUB", "NUMSUB", &channel]) {
                Ok(redis::Value::Array(reply)) => redis::from_redis_value(reply[1].clone()).ok(),
                _ => None,
            }
            .unwrap_or(0i64)
        })
        .await;
    }
    // A reentrant lock's waiter keeps no place; a semaphore's does (first come, first served),
    // and is shown with how long it has waited.
    let info = inspect(&a, "nested").await;
    assert!(info.is_held(), "{info:#?}");
    assert_eq!((info.waiting, info.waiters.len()), (0, 0), "{info:#?}");
    let info = inspect(&a, "permits").await;
    assert!(info.is_held(), "{info:#?}");
    assert_eq!((info.waiting, info.waiters.len()), (1, 1), "{info:#?}");
    assert_eq!(info.waiters[0].place, Some(1), "{info:#?}");
    assert!(info.waiters[0].waited.is_some(), "{info:#?}");
    assert!(permit.release().await.unwrap());
    assert!(held.release().await.unwrap());
    for waiter in waiters {
        let guard = tokio::time::timeout(LIMIT, waiter).await.unwrap().unwrap();
        assert!(guard.release().await.unwrap());
    }
}
