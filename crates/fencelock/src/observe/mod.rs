//! Where the library reports what its locks do: the series of [`crate::metrics`] (cargo
//! feature `metrics`; without it, the calls here record nothing and the clock is not read),
//! and the [`tracing`](https://docs.rs/tracing) spans and events (always, at `debug` unless
//! said otherwise), each carrying the lock's name, kind and fence, never a token or a
//! password:
//!
//! - `fencelock.acquire{lock, kind, fence}`: a request, its fence recorded once granted, with a
//!   child `fencelock.wait` for each wait between two tries;
//! - `fencelock.hold{lock, kind, fence}`: from the grant to the end of the lease (a release, a
//!   loss) or the guard's drop; a loss is a `warn` event "lock lost" on it, with the lock, kind,
//!   fence and reason as fields;
//! - `fencelock.release{lock, kind, fence}` and `fencelock.renew{locks}` (one per renewal
//!   batch).

mod held;

pub(crate) use held::{Held, HeldEnd};

use crate::error::{Error, LostReason};

/// The labels of one lock's series: its kind (or none), and its name's `lock` label if the
/// process asks for one ([`crate::metrics::set_lock_labels`]).
#[cfg(feature = "metrics")]
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    kind: Option<&'static str>,
    lock: Option<String>,
}

#[cfg(feature = "metrics")]
impl Labels {
    pub(crate) fn new(kind: Option<&'static str>, name: &str) -> Self {
        Labels {
            kind,
            lock: crate::metrics::lock_label(name),
        }
    }

    /// `kind`, then `pairs`, then `lock`.
    fn with(&self, pairs: &[(&'static str, &'static str)]) -> Vec<metrics::Label> {
        let mut labels = Vec::with_capacity(pairs.len() + 2);
        if let Some(kind) = self.kind {
            labels.push(metrics::Label::from_static_parts("kind", kind));
        }
        labels.extend(
            pairs
                .iter()
                .map(|(k, v)| metrics::Label::from_static_parts(k, v)),
        );
        if let Some(lock) = &self.lock {
            labels.push(metrics::Label::new("lock", lock.clone()));
        }
        labels
    }

    fn count(&self, name: &'static str, pairs: &[(&'static str, &'static str)]) {
        metrics::counter!(name, self.with(pairs)).increment(1);
    }
}

/// The labels of lock `name`'s series, if the library records ([`crate::metrics::recording`]).
#[cfg(feature = "metrics")]
fn labels_if_recording(kind: Option<&'static str>, name: &str) -> Option<Labels> {
    crate::metrics::recording().then(|| Labels::new(kind, name))
}

/// Counts one in lock `name`'s counter `counter` with `pairs`, if the library records.
#[cfg(feature = "metrics")]
fn count(
    kind: Option<&'static str>,
    name: &str,
    counter: &'static str,
    pairs: &[(&'static str, &'static str)],
) {
    if let Some(labels) = labels_if_recording(kind, name) {
        labels.count(counter, pairs);
    }
}

/// How an acquisition ended, as the `outcome` label says it.
fn outcome<T>(result: &Result<T, Error>) -> &'static str {
    match result {
        Ok(_) => "granted",
        Err(e @ (Error::Busy { .. } | Error::TimedOut { .. })) => e.code(),
        Err(_) => "failed",
    }
}

/// An acquisition of a lock, from its start, for its count and its wait histogram: without the
/// `metrics` feature, or with recording off, nothing (no clock read on the way in, nor on the
/// way out).
#[derive(Debug)]
pub(crate) struct Started {
    #[cfg(feature = "metrics")]
    counted: Option<(std::time::Instant, Labels)>,
}

impl Started {
    /// An acquisition of lock `name` of `kind`, starting now.
    pub(crate) fn now(kind: &'static str, name: &str) -> Self {
        #[cfg(feature = "metrics")]
        {
            Started {
                counted: labels_if_recording(Some(kind), name)
                    .map(|labels| (std::time::Instant::now(), labels)),
            }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (kind, name);
            Started {}
        }
    }
}

