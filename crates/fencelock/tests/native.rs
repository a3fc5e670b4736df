//! Leases re-armed by the server's own compare-and-set (`SET key value IFEQ value PX ttl`)
//! where the server has it (Valkey 8.1 and later: `FENCELOCK_TEST_SERVER`), and by script
//! where it has not (Redis 7.0); either way with the same answers.

use crate::common;

use std::time::Duration;

use fencelock_testkit::RedisServer;

use common::{calls, client, monitor, server};
use futures_util::StreamExt;

/// Whether the server knows `SET … IFEQ` (asked on a key of its own).
fn has_set_ifeq(redis: &RedisServer) -> bool {
    match redis.cmd(&["SET", "probe", "v", "IFEQ", "v"]) {
        Ok(_) => true,
        Err(err) if err.to_string().contains("syntax error") => false,
        Err(err) => panic!("SET IFEQ: {err}"),
    }
}

/// Script runs so far (`EVALSHA` and `EVAL`).
fn scripts(redis: &RedisServer) -> u64 {
    calls(redis, "evalsha") + calls(redis, "eval")
}

fn pttl(redis: &RedisServer, key: &str) -> i64 {
    match redis.cmd(&["PTTL", key]) {
        Ok(redis::Value::Int(ms)) => ms,
        other => panic!("PTTL {key}: {other:?}"),
    }
}

#[tokio::test]
async fn renewals_and_extend_use_set_ifeq_where_the_server_has_it() {
    let redis = server();
    let native = has_set_ifeq(&redis);
    let client = client(&redis.url());
    let lease = Duration::from_millis(900);
    let guard = client.lock("renewed").ttl(lease).acquire().await.unwrap();
    let (scripts_before, sets_before) = (scripts(&redis), calls(&redis, "set"));
    // The watchdog renews every 300 ms: several renewals, then one by hand.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    guard.extend(Duration::from_secs(5)).await.unwrap();
    assert!(guard.is_held(), "the lock was lost while renewed");
    assert!(
        pttl(&redis, "fencelock:{renewed}") > 4000,
        "extend did not re-arm the lease"
    );
    let (scripts_run, sets) = (
        scripts(&redis) - scripts_before,
        calls(&redis, "set") - sets_before,
    );
    if native {
        assert_eq!(
            scripts_run, 0,
            "a renewal ran a script on a server with SET IFEQ"
        );
        assert!(
            sets >= 4,
            "{sets} SET calls for the renewals and the extend"
        );
    } else {
        // One SET refused as a syntax error, then every renewal by script.
        assert!(scripts_run >= 4, "{scripts_run} scripts for the renewals");
        assert!(
            sets <= 1,
            "SET IFEQ sent again after the server refused it: {sets}"
        );
    }
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_value_marked_by_a_waiter_is_renewed_by_script_and_the_lock_passed_on() {
    let redis = server();
    let holder = client(&redis.url());
    let waiter = client(&redis.url());
    let lease = Duration::from_millis(900);
    let guard = holder.lock("marked").ttl(lease).acquire().await.unwrap();
    let fence = guard.fence();
    let waiting = tokio::spawn(async move {
        waiter
            .lock("marked")
            .ttl(Duration::from_secs(5))
            .wait_up_to(Duration::from_secs(20))
            .acquire()
            .await
    });
    // The waiter marks the value (`+`): SET IFEQ with the value the grant wrote no longer
    // matches, and the extend script must re-arm it, or the holder loses the lock.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    match redis.cmd(&["GET", "fencelock:{marked}"]) {
        Ok(redis::Value::BulkString(v)) => {
            let v = String::from_utf8_lossy(&v).into_owned();
            assert!(v.ends_with(&format!(":{fence}+")), "value not marked: {v}");
        }
        other => panic!("GET: {other:?}"),
    }
    assert!(guard.is_held(), "the holder lost a lock someone waited for");
    assert!(!waiting.is_finished(), "the waiter got a lock still held");
    // The first renewal after the mark missed and went by script; the hold remembers the mark,
    // and where the server has SET IFEQ, the renewals that follow compare with the marked value
    // (one round trip, no script). Extend calls have two arguments (token, ms); the waiter's
    // tries have four.
    let mut heard = monitor(&redis).await;
    let mut extends = 0;
    let window = tokio::time::Instant::now() + Duration::from_millis(1500);
    while let Ok(Some(line)) = tokio::time::timeout_at(window, heard.next()).await {
        extends += common::script_calls(&line)
            .iter()
            .filter(|args| args.len() == 2)
            .count();
    }
    if has_set_ifeq(&redis) {
        assert_eq!(extends, 0, "renewals of a marked value ran the script");
    } else {
        assert!(extends >= 1, "no renewal heard in 1.5 s");
    }
    assert!(guard.is_held(), "the holder lost a lock someone waited for");
    guard.release().await.unwrap();
    let next = waiting.await.unwrap().unwrap();
    assert!(next.fence() > fence);
    next.release().await.unwrap();
}

#[tokio::test]
async fn a_key_replaced_by_another_type_is_a_lost_lock_not_an_error() {
    let redis = server();
    let client = client(&redis.url());
    let guard = client
        .lock("swapped")
        .ttl(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    // Behind the holder's back the key becomes a hash: `SET … IFEQ` answers WRONGTYPE, and
    // the extend script says the key is someone else's.
    redis.cmd(&["DEL", "fencelock:{swapped}"]).unwrap();
    redis
        .cmd(&["HSET", "fencelock:{swapped}", "field", "value"])
        .unwrap();
    let err = guard.extend(Duration::from_secs(10)).await.unwrap_err();
    assert!(
        matches!(
            err,
            fencelock::Error::NotHeld {
                reason: fencelock::LostReason::NotOwner,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!guard.is_held());
    // Nothing of the holder's touched the foreign key.
    assert!(matches!(
        redis.cmd(&["TYPE", "fencelock:{swapped}"]),
        Ok(redis::Value::SimpleString(t)) if t == "hash"
    ));
}
