//! A read, a write, a reentrant hold or a semaphore take whose reply is lost is retried with its
//! token: the retry finds what it took and confirms it (a read even with a writer waiting that
//! arrived in between: a new reader would wait behind that writer, this one holds the lock
//! already). And over Redlock a writer's release writes its fence back to every instance.

use crate::common;

use std::time::Duration;

use fencelock_testkit::FaultProxy;

use common::{fields_starting, lock_key, server, wait_for_count};

#[tokio::test]
async fn a_read_whose_reply_is_lost_is_confirmed_by_its_retry_though_a_writer_waits() {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Patient: the answer is lost to the cut below, not to a timeout.
    let reader_client = fencelock::Client::builder(&proxy.url())
        .command_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let writer_client = common::client(&redis.url());
    let key = lock_key("book");
    let count = |role: &str| fields_starting(&redis, &key, role).len();
    // Warm the connection and the script cache up: the read below is one EVALSHA.
    let warm = reader_client
        .read_write_lock("warm-up")
        .read()
        .no_wait()
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(warm.release().await.unwrap_or_else(|e| panic!("{e}")));
    proxy.set_latency(Duration::from_secs(2));
    let reader = tokio::spawn(async move {
        reader_client
            .read_write_lock("book")
            .read()
            .ttl(Duration::from_secs(30))
            .wait_up_to(Duration::from_secs(3))
            .acquire()
            .await
    });
    wait_for_count("the read granted", 1, Duration::from_secs(10), || {
        count("r:")
    })
    .await;
    // A writer arrives and waits for the reader.
    let writer = tokio::spawn(async move {
        writer_client
            .read_write_lock("book")
            .write()
            .wait_up_to(Duration::from_secs(20))
            .acquire()
            .await
    });
    wait_for_count("the writer waiting", 1, Duration::from_secs(10), || {
        count("i:")
    })
    .await;
    proxy.set_latency(Duration::ZERO);
    proxy.cut_all();
    let read = tokio::time::timeout(Duration::from_secs(20), reader)
        .await
        .unwrap_or_else(|_| panic!("the read hung"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the retried read: {e}"));
    assert_eq!(
        (count("r:"), count("i:")),
        (1, 1),
        "one reader, the writer waiting"
    );
    assert!(
        !writer.is_finished(),
        "the writer went in while the reader held"
    );
    assert!(read.release().await.unwrap_or_else(|e| panic!("{e}")));
    let write = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .unwrap_or_else(|_| panic!("the writer was not granted after the read"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the write: {e}"));
    assert!(write.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A write whose reply is lost is retried with its token: the retry finds its own writer's
/// entry, confirms the fence it was given and re-arms its lease.
#[tokio::test]
async fn a_write_whose_reply_is_lost_is_confirmed_by_its_retry() {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let writer_client = fencelock::Client::builder(&proxy.url())
        .command_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let key = lock_key("page");
    let warm = writer_client
        .read_write_lock("warm-up")
        .write()
        .no_wait()
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(warm.release().await.unwrap_or_else(|e| panic!("{e}")));
    proxy.set_latency(Duration::from_secs(2));
    let writer = tokio::spawn(async move {
        writer_client
            .read_write_lock("page")
            .write()
            .ttl(Duration::from_secs(30))
            .no_wait()
            .acquire()
            .await
    });
    let entry = || fields_starting(&redis, &key, "w:");
    wait_for_count("the write granted", 1, Duration::from_secs(10), || {
        entry().len()
    })
    .await;
    // The retry comes well after the grant: its re-armed lease shows.
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set_latency(Duration::ZERO);
    proxy.cut_all();
    let write = tokio::time::timeout(Duration::from_secs(20), writer)
        .await
        .unwrap_or_else(|_| panic!("the write hung"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the retried write: {e}"));
    let field = entry().pop().unwrap_or_else(|| panic!("no writer's entry"));
    let value = common::hash_fields(&redis, &key)
        .remove(&field)
        .unwrap_or_else(|| panic!("no {field}"));
    // `<expiry ms>:<owner>:<fence>`: the fence granted, the lease from the retry.
    let parts: Vec<&str> = value.split(':').collect();
    assert_eq!(
        parts.last().copied(),
        Some(write.fence().to_string().as_str()),
        "{value}"
    );
    let expiry: u64 = parts[0].parse().unwrap_or_else(|e| panic!("{value}: {e}"));
    let lease_left = expiry.saturating_sub(common::server_ms(&redis));
    assert!(
        lease_left > 29_500,
        "the retry did not re-arm the lease: {lease_left} ms left of 30 s"
    );
    assert!(write.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// Over Redlock a writer's release writes its fence back to every instance it holds, so that
/// whichever majority grants the next write knows it: here each instance's counter is far
/// ahead of the clock and the first one's the lowest, so the fence (the largest of a majority's)
/// is above the first one's own, and the first learns it when the writer lets go.
#[tokio::test]
async fn a_writers_release_over_redlock_writes_its_fence_back() {
    const AHEAD: u64 = 4_000_000_000_000_000;
    let (servers, urls) = common::redlock_servers(3);
    let client = common::redlock_client(&urls, Duration::from_millis(500));
    for (i, server) in servers.iter().enumerate() {
        let counter = (AHEAD + 10 * i as u64).to_string();
        server
            .cmd(&["SET", "fencelock:{ledger}:fence", &counter])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let write = client
        .read_write_lock("ledger")
        .write()
        .no_wait()
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let fence = write.fence();
    assert!(fence > AHEAD + 10, "{fence}");
    // Granted at a majority: the last instance's grant may still be on its way.
    let writers = || -> Vec<usize> {
        servers
            .iter()
            .map(|server| fields_starting(server, "fencelock:{ledger}", "w:").len())
            .collect()
    };
    wait_for_count(
        "the writer on every instance",
        vec![1; 3],
        Duration::from_secs(5),
        writers,
    )
    .await;
    assert!(write.release().await.unwrap_or_else(|e| panic!("{e}")));
    // The release returns at a majority; the last instance's share may still be on its way.
    let raised = || -> Vec<bool> {
        servers
            .iter()
            .map(
                |server| match server.cmd(&["GET", "fencelock:{ledger}:fence"]) {
                    Ok(redis::Value::BulkString(bytes)) => String::from_utf8_lossy(&bytes)
                        .parse::<u64>()
                        .is_ok_and(|f| f >= fence),
                    _ => false,
                },
            )
            .collect()
    };
    wait_for_count(
        "every fence key at the writer's fence",
        vec![true; 3],
        Duration::from_secs(5),
        raised,
    )
    .await;
}

/// A reentrant lock's acquisition whose reply is lost is retried with its hold's token: the
/// retry finds that hold and confirms it, even at the re-entry limit (a new hold there would be
/// refused).
#[tokio::test]
async fn a_reentrant_acquisition_whose_reply_is_lost_is_confirmed_at_the_limit() {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let client = fencelock::Client::builder(&proxy.url())
        .command_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let key = lock_key("vault");
    let warm = client
        .reentrant_lock("warm-up")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(warm.release().await.unwrap_or_else(|e| panic!("{e}")));
    proxy.set_latency(Duration::from_secs(2));
    let vault = client.reentrant_lock("vault").max_reentry(1);
    let taking = tokio::spawn(async move { vault.request().no_wait().acquire().await });
    wait_for_count("the hold granted", 1, Duration::from_secs(10), || {
        fields_starting(&redis, &key, "h:").len()
    })
    .await;
    proxy.set_latency(Duration::ZERO);
    proxy.cut_all();
    let hold = tokio::time::timeout(Duration::from_secs(20), taking)
        .await
        .unwrap_or_else(|_| panic!("the acquisition hung"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the retried acquisition: {e}"));
    assert_eq!(fields_starting(&redis, &key, "h:").len(), 1, "one hold");
    assert!(hold.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A semaphore's take whose reply is lost is retried with its token: the retry finds its
/// permits and confirms them (none taken twice), with their fence and the lease re-armed.
#[tokio::test]
async fn a_semaphore_take_whose_reply_is_lost_is_confirmed_by_its_retry() {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let client = fencelock::Client::builder(&proxy.url())
        .command_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let key = lock_key("seats");
    let warm = client
        .semaphore("warm-up", 3)
        .no_wait()
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(warm.release().await.unwrap_or_else(|e| panic!("{e}")));
    proxy.set_latency(Duration::from_secs(2));
    let taking = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .semaphore("seats", 3)
                .take(2)
                .ttl(Duration::from_secs(30))
                .no_wait()
                .acquire()
                .await
        }
    });
    let permits = || fields_starting(&redis, &key, "p:");
    wait_for_count("the permits taken", 2, Duration::from_secs(10), || {
        permits().len()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set_latency(Duration::ZERO);
    proxy.cut_all();
    let taken = tokio::time::timeout(Duration::from_secs(20), taking)
        .await
        .unwrap_or_else(|_| panic!("the take hung"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the retried take: {e}"));
    let fields = common::hash_fields(&redis, &key);
    let held: Vec<&String> = fields.keys().filter(|f| f.starts_with("p:")).collect();
    assert_eq!(held.len(), 2, "permits taken twice? {fields:?}");
    let now = common::server_ms(&redis);
    for field in held {
        let value = &fields[field];
        let (expiry, fence) = value.split_once(':').unwrap_or_else(|| panic!("{value}"));
        assert_eq!(fence, taken.fence().to_string(), "{field}: {value}");
        let left = expiry.parse::<u64>().unwrap_or(0).saturating_sub(now);
        assert!(
            left > 29_500,
            "{field}: the retry did not re-arm the lease: {left} ms left"
        );
    }
    assert!(taken.release().await.unwrap_or_else(|e| panic!("{e}")));
}
