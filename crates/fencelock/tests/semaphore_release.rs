//! The semaphore's release script as its waiters hear it: what a release, and a waiter's giving
//! up, publish on the semaphore's channel, and who is let in by it.

use crate::common;

use std::time::Duration;

use fencelock::{Client, LockGuard};
use fencelock_testkit::RedisServer;
use tokio::task::JoinHandle;

use common::{
    client, fields_starting, next_message as next, no_message as silence,
    release_messages as listen, server, wait_for_count,
};

const LONG: Duration = Duration::from_secs(30);

/// A request for `take` of `name`'s `permits` that waits (up to 30 s, its place lasting as
/// long), in a task of its own.
fn waiter(client: &Client, name: &str, permits: u32, take: u32) -> JoinHandle<LockGuard> {
    let request = client
        .semaphore(name, permits)
        .take(take)
        .ttl(LONG)
        .queue_timeout(LONG)
        .wait_up_to(LONG);
    tokio::spawn(async move { request.acquire().await.unwrap_or_else(|e| panic!("{e}")) })
}

/// The requests waiting for `name` (their places), once there are `count`.
async fn waiting(redis: &RedisServer, name: &str, count: usize) {
    let key = common::lock_key(name);
    wait_for_count("waiting requests", count, Duration::from_secs(10), || {
        fields_starting(redis, &key, "w:").len()
    })
    .await;
}

/// A release while another request waits wakes every waiter (`all`: which one goes first only
/// its own try can tell); a release with nobody waiting wakes one waiter of each client
/// (`one`); a waiter that gives up with nobody else waiting leaves its place and publishes
/// nothing, and the holder keeps its permit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_all_while_requests_wait_one_otherwise_and_a_lone_give_up_nobody() {
    let redis = server();
    let name = "sem-wakes";
    let channel = format!("fencelock:{{{name}}}:released");
    let [a, b, c, d] = [(); 4].map(|_| client(&redis.url()));
    let holder = a
        .semaphore(name, 1)
        .ttl(LONG)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let next_holder = waiter(&b, name, 1, 1);
    waiting(&redis, name, 1).await;
    let mut heard = listen(&redis, name).await;

    assert!(holder.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        next(&mut heard, "a release with a request waiting").await,
        (channel.clone(), "all".to_owned()),
        "a release with a request waiting"
    );
    let second = tokio::time::timeout(Duration::from_secs(5), next_holder)
        .await
        .unwrap_or_else(|_| panic!("the waiter was not let in after the release"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(second.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        next(&mut heard, "a release with nobody waiting").await,
        (channel.clone(), "one".to_owned()),
        "a release with nobody waiting"
    );
    let key = common::lock_key(name);
    assert!(
        !common::keys(&redis).contains(&key),
        "the last release left the semaphore's hash: {:?}",
        common::hash_fields(&redis, &key)
    );

    let third = c
        .semaphore(name, 1)
        .ttl(LONG)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let held = fields_starting(&redis, &key, "p:");
    let gives_up = waiter(&d, name, 1, 1);
    waiting(&redis, name, 1).await;
    gives_up.abort();
    waiting(&redis, name, 0).await;
    silence(&mut heard, "the only waiter gave up").await;
    assert_eq!(
        fields_starting(&redis, &key, "p:"),
        held,
        "a waiter's giving up changed the holder's permit"
    );
    assert!(third.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// Permits go first come, first served: a request for one permit waits behind an earlier one
/// for two, though one is free. When the request for two gives up, its leaving wakes every
/// waiter (`all`), and the request for one is let in at once, long before its own wait for the
/// holder's lease or the earlier request's place would end (30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_gives_up_lets_in_the_smaller_request_behind_it() {
    let redis = server();
    let name = "sem-gives-up";
    let channel = format!("fencelock:{{{name}}}:released");
    let [a, b, c] = [(); 3].map(|_| client(&redis.url()));
    let holder = a
        .semaphore(name, 2)
        .ttl(LONG)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let for_two = waiter(&b, name, 2, 2);
    waiting(&redis, name, 1).await;
    let for_one = waiter(&c, name, 2, 1);
    waiting(&redis, name, 2).await;
    // Time for the request for one to have tried again: it still waits behind the one for two.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !for_one.is_finished(),
        "a request for one permit went in ahead of an earlier request for two"
    );
    let mut heard = listen(&redis, name).await;

    for_two.abort();
    assert_eq!(
        next(&mut heard, "the request for two gave up").await,
        (channel, "all".to_owned()),
        "the request for two gave up while another waited"
    );
    let granted = tokio::time::timeout(Duration::from_secs(5), for_one)
        .await
        .unwrap_or_else(|_| panic!("the request for one was not let in when the one ahead left"))
        .unwrap_or_else(|e| panic!("{e}"));
    waiting(&redis, name, 0).await;
    assert!(granted.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert!(holder.release().await.unwrap_or_else(|e| panic!("{e}")));
}
