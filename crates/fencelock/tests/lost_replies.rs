//! A read, a write, a reentrant hold, a semaphore take or a fair lock's grant whose reply is
//! lost is retried with its token: the retry finds what it took and confirms it (a read even
//! with a writer waiting that arrived in between: a new reader would wait behind that writer,
//! this one holds the lock already). And over Redlock a writer's release writes its fence back
//! to every instance.

use crate::common;

use std::time::Duration;

use fencelock::{Client, LockGuard, LockRequest};
use fencelock_testkit::{FaultProxy, RedisServer};

use common::{fields_starting, lock_key, patient_client, reply_lost, server, wait_for_count};

/// A proxy in front of `redis` and a patient client through it, its connection made and the
/// script of `request` loaded (taken on another name and given back): the call under test is
/// one `EVALSHA`, run as soon as it arrives.
async fn through_a_proxy(
    redis: &RedisServer,
    request: impl FnOnce(&Client) -> LockRequest,
) -> (FaultProxy, Client) {
    let proxy = FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let client = patient_client(&proxy);
    let warm = request(&client)
        .no_wait()
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(warm.release().await.unwrap_or_else(|e| panic!("{e}")));
    (proxy, client)
}

/// What `granted` answered, its error named.
fn held(granted: fencelock::Result<LockGuard>) -> LockGuard {
    granted.unwrap_or_else(|e| panic!("the retried call: {e}"))
}

/// The lease left on the holder entry `value` (`<expiry ms>:...`) of `redis`'s clock.
fn lease_left(redis: &RedisServer, value: &str) -> u64 {
    let expiry = value.split(':').next().and_then(|e| e.parse::<u64>().ok());
    expiry
        .unwrap_or_else(|| panic!("no expiry in {value}"))
        .saturating_sub(common::server_ms(redis))
}

