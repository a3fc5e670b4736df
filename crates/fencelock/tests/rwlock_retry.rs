//! A read whose reply is lost is retried with its token: the retry finds its reader's entry and
//! confirms it, even with a writer waiting that arrived in between (a new reader would wait
//! behind that writer; this one holds the lock already, and the writer waits for it).

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
