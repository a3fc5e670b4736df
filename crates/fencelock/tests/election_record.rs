//! The election's leader record as `leader()` and a resignation treat it: a record that is not
//! the held term's, or lacks a field, names no leader; a record or a lock of another type is
//! refused, naming the key; a resignation deletes its own term's record with the lock.

use crate::common;

use std::time::Duration;

use fencelock::Error;

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
