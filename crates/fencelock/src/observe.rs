//! What fencelock reports about its locks through the [`metrics`](https://docs.rs/metrics)
//! facade, with the cargo feature `metrics` (without it, every function here is empty and
//! compiles away). No exporter is installed: the application picks one (Prometheus, StatsD,
//! ...), and fencelock's metrics appear in it.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `fencelock_acquisitions_total` | counter | `kind`, `outcome` (`granted`, `busy`, `timed_out`, `failed`) |
//! | `fencelock_wait_seconds` | histogram | `kind`: from the request to its outcome |
//! | `fencelock_hold_seconds` | histogram | `kind`: from the grant to the release or loss |
//! | `fencelock_renewals_total` | counter | `outcome` (`ok`, `failed`) |
//! | `fencelock_losses_total` | counter | `reason` (`not_owner`, `expired`, `max_hold_reached`: [`LostReason::code`](crate::LostReason::code)) |
//! | `fencelock_held` | gauge | `kind`: locks held by this process now (a lost one no longer counts, from the moment its loss is known) |
//! | `fencelock_waiters` | gauge | `kind`: requests of this process waiting now |
//!
//! Through [`tracing`](https://docs.rs/tracing) (always, at `debug` unless said otherwise),
//! each carrying the lock's name, kind and fence, never a token or a password:
//! spans `fencelock.acquire` (the fence recorded once granted), `fencelock.release`,
//! `fencelock.renew` (one per renewal batch, with the number of locks), and a `warn` event
//! "lock lost" inside a `fencelock.lost` span with the reason.

#[cfg(feature = "metrics")]
use std::time::Instant;

use crate::error::{Error, LostReason};

/// How an acquisition ended, as the `outcome` label says it.
fn outcome<T>(result: &Result<T, Error>) -> &'static str {
    match result {
        Ok(_) => "granted",
        Err(e @ (Error::Busy { .. } | Error::TimedOut { .. })) => e.code(),
        Err(_) => "failed",
    }
}

/// When an acquisition began, for its wait histogram: without the `metrics` feature nothing
/// (no clock read on the way in, nor on the way out).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started {
    #[cfg(feature = "metrics")]
    at: std::time::Instant,
}

impl Started {
    pub(crate) fn now() -> Self {
        Started {
            #[cfg(feature = "metrics")]
            at: std::time::Instant::now(),
        }
    }
}

/// Counts an acquisition of a lock of `kind` that began at `started`.
pub(crate) fn acquisition<T>(kind: &'static str, result: &Result<T, Error>, started: Started) {
    let outcome = outcome(result);
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("fencelock_acquisitions_total", "kind" => kind, "outcome" => outcome)
            .increment(1);
        metrics::histogram!("fencelock_wait_seconds", "kind" => kind)
            .record(started.at.elapsed().as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, outcome, started);
}

/// Counts a renewal.
pub(crate) fn renewal(ok: bool) {
    #[cfg(feature = "metrics")]
    metrics::counter!("fencelock_renewals_total", "outcome" => if ok { "ok" } else { "failed" })
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = ok;
}

/// Reports the loss of lock `lock` of `kind` (fence `fence`): counts it in
/// `fencelock_losses_total` and logs a `warn` event "lock lost" in a `fencelock.lost` span. A
/// release is not a loss: nothing is reported. Called by [`crate::lease::end`] only, once per
/// lease.
pub(crate) fn lost(lock: &str, kind: &'static str, fence: u64, reason: &LostReason) {
    if *reason == LostReason::Released {
        return;
    }
    let label = reason.code();
    #[cfg(feature = "metrics")]
    metrics::counter!("fencelock_losses_total", "reason" => label).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = label;
    let span = tracing::warn_span!("fencelock.lost", lock = %lock, kind = %kind, fence);
    let _entered = span.enter();
    tracing::warn!(%reason, "lock lost");
}

/// A lock held by this process, counted in `fencelock_held` until its hold ends (a release or a
/// loss, whichever comes first: the lease's end, [`crate::lease::end`], ends it through a
/// `HeldEnd`), or until the guard is gone; the end records the hold time, once.
#[derive(Debug)]
pub(crate) struct Held {
    #[cfg(feature = "metrics")]
    inner: std::sync::Arc<HeldInner>,
}

/// What ends a [`Held`] at the lease's end (kept in the lease's state).
#[cfg(feature = "metrics")]
#[derive(Debug, Clone)]
pub(crate) struct HeldEnd {
    inner: std::sync::Arc<HeldInner>,
}

#[cfg(feature = "metrics")]
#[derive(Debug)]
struct HeldInner {
    kind: &'static str,
    since: Instant,
    ended: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "metrics")]
impl HeldInner {
    fn end(&self) {
        if !self.ended.swap(true, std::sync::atomic::Ordering::AcqRel) {
            metrics::gauge!("fencelock_held", "kind" => self.kind).decrement(1.0);
            metrics::histogram!("fencelock_hold_seconds", "kind" => self.kind)
                .record(self.since.elapsed().as_secs_f64());
        }
    }
}

impl Held {
    pub(crate) fn start(kind: &'static str) -> Self {
        #[cfg(feature = "metrics")]
        {
            metrics::gauge!("fencelock_held", "kind" => kind).increment(1.0);
            Held {
                inner: std::sync::Arc::new(HeldInner {
                    kind,
                    since: Instant::now(),
                    ended: std::sync::atomic::AtomicBool::new(false),
                }),
            }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = kind;
            Held {}
        }
    }

    /// What ends it at the lease's end.
    #[cfg(feature = "metrics")]
    pub(crate) fn ender(&self) -> HeldEnd {
        HeldEnd {
            inner: self.inner.clone(),
        }
    }
}

#[cfg(feature = "metrics")]
impl HeldEnd {
    /// Ends the hold's count (once, whoever comes first).
    pub(crate) fn end(&self) {
        self.inner.end();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        self.inner.end();
    }
}

/// A request that waits, counted in `fencelock_waiters` while it lives.
#[derive(Debug)]
pub(crate) struct Waiting {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    kind: &'static str,
}

impl Waiting {
    pub(crate) fn start(kind: &'static str) -> Self {
        #[cfg(feature = "metrics")]
        metrics::gauge!("fencelock_waiters", "kind" => kind).increment(1.0);
        Waiting { kind }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("fencelock_waiters", "kind" => self.kind).decrement(1.0);
    }
}
