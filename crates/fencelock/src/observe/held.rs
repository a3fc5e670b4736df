//! A lock held by this process: counted in `fencelock_held` and traced as a `fencelock.hold`
//! span from its grant until its lease ends (a release or a loss, whichever comes first:
//! [`crate::lease::end`] ends it through a [`HeldEnd`]) or its guard is gone; the end records
//! the hold time, once.

use std::sync::{Arc, OnceLock};

#[cfg(feature = "metrics")]
use super::Labels;

/// A hold, reported while it lasts.
#[derive(Debug)]
pub(crate) struct Held {
    /// `None`: nothing to report (not counted, and the span is disabled).
    inner: Option<Arc<HeldInner>>,
}

/// What ends a [`Held`] at the lease's end (kept in the lease's state).
#[derive(Debug, Clone)]
pub(crate) struct HeldEnd {
    inner: Arc<HeldInner>,
}

#[derive(Debug)]
struct HeldInner {
    /// Set by [`Held::trace`] once the acquisition returns the guard.
    span: OnceLock<tracing::Span>,
    /// `None`: not counted (recording was off at the grant).
    #[cfg(feature = "metrics")]
    counted: Option<Counted>,
}

/// The hold's series (registered once, at the grant).
#[cfg(feature = "metrics")]
struct Counted {
    labels: Labels,
    held: metrics::Gauge,
    hold: metrics::Histogram,
    since: std::time::Instant,
    ended: std::sync::atomic::AtomicBool,
}

#[cfg(feature = "metrics")]
impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counted")
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl HeldInner {
    fn end(&self) {
        #[cfg(feature = "metrics")]
        if let Some(c) = &self.counted
            && !c.ended.swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            c.held.decrement(1.0);
            c.hold.record(c.since.elapsed().as_secs_f64());
        }
    }
}

impl Held {
    /// The hold of lock `name` of `kind`.
    pub(crate) fn start(kind: &'static str, name: &str) -> Self {
        #[cfg(feature = "metrics")]
        if crate::metrics::recording() {
            let labels = Labels::new(Some(kind), name);
            let series = labels.with(&[]);
            let held = metrics::gauge!(crate::metrics::HELD, series.clone());
            held.increment(1.0);
            return Held {
                inner: Some(Arc::new(HeldInner {
                    span: OnceLock::new(),
                    counted: Some(Counted {
                        labels,
                        held,
                        hold: metrics::histogram!(crate::metrics::HOLD, series),
                        since: std::time::Instant::now(),
                        ended: std::sync::atomic::AtomicBool::new(false),
                    }),
                })),
            };
        }
        let _ = (kind, name);
        Held {
            inner: tracing::enabled!(tracing::Level::DEBUG).then(|| {
                Arc::new(HeldInner {
                    span: OnceLock::new(),
                    #[cfg(feature = "metrics")]
                    counted: None,
                })
            }),
        }
    }

    /// Traces the hold of lock `name` of `kind`, granted with `fence`, as a `fencelock.hold`
    /// span in the caller's context (the acquisition's caller's: not a child of its
    /// `fencelock.acquire`, which ends with the grant).
    pub(crate) fn trace(&self, kind: &'static str, name: &str, fence: u64) {
        if let Some(inner) = &self.inner {
            let _ = inner.span.get_or_init(
                || tracing::debug_span!("fencelock.hold", lock = %name, kind = %kind, fence),
            );
        }
    }

    /// What ends it at the lease's end (`None`: nothing to end).
    pub(crate) fn ender(&self) -> Option<HeldEnd> {
        self.inner.as_ref().map(|inner| HeldEnd {
            inner: inner.clone(),
        })
    }
}

impl HeldEnd {
    /// Ends the hold's count (once, whoever comes first).
    pub(crate) fn end(&self) {
        self.inner.end();
    }

    /// The hold's span, if it is traced.
    pub(crate) fn span_id(&self) -> Option<tracing::Id> {
        self.inner.span.get()?.id()
    }

    /// The labels of the hold's series, if it is counted.
    #[cfg(feature = "metrics")]
    pub(crate) fn labels(&self) -> Option<Labels> {
        self.inner.counted.as_ref().map(|c| c.labels.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(inner) = &self.inner {
            inner.end();
        }
    }
}
