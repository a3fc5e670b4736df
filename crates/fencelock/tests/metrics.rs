//! The `metrics` feature: every instrument of `fencelock::metrics::INSTRUMENTS` read back from
//! fencelock's own `Registry`, installed as this binary's recorder, after a scripted run:
//! grants, a busy try, a wait that times out, a pass, a loss, a fenced refusal, run-once
//! outcomes, an election's terms, the `lock` label by pattern, and recording turned off and on.
//! One test, so that nothing else records meanwhile. Built only with the feature (`scripts/test`
//! runs it).

mod common;

use std::time::Duration;

use futures_util::StreamExt;

use fencelock::metrics::{
    INSTRUMENTS, LockLabels, Registry, Series, Value, set_lock_labels, set_recording,
};

/// What the registry holds.
struct Seen {
    registry: Registry,
}

impl Seen {
    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<Series> {
        self.registry.snapshot().into_iter().find(|s| {
            s.name == name
                && s.labels.len() == labels.len()
                && labels
                    .iter()
                    .all(|(l, v)| s.labels.iter().any(|(k, w)| k == l && w == v))
        })
    }

    fn counter(&mut self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.find(name, labels).map(|s| s.value) {
            Some(Value::Counter(n)) => n,
            None => 0,
            other => panic!("{name}: {other:?}"),
        }
    }

    fn gauge(&mut self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.find(name, labels).map(|s| s.value) {
            Some(Value::Gauge(n)) => n,
            None => 0.0,
            other => panic!("{name}: {other:?}"),
        }
    }

