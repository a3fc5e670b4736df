//! Redlock's re-assertion (`reassert.lua`) never takes an instance's key from someone else: a
//! renewal that found the hold's key gone on one instance puts the hold back there only if the
//! key is still empty when the re-assertion arrives. Here another owner takes the key in between:
//! the renewal's verdict waits for a slow instance (behind a proxy that delays both directions),
//! and the test writes the other owner's key on the fast one as soon as it has run the renewal.

use crate::common;

use std::time::Duration;

use fencelock_testkit::{FaultProxy, RedisServer};
use tokio::time::Instant;

/// How many scripts the instance has run (`INFO commandstats`: `evalsha` and `eval` calls).
fn scripts_run(server: &RedisServer) -> u64 {
    let info = match server.cmd(&["INFO", "commandstats"]) {
        Ok(redis::Value::BulkString(text)) => String::from_utf8_lossy(&text).into_owned(),
        Ok(redis::Value::VerbatimString { text, .. }) => text,
        other => panic!("INFO commandstats: {other:?}"),
    };
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split_once("calls=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

fn value(server: &RedisServer, key: &str) -> Option<String> {
    match server.cmd(&["GET", key]) {
        Ok(redis::Value::BulkString(v)) => Some(String::from_utf8_lossy(&v).into_owned()),
        Ok(redis::Value::Nil) => None,
        other => panic!("GET {key}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reassertion_leaves_a_key_another_owner_took_in_the_meantime() {
    let (servers, urls) = common::redlock_servers(3);
    let proxy = FaultProxy::start(servers[2].addr())
        .await
        .unwrap_or_else(|e| panic!("starting the proxy: {e}"));
    let mut through = urls.clone();
    through[2] = proxy.url();
    // Long enough a limit for the slow instance to answer (the renewal's verdict needs it), and
    // a lease renewed every second.
    let client = common::redlock_client(&through, Duration::from_secs(3));
    let guard = client
        .lock("taken")
        .ttl(Duration::from_millis(3000))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let key = common::lock_key("taken");
    let deadline = Instant::now() + Duration::from_secs(5);
    while value(&servers[0], &key).is_none() {
        assert!(
            Instant::now() < deadline,
            "the hold never reached instance 0"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // From now on a call to instance 2 takes 0.15 s each way.
    proxy.set_latency(Duration::from_millis(150));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Instance 0's key goes; as soon as the next renewal has run there (finding it missing),
    // another owner takes it. The renewal's verdict waits for instance 2 (0.3 s): only then is
    // the hold re-asserted on instance 0.
    let before = scripts_run(&servers[0]);
    servers[0]
        .cmd(&["DEL", &key])
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while scripts_run(&servers[0]) == before {
        assert!(Instant::now() < deadline, "no renewal reached instance 0");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    servers[0]
        .cmd(&["SET", &key, "someone-else:1", "PX", "60000"])
        .unwrap_or_else(|e| panic!("{e}"));
    // The re-assertion runs there: the other owner's key stays.
    let after = scripts_run(&servers[0]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while scripts_run(&servers[0]) == after {
        assert!(
            Instant::now() < deadline,
            "no re-assertion reached instance 0"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        value(&servers[0], &key).as_deref(),
        Some("someone-else:1"),
        "the re-assertion took the key another owner had taken"
    );
    // The hold goes on with the two other instances.
    assert!(guard.is_held());
    proxy.set_latency(Duration::ZERO);
    drop(guard);
}
