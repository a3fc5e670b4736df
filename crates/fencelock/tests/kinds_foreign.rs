//! Every kind of lock against keys it did not write: a fence key that is not a number is named
//! and nothing is written; a renewal or a release that finds its lock's key replaced by a value
//! of another type is refused (or answers that it no longer held it, or names the key) and
//! leaves that value alone.

use crate::common;

use fencelock::Error;

use common::{client, dumps, lock_key, lock_subkey, request, server};

const KINDS: [&str; 6] = ["lock", "fair", "reentrant", "read", "write", "semaphore"];

#[tokio::test]
async fn a_fence_key_that_is_not_a_number_is_named_by_every_kind_and_nothing_is_written() {
    let redis = server();
    let a = client(&redis.url());
    for kind in KINDS {
        let name = format!("fence-{kind}");
        let (key, fence) = (lock_key(&name), lock_subkey(&name, "fence"));
        redis
            .cmd(&["SET", &fence, "twelve"])
            .unwrap_or_else(|e| panic!("{e}"));
        let before = dumps(&redis, &[&key, &fence]);
        match request(&a, kind, &name).try_acquire().await {
            Err(e @ Error::WrongType { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains(&fence) && text.contains(&name),
                    "{kind}: {text}"
                );
            }
            other => panic!("{kind}: expected WrongType, got {other:?}"),
        }
        assert_eq!(
            dumps(&redis, &[&key, &fence]),
            before,
            "{kind}: a key was written"
        );
    }
}

/// `kind` taken as `name` (not renewed), then its key replaced by a value of another type (the
/// string kinds' key becomes a list, the hash kinds' a string): the guard, the key and what
/// the key holds (`DUMP`).
async fn held_then_replaced(
    redis: &fencelock_testkit::RedisServer,
    client: &fencelock::Client,
    kind: &str,
    name: &str,
) -> (fencelock::LockGuard, String, Vec<redis::Value>) {
    let key = lock_key(name);
    let guard = request(client, kind, name)
        .auto_renew(false)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{kind}: {e}"))
        .unwrap_or_else(|| panic!("{kind}: busy"));
    redis.cmd(&["DEL", &key]).unwrap_or_else(|e| panic!("{e}"));
    let foreign = match kind {
        "lock" | "fair" => redis.cmd(&["RPUSH", &key, "not ours"]),
        _ => redis.cmd(&["SET", &key, "not ours"]),
    };
    foreign.unwrap_or_else(|e| panic!("{e}"));
    let before = dumps(redis, &[&key]);
    (guard, key, before)
}

#[tokio::test]
async fn a_release_that_finds_its_key_replaced_by_another_type_leaves_it_alone() {
    let redis = server();
    let a = client(&redis.url());
    for kind in KINDS {
        let (guard, key, before) =
            held_then_replaced(&redis, &a, kind, &format!("replaced-{kind}")).await;
        match guard.release().await {
            Ok(false) => {}
            Err(e @ Error::WrongType { .. }) => {
                assert!(e.to_string().contains(&key), "{kind}: {e}");
            }
            other => panic!("{kind}: expected Ok(false) or WrongType, got {other:?}"),
        }
        assert_eq!(
            dumps(&redis, &[&key]),
            before,
            "{kind}: the foreign value changed"
        );
    }
}

/// A plain lock's release that finds another owner's value (its lease was lost) gives up its
/// place in line, if it has one: a line key of another type is left alone, and the release
/// answers that the lock was no longer held.
#[tokio::test]
async fn a_release_that_finds_another_owner_leaves_a_line_of_another_type_alone() {
    let redis = server();
    let a = client(&redis.url());
    let name = "line-foreign";
    let (key, line) = (lock_key(name), lock_subkey(name, "waiters"));
    let guard = a
        .lock(name)
        .auto_renew(false)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("busy"));
    for planted in [
        vec![
            "SET",
            &key,
            "0123456789abcdef0123456789abcdef:5",
            "PX",
            "60000",
        ],
        vec!["RPUSH", &line, "not ours"],
    ] {
        redis
            .cmd(&planted)
            .unwrap_or_else(|e| panic!("{planted:?}: {e}"));
    }
    let before = dumps(&redis, &[&key, &line]);
    match guard.release().await {
        Ok(false) => {}
        other => panic!("expected Ok(false), got {other:?}"),
    }
    assert_eq!(
        dumps(&redis, &[&key, &line]),
        before,
        "the other owner's value or the line of another type changed"
    );
}

#[tokio::test]
async fn a_renewal_that_finds_its_key_replaced_by_another_type_is_refused_and_leaves_it_alone() {
    let redis = server();
    let a = client(&redis.url());
    for kind in KINDS {
        let (guard, key, before) =
            held_then_replaced(&redis, &a, kind, &format!("renewed-{kind}")).await;
        match guard.extend(std::time::Duration::from_secs(30)).await {
            Err(Error::NotHeld { .. }) => {}
            other => panic!("{kind}: expected NotHeld, got {other:?}"),
        }
        assert!(
            !guard.is_held(),
            "{kind}: still held after a refused renewal"
        );
        assert_eq!(
            dumps(&redis, &[&key]),
            before,
            "{kind}: the foreign value changed"
        );
        let _ = guard.release().await;
        assert_eq!(
            dumps(&redis, &[&key]),
            before,
            "{kind}: the release changed it"
        );
    }
}
