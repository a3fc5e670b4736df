//! Every loss of a lock is reported once, whatever noticed it: counted in
//! `fencelock_losses_total` with its kind and reason, and logged as a "lock lost" event (with
//! the lock, its kind and the reason) on the hold's `fencelock.hold` span. A release is not a
//! loss. The recorder and the subscriber are global
//! to this binary, so the tests take turns (`one_at_a_time`) and each reads the counters as
//! they change across it. Built only with the feature `metrics`
//! (`cargo test -p fencelock --features metrics --test losses`).

mod common;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use fencelock::LostReason;
use metrics_util::MetricKind;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A "lock lost" event's fields.
#[derive(Debug, Clone, Default)]
struct Lost {
    lock: String,
    kind: String,
    reason: String,
}

/// The fields of a `fencelock.hold` span or a "lock lost" event.
#[derive(Default)]
struct Fields {
    lock: Option<String>,
    kind: Option<String>,
    reason: Option<String>,
    message: Option<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let value = format!("{value:?}");
        match field.name() {
            "lock" => self.lock = Some(value),
            "kind" => self.kind = Some(value),
            "reason" => self.reason = Some(value),
            "message" => self.message = Some(value),
            _ => {}
        }
    }
}

/// Collects every "lock lost" event.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Lost>>>);

impl Capture {
    fn events(&self) -> Vec<Lost> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn of(&self, lock: &str) -> Vec<Lost> {
        self.events()
            .into_iter()
            .filter(|e| e.lock == lock)
            .collect()
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "fencelock.hold" {
            return;
        }
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Lost {
                lock: fields.lock.unwrap_or_default(),
                kind: fields.kind.unwrap_or_default(),
                reason: String::new(),
            });
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message.as_deref() != Some("lock lost") {
            return;
        }
        assert_eq!(*event.metadata().level(), Level::WARN);
        let lost = Lost {
            lock: fields.lock.unwrap_or_default(),
            kind: fields.kind.unwrap_or_default(),
            reason: fields.reason.unwrap_or_default(),
        };
        // On the hold's span: the one of the same lock and kind.
        let Some(span) = ctx.event_span(event) else {
            panic!("a \"lock lost\" event outside any span");
        };
        assert_eq!(span.name(), "fencelock.hold");
        let Some(hold) = span.extensions().get::<Lost>().cloned() else {
            panic!("a fencelock.hold span without its fields");
        };
        assert_eq!((&hold.lock, &hold.kind), (&lost.lock, &lost.kind));
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(lost);
    }
}

struct Observed {
    snapshotter: Snapshotter,
    capture: Capture,
}

impl Observed {
    /// `fencelock_losses_total{reason}` as it is now.
    fn losses(&self, reason: &str) -> u64 {
        let mut total = 0;
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let k = key.key();
            if key.kind() == MetricKind::Counter
                && k.name() == "fencelock_losses_total"
                && k.labels()
                    .any(|l| l.key() == "reason" && l.value() == reason)
                && let DebugValue::Counter(n) = value
            {
                total += n;
            }
        }
        total
    }

    /// `fencelock_losses_total` for each reason, as it is now.
    fn all_losses(&self) -> [u64; 3] {
        [
            self.losses("not_owner"),
            self.losses("expired"),
            self.losses("max_hold_reached"),
        ]
    }

    /// Waits (generously: the machine may be loaded) until lock `lock` has a "lock lost" event.
    async fn event_of(&self, lock: &str) -> Vec<Lost> {
        let give_up = Instant::now() + Duration::from_secs(20);
        loop {
            let events = self.capture.of(lock);
            if !events.is_empty() {
                return events;
            }
            assert!(
                Instant::now() < give_up,
                "no \"lock lost\" event for {lock} (events: {:?})",
                self.capture.events()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The recorder and subscriber of this binary, installed by the first test.
fn observed() -> &'static Observed {
    static OBSERVED: OnceLock<Observed> = OnceLock::new();
    OBSERVED.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .unwrap_or_else(|e| panic!("cannot install the recorder: {e}"));
        let capture = Capture::default();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(capture.clone()),
        )
        .unwrap_or_else(|e| panic!("cannot install the subscriber: {e}"));
        Observed {
            snapshotter,
            capture,
        }
    })
}

