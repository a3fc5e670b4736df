//! The process's fencelock metrics, as a package exports them (a Prometheus collector, an
//! OpenTelemetry meter): one [`Registry`] per process, installed as the recorder the first time
//! a package asks for it, and read at each scrape. A process that never asks records nothing,
//! and pays nothing for it: the library's recording is off until then
//! ([`record_once_enabled`]).

use std::sync::{Once, OnceLock};

pub use fencelock::metrics::{
    BUCKETS, INSTRUMENTS, Instrument, InstrumentKind, LockLabels, Observation, Registry, Series,
    Value,
};

/// Whether, and how, the series name their locks (the package's `lock_labels` option).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Names {
    /// No `lock` label.
    #[default]
    Off,
    /// Every lock's name as its label.
    All,
    /// A label by pattern (`prefix*` or an exact name); unmatched names are `other`.
    Patterns(Vec<(String, String)>),
}

impl Names {
    fn labels(self) -> LockLabels {
        match self {
            Names::Off => LockLabels::off(),
            Names::All => LockLabels::names(),
            Names::Patterns(p) => LockLabels::patterns(p),
        }
    }
}

static REGISTRY: OnceLock<Result<Registry, String>> = OnceLock::new();

static QUIET: Once = Once::new();

/// Turns the library's recording off until [`enable`] (`fencelock::metrics::set_recording`):
/// with no recorder installed, every acquisition would still make its series' labels and keys
/// for nobody. Called as a package is loaded; only the first call does anything, and not
/// after [`enable`].
pub fn record_once_enabled() {
    QUIET.call_once(|| {
        if REGISTRY.get().is_none() {
            fencelock::metrics::set_recording(false);
        }
    });
}

/// The process's registry, installed as its recorder on the first call (from then on, the
/// library records into it), with the `lock` label as `names` says (a later call changes it
/// for the series recorded after).
///
/// # Errors
///
/// The reason, if another recorder was installed in this process first (by a Rust extension
/// that installs its own).
pub fn enable(names: Names) -> Result<&'static Registry, String> {
    fencelock::metrics::set_lock_labels(names.labels());
    let installed = REGISTRY.get_or_init(|| {
        let registry = Registry::new();
        registry
            .install()
            .map(|()| registry)
            .map_err(|e| e.to_string())
    });
    // On, whether or not the registry could be installed: with another recorder installed
    // first, the series go to it.
    fencelock::metrics::set_recording(true);
    installed.as_ref().map_err(Clone::clone)
}

/// The registry, if [`enable`] installed it.
pub fn registry() -> Option<&'static Registry> {
    REGISTRY.get()?.as_ref().ok()
}

/// A series' value by kind, as a package hands it over: `("counter", n)`, `("gauge", v)`, or
/// `("histogram", counts, sum, count)` with counts per bucket of [`BUCKETS`] (not cumulative)
/// and one above the last.
#[derive(Debug, Clone, PartialEq)]
pub enum Sample {
    Counter(u64),
    Gauge(f64),
    Histogram {
        counts: Vec<u64>,
        sum: f64,
        count: u64,
    },
}

/// Every series now, with its value as a [`Sample`] (empty before [`enable`]).
pub fn snapshot() -> Vec<(Series, Sample)> {
    let Some(registry) = registry() else {
        return Vec::new();
    };
    registry
        .snapshot()
        .into_iter()
        .filter_map(|series| {
            let sample = match &series.value {
                Value::Counter(n) => Sample::Counter(*n),
                Value::Gauge(v) => Sample::Gauge(*v),
                Value::Histogram { counts, sum, count } => Sample::Histogram {
                    counts: counts.clone(),
                    sum: *sum,
                    count: *count,
                },
                _ => return None,
            };
            Some((series, sample))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_installed_once_and_the_labels_follow_the_last_call() {
        let first = enable(Names::Off).map(std::ptr::from_ref);
        let again =
            enable(Names::Patterns(vec![("a*".into(), "a".into())])).map(std::ptr::from_ref);
        assert_eq!(first, again);
        assert!(registry().is_some());
        fencelock::metrics::set_lock_labels(LockLabels::off());
    }
}
