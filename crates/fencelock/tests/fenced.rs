//! Fenced writes to Redis: a stale fence is refused and changes nothing, the same fence may
//! write again, a key of the wrong type refuses the whole call before anything is written, and
//! a holder whose lease ran out while it stalled cannot overwrite the next holder's data.

use crate::common;

use std::time::Duration;

use common::{dumps, server};
use fencelock::Error;
use fencelock::fenced::Writes;

#[tokio::test]
async fn a_stale_fence_is_refused_and_changes_nothing() {
    let redis = server();
    let client = common::client(&redis.url());
    let store = client
        .fenced_store("acct")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.accepted().await.unwrap_or_else(|e| panic!("{e}")), 0);

    let first = client
        .lock("acct")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let old_fence = first.fence();
    assert!(first.release().await.unwrap_or_else(|e| panic!("{e}")));
    let second = client
        .lock("acct")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(second.fence() > old_fence);

    let newer = Writes::new()
        .hset("acct:{acct}", "balance", "200")
        .rpush("acct:{acct}:log", "second");
    let accepted = store
        .apply(second.fence(), &newer)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(accepted, second.fence());
    assert_eq!(
        store.accepted().await.unwrap_or_else(|e| panic!("{e}")),
        second.fence()
    );

    // The older holder writes late: refused, typed, and nothing changes.
    let keys = [
        "acct:{acct}",
        "acct:{acct}:log",
        "acct:{acct}:other",
        "fencelock:fenced:{acct}",
    ];
    let before = dumps(&redis, &keys);
    let stale = Writes::new()
        .hset("acct:{acct}", "balance", "100")
        .rpush("acct:{acct}:log", "first")
        .set("acct:{acct}:other", "x");
    let err = store.apply(old_fence, &stale).await.unwrap_err();
    match &err {
        Error::Fenced {
            resource,
            fence,
            accepted,
        } => {
            assert_eq!(resource, "acct");
            assert_eq!(*fence, old_fence);
            assert_eq!(*accepted, second.fence());
        }
        other => panic!("expected Error::Fenced, got {other:?}"),
    }
    assert!(err.to_string().contains("acct"), "{err}");
    assert_eq!(
        dumps(&redis, &keys),
        before,
        "a refused write changed something"
    );
    assert!(second.release().await.unwrap_or_else(|e| panic!("{e}")));
}