#[tokio::test]
async fn a_read_whose_reply_is_lost_is_confirmed_by_its_retry_though_a_writer_waits() {
    let redis = server();
    let (proxy, reader_client) =
        through_a_proxy(&redis, |c| c.read_write_lock("warm-up").read()).await;
    let writer_client = common::client(&redis.url());
    let key = lock_key("book");
    let count = |role: &str| fields_starting(&redis, &key, role).len();
    let read = reader_client
        .read_write_lock("book")
        .read()
        .ttl(Duration::from_secs(30))
        .wait_up_to(Duration::from_secs(3));
    // Before the cut, a writer arrives and waits for the reader; the writer's task is answered
    // (not awaited): the test waits for it once the reader has released.
    #[expect(
        clippy::async_yields_async,
        reason = "the writer's task is awaited after the read"
    )]
    let writer_arrives = async {
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
        writer
    };
    let (read, writer) =
        reply_lost(&proxy, read.acquire(), || count("r:") == 1, writer_arrives).await;
    let read = held(read);
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
/// entry, confirms the fence it was given and re-arms its lease (the retry comes well after the
/// grant, so the re-armed lease shows).
#[tokio::test]
async fn a_write_whose_reply_is_lost_is_confirmed_by_its_retry() {
    let redis = server();
    let (proxy, client) = through_a_proxy(&redis, |c| c.read_write_lock("warm-up").write()).await;
    let key = lock_key("page");
    let entry = || fields_starting(&redis, &key, "w:");
    let write = client
        .read_write_lock("page")
        .write()
        .ttl(Duration::from_secs(30))
        .no_wait()
        .acquire();
    let later = async { tokio::time::sleep(Duration::from_millis(800)).await };
    let write = held(
        reply_lost(&proxy, write, || entry().len() == 1, later)
            .await
            .0,
    );
    let field = entry().pop().unwrap_or_else(|| panic!("no writer's entry"));
    let value = common::hash_fields(&redis, &key)
        .remove(&field)
        .unwrap_or_else(|| panic!("no {field}"));
    // `<expiry ms>:<owner>:<fence>`: the fence granted, the lease from the retry.
    assert_eq!(
        value.rsplit(':').next(),
        Some(write.fence().to_string().as_str()),
        "{value}"
    );
    let left = lease_left(&redis, &value);
    assert!(
        left > 29_500,
        "the retry did not re-arm the lease: {left} ms left of 30 s"
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
    let (proxy, client) = through_a_proxy(&redis, |c| c.reentrant_lock("warm-up").request()).await;
    let key = lock_key("vault");
    let holds = || fields_starting(&redis, &key, "h:").len();
    let take = client
        .reentrant_lock("vault")
        .max_reentry(1)
        .request()
        .no_wait()
        .acquire();
    let hold = held(reply_lost(&proxy, take, || holds() == 1, async {}).await.0);
    assert_eq!(holds(), 1, "one hold");
    assert!(hold.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A semaphore's take whose reply is lost is retried with its token: the retry finds its
/// permits and confirms them (none taken twice), with their fence and the lease re-armed.
#[tokio::test]
async fn a_semaphore_take_whose_reply_is_lost_is_confirmed_by_its_retry() {
    let redis = server();
    let (proxy, client) = through_a_proxy(&redis, |c| c.semaphore("warm-up", 3)).await;
    let key = lock_key("seats");
    let permits = || fields_starting(&redis, &key, "p:").len();
    let take = client
        .semaphore("seats", 3)
        .take(2)
        .ttl(Duration::from_secs(30))
        .no_wait()
        .acquire();
    let later = async { tokio::time::sleep(Duration::from_millis(800)).await };
    let taken = held(reply_lost(&proxy, take, || permits() == 2, later).await.0);
    let fields = common::hash_fields(&redis, &key);
    let held: Vec<&String> = fields.keys().filter(|f| f.starts_with("p:")).collect();
    assert_eq!(held.len(), 2, "permits taken twice? {fields:?}");
    for field in held {
        let value = &fields[field];
        assert_eq!(
            value.rsplit(':').next(),
            Some(taken.fence().to_string().as_str()),
            "{field}: {value}"
        );
        let left = lease_left(&redis, value);
        assert!(
            left > 29_500,
            "{field}: the retry did not re-arm the lease: {left} ms left"
        );
    }
    assert!(taken.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A fair lock's acquisition whose reply is lost is retried with its token: the retry finds the
/// lock its own and confirms it, with the fence it was given (no second fence is handed out)
/// and the lease re-armed.
#[tokio::test]
async fn a_fair_acquisition_whose_reply_is_lost_is_confirmed_by_its_retry() {
    let redis = server();
    let (proxy, client) = through_a_proxy(&redis, |c| c.fair_lock("warm-up")).await;
    let key = lock_key("fair-seat");
    let fence_key = common::lock_subkey("fair-seat", "fence");
    let exists = |key: &str| common::integer_reply(&redis, &["EXISTS", key]) == 1;
    let take = client
        .fair_lock("fair-seat")
        .ttl(Duration::from_secs(30))
        .no_wait()
        .acquire();
    let later = async { tokio::time::sleep(Duration::from_millis(800)).await };
    let taken = held(reply_lost(&proxy, take, || exists(&key), later).await.0);
    let value = common::string_at(&redis, &key).unwrap_or_else(|| panic!("{key} is gone"));
    assert_eq!(
        value.rsplit(':').next(),
        Some(taken.fence().to_string().as_str()),
        "the lock's value {value} against the fence given"
    );
    assert_eq!(
        common::string_at(&redis, &fence_key),
        Some(taken.fence().to_string()),
        "a second fence was handed out"
    );
    let left = common::integer_reply(&redis, &["PTTL", &key]);
    assert!(
        left > 29_500,
        "the retry did not re-arm the lease: {left} ms left"
    );
    assert!(taken.release().await.unwrap_or_else(|e| panic!("{e}")));
}
