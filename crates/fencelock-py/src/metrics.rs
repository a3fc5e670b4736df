//! The process's fencelock metrics, for Python (`fencelock.metrics`, and the exporters
//! `fencelock.prometheus` and `fencelock.otel`): `fencelock_bind::metrics`'s registry, enabled
//! once per process, read at each scrape. Every call here is a short read of memory, made with
//! the GIL held (the recorder's locks are never held by a thread that waits for the GIL).

use fencelock_bind::metrics::{self, BUCKETS, INSTRUMENTS, Names, Sample};
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyTuple};

use crate::errors::config_error;

/// A series' labels, in the order the core gave them.
type Labels = Vec<(String, String)>;

/// An instrument as Python gets it: `(name, kind, unit, labels, help)`.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    Vec<&'static str>,
    &'static str,
);

/// What `lock_labels` may be, for the message of a value that is none of these.
const LOCK_LABELS: &str = "lock_labels must be None or False (no lock label), True (every lock's \
     name), or a dict (or a list) of (pattern, label) pairs of strings, such as \
     {\"account:*\": \"account\"}";

/// `lock_labels` as the registry takes it.
fn names(lock_labels: Option<&Bound<'_, PyAny>>) -> PyResult<Names> {
    let Some(value) = lock_labels.filter(|v| !v.is_none()) else {
        return Ok(Names::Off);
    };
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(if flag.is_true() {
            Names::All
        } else {
            Names::Off
        });
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut patterns = Vec::with_capacity(dict.len());
        for (pattern, label) in dict.iter() {
            patterns.push((text(&pattern, "pattern")?, text(&label, "label")?));
        }
        return Ok(Names::Patterns(patterns));
    }
    let items = if let Ok(list) = value.cast::<PyList>() {
        list.iter().collect::<Vec<_>>()
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(refused(repr(value)));
    };
    items
        .iter()
        .map(pair)
        .collect::<PyResult<_>>()
        .map(Names::Patterns)
}

/// One `(pattern, label)` pair of a list: a tuple or a list of two strings.
fn pair(item: &Bound<'_, PyAny>) -> PyResult<(String, String)> {
    let both = if let Ok(tuple) = item.cast::<PyTuple>() {
        tuple.iter().collect::<Vec<_>>()
    } else if let Ok(list) = item.cast::<PyList>() {
        list.iter().collect()
    } else {
        Vec::new()
    };
    match both.as_slice() {
        [pattern, label] => Ok((text(pattern, "pattern")?, text(label, "label")?)),
        _ => Err(refused(format!(
            "an item that is not a (pattern, label) pair: {}",
            repr(item)
        ))),
    }
}

/// `fencelock.ConfigError` (a `ValueError`) for a `lock_labels` that is none of those above.
fn refused(got: String) -> PyErr {
    config_error(&format!("{LOCK_LABELS}; got {got}"))
}

fn text(value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    value
        .extract::<String>()
        .map_err(|_| refused(format!("a {what} that is not a string: {}", repr(value))))
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "an object".to_owned(), |n| n.to_string())
}

/// `value`'s `repr()`, cut at 80 characters (for a message).
fn repr(value: &Bound<'_, PyAny>) -> String {
    let full = value
        .repr()
        .map_or_else(|_| type_name(value), |r| r.to_string());
    match full.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &full[..at]),
        None => full,
    }
}

/// Installs the process's registry (once: later calls change the `lock` label only, for the
/// series recorded after) with the `lock` label as `lock_labels` says: `None` or `False`
/// none, `True` every lock's name, a dict or a list of `(pattern, label)` pairs a label by
/// pattern (`prefix*` or a name; the first that matches; `other` for a name none matches).
#[pyfunction]
#[pyo3(signature = (lock_labels=None))]
pub fn metrics_enable(lock_labels: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let names = names(lock_labels)?;
    metrics::enable(names)
        .map(|_| ())
        .map_err(PyRuntimeError::new_err)
}

/// Every series now: `(name, [(label, value), ...], kind, value)`, the value an `int` (a
/// counter), a `float` (a gauge), or `(counts, sum, count)` (a histogram: the count in each
/// bucket of `metrics_buckets()`, not cumulative, then the count above the last). Empty before
/// `metrics_enable`.
#[pyfunction]
pub fn metrics_snapshot(py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
    metrics::snapshot()
        .into_iter()
        .map(|(series, sample)| {
            let (kind, value) = match sample {
                Sample::Counter(n) => ("counter", n.into_py_any(py)?),
                Sample::Gauge(v) => ("gauge", v.into_py_any(py)?),
                Sample::Histogram { counts, sum, count } => {
                    ("histogram", (counts, sum, count).into_py_any(py)?)
                }
            };
            (series.name, series.labels, kind, value).into_py_any(py)
        })
        .collect()
}

/// Every series in the Prometheus text format (0.0.4), with each instrument's `# HELP` and
/// `# TYPE`; empty before `metrics_enable`.
#[pyfunction]
pub fn metrics_render() -> String {
    metrics::registry().map_or_else(String::new, metrics::Registry::render)
}

/// Keeps (`True`) or stops keeping (`False`) each histogram value for
/// `metrics_take_observations` (at most 65,536 between two takes; later ones are counted in the
/// buckets only).
#[pyfunction]
pub fn metrics_keep_observations(keep: bool) -> PyResult<()> {
    let registry = metrics::registry().ok_or_else(|| {
        PyRuntimeError::new_err("fencelock's metrics are not enabled: call metrics_enable first")
    })?;
    registry.keep_observations(keep);
    Ok(())
}

/// The histogram values recorded since the last take, while kept: `(name, [(label, value),
/// ...], seconds)`. Empty before `metrics_enable`.
#[pyfunction]
pub fn metrics_take_observations() -> Vec<(String, Labels, f64)> {
    metrics::registry().map_or_else(Vec::new, |registry| {
        registry
            .take_observations()
            .into_iter()
            .map(|o| (o.name, o.labels, o.value))
            .collect()
    })
}

/// Every instrument fencelock reports: `(name, kind, unit, labels, help)`; `unit` is
/// `"seconds"` or `""` (a count), `labels` leaves out `lock` (present only when
/// `metrics_enable` asks for it, and never on `fencelock_renewals_total`).
#[pyfunction]
pub fn metrics_instruments() -> Vec<Row> {
    INSTRUMENTS
        .iter()
        .map(|i| (i.name, i.kind.as_str(), i.unit, i.labels.to_vec(), i.help))
        .collect()
}

/// The upper bounds of the histograms' buckets, in seconds (a last bucket, `+Inf`, takes the
/// rest).
#[pyfunction]
pub fn metrics_buckets() -> Vec<f64> {
    BUCKETS.to_vec()
}

/// Adds the functions above to the native module.
pub fn add(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(metrics_enable, module)?)?;
    module.add_function(wrap_pyfunction!(metrics_snapshot, module)?)?;
    module.add_function(wrap_pyfunction!(metrics_render, module)?)?;
    module.add_function(wrap_pyfunction!(metrics_keep_observations, module)?)?;
    module.add_function(wrap_pyfunction!(metrics_take_observations, module)?)?;
    module.add_function(wrap_pyfunction!(metrics_instruments, module)?)?;
    module.add_function(wrap_pyfunction!(metrics_buckets, module)?)?;
    Ok(())
}
