//! Requests that do not wait (`try_acquire`, `no_wait`): they take no place among the waiters
//! and never a held lock; a fair lock's takes a free lock only when no live waiter is queued
//! ahead of it, and its pass takes the next fence.

use crate::common;

use common::{calls, client, server};

/// `ZCARD` of `key`.
fn members(redis: &fencelock_testkit::RedisServer, key: &str) -> i64 {
    common::integer_reply(redis, &["ZCARD", key])
}

/// The server's clock in milliseconds, plus `ms`, as text.
fn server_ms_plus(redis: &fencelock_testkit::RedisServer, ms: i64) -> String {
    (i64::try_from(common::server_ms(redis)).unwrap_or(i64::MAX) + ms).to_string()
}

#[tokio::test]
async fn a_try_takes_no_place_and_never_a_held_lock() {
    let redis = server();
    let (a, b) = (client(&redis.url()), client(&redis.url()));
    let (lock, queue) = ("fencelock:{turns}", "fencelock:{turns}:queue");
    let held = a
        .fair_lock("turns")
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the free lock was not taken"));
    let value = redis.cmd(&["GET", lock]).unwrap_or_else(|e| panic!("{e}"));
    let tried = b.fair_lock("turns").try_acquire().await;
    assert!(matches!(tried, Ok(None)), "{tried:?}");
    assert_eq!(
        redis.cmd(&["GET", lock]).unwrap_or_else(|e| panic!("{e}")),
        value
    );
    assert_eq!(
        (members(&redis, queue), calls(&redis, "zadd")),
        (0, 0),
        "a try queued itself"
    );
    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
}

#[tokio::test]
async fn a_try_on_a_free_lock_waits_for_a_live_waiter_and_not_for_a_dead_one() {
    let redis = server();
    let b = client(&redis.url());
    let (queue, alive) = ("fencelock:{turns}:queue", "fencelock:{turns}:alive");
    // A waiter queued ahead, its place alive for a minute (the lock free: its holder's lease ran
    // out before the waiter's next try).
    let lapses = server_ms_plus(&redis, 60_000);
    redis
        .cmd(&["ZADD", queue, "1", "ahead"])
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["ZADD", alive, &lapses, "ahead"])
        .unwrap_or_else(|e| panic!("{e}"));
    let tried = b.fair_lock("turns").try_acquire().await;
    assert!(
        matches!(tried, Ok(None)),
        "a try went ahead of a live waiter: {tried:?}"
    );
    assert_eq!(members(&redis, queue), 1, "the waiter lost its place");
    // Refused, told how long the waiter's place lasts at most.
    match b.fair_lock("turns").no_wait().acquire().await {
        Err(fencelock::Error::Busy {
            remaining: Some(left),
            ..
        }) => assert!(
            left > std::time::Duration::from_secs(50),
            "told {left:?}, the waiter's place lasts a minute"
        ),
        other => panic!("expected Busy with the time left, got {other:?}"),
    }
    // The waiter died: its place lapsed. The try takes the lock, and the dead place goes.
    let lapsed = server_ms_plus(&redis, -1_000);
    redis
        .cmd(&["ZADD", alive, &lapsed, "ahead"])
        .unwrap_or_else(|e| panic!("{e}"));
    let taken = b
        .fair_lock("turns")
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("a try behind a dead waiter: {e}"))
        .unwrap_or_else(|| panic!("a try waited for a dead waiter"));
    assert_eq!(members(&redis, queue), 0, "the dead waiter's place stayed");
    assert!(taken.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A release that passes the fair lock to the head of the queue gives it a fence of its own by
/// the fence rule, max(last + 1, clock): after the counter when it is ahead of the server's
/// clock, the clock when it is behind.
#[tokio::test]
async fn a_pass_takes_the_next_fence_whether_the_counter_is_ahead_of_the_clock_or_behind() {
    let redis = server();
    let (a, b) = (client(&redis.url()), client(&redis.url()));
    for (name, counter) in [("ahead", "4000000000000000"), ("behind", "1000")] {
        redis
            .cmd(&["SET", &format!("fencelock:{{{name}}}:fence"), counter])
            .unwrap_or_else(|e| panic!("{e}"));
        let first = a
            .fair_lock(name)
            .try_acquire()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("{name}: not taken"));
        let waiting = tokio::spawn({
            let b = b.clone();
            let name = name.to_owned();
            async move {
                b.fair_lock(name)
                    .wait_up_to(std::time::Duration::from_secs(10))
                    .acquire()
                    .await
            }
        });
        let queue = format!("fencelock:{{{name}}}:queue");
        common::wait_for_count(
            &format!("{name}: a waiter queued"),
            1,
            std::time::Duration::from_secs(5),
            || members(&redis, &queue),
        )
        .await;
        let clock_us = common::server_ms(&redis) * 1000;
        let first_fence = first.fence();
        assert!(first.release().await.unwrap_or_else(|e| panic!("{e}")));
        let second = waiting
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{name}: the waiter: {e}"));
        if name == "ahead" {
            assert_eq!(second.fence(), first_fence + 1, "{name}: the passed fence");
        } else {
            // The clock, read before the release: not the counter's `last + 1`.
            assert!(
                second.fence() >= clock_us && second.fence() > first_fence,
                "{name}: the passed fence {} (the first {first_fence}, the clock {clock_us})",
                second.fence()
            );
        }
        assert!(second.release().await.unwrap_or_else(|e| panic!("{e}")));
    }
}

/// A semaphore's try, for one permit or several (their count and the place's length travel
/// together), takes no place among the waiters.
#[tokio::test]
async fn a_semaphore_try_takes_no_place_among_the_waiters() {
    let redis = server();
    let (a, b) = (client(&redis.url()), client(&redis.url()));
    let key = "fencelock:{pool}";
    let held = a
        .semaphore("pool", 2)
        .take(2)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the free permits were not taken"));
    for take in [1, 2] {
        let tried = b.semaphore("pool", 2).take(take).try_acquire().await;
        assert!(matches!(tried, Ok(None)), "take {take}: {tried:?}");
        let waiting = common::fields_starting(&redis, key, "w:");
        assert!(
            waiting.is_empty(),
            "a try of {take} took a place: {waiting:?}"
        );
    }
    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
}
