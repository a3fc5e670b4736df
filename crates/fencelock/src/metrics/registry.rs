//! A recorder for the `metrics` facade that keeps what fencelock reports in memory, for a
//! program without an exporter of its own: the `fencelock` command and the Python and Node.js
//! packages read it ([`Registry::snapshot`], [`Registry::render`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

use super::instruments::{BUCKETS, InstrumentKind};

/// How many histogram values [`Registry::take_observations`] keeps between two takes; later
/// ones are counted in the buckets only.
pub const KEPT_OBSERVATIONS: usize = 65_536;

/// fencelock's series, kept in memory: install it as the process's recorder
/// ([`Registry::install`]), then read it when asked (a scrape).
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let registry = fencelock::metrics::Registry::new();
/// registry.install()?;
/// let guard = client.lock("reports/nightly").acquire().await?;
/// guard.release().await?;
/// print!("{}", registry.render());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Registry {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    counters: RwLock<HashMap<Key, Arc<AtomicU64>>>,
    gauges: RwLock<HashMap<Key, Arc<AtomicU64>>>,
    histograms: RwLock<HashMap<Key, Arc<Buckets>>>,
    observations: Arc<Observations>,
}

/// One series as it is now.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Series {
    /// The instrument's name (`fencelock_acquisitions_total`).
    pub name: String,
    /// Its labels, in the order they were given.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: Value,
}

/// A series' value.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// A counter's total.
    Counter(u64),
    /// A gauge's value.
    Gauge(f64),
    /// A histogram: the count in each bucket of [`BUCKETS`] (not cumulative), then the count
    /// above the last; the sum and the count of every value.
    Histogram {
        /// Values up to each bound of [`BUCKETS`] and above the previous one, then above the
        /// last (`BUCKETS.len() + 1` counts).
        counts: Vec<u64>,
        /// The sum of the values.
        sum: f64,
        /// How many values.
        count: u64,
    },
}

impl Series {
    /// A series named `name` with `labels` and `value`.
    pub fn new<K: Into<String>, V: Into<String>>(
        name: impl Into<String>,
        labels: impl IntoIterator<Item = (K, V)>,
        value: Value,
    ) -> Self {
        Series {
            name: name.into(),
            labels: labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            value,
        }
    }
}

impl Value {
    /// The instrument kind this value is of.
    pub fn kind(&self) -> InstrumentKind {
        match self {
            Value::Counter(_) => InstrumentKind::Counter,
            Value::Gauge(_) => InstrumentKind::Gauge,
            Value::Histogram { .. } => InstrumentKind::Histogram,
        }
    }
}

/// A histogram's value, as recorded (for a push API such as OpenTelemetry's histograms).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Observation {
    /// The histogram's name.
    pub name: String,
    /// Its labels.
    pub labels: Vec<(String, String)>,
    /// The value (seconds).
    pub value: f64,
}

/// The error of [`Registry::install`]: the process has a recorder already.
#[derive(Debug, thiserror::Error)]
#[error("this process has a metrics recorder already; fencelock's series go to it")]
pub struct InstallError;

impl Registry {
    /// An empty registry, not installed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes this registry the process's recorder for the `metrics` facade: from now on,
    /// fencelock records into it.
    ///
    /// # Errors
    ///
    /// [`InstallError`] if the process has a recorder already (one is installed once).
    pub fn install(&self) -> Result<(), InstallError> {
        metrics::set_global_recorder(self.clone()).map_err(|_| InstallError)
    }

    /// Every series as it is now, sorted by name and labels.
    pub fn snapshot(&self) -> Vec<Series> {
        let mut all = Vec::new();
        let inner = &self.inner;
        if let Ok(counters) = inner.counters.read() {
            all.extend(
                counters
                    .iter()
                    .map(|(key, c)| series(key, Value::Counter(c.load(Ordering::Relaxed)))),
            );
        }
        if let Ok(gauges) = inner.gauges.read() {
            all.extend(gauges.iter().map(|(key, g)| {
                series(key, Value::Gauge(f64::from_bits(g.load(Ordering::Relaxed))))
            }));
        }
        if let Ok(histograms) = inner.histograms.read() {
            all.extend(histograms.iter().map(|(key, h)| series(key, h.value())));
        }
        all.sort_by(|a, b| (&a.name, &a.labels).cmp(&(&b.name, &b.labels)));
        all
    }

