//! The process's metrics, for the package's exporters (`lib/prometheus.js`, `lib/otel.js`):
//! `fencelock_bind::metrics`'s registry, enabled once with the `lock` label as asked, read as
//! plain JavaScript values (every series now, the histogram values recorded since the last
//! take) or as the Prometheus text, and the instruments' list that every front end exports.

use fencelock_bind::metrics::{self, BUCKETS, INSTRUMENTS, Names, Sample};
use napi::bindgen_prelude::{JsObjectValue, JsValue, Object, Unknown};
use napi::{Env, Error, Result, Status, ValueType};
use napi_derive::napi;

/// What `lockLabels` may be, for the error that names what it was instead.
const LOCK_LABELS: &str = "lockLabels must be false (no `lock` label), true (every lock's name), an object {pattern: label} or an array of [pattern, label] pairs";

/// Enables the process's metrics (the registry is installed once; from then on the library
/// records into it), with the `lock` label as `lockLabels` says: `false` or absent, none;
/// `true`, every lock's name; `{pattern: label}` or `[[pattern, label], ...]`, a label by
/// pattern (`prefix*` or an exact name; the first that matches; `other` for none). A later
/// call changes the label of the series recorded after it. Throws a `TypeError` for any other
/// `lockLabels`, and an `Error` if another recorder was installed in the process first.
#[napi(
    ts_args_type = "lockLabels?: boolean | null | Record<string, string> | Array<[string, string]>"
)]
pub fn metrics_enable(env: &Env, lock_labels: Option<Unknown<'_>>) -> Result<()> {
    let names = match lock_labels {
        None => Names::Off,
        Some(value) => match names(value) {
            Ok(names) => names,
            Err(reason) => return Err(type_error(env, &reason)),
        },
    };
    metrics::enable(names)
        .map(|_| ())
        .map_err(|reason| Error::new(Status::GenericFailure, format!("fencelock: {reason}")))
}

/// The [`Names`] that `value` asks for, or why it asks for none.
fn names(value: Unknown<'_>) -> std::result::Result<Names, String> {
    let shown = |what: &str| format!("{LOCK_LABELS}, not {what}");
    match value.get_type().map_err(|e| e.reason)? {
        ValueType::Undefined | ValueType::Null => Ok(Names::Off),
        ValueType::Boolean => {
            let on = value.coerce_to_bool().map_err(|e| e.reason)?;
            Ok(if on { Names::All } else { Names::Off })
        }
        ValueType::Object => {
            let object = value.coerce_to_object().map_err(|e| e.reason)?;
            if value.is_array().map_err(|e| e.reason)? {
                pairs(&object).ok_or_else(|| {
                    shown("an array with an element that is not a [pattern, label] pair of strings")
                })
            } else {
                mapping(&object).ok_or_else(|| shown("an object with a label that is not a string"))
            }
        }
        ValueType::String => Err(shown("a string")),
        ValueType::Number => Err(shown("a number")),
        ValueType::BigInt => Err(shown("a bigint")),
        ValueType::Function => Err(shown("a function")),
        ValueType::Symbol => Err(shown("a symbol")),
        _ => Err(shown("a value of another type")),
    }
}

/// `[[pattern, label], ...]` as patterns, in order (`None`: an element is no such pair).
fn pairs(array: &Object<'_>) -> Option<Names> {
    let length = array.get_array_length().ok()?;
    let mut patterns = Vec::new();
    for at in 0..length {
        let pair: Unknown<'_> = array.get_element(at).ok()?;
        if pair.get_type().ok()? != ValueType::Object || !pair.is_array().ok()? {
            return None;
        }
        let pair = pair.coerce_to_object().ok()?;
        if pair.get_array_length().ok()? != 2 {
            return None;
        }
        let pattern: String = string(pair.get_element(0).ok()?)?;
        let label: String = string(pair.get_element(1).ok()?)?;
        patterns.push((pattern, label));
    }
    Some(Names::Patterns(patterns))
}

/// `{pattern: label}` as patterns, in the object's order (`None`: a label is no string).
fn mapping(object: &Object<'_>) -> Option<Names> {
    let keys = object.get_property_names().ok()?;
    let length = keys.get_array_length().ok()?;
    let mut patterns = Vec::new();
    for at in 0..length {
        let pattern: String = string(keys.get_element(at).ok()?)?;
        let label = string(object.get_named_property(&pattern).ok()?)?;
        patterns.push((pattern, label));
    }
    Some(Names::Patterns(patterns))
}

/// `value` if it is a string (no coercion).
fn string(value: Unknown<'_>) -> Option<String> {
    if value.get_type().ok()? != ValueType::String {
        return None;
    }
    value
        .coerce_to_string()
        .ok()?
        .into_utf8()
        .ok()?
        .into_owned()
        .ok()
}