#[tokio::test]
async fn the_same_fence_may_write_again_and_a_newer_one_raises_the_floor() {
    let redis = server();
    let client = common::client(&redis.url());
    let store = client
        .fenced_store("counter")
        .unwrap_or_else(|e| panic!("{e}"));
    let guard = client
        .lock("counter")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..3 {
        store
            .apply(guard.fence(), &Writes::new().incr_by("n:{counter}", 1))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(
        redis
            .cmd(&["GET", "n:{counter}"])
            .unwrap_or_else(|e| panic!("{e}")),
        redis::Value::BulkString(b"3".to_vec())
    );
    // The resource's fence key never expires.
    assert_eq!(
        common::integer_reply(&redis, &["PTTL", "fencelock:fenced:{counter}"]),
        -1
    );
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
}

#[tokio::test]
async fn a_key_of_the_wrong_type_refuses_the_whole_call_before_writing() {
    let redis = server();
    let client = common::client(&redis.url());
    let store = client
        .fenced_store("typed")
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["RPUSH", "h:{typed}", "a list"])
        .unwrap_or_else(|e| panic!("{e}"));
    let keys = ["s:{typed}", "h:{typed}", "fencelock:fenced:{typed}"];
    let before = dumps(&redis, &keys);
    let writes = Writes::new()
        .set("s:{typed}", "written first")
        .hset("h:{typed}", "f", "v");
    let err = store.apply(7, &writes).await.unwrap_err();
    match &err {
        Error::FencedWrongType { key, found, .. } => {
            assert_eq!(key, "h:{typed}");
            assert!(found.contains("list"), "{found}");
        }
        other => panic!("expected Error::FencedWrongType, got {other:?}"),
    }
    assert_eq!(
        dumps(&redis, &keys),
        before,
        "a refused call wrote something"
    );

    // No writes, or no fence: a clear error before anything is sent.
    let err = store.apply(7, &Writes::new()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = store
        .apply(0, &Writes::new().set("s:{typed}", "v"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

/// What the call finds that it cannot work with is named as it is (the key, and a type or
/// "a string that is not a number"), and nothing is written: a fence key of another type or
/// not a number, a counter to increment that is not a number.
#[tokio::test]
async fn a_fence_key_or_a_counter_that_is_not_a_number_is_named_and_nothing_written() {
    let redis = server();
    let client = common::client(&redis.url());
    let store = client.fenced_store("odd").unwrap_or_else(|e| panic!("{e}"));
    let fence_key = "fencelock:fenced:{odd}";
    let keys = ["n:{odd}", "s:{odd}", fence_key];
    for (planted, key, found) in [
        (vec!["HSET", fence_key, "f", "v"], fence_key, "hash"),
        (
            vec!["SET", fence_key, "seven"],
            fence_key,
            "a string that is not a number",
        ),
        (
            vec!["SET", "n:{odd}", "seven"],
            "n:{odd}",
            "a string that is not a number",
        ),
    ] {
        redis
            .cmd(&["DEL", keys[0], keys[1], keys[2]])
            .unwrap_or_else(|e| panic!("{e}"));
        redis.cmd(&planted).unwrap_or_else(|e| panic!("{e}"));
        let before = dumps(&redis, &keys);
        let writes = Writes::new().set("s:{odd}", "first").incr_by("n:{odd}", 1);
        match store.apply(7, &writes).await {
            Err(Error::FencedWrongType {
                key: named,
                found: what,
                ..
            }) => {
                assert_eq!(named, key, "{planted:?}");
                assert!(what.contains(found), "{planted:?}: {what}");
            }
            other => panic!("{planted:?}: expected Error::FencedWrongType, got {other:?}"),
        }
        assert_eq!(
            dumps(&redis, &keys),
            before,
            "{planted:?}: something was written"
        );
    }
}

#[tokio::test]
async fn a_holder_whose_lease_ran_out_cannot_overwrite_the_next_holder() {
    let redis = server();
    let client = common::client(&redis.url());
    let other = common::client(&redis.url());
    let store = client.fenced_store("job").unwrap_or_else(|e| panic!("{e}"));
    let (stalled, next) = common::stalled_then_replaced(&client, &other, "job").await;
    store
        .apply(
            next.fence(),
            &Writes::new().set("result:{job}", "from the next holder"),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The stalled holder wakes up and writes: refused.
    let err = store
        .apply(
            stalled.fence(),
            &Writes::new().set("result:{job}", "from the stalled holder"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Fenced { .. }), "{err:?}");
    assert_eq!(
        redis
            .cmd(&["GET", "result:{job}"])
            .unwrap_or_else(|e| panic!("{e}")),
        redis::Value::BulkString(b"from the next holder".to_vec())
    );
    assert!(!stalled.is_held());
    assert!(next.release().await.unwrap_or_else(|e| panic!("{e}")));
}

#[tokio::test]
async fn a_redlock_client_has_no_fenced_store() {
    let (_servers, urls) = common::redlock_servers(3);
    let client = common::redlock_client(&urls, Duration::from_millis(200));
    let err = client.fenced_store("x").map(drop).unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    let err = client.fenced_store("bad{name}").map(drop).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

#[tokio::test]
async fn a_callers_script_runs_only_with_a_fence_the_resource_accepts() {
    let redis = server();
    let client = common::client(&redis.url());
    let store = client
        .fenced_store("wallet")
        .unwrap_or_else(|e| panic!("{e}"));
    let debit = store.script(
        "local balance = tonumber(redis.call('hget', KEYS[1], 'balance') or '0')
         if balance < tonumber(ARGV[1]) then return -1 end
         return redis.call('hincrby', KEYS[1], 'balance', -tonumber(ARGV[1]))",
    );
    let key = "wallet:{wallet}";
    redis
        .cmd(&["HSET", key, "balance", "100"])
        .unwrap_or_else(|e| panic!("{e}"));

    // Fence 5: runs, the body's reply comes back, the fence is raised.
    let left: i64 = debit
        .apply(5, &[key], &["30"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(left, 70);
    assert_eq!(store.accepted().await.unwrap_or_else(|e| panic!("{e}")), 5);
    // The body's own refusal is its reply; the fence is raised all the same.
    let refused: i64 = debit
        .apply(6, &[key], &["500"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(refused, -1);
    assert_eq!(store.accepted().await.unwrap_or_else(|e| panic!("{e}")), 6);

    // A stale fence: Error::Fenced, the body never ran.
    let before = dumps(&redis, &[key]);
    match debit.apply::<i64>(4, &[key], &["30"]).await {
        Err(Error::Fenced {
            resource,
            fence: 4,
            accepted: 6,
        }) => assert_eq!(resource, "wallet"),
        other => panic!("expected Error::Fenced, got {other:?}"),
    }
    assert_eq!(
        dumps(&redis, &[key]),
        before,
        "a stale script changed the data"
    );

    // A body that returns nothing; a body that fails (the fence is not raised).
    let touch = store.script("redis.call('set', KEYS[1], ARGV[1])");
    touch
        .apply::<()>(7, &["note:{wallet}"], &["hello"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.accepted().await.unwrap_or_else(|e| panic!("{e}")), 7);
    let broken = store.script("return redis.call('incr', KEYS[1])");
    match broken.apply::<i64>(8, &["note:{wallet}"], &[]).await {
        Err(Error::Redis { lock, .. }) => assert_eq!(lock, "wallet"),
        other => panic!("expected Error::Redis, got {other:?}"),
    }
    assert_eq!(store.accepted().await.unwrap_or_else(|e| panic!("{e}")), 7);
    // Fence 0 is refused before anything is sent.
    assert!(matches!(
        touch.apply::<()>(0, &["note:{wallet}"], &["x"]).await,
        Err(Error::InvalidArgument { .. })
    ));
}

#[tokio::test]
async fn binary_values_are_written_byte_for_byte() {
    let redis = server();
    let client = common::client(&redis.url());
    let store = client
        .fenced_store("blob")
        .unwrap_or_else(|e| panic!("{e}"));
    let guard = client
        .lock("blob")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Not UTF-8, with a NUL and a byte that Lua strings must carry through untouched.
    let blob: Vec<u8> = vec![0x89, b'P', 0x00, 0xff, 0xfe, b'\n'];
    let writes = Writes::new()
        .set("blob:{blob}", &blob)
        .hset("blob:{blob}:h", [0xc3u8, 0x28], blob.as_slice())
        .rpush("blob:{blob}:l", "text too");
    store
        .apply(guard.fence(), &writes)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut conn = redis::Client::open(redis.url())
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("{e}"));
    let stored: Vec<u8> = redis::cmd("GET")
        .arg("blob:{blob}")
        .query(&mut conn)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stored, blob);
    let field: Vec<u8> = redis::cmd("HGET")
        .arg("blob:{blob}:h")
        .arg(&[0xc3u8, 0x28][..])
        .query(&mut conn)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(field, blob);
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
}

#[tokio::test]
async fn every_kind_of_write_is_applied_as_its_command() {
    let redis = server();
    let client = common::client(&redis.url());
    let store = client.fenced_store("all").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.resource(), "all");
    assert_eq!(store.fence_key(), "fencelock:fenced:{all}");
    let guard = client
        .lock("all")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let setup = Writes::new()
        .set("gone:{all}", "x")
        .hset("h:{all}", "drop", "x")
        .sadd("s:{all}", "drop")
        .set("ttl:{all}", "x");
    store
        .apply(guard.fence(), &setup)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Every command once, and two writes to one key (the key named once in the call).
    let writes = Writes::new()
        .set_with_ttl("t:{all}", "v", Duration::from_secs(100))
        .del("gone:{all}")
        .hset("h:{all}", "keep", "1")
        .hdel("h:{all}", "drop")
        .incr_by("n:{all}", 5)
        .pexpire("ttl:{all}", Duration::from_secs(200))
        .rpush("l:{all}", "b")
        .lpush("l:{all}", "a")
        .sadd("s:{all}", "keep")
        .srem("s:{all}", "drop")
        .xadd("x:{all}", &[("f", "1"), ("g", "2")]);
    assert!(!writes.is_empty());
    store
        .apply(guard.fence(), &writes)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = |args: &[&str]| match redis.cmd(args) {
        Ok(redis::Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(redis::Value::Array(items)) => format!("{items:?}"),
        other => format!("{other:?}"),
    };
    assert_eq!(text(&["GET", "t:{all}"]), "v");
    let ttl = common::integer_reply(&redis, &["PTTL", "t:{all}"]);
    assert!(0 < ttl && ttl <= 100_000, "{ttl}");
    assert_eq!(common::integer_reply(&redis, &["EXISTS", "gone:{all}"]), 0);
    assert_eq!(common::integer_reply(&redis, &["HLEN", "h:{all}"]), 1);
    assert_eq!(text(&["HGET", "h:{all}", "keep"]), "1");
    assert_eq!(text(&["GET", "n:{all}"]), "5");
    let ttl = common::integer_reply(&redis, &["PTTL", "ttl:{all}"]);
    assert!(100_000 < ttl && ttl <= 200_000, "{ttl}");
    assert_eq!(text(&["LINDEX", "l:{all}", "0"]), "a");
    assert_eq!(text(&["LINDEX", "l:{all}", "1"]), "b");
    assert_eq!(common::integer_reply(&redis, &["SCARD", "s:{all}"]), 1);
    assert_eq!(
        common::integer_reply(&redis, &["SISMEMBER", "s:{all}", "keep"]),
        1
    );
    assert_eq!(common::integer_reply(&redis, &["XLEN", "x:{all}"]), 1);
    let entry = text(&["XRANGE", "x:{all}", "-", "+"]);
    for part in ["\"f\"", "\"1\"", "\"g\"", "\"2\""] {
        assert!(entry.contains(part), "{entry}");
    }
    // One SET alone takes a shorter path, with its expiry too.
    let one = Writes::new().set_with_ttl("one:{all}", "w", Duration::from_secs(100));
    store
        .apply(guard.fence(), &one)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&["GET", "one:{all}"]), "w");
    let ttl = common::integer_reply(&redis, &["PTTL", "one:{all}"]);
    assert!(0 < ttl && ttl <= 100_000, "{ttl}");
    // The fence key holds the fence.
    assert_eq!(
        store.accepted().await.unwrap_or_else(|e| panic!("{e}")),
        guard.fence()
    );
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
}