/// Runs `test` on its own runtime, while no other test of this binary runs.
fn one_at_a_time<F: Future<Output = ()>>(test: impl FnOnce(&'static Observed) -> F) {
    static TURN: Mutex<()> = Mutex::new(());
    let _turn: MutexGuard<'_, ()> = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    let observed = observed();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot build a runtime: {e}"));
    runtime.block_on(test(observed));
}

#[test]
fn reaching_max_hold_is_counted_and_logged_once() {
    one_at_a_time(|seen| async move {
        let redis = common::server();
        let client = common::client(&redis.url());
        let before = seen.all_losses();
        let guard = client
            .lock("capped")
            .ttl(Duration::from_millis(300))
            .max_hold(Duration::from_millis(400))
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let reason = tokio::time::timeout(Duration::from_secs(20), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("a capped lock must be lost"));
        assert_eq!(reason, LostReason::MaxHoldReached);
        let events = seen.event_of("capped").await;
        // Nothing more comes of it: not the guard's end, not a late look at the deadline.
        drop(guard);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let events_after = seen.capture.of("capped");
        assert_eq!(events_after.len(), 1, "{events_after:?}");
        assert_eq!(events[0].kind, "lock");
        assert!(
            events[0].reason.contains("maximum hold time"),
            "{:?}",
            events[0]
        );
        let after = seen.all_losses();
        assert_eq!(after[2] - before[2], 1, "max_hold: {before:?} -> {after:?}");
        assert_eq!(after[..2], before[..2], "{before:?} -> {after:?}");
    });
}

#[test]
fn an_unrenewed_lease_running_out_is_counted_and_logged_once() {
    one_at_a_time(|seen| async move {
        let redis = common::server();
        let client = common::client(&redis.url());
        let before = seen.all_losses();
        // Nobody waits on `lost()`: the loss is reported all the same.
        let guard = client
            .lock("unrenewed")
            .ttl(Duration::from_millis(300))
            .auto_renew(false)
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let events = seen.event_of("unrenewed").await;
        assert!(!guard.is_held());
        assert_eq!(guard.lost().await, LostReason::Expired { last_error: None });
        // The holder's deadline is conservative (it counts from before the request was sent,
        // less a drift margin): the server lets the key go a little later. Released once it
        // has, the release finds nothing to release.
        let gone = std::time::Instant::now() + Duration::from_secs(10);
        while common::integer_reply(&redis, &["EXISTS", "fencelock:{unrenewed}"]) != 0 {
            assert!(
                std::time::Instant::now() < gone,
                "the key outlived its lease"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!guard.release().await.unwrap_or_else(|e| panic!("{e}")));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let events_after = seen.capture.of("unrenewed");
        assert_eq!(events_after.len(), 1, "{events_after:?}");
        assert!(
            events[0].reason.contains("the lease ran out"),
            "{:?}",
            events[0]
        );
        let after = seen.all_losses();
        assert_eq!(after[1] - before[1], 1, "expired: {before:?} -> {after:?}");
        assert_eq!(after[0], before[0], "{before:?} -> {after:?}");
        assert_eq!(after[2], before[2], "{before:?} -> {after:?}");
    });
}

#[test]
fn a_release_is_not_a_loss() {
    one_at_a_time(|seen| async move {
        let redis = common::server();
        let client = common::client(&redis.url());
        let before = seen.all_losses();
        let ttl = Duration::from_millis(300);
        // Released, dropped, renewed or not, capped or not: each lets go well within its lease.
        let renewed = client.lock("released/renewed").ttl(ttl).acquire().await;
        let renewed = renewed.unwrap_or_else(|e| panic!("{e}"));
        let unrenewed = client.lock("released/unrenewed").ttl(ttl).auto_renew(false);
        let unrenewed = unrenewed.acquire().await.unwrap_or_else(|e| panic!("{e}"));
        let capped = client
            .lock("released/capped")
            .ttl(ttl)
            .max_hold(Duration::from_secs(30));
        let capped = capped.acquire().await.unwrap_or_else(|e| panic!("{e}"));
        let dropped = client.lock("released/dropped").ttl(ttl).auto_renew(false);
        let dropped = dropped.acquire().await.unwrap_or_else(|e| panic!("{e}"));
        let signals = [
            renewed.lost(),
            unrenewed.lost(),
            capped.lost(),
            dropped.lost(),
        ];
        for guard in [renewed, unrenewed, capped] {
            assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
        }
        drop(dropped);
        for signal in signals {
            assert_eq!(signal.await, LostReason::Released);
        }
        // Past every lease: nothing noticed any of them run out.
        tokio::time::sleep(ttl * 4).await;
        let events: Vec<Lost> = seen
            .capture
            .events()
            .into_iter()
            .filter(|e| e.lock.starts_with("released/"))
            .collect();
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(seen.all_losses(), before);
    });
}