/// Counts an acquisition that ended with `result`.
pub(crate) fn acquisition<T>(result: &Result<T, Error>, started: Started) {
    let outcome = outcome(result);
    #[cfg(feature = "metrics")]
    if let Some((at, labels)) = started.counted {
        labels.count(crate::metrics::ACQUISITIONS, &[("outcome", outcome)]);
        metrics::histogram!(crate::metrics::WAIT, labels.with(&[]))
            .record(at.elapsed().as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (outcome, started);
}

/// Counts a renewal.
pub(crate) fn renewal(ok: bool) {
    #[cfg(feature = "metrics")]
    if crate::metrics::recording() {
        metrics::counter!(crate::metrics::RENEWALS, "outcome" => if ok { "ok" } else { "failed" })
            .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = ok;
}

/// Counts a pass of lock `name` to one of this process's waiters: `taken`, or `missed` (it came
/// too late to use, and the waiter tries again).
pub(crate) fn pass(kind: &'static str, name: &str, taken: bool) {
    #[cfg(feature = "metrics")]
    count(
        Some(kind),
        name,
        crate::metrics::PASSES,
        &[("outcome", if taken { "taken" } else { "missed" })],
    );
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, name, taken);
}

/// Counts a fenced write to `resource` that ended with `result`: `accepted`, or `refused` (a
/// newer fence was); a write that failed otherwise (unreachable, a wrong type) is not counted.
pub(crate) fn fenced_write<T>(resource: &str, result: &Result<T, Error>) {
    let outcome = match result {
        Ok(_) => "accepted",
        Err(Error::Fenced { .. }) => "refused",
        Err(_) => return,
    };
    #[cfg(feature = "metrics")]
    count(
        None,
        resource,
        crate::metrics::FENCED_WRITES,
        &[("outcome", outcome)],
    );
    #[cfg(not(feature = "metrics"))]
    let _ = (resource, outcome);
}

/// Counts a start of run-once job `job`: `ran`, `failed`, `already_done`, `too_late` or
/// `gave_up`.
pub(crate) fn once(job: &str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    count(None, job, crate::metrics::ONCE, &[("outcome", outcome)]);
    #[cfg(not(feature = "metrics"))]
    let _ = (job, outcome);
}

/// Counts a term of election `election`: `won`, `lost` or `observed`.
pub(crate) fn term(election: &str, event: &'static str) {
    #[cfg(feature = "metrics")]
    count(None, election, crate::metrics::TERMS, &[("event", event)]);
    #[cfg(not(feature = "metrics"))]
    let _ = (election, event);
}

/// Reports the end of the lease of lock `lock` of `kind` (fence `fence`) for `reason`: the hold
/// is no longer counted (`held`, if it is counted or traced), and a loss (not a release) is
/// counted in `fencelock_losses_total` and logged as a `warn` event "lock lost" on the hold's
/// span. Called by [`crate::lease::end`] only, once per lease.
/// A lost hold that is an election's term (`is_term`) is a lost term.
pub(crate) fn ended(
    held: Option<HeldEnd>,
    (lock, kind): (&str, &'static str),
    is_term: bool,
    fence: u64,
    reason: &LostReason,
) {
    let parent = held.as_ref().and_then(HeldEnd::span_id);
    if let Some(held) = &held {
        held.end();
    }
    if *reason == LostReason::Released {
        return;
    }
    let code = reason.code();
    #[cfg(feature = "metrics")]
    if crate::metrics::recording() {
        let labels = held
            .as_ref()
            .and_then(HeldEnd::labels)
            .unwrap_or_else(|| Labels::new(Some(kind), lock));
        labels.count(crate::metrics::LOSSES, &[("reason", code)]);
    }
    if is_term {
        term(lock, "lost");
    }
    match parent {
        Some(parent) => {
            tracing::warn!(parent: parent, lock = %lock, kind = %kind, fence, %reason, code = %code, "lock lost")
        }
        None => {
            tracing::warn!(lock = %lock, kind = %kind, fence, %reason, code = %code, "lock lost")
        }
    }
}

/// A request that waits, counted in `fencelock_waiters` while it lives (if it was counted
/// when it started: recording on).
#[derive(Debug)]
pub(crate) struct Waiting {
    #[cfg(feature = "metrics")]
    labels: Option<Vec<metrics::Label>>,
}

impl Waiting {
    pub(crate) fn start(kind: &'static str, name: &str) -> Self {
        #[cfg(feature = "metrics")]
        {
            let labels = labels_if_recording(Some(kind), name).map(|labels| {
                let labels = labels.with(&[]);
                metrics::gauge!(crate::metrics::WAITERS, labels.clone()).increment(1.0);
                labels
            });
            Waiting { labels }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (kind, name);
            Waiting {}
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        if let Some(labels) = self.labels.take() {
            metrics::gauge!(crate::metrics::WAITERS, labels).decrement(1.0);
        }
    }
}
