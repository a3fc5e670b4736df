//! The election's leader record as `leader()` and a resignation treat it: a record that is not
//! the held term's, or lacks a field, names no leader; a record or a lock of another type is
//! refused, naming the key; a resignation deletes its own term's record with the lock.

use crate::common;

use std::time::Duration;

use fencelock::Error;
use futures_util::StreamExt as _;

use common::server;

#[tokio::test]
async fn leader_reads_only_the_held_terms_whole_record_and_a_resignation_deletes_it() {
    let redis = server();
    let client = common::client(&redis.url());
    let election = client.election("board");
    let record = "fencelock:{board}:leader";
    let leadership = election
        .campaign("a")
        .ttl(Duration::from_secs(30))
        .campaign()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let term = leadership.term().to_string();
    let leader = election.leader().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(leader.map(|l| l.term), Some(leadership.term()));

    // Another term's record, or one without its start or its value: no leader.
    for (field, value) in [("term", "1"), ("since", ""), ("value", "")] {
        let fields = common::hash_fields(&redis, record);
        if value.is_empty() {
            redis
                .cmd(&["HDEL", record, field])
                .unwrap_or_else(|e| panic!("{e}"));
        } else {
            redis
                .cmd(&["HSET", record, field, value])
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let leader = election.leader().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(leader.is_none(), "{field} {value:?}: {leader:?}");
        for (f, v) in &fields {
            redis
                .cmd(&["HSET", record, f, v])
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    assert!(
        election
            .leader()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_some()
    );

    // A record of another type: refused, naming it.
    let fields = common::hash_fields(&redis, record);
    redis
        .cmd(&["DEL", record])
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["RPUSH", record, "not ours"])
        .unwrap_or_else(|e| panic!("{e}"));
    match election.leader().await {
        Err(Error::WrongType { key, .. }) => assert_eq!(key, record),
        other => panic!("expected WrongType, got {other:?}"),
    }
    redis
        .cmd(&["DEL", record])
        .unwrap_or_else(|e| panic!("{e}"));
    for (f, v) in &fields {
        redis
            .cmd(&["HSET", record, f, v])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(common::hash_fields(&redis, record).get("term"), Some(&term));

    // The election's lock of another type: refused, naming it.
    redis
        .cmd(&["RPUSH", "fencelock:{other}", "not ours"])
        .unwrap_or_else(|e| panic!("{e}"));
    match client.election("other").leader().await {
        Err(Error::WrongType { key, .. }) => assert_eq!(key, "fencelock:{other}"),
        other => panic!("expected WrongType, got {other:?}"),
    }

    // Resigned: the lock and its term's record go together.
    assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(common::integer_reply(&redis, &["EXISTS", record]), 0);
    assert_eq!(
        common::integer_reply(&redis, &["EXISTS", "fencelock:{board}"]),
        0
    );
}

/// `outcome` is a refusal that names `key` as a list (what the test found there).
fn refused_naming_a_list<T: std::fmt::Debug>(outcome: fencelock::Result<T>, key: &str) {
    match outcome {
        Err(Error::WrongType {
            key: named, found, ..
        }) => {
            assert_eq!((named.as_str(), found.as_str()), (key, "a list"));
        }
        other => panic!("expected WrongType for {key}, got {other:?}"),
    }
}

/// A campaign that finds the election's record, its lock or its fence key holding something
/// else is refused, naming the key, and writes nothing: no lock, no fence, no record. A
/// proclaim that finds its record replaced is refused the same way, and so is a leader whose
/// lock key holds a string that is not a lock.
#[tokio::test]
async fn a_campaign_or_a_proclaim_that_finds_a_key_of_another_type_is_refused_and_writes_nothing() {
    let redis = server();
    let client = common::client(&redis.url());
    let (lock, fence, record) = (
        "fencelock:{seat}",
        "fencelock:{seat}:fence",
        "fencelock:{seat}:leader",
    );
    let campaign = || {
        client
            .election("seat")
            .campaign("a")
            .ttl(Duration::from_secs(30))
            .no_wait()
            .campaign()
    };
    let ours = [lock, fence, record];
    // The record is a list.
    redis
        .cmd(&["RPUSH", record, "not ours"])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = common::dumps(&redis, &ours);
    refused_naming_a_list(campaign().await, record);
    assert_eq!(common::dumps(&redis, &ours), before, "a key was written");
    redis
        .cmd(&["DEL", record])
        .unwrap_or_else(|e| panic!("{e}"));

    // The fence key is not a number.
    redis
        .cmd(&["SET", fence, "twelve"])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = common::dumps(&redis, &ours);
    match campaign().await {
        Err(e @ Error::WrongType { .. }) => assert!(e.to_string().contains(fence), "{e}"),
        other => panic!("expected WrongType, got {other:?}"),
    }
    assert_eq!(common::dumps(&redis, &ours), before, "a key was written");
    redis.cmd(&["DEL", fence]).unwrap_or_else(|e| panic!("{e}"));

    // The lock's key is a string that is not a lock: the campaign does not take it, and the
    // leader it names cannot be read.
    redis
        .cmd(&["SET", lock, "not a lock"])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = common::dumps(&redis, &ours);
    assert!(campaign().await.is_err(), "a campaign took a foreign key");
    match client.election("seat").leader().await {
        Err(Error::WrongType { key, found, .. }) => {
            assert_eq!(key, lock);
            assert!(found.contains("not a fencelock lock"), "{found}");
        }
        other => panic!("expected WrongType, got {other:?}"),
    }
    assert_eq!(common::dumps(&redis, &ours), before, "a key was written");
    redis.cmd(&["DEL", lock]).unwrap_or_else(|e| panic!("{e}"));

    // The lock's key is a list: refused, naming it.
    redis
        .cmd(&["RPUSH", lock, "not ours"])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = common::dumps(&redis, &ours);
    refused_naming_a_list(campaign().await, lock);
    assert_eq!(common::dumps(&redis, &ours), before, "a key was written");
    redis.cmd(&["DEL", lock]).unwrap_or_else(|e| panic!("{e}"));

    // The lock's key looks like a lease but has no expiry (nobody's lease): not taken, and
    // not marked as waited for either.
    redis
        .cmd(&["SET", lock, "0123abcd:5"])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = common::dumps(&redis, &ours);
    assert!(
        campaign().await.is_err(),
        "a campaign took a lease without expiry"
    );
    assert_eq!(common::dumps(&redis, &ours), before, "a key was written");
    redis.cmd(&["DEL", lock]).unwrap_or_else(|e| panic!("{e}"));

    // Won; then the record is replaced by a list: a proclaim is refused, naming it, and
    // leaves it as it is.
    let mut leadership = campaign().await.unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["DEL", record])
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["RPUSH", record, "not ours"])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = common::dumps(&redis, &[record]);
    refused_naming_a_list(leadership.proclaim("b").await, record);
    assert_eq!(
        common::dumps(&redis, &[record]),
        before,
        "the list was written"
    );
    // With the record back as a hash of another term, a proclaim writes this term's, with
    // the time it proclaims as the term's start.
    redis
        .cmd(&["DEL", record])
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["HSET", record, "term", "1", "since", "1", "value", "x"])
        .unwrap_or_else(|e| panic!("{e}"));
    leadership
        .proclaim("c")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let fields = common::hash_fields(&redis, record);
    assert_eq!(
        fields.get("term"),
        Some(&leadership.term().to_string()),
        "{fields:?}"
    );
    assert_eq!(fields.get("value").map(String::as_str), Some("c"));
    let since: u64 = fields
        .get("since")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no since in {fields:?}"));
    assert!(since > 1, "the other term's start was kept: {fields:?}");
    // The record it wrote (over one that had no expiry) outlives the term's lease by a second.
    let (lease_ms, record_ms) = (
        common::integer_reply(&redis, &["PTTL", lock]),
        common::integer_reply(&redis, &["PTTL", record]),
    );
    assert!(
        (lease_ms..=lease_ms + 1050).contains(&record_ms),
        "the record lives {record_ms} ms, the lease {lease_ms} ms"
    );
    // The lock's key is replaced by a list: a proclaim is refused, naming it, and leaves it
    // (and the record) as they are.
    redis.cmd(&["DEL", lock]).unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["RPUSH", lock, "not ours"])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = common::dumps(&redis, &[lock, record]);
    refused_naming_a_list(leadership.proclaim("d").await, lock);
    assert_eq!(
        common::dumps(&redis, &[lock, record]),
        before,
        "a key was written"
    );
}

