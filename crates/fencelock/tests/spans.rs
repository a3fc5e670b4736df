//! The `tracing` spans: `fencelock.acquire` (with a `fencelock.wait` per wait),
//! `fencelock.hold` (a loss an event on it), `fencelock.release` and `fencelock.renew` carry the lock's name, kind and fence, and never the owner token. Read back
//! from a `tracing-subscriber` that writes into a buffer (one test in this binary, so that the
//! global subscriber sees only it).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::FmtSpan;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'a self) -> Buffer {
        self.clone()
    }
}

fn token_of(server: &fencelock_testkit::RedisServer, name: &str) -> String {
    match server.cmd(&["GET", &common::lock_key(name)]) {
        Ok(redis::Value::BulkString(bytes)) => {
            let value = String::from_utf8_lossy(&bytes).into_owned();
            let (token, _fence) = value.rsplit_once(':').expect("token:fence");
            token.to_owned()
        }
        other => panic!("GET {name}: {other:?}"),
    }
}

/// The lines of `text` that mention `span` (its name and its fields).
fn lines_of<'a>(text: &'a str, span: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(span)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_name_the_lock_kind_and_fence_and_never_the_token() {
    let buffer = Buffer::default();
    tracing_subscriber::fmt()
        .with_writer(buffer.clone())
        .with_ansi(false)
        .with_max_level(tracing_subscriber::filter::LevelFilter::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .init();

    let server = common::server();
    let client = common::client(&server.url());

    // Acquired, renewed at least once, released.
    let guard = client
        .lock("spans/kept")
        .ttl(Duration::from_millis(600))
        .acquire()
        .await
        .expect("acquire");
    let kept_fence = guard.fence();
    let kept_token = token_of(&server, "spans/kept");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(guard.release().await.expect("release"));

    // Acquired, then its key deleted behind its back: lost at the next renewal.
    let guard = client
        .lock("spans/lost")
        .ttl(Duration::from_millis(600))
        .acquire()
        .await
        .expect("acquire");
    let lost_fence = guard.fence();
    let lost_token = token_of(&server, "spans/lost");
    server
        .cmd(&["DEL", &common::lock_key("spans/lost")])
        .expect("DEL");
    let reason = tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the loss is noticed");
    assert_eq!(reason, fencelock::LostReason::NotOwner);
    drop(guard);

    // A request that waits for a release: each wait a child span of its acquire.
    let first = client
        .lock("spans/waited")
        .acquire()
        .await
        .expect("acquire");
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .lock("spans/waited")
                .wait(fencelock::WaitPolicy::UpTo(Duration::from_secs(10)))
                .acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(first.release().await.expect("release"));
    let second = waiter.await.expect("join").expect("acquired after a wait");
    assert!(second.release().await.expect("release"));
    client.wait_idle(Duration::from_secs(2)).await;

    let text = buffer.text();
    let acquire = lines_of(&text, "fencelock.acquire{lock=spans/kept kind=lock");
    assert!(
        acquire
            .iter()
            .any(|l| l.contains(&format!("fence={kept_fence}")) && l.contains("granted")),
        "no acquire span with the fence:\n{text}"
    );
    let release = format!("fencelock.release{{lock=spans/kept kind=lock fence={kept_fence}}}");
    assert!(
        !lines_of(&text, &release).is_empty(),
        "no release span:\n{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("fencelock.renew{locks=") && l.contains("close")),
        "no renewal span:\n{text}"
    );
    // The hold is a span from the grant to the release, and a loss an event on it.
    let kept = format!("fencelock.hold{{lock=spans/kept kind=lock fence={kept_fence}}}");
    assert!(
        lines_of(&text, &kept).iter().any(|l| l.contains("close")),
        "no hold span:\n{text}"
    );
    let lost = format!("fencelock.hold{{lock=spans/lost kind=lock fence={lost_fence}}}");
    assert!(
        lines_of(&text, &lost).iter().any(
            |l| l.contains("WARN") && l.contains("lock lost") && l.contains("code=not_owner")
                // Not inside the acquire's span, which ends with the grant.
                && !l.contains("fencelock.acquire{")
        ),
        "no lost event on the hold's span:\n{text}"
    );
    assert!(
        lines_of(&text, "fencelock.acquire{lock=spans/waited kind=lock")
            .iter()
            .any(|l| l.contains(":fencelock.wait{lock=spans/waited}") && l.contains("close")),
        "no wait span in the acquire's:\n{text}"
    );
    for token in [kept_token, lost_token] {
        assert!(
            !text.contains(&token),
            "a token ({token}) is in the trace:\n{text}"
        );
    }
}