    /// Every series in the Prometheus text format (version 0.0.4), with the `# HELP` and
    /// `# TYPE` of each instrument: what a `/metrics` endpoint serves, or what node_exporter's
    /// textfile collector reads.
    pub fn render(&self) -> String {
        super::render(&self.snapshot(), super::INSTRUMENTS)
    }

    /// As [`render`](Self::render), with `labels` added to every series that does not have
    /// them: for a file of one job among several that node_exporter's textfile collector
    /// merges (`lock="nightly"`), whose series must not collide.
    pub fn render_with(&self, labels: &[(&str, &str)]) -> String {
        let mut series = self.snapshot();
        for s in &mut series {
            for (key, value) in labels {
                if !s.labels.iter().any(|(k, _)| k == key) {
                    s.labels.push(((*key).to_owned(), (*value).to_owned()));
                }
            }
        }
        super::render(&series, super::INSTRUMENTS)
    }

    /// Keeps (`true`) or stops keeping (`false`, the default) each histogram value for
    /// [`take_observations`](Self::take_observations).
    pub fn keep_observations(&self, keep: bool) {
        self.inner.observations.on.store(keep, Ordering::Release);
        if !keep && let Ok(mut kept) = self.inner.observations.kept.lock() {
            kept.clear();
        }
    }

    /// The histogram values recorded since the last take (at most [`KEPT_OBSERVATIONS`]),
    /// while [`keep_observations`](Self::keep_observations) is on.
    pub fn take_observations(&self) -> Vec<Observation> {
        match self.inner.observations.kept.lock() {
            Ok(mut kept) => kept
                .drain(..)
                .map(|(key, value)| Observation {
                    name: key.name().to_owned(),
                    labels: labels_of(&key),
                    value,
                })
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn labels_of(key: &Key) -> Vec<(String, String)> {
    key.labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect()
}

fn series(key: &Key, value: Value) -> Series {
    Series {
        name: key.name().to_owned(),
        labels: labels_of(key),
        value,
    }
}

/// The series of `key` in `map`, made on first use.
fn entry<T: Default>(map: &RwLock<HashMap<Key, Arc<T>>>, key: &Key) -> Option<Arc<T>> {
    if let Some(found) = map.read().ok()?.get(key) {
        return Some(found.clone());
    }
    let mut map = map.write().ok()?;
    Some(map.entry(key.clone()).or_default().clone())
}

impl Recorder for Registry {
    // The help and units are fencelock's own ([`super::INSTRUMENTS`]).
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        entry(&self.inner.counters, key).map_or_else(Counter::noop, Counter::from_arc)
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        entry(&self.inner.gauges, key).map_or_else(Gauge::noop, Gauge::from_arc)
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let found = match self.inner.histograms.read() {
            Ok(map) => map.get(key).cloned(),
            Err(_) => return Histogram::noop(),
        };
        let buckets = match found {
            Some(b) => b,
            None => {
                let Ok(mut map) = self.inner.histograms.write() else {
                    return Histogram::noop();
                };
                map.entry(key.clone())
                    .or_insert_with(|| {
                        Arc::new(Buckets::new(key.clone(), self.inner.observations.clone()))
                    })
                    .clone()
            }
        };
        Histogram::from_arc(buckets)
    }
}

/// The histogram values kept for a take.
#[derive(Debug, Default)]
struct Observations {
    on: AtomicBool,
    kept: Mutex<VecDeque<(Key, f64)>>,
}

/// A histogram in [`BUCKETS`].
#[derive(Debug)]
struct Buckets {
    key: Key,
    counts: Vec<AtomicU64>,
    count: AtomicU64,
    /// The sum's bits (an `f64`).
    sum: AtomicU64,
    observations: Arc<Observations>,
}

impl Buckets {
    fn new(key: Key, observations: Arc<Observations>) -> Self {
        Buckets {
            key,
            counts: (0..=BUCKETS.len()).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0.0f64.to_bits()),
            observations,
        }
    }

    fn value(&self) -> Value {
        Value::Histogram {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: f64::from_bits(self.sum.load(Ordering::Relaxed)),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

impl HistogramFn for Buckets {
    fn record(&self, value: f64) {
        let at = BUCKETS
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(BUCKETS.len());
        if let Some(bucket) = self.counts.get(at) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
        if self.observations.on.load(Ordering::Acquire)
            && let Ok(mut kept) = self.observations.kept.lock()
            && kept.len() < KEPT_OBSERVATIONS
        {
            kept.push_back((self.key.clone(), value));
        }
    }
}
