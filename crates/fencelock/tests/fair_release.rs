//! The fair lock's release script beyond the pass: a head that gives up while another holds the
//! lock, and a release that finds the queue's keys of another type or a place without liveness.

use crate::common;

use std::time::Duration;

use common::{client, integer_reply, keys, members, server, wait_for_count};

/// A waiter that gives up (its request cancelled) while another owner holds the lock leaves the
/// queue: behind the head, silently; at the head, the waiter behind it, the new head, is told so
/// by its token (`to:<token>`, nothing else: not the wake of every waiter, not a pass). The
/// holder keeps the lock as it was, and the new head is granted only once it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_leaves_quietly_and_a_head_wakes_the_next_by_its_token() {
    let redis = server();
    let [a, b, c, d] = [(); 4].map(|_| client(&redis.url()));
    let name = "giving-up";
    let lock_key = common::lock_key(name);
    let queue_key = common::lock_subkey(name, "queue");
    let holder = a
        .fair_lock(name)
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let held_as = common::string_at(&redis, &lock_key);
    let waiter = |client: fencelock::Client| {
        tokio::spawn(async move {
            client
                .fair_lock(name)
                .ttl(Duration::from_secs(30))
                .queue_timeout(Duration::from_secs(30))
                .wait_up_to(Duration::from_secs(30))
                .acquire()
                .await
        })
    };
    let queued = |count| {
        let redis = &redis;
        let queue_key = &queue_key;
        wait_for_count(
            "places in the queue",
            count,
            Duration::from_secs(10),
            move || members(redis, queue_key).len(),
        )
    };
    let head = waiter(b);
    queued(1).await;
    let behind = waiter(c);
    queued(2).await;
    let last = waiter(d);
    queued(3).await;
    let [head_token, behind_token, _] = &members(&redis, &queue_key)[..] else {
        panic!("three places expected");
    };
    // Every message on the lock's channels: the lock's own, and each waiter's.
    let mut heard = common::release_messages(&redis, name).await;

    // The last in line gives up: its place goes, and nobody is woken.
    last.abort();
    queued(2).await;
    assert_eq!(
        members(&redis, &queue_key),
        vec![head_token.clone(), behind_token.clone()]
    );
    common::no_message(&mut heard, "the last in line gave up").await;

    head.abort();
    assert_eq!(
        common::next_message(&mut heard, "the head gave up").await,
        (
            format!("fencelock:{{{name}}}:released:{behind_token}"),
            format!("to:{behind_token}")
        ),
        "the new head was not told by its token"
    );
    queued(1).await;
    assert_eq!(
        members(&redis, &queue_key),
        vec![behind_token.clone()],
        "{head_token} gave up"
    );
    // Time for the woken head's try: it finds the lock held, and waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        common::string_at(&redis, &lock_key),
        held_as,
        "the holder's lock changed when a waiter gave up"
    );
    assert!(!behind.is_finished(), "the new head went in while held");

    let fence = holder.fence();
    assert!(holder.release().await.unwrap_or_else(|e| panic!("{e}")));
    let guard = tokio::time::timeout(Duration::from_secs(10), behind)
        .await
        .unwrap_or_else(|_| panic!("the new head was not granted after the release"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the new head: {e}"));
    assert!(guard.fence() > fence);
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(keys(&redis), vec![format!("fencelock:{{{name}}}:fence")]);
}

/// A release that finds the queue or its liveness set replaced by a key of another type
/// releases the lock and leaves that key as it is (the next acquire reports it); one that finds
/// a place without liveness (left by an eviction) takes it out with the lock.
#[tokio::test]
async fn a_release_leaves_queue_keys_of_another_type_alone_and_clears_a_place_without_liveness() {
    let redis = server();
    let a = client(&redis.url());
    let cases: [(&str, &str, &[&str], bool); 3] = [
        ("q-string", "queue", &["SET", "not a queue"], true),
        ("q-list", "alive", &["RPUSH", "x"], true),
        (
            "q-ghost",
            "queue",
            &["ZADD", "1", "0123456789abcdef"],
            false,
        ),
    ];
    for (name, suffix, write, kept) in cases {
        let guard = a
            .fair_lock(name)
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let key = common::lock_subkey(name, suffix);
        let mut command = vec![write[0], key.as_str()];
        command.extend(&write[1..]);
        redis
            .cmd(&command)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let before = common::dumps(&redis, &[&key]);
        assert!(
            guard
                .release()
                .await
                .unwrap_or_else(|e| panic!("{name}: the release: {e}")),
            "{name}: not released"
        );
        assert_eq!(
            integer_reply(&redis, &["EXISTS", &common::lock_key(name)]),
            0,
            "{name}: the lock is still held"
        );
        if kept {
            assert_eq!(
                common::dumps(&redis, &[&key]),
                before,
                "{name}: the key of another type was changed"
            );
        } else {
            assert_eq!(
                integer_reply(&redis, &["EXISTS", &key]),
                0,
                "{name}: the place without liveness was left in the queue"
            );
        }
    }
}
