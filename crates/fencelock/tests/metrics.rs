//! The `metrics` feature: acquisitions by kind and outcome, wait and hold times, renewals,
//! losses, locks held and waiters now — read back from a recorder installed for this test
//! binary (one test, so that nothing else records meanwhile). Built only with the feature
//! (`scripts/test` runs it: `cargo test -p fencelock --features metrics --test metrics`).

mod common;

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};

/// What the recorder has seen: counters and gauges as they are now, and every histogram
/// sample so far (a snapshot hands each sample out once).
struct Seen {
    snapshotter: Snapshotter,
    histograms: Vec<(CompositeKey, usize)>,
}

impl Seen {
    fn value(
        &mut self,
        kind: MetricKind,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<DebugValue> {
        let matches = |key: &CompositeKey| {
            let k = key.key();
            key.kind() == kind
                && k.name() == name
                && k.labels().count() == labels.len()
                && labels.iter().all(|(l, v)| {
                    k.labels()
                        .any(|label| label.key() == *l && label.value() == *v)
                })
        };
        let mut found = None;
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            if let DebugValue::Histogram(samples) = &value {
                match self.histograms.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, n)) => *n += samples.len(),
                    None => self.histograms.push((key.clone(), samples.len())),
                }
            }
            if matches(&key) {
                found = Some(value);
            }
        }
        found
    }

    fn counter(&mut self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.value(MetricKind::Counter, name, labels) {
            Some(DebugValue::Counter(n)) => n,
            None => 0,
            other => panic!("{name}: {other:?}"),
        }
    }

    fn gauge(&mut self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.value(MetricKind::Gauge, name, labels) {
            Some(DebugValue::Gauge(n)) => n.into_inner(),
            None => 0.0,
            other => panic!("{name}: {other:?}"),
        }
    }

    /// Histogram samples recorded so far.
    fn samples(&mut self, name: &str, labels: &[(&str, &str)]) -> usize {
        let _ = self.value(MetricKind::Histogram, name, labels);
        self.histograms
            .iter()
            .filter(|(key, _)| {
                let k = key.key();
                k.name() == name
                    && k.labels().count() == labels.len()
                    && labels.iter().all(|(l, v)| {
                        k.labels()
                            .any(|label| label.key() == *l && label.value() == *v)
                    })
            })
            .map(|(_, n)| n)
            .sum()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_counted_timed_and_their_losses_reported() {
    // Global: the client's tasks run on the runtime's threads.
    let recorder = DebuggingRecorder::new();
    let mut seen = Seen {
        snapshotter: recorder.snapshotter(),
        histograms: Vec::new(),
    };
    recorder
        .install()
        .unwrap_or_else(|e| panic!("cannot install the recorder: {e}"));
    let s = &mut seen;

    let redis = common::server();
    let client = common::client(&redis.url());
    let lock = [("kind", "lock")];

    // Granted, and held while the guard lives; renewed meanwhile.
    let guard = client
        .lock("m")
        .ttl(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s.counter(
            "fencelock_acquisitions_total",
            &[("kind", "lock"), ("outcome", "granted")]
        ),
        1
    );
    assert_eq!(s.gauge("fencelock_held", &lock), 1.0);
    // Busy, then a waiter that times out (and is counted as waiting while it waits).
    assert!(
        client
            .lock("m")
            .try_acquire()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none()
    );
    assert_eq!(
        s.counter(
            "fencelock_acquisitions_total",
            &[("kind", "lock"), ("outcome", "busy")]
        ),
        1
    );
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .lock("m")
                .wait_up_to(Duration::from_millis(600))
                .acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.gauge("fencelock_waiters", &lock), 1.0);
    let timed_out = waiter.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(timed_out, Err(fencelock::Error::TimedOut { .. })),
        "{timed_out:?}"
    );
    assert_eq!(
        s.counter(
            "fencelock_acquisitions_total",
            &[("kind", "lock"), ("outcome", "timed_out")]
        ),
        1
    );
    assert_eq!(s.gauge("fencelock_waiters", &lock), 0.0);
    assert!(s.counter("fencelock_renewals_total", &[("outcome", "ok")]) >= 1);
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(s.gauge("fencelock_held", &lock), 0.0);
    assert_eq!(s.samples("fencelock_hold_seconds", &lock), 1);
    assert_eq!(s.samples("fencelock_wait_seconds", &lock), 3);

    // A loss: another owner's key replaces ours; the next renewal finds it and reports it.
    let semaphore = [("kind", "semaphore")];
    let lost = client
        .lock("gone")
        .ttl(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .cmd(&["SET", "fencelock:{gone}", "someone-else:1"])
        .unwrap_or_else(|e| panic!("{e}"));
    let reason = tokio::time::timeout(Duration::from_secs(5), lost.lost())
        .await
        .unwrap_or_else(|_| panic!("the loss was not noticed"));
    // Counted just after the guard's signal fires (outside the lease's lock).
    common::wait_for_count(
        &format!("losses counted ({reason})"),
        1,
        Duration::from_secs(5),
        || s.counter("fencelock_losses_total", &[("reason", "not_owner")]),
    )
    .await;
    assert!(s.counter("fencelock_renewals_total", &[("outcome", "failed")]) >= 1);
    // No longer held from the moment the loss is known, though the guard still lives; its
    // hold time recorded then, once.
    assert_eq!(s.gauge("fencelock_held", &lock), 0.0);
    assert_eq!(s.samples("fencelock_hold_seconds", &lock), 2);
    drop(lost);
    assert_eq!(s.gauge("fencelock_held", &lock), 0.0);
    assert_eq!(s.samples("fencelock_hold_seconds", &lock), 2);
    // Other kinds have their own label.
    let permit = client
        .semaphore("pool", 2)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.gauge("fencelock_held", &semaphore), 1.0);
    assert!(permit.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        s.counter(
            "fencelock_acquisitions_total",
            &[("kind", "semaphore"), ("outcome", "granted")]
        ),
        1
    );
}