/// Throws a `TypeError` (code `invalid_argument`) with `message`: the error returned says it
/// is pending, so that napi throws nothing else.
fn type_error(env: &Env, message: &str) -> Error {
    match env.throw_type_error(message, Some("invalid_argument")) {
        Ok(()) => Error::new(Status::PendingException, message.to_owned()),
        Err(e) => e,
    }
}

/// Every series now (none before `metricsEnable`): `{ name, labels, kind, value }`, or for a
/// histogram `{ name, labels, kind, counts, sum, count }` with the count of each bucket of
/// `metricsBuckets()` (not cumulative) and one above the last.
#[napi(
    ts_return_type = "Array<{ name: string, labels: Record<string, string>, kind: 'counter' | 'gauge', value: number } | { name: string, labels: Record<string, string>, kind: 'histogram', counts: number[], sum: number, count: number }>"
)]
pub fn metrics_snapshot<'env>(env: &'env Env) -> Result<Vec<Object<'env>>> {
    metrics::snapshot()
        .into_iter()
        .map(|(series, sample)| {
            let mut object = Object::new(env)?;
            object.set("name", series.name.as_str())?;
            object.set("labels", labels(env, &series.labels)?)?;
            match sample {
                Sample::Counter(n) => {
                    object.set("kind", "counter")?;
                    object.set("value", number(n))?;
                }
                Sample::Gauge(v) => {
                    object.set("kind", "gauge")?;
                    object.set("value", v)?;
                }
                Sample::Histogram { counts, sum, count } => {
                    object.set("kind", "histogram")?;
                    object.set("counts", counts.into_iter().map(number).collect::<Vec<_>>())?;
                    object.set("sum", sum)?;
                    object.set("count", number(count))?;
                }
            }
            Ok(object)
        })
        .collect()
}

/// A count as a JavaScript number (exact up to 2^53).
#[allow(clippy::cast_precision_loss)]
fn number(n: u64) -> f64 {
    n as f64
}

/// Labels as an object, in their order.
fn labels<'env>(env: &'env Env, labels: &[(String, String)]) -> Result<Object<'env>> {
    let mut object = Object::new(env)?;
    for (key, value) in labels {
        object.set(key, value.as_str())?;
    }
    Ok(object)
}

/// Every series in the Prometheus text format, with each instrument's `# HELP` and `# TYPE`
/// (empty before `metricsEnable`).
#[napi]
pub fn metrics_render() -> String {
    metrics::registry().map_or_else(String::new, metrics::Registry::render)
}

/// Keeps (`true`) or stops keeping (`false`, the default) each histogram value for
/// `metricsTakeObservations()`. Throws before `metricsEnable`.
#[napi]
pub fn metrics_keep_observations(keep: bool) -> Result<()> {
    let registry = metrics::registry().ok_or_else(|| {
        Error::new(
            Status::GenericFailure,
            "fencelock: metrics are not enabled (metricsEnable first)",
        )
    })?;
    registry.keep_observations(keep);
    Ok(())
}

/// The histogram values recorded since the last take, while kept: `{ name, labels, value }`
/// (seconds).
#[napi(ts_return_type = "Array<{ name: string, labels: Record<string, string>, value: number }>")]
pub fn metrics_take_observations<'env>(env: &'env Env) -> Result<Vec<Object<'env>>> {
    let Some(registry) = metrics::registry() else {
        return Ok(Vec::new());
    };
    registry
        .take_observations()
        .into_iter()
        .map(|observation| {
            let mut object = Object::new(env)?;
            object.set("name", observation.name.as_str())?;
            object.set("labels", labels(env, &observation.labels)?)?;
            object.set("value", observation.value)?;
            Ok(object)
        })
        .collect()
}

/// One instrument of the core's list.
#[napi(object, object_from_js = false)]
pub struct InstrumentInfo {
    /// Its name, as Prometheus shows it (a counter's ends in `_total`).
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    #[napi(ts_type = "'counter' | 'gauge' | 'histogram'")]
    pub kind: String,
    /// `seconds`, or `""` for a count.
    pub unit: String,
    /// Its labels, besides the optional `lock`.
    pub labels: Vec<String>,
    /// What it counts (Prometheus's `# HELP`).
    pub help: String,
}

/// Every instrument fencelock reports, in the order the exports list them.
#[napi]
pub fn metrics_instruments() -> Vec<InstrumentInfo> {
    INSTRUMENTS
        .iter()
        .map(|i| InstrumentInfo {
            name: i.name.to_owned(),
            kind: i.kind.as_str().to_owned(),
            unit: i.unit.to_owned(),
            labels: i.labels.iter().map(|l| (*l).to_owned()).collect(),
            help: i.help.to_owned(),
        })
        .collect()
}

/// The histograms' bucket bounds, in seconds (a last bucket, `+Inf`, takes the rest).
#[napi]
pub fn metrics_buckets() -> Vec<f64> {
    BUCKETS.to_vec()
}