    /// How many values a histogram has recorded.
    fn samples(&mut self, name: &str, labels: &[(&str, &str)]) -> usize {
        match self.find(name, labels).map(|s| s.value) {
            Some(Value::Histogram { count, counts, .. }) => {
                assert_eq!(
                    counts.iter().sum::<u64>(),
                    count,
                    "{name}: buckets and count"
                );
                usize::try_from(count).unwrap_or(usize::MAX)
            }
            None => 0,
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// A request for lock `name` that waits up to `wait`, on a task of its own.
fn spawn_waiter(
    client: &fencelock::Client,
    name: &'static str,
    wait: Duration,
) -> tokio::task::JoinHandle<fencelock::Result<fencelock::LockGuard>> {
    let client = client.clone();
    tokio::spawn(async move { client.lock(name).wait_up_to(wait).acquire().await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_counted_timed_and_their_losses_reported() {
    // Global: the client's tasks run on the runtime's threads.
    let registry = Registry::new();
    registry
        .install()
        .unwrap_or_else(|e| panic!("cannot install the recorder: {e}"));
    let mut seen = Seen {
        registry: registry.clone(),
    };
    let s = &mut seen;

    let mut redis = common::server();
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
    let waiter = spawn_waiter(&client, "m", Duration::from_millis(600));
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
        || {
            s.counter(
                "fencelock_losses_total",
                &[("kind", "lock"), ("reason", "not_owner")],
            )
        },
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

    // A pass: a release hands the lock to the waiter in line.
    let first = client
        .lock("p")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let waiter = spawn_waiter(&client, "p", Duration::from_secs(10));
    common::wait_for_count("a waiter", 1, Duration::from_secs(5), || {
        s.gauge("fencelock_waiters", &lock) as u64
    })
    .await;
    assert!(first.release().await.unwrap_or_else(|e| panic!("{e}")));
    let second = waiter
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s.counter(
            "fencelock_passes_total",
            &[("kind", "lock"), ("outcome", "taken")]
        ),
        1
    );

    // Fenced writes: one accepted, one refused (an older fence).
    let store = client.fenced_store("res").unwrap_or_else(|e| panic!("{e}"));
    let writes = fencelock::fenced::Writes::new().set("res:value", "new");
    store
        .apply(second.fence(), &writes)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let refused = store.apply(second.fence() - 1, &writes).await;
    assert!(
        matches!(refused, Err(fencelock::Error::Fenced { .. })),
        "{refused:?}"
    );
    assert_eq!(
        s.counter("fencelock_fenced_writes_total", &[("outcome", "accepted")]),
        1
    );
    assert_eq!(
        s.counter("fencelock_fenced_writes_total", &[("outcome", "refused")]),
        1
    );
    assert!(second.release().await.unwrap_or_else(|e| panic!("{e}")));

    // Run-once: ran, then already done; a failure.
    for _ in 0..2 {
        client
            .once("migrate")
            .run(|_| async { Ok::<_, std::io::Error>(()) })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    client
        .once("import")
        .run(|_| async { Err::<(), _>(std::io::Error::other("no file")) })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for (outcome, n) in [("ran", 1), ("already_done", 1), ("failed", 1)] {
        assert_eq!(
            s.counter("fencelock_once_total", &[("outcome", outcome)]),
            n,
            "{outcome}"
        );
    }

    // An election: won, observed by an observer, lost when its key is deleted.
    let election = client.election("leader");
    let mut observer = election.observe().await.unwrap_or_else(|e| panic!("{e}"));
    let _vacant = observer.next().await;
    let leadership = election
        .campaign("a")
        .ttl(Duration::from_millis(300))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.counter("fencelock_terms_total", &[("event", "won")]), 1);
    let _leader = tokio::time::timeout(Duration::from_secs(5), observer.next()).await;
    common::wait_for_count("a term observed", 1, Duration::from_secs(5), || {
        s.counter("fencelock_terms_total", &[("event", "observed")])
    })
    .await;
    redis
        .cmd(&["DEL", "fencelock:{leader}"])
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = tokio::time::timeout(Duration::from_secs(5), leadership.lost()).await;
    common::wait_for_count("a term lost", 1, Duration::from_secs(5), || {
        s.counter("fencelock_terms_total", &[("event", "lost")])
    })
    .await;
    drop(leadership);

    // The lock's name as a label, by pattern, from now on.
    set_lock_labels(LockLabels::patterns([("account:*", "account")]));
    for name in ["account:1", "account:2", "other-lock"] {
        let guard = client
            .lock(name)
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    }
    set_lock_labels(LockLabels::off());
    let granted = [("kind", "lock"), ("outcome", "granted")];
    let with = |lock: &'static str| [granted[0], granted[1], ("lock", lock)];
    assert_eq!(
        s.counter("fencelock_acquisitions_total", &with("account")),
        2
    );
    assert_eq!(s.counter("fencelock_acquisitions_total", &with("other")), 1);
    assert_eq!(
        s.samples(
            "fencelock_hold_seconds",
            &[("kind", "lock"), ("lock", "account")]
        ),
        2
    );

    // Recording off: nothing is recorded. A hold granted and a waiter started while it is off
    // are not taken out of counts they never entered when they end with recording on again.
    let counted = |s: &mut Seen| {
        (
            s.counter("fencelock_acquisitions_total", &granted),
            s.counter(
                "fencelock_acquisitions_total",
                &[("kind", "lock"), ("outcome", "timed_out")],
            ),
            s.samples("fencelock_wait_seconds", &lock),
            s.samples("fencelock_hold_seconds", &lock),
        )
    };
    let before = counted(s);
    set_recording(false);
    let quiet = client
        .lock("quiet")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let waiter = spawn_waiter(&client, "quiet", Duration::from_millis(1500));
    // In line (its acquisition started before): recording is turned on only then.
    common::wait_for_count("the waiter in line", true, Duration::from_secs(5), || {
        matches!(
            redis.cmd(&["ZCARD", "fencelock:{quiet}:waiters"]),
            Ok(redis::Value::Int(1))
        )
    })
    .await;
    assert_eq!(s.gauge("fencelock_held", &lock), 0.0);
    assert_eq!(s.gauge("fencelock_waiters", &lock), 0.0);
    set_recording(true);
    let timed_out = waiter.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(timed_out, Err(fencelock::Error::TimedOut { .. })),
        "{timed_out:?}"
    );
    assert!(quiet.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(s.gauge("fencelock_waiters", &lock), 0.0);
    assert_eq!(s.gauge("fencelock_held", &lock), 0.0);
    assert_eq!(counted(s), before);

    // Every instrument has a series now, and the text format names each once, with its type.
    let text = registry.render();
    for instrument in INSTRUMENTS {
        assert!(
            registry
                .snapshot()
                .iter()
                .any(|s| s.name == instrument.name),
            "no series of {}:\n{text}",
            instrument.name
        );
        let typed = format!("# TYPE {} {}\n", instrument.name, instrument.kind.as_str());
        assert_eq!(text.matches(&typed).count(), 1, "{typed}{text}");
    }
    assert!(
        text.contains(
            "fencelock_acquisitions_total{kind=\"lock\",outcome=\"granted\",lock=\"account\"} 2\n"
        ),
        "{text}"
    );

    // A renewal that fails is tried again a tenth of a lease later, not at once: a hold whose
    // server is gone fails its renewals from a third of the lease in until its deadline.
    let failed = [("outcome", "failed")];
    let failed_before = s.counter("fencelock_renewals_total", &failed);
    let ttl = Duration::from_secs(1);
    let orphan = client
        .lock("orphan")
        .ttl(ttl)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    redis.kill().unwrap_or_else(|e| panic!("{e}"));
    tokio::time::timeout(ttl * 3, orphan.lost())
        .await
        .unwrap_or_else(|_| panic!("no loss reported with the server gone"));
    let retries = s.counter("fencelock_renewals_total", &failed) - failed_before;
    assert!(
        (1..=12).contains(&retries),
        "{retries} failed renewals in the two thirds of a lease before the deadline"
    );
}