/// A campaign whose reply is lost (its connection cut after the server granted it) is retried
/// with the same token: the retry finds the term held by this candidate and confirms it. The
/// term is the one granted, its record is kept, and the leader is announced once.
#[tokio::test]
async fn a_campaign_whose_reply_is_lost_is_confirmed_by_its_retry_and_announced_once() {
    let redis = server();
    let proxy = fencelock_testkit::FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let through_proxy = common::patient_client(&proxy);
    // Warm the connection and the script cache up: the campaign below is one EVALSHA, run as
    // soon as it arrives.
    let warm = through_proxy
        .election("warm-up")
        .campaign("w")
        .no_wait()
        .campaign()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(warm.resign().await.unwrap_or_else(|e| panic!("{e}")));
    let mut announcements = redis::Client::open(redis.url())
        .unwrap_or_else(|e| panic!("{e}"))
        .get_async_pubsub()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    announcements
        .subscribe("fencelock:{seat}:announce")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The campaign's reply is lost, late enough that the retry's renewal of the record shows.
    let lock = "fencelock:{seat}";
    let campaign = through_proxy
        .election("seat")
        .campaign("a")
        .ttl(Duration::from_secs(30))
        .no_wait()
        .campaign();
    let ran = || common::integer_reply(&redis, &["EXISTS", lock]) == 1;
    let later = async { tokio::time::sleep(Duration::from_millis(800)).await };
    let (leadership, ()) = common::reply_lost(&proxy, campaign, ran, later).await;
    let leadership = leadership.unwrap_or_else(|e| panic!("the retried campaign: {e}"));
    let value = match redis.cmd(&["GET", lock]).unwrap_or_else(|e| panic!("{e}")) {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        other => panic!("the lock: {other:?}"),
    };
    assert!(
        value.ends_with(&format!(":{}", leadership.term())),
        "the lock holds {value}, the leadership's term is {}",
        leadership.term()
    );
    // The retry renewed the lease and the record with it: the record outlasts the lease by
    // the record's margin (a second), not by what was left of it since the first grant.
    let lease = common::integer_reply(&redis, &["PTTL", lock]);
    let kept = common::integer_reply(&redis, &["PTTL", "fencelock:{seat}:leader"]);
    assert!(
        (900..=1100).contains(&(kept - lease)),
        "the record's expiry ({kept} ms) against the lease's ({lease} ms)"
    );
    let fields = common::hash_fields(&redis, "fencelock:{seat}:leader");
    assert_eq!(
        fields.get("term"),
        Some(&leadership.term().to_string()),
        "{fields:?}"
    );
    // One announcement of the term, none for the retry.
    let mut stream = announcements.on_message();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap_or_else(|_| panic!("no announcement"))
        .unwrap_or_else(|| panic!("the subscription ended"));
    let first: String = first.get_payload().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        first.starts_with(&format!("leader:{}:", leadership.term())),
        "{first}"
    );
    let again = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(again.is_err(), "announced again: {again:?}");
    drop(stream);
    assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
}
