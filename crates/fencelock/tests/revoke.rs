//! Polite revocation: `Client::request_release` asks, `LockGuard::release_requested` hears,
//! and nothing is taken from the holder.

#![allow(clippy::unwrap_used)] // a test fails by panicking

use crate::common;

use std::time::Duration;

use fencelock::Error;

use common::{client, server};

const HEARD_WITHIN: Duration = Duration::from_secs(3);

#[tokio::test]
async fn a_holder_hears_the_request_and_keeps_the_lock_until_it_releases() {
    let redis = server();
    let holder = client(&redis.url());
    let operator = client(&redis.url());
    let guard = holder.lock("asked").acquire().await.unwrap();
    let heard = {
        let listening = guard.release_requested();
        tokio::pin!(listening);
        // Not asked yet: nothing resolves.
        assert!(
            tokio::time::timeout(Duration::from_millis(300), &mut listening)
                .await
                .is_err()
        );
        assert!(operator.request_release("asked").await.unwrap());
        tokio::time::timeout(HEARD_WITHIN, listening).await.is_ok()
    };
    assert!(heard, "the holder did not hear the request");
    // Asking took nothing.
    assert!(guard.is_held());
    let busy = operator
        .lock("asked")
        .no_wait()
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(busy, Error::Busy { .. }), "{busy}");
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn a_request_made_before_the_holder_listens_is_found() {
    let redis = server();
    let holder = client(&redis.url());
    let guard = holder.lock("asked-early").acquire().await.unwrap();
    assert!(
        client(&redis.url())
            .request_release("asked-early")
            .await
            .unwrap()
    );
    tokio::time::timeout(HEARD_WITHIN, guard.release_requested())
        .await
        .unwrap();
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_request_for_an_earlier_holder_does_not_reach_the_next() {
    let redis = server();
    let a = client(&redis.url());
    let first = a
        .lock("asked-once")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    assert!(a.request_release("asked-once").await.unwrap());
    first.release().await.unwrap();
    // The request stands for the first hold's lease; the next holder has a larger fence.
    let second = a.lock("asked-once").acquire().await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(800), second.release_requested())
            .await
            .is_err(),
        "the next holder was told of a request made for the one before"
    );
    second.release().await.unwrap();
}

#[tokio::test]
async fn asking_for_a_free_lock_answers_false_and_a_bad_name_is_refused() {
    let redis = server();
    let a = client(&redis.url());
    assert!(!a.request_release("nobody-holds-it").await.unwrap());
    let err = a.request_release("bad{name}").await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}
