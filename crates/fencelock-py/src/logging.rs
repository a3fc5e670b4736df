//! The library's `tracing` events in Python's `logging`: each event becomes a record of the
//! logger named after its module (`fencelock.engine.acquire`), under the `fencelock` logger.
//!
//! An event is formatted where it happens (a thread of the runtime) and queued for the thread
//! that answers Python, which logs it: a runtime thread never waits for the GIL. Only the events
//! that the `fencelock` logger's effective level lets through are formatted at all; that level
//! is read again, at most once a second, whenever fencelock is called.

use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use pyo3::prelude::*;
use tracing::Level;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Registry, reload};

/// A call into Python, made by the answering thread (see `process.rs`).
pub type Job = Box<dyn FnOnce(Python<'_>) + Send>;

/// The level the subscriber lets through, changed when Python's changes.
static FILTER: OnceLock<reload::Handle<LevelFilter, Registry>> = OnceLock::new();

/// When the level was last read from Python (milliseconds since [`EPOCH`]), and the level read.
static CHECKED: AtomicU64 = AtomicU64::new(0);
static LEVEL: AtomicU64 = AtomicU64::new(u64::MAX);
static EPOCH: OnceLock<Instant> = OnceLock::new();

thread_local! {
    /// On the runtime's threads: where the answering thread takes its calls.
    static SINK: std::cell::RefCell<Option<mpsc::Sender<Job>>> = const { std::cell::RefCell::new(None) };
}

/// Makes this thread (one of the runtime's) queue its log records for `sink`.
pub fn set_sink(sink: mpsc::Sender<Job>) {
    SINK.with(|s| *s.borrow_mut() = Some(sink));
}

/// Installs the subscriber (once per process image; a forked child keeps its parent's).
pub fn install(py: Python<'_>) -> PyResult<()> {
    if FILTER.get().is_some() {
        return Ok(());
    }
    let (filter, handle) = reload::Layer::new(LevelFilter::OFF);
    let format = tracing_subscriber::fmt::layer()
        .without_time()
        .with_ansi(false)
        .with_level(false)
        .with_target(false)
        .with_writer(ToPython);
    // The fields are gathered before the formatter writes the event's record, which takes
    // them (layers see an event in the order they were added).
    let subscriber = Registry::default()
        .with(filter)
        .with(fencelock_bind::log_fields::Gather)
        .with(format);
    // Another subscriber of this module's copy of `tracing` cannot exist; if one did, its
    // owner decides where events go.
    if tracing::subscriber::set_global_default(subscriber).is_ok() {
        let _ = FILTER.set(handle);
    }
    refresh(py, true);
    Ok(())
}

/// Reads the `fencelock` logger's effective level again if a second has passed since it was
/// last read (or if `now`), and lets through the events it would log.
pub fn refresh(py: Python<'_>, now: bool) {
    let Some(filter) = FILTER.get() else {
        return;
    };
    let epoch = *EPOCH.get_or_init(Instant::now);
    let at = u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
    if !now && at.saturating_sub(CHECKED.load(Ordering::Relaxed)) < 1000 {
        return;
    }
    // Python code run under this native frame: not once the interpreter's exit began.
    let Some(_inside) = crate::gil::enter(py) else {
        return;
    };
    CHECKED.store(at, Ordering::Relaxed);
    let level = py
        .import("logging")
        .and_then(|logging| logging.call_method1("getLogger", ("fencelock",)))
        .and_then(|logger| logger.call_method0("getEffectiveLevel"))
        .and_then(|level| level.extract::<u64>())
        .unwrap_or(30);
    if LEVEL.swap(level, Ordering::Relaxed) == level {
        return;
    }
    let filter_level = match level {
        0..=5 => LevelFilter::TRACE,
        6..=10 => LevelFilter::DEBUG,
        11..=20 => LevelFilter::INFO,
        21..=30 => LevelFilter::WARN,
        31..=40 => LevelFilter::ERROR,
        _ => LevelFilter::OFF,
    };
    let _ = filter.reload(filter_level);
}

/// What a `logging.LogRecord` has of its own: a field of that name is left out of `extra`
/// (Python refuses to overwrite them).
const RESERVED: [&str; 23] = [
    "name",
    "msg",
    "args",
    "levelname",
    "levelno",
    "pathname",
    "filename",
    "module",
    "exc_info",
    "exc_text",
    "stack_info",
    "lineno",
    "funcName",
    "created",
    "msecs",
    "relativeCreated",
    "thread",
    "threadName",
    "processName",
    "process",
    "message",
    "asctime",
    "taskName",
];

/// The event's fields as a record's `extra`: numbers as `int`, the rest as `str`.
fn extra<'py>(
    py: Python<'py>,
    fields: &fencelock_bind::log_fields::Fields,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use fencelock_bind::log_fields::Value;
    let extra = pyo3::types::PyDict::new(py);
    for (name, value) in &fields.0 {
        if RESERVED.contains(name) {
            continue;
        }
        match value {
            Value::Int(n) => extra.set_item(*name, *n)?,
            Value::Text(t) => extra.set_item(*name, t)?,
        }
    }
    Ok(extra)
}

/// Python's number for a `tracing` level.
fn python_level(level: Level) -> u32 {
    match level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// Where the formatter writes: one record per event.
struct ToPython;

impl<'a> MakeWriter<'a> for ToPython {
    type Writer = Record;

    fn make_writer(&'a self) -> Record {
        Record {
            logger: "fencelock".to_owned(),
            level: 20,
            line: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Record {
        Record {
            logger: meta.target().replace("::", "."),
            level: python_level(*meta.level()),
            line: Vec::new(),
        }
    }
}

/// One event's record, logged when the formatter is done with it.
struct Record {
    logger: String,
    level: u32,
    line: Vec<u8>,
}

impl Write for Record {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let logger = std::mem::take(&mut self.logger);
        let level = self.level;
        let line = String::from_utf8_lossy(&self.line).trim_end().to_owned();
        let fields = fencelock_bind::log_fields::take().unwrap_or_default();
        let job: Job = Box::new(move |py| log(py, &logger, level, &line, &fields));
        let queued = SINK.with(|sink| match sink.borrow().as_ref() {
            Some(sink) => sink.send(job).map_err(|e| e.0),
            None => Err(job),
        });
        // Not on a runtime thread (a Python thread, which may hold the GIL): logged here.
        // (Not once the interpreter's exit began: see `gil::Inside`.)
        if let Err(job) = queued {
            let _ = crate::gil::try_attach(job);
        }
    }
}

fn log(
    py: Python<'_>,
    logger: &str,
    level: u32,
    line: &str,
    fields: &fencelock_bind::log_fields::Fields,
) {
    let logged = extra(py, fields).and_then(|extra| {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("extra", extra)?;
        py.import("logging")
            .and_then(|logging| logging.call_method1("getLogger", (logger,)))
            .and_then(|logger| logger.call_method("log", (level, line), Some(&kwargs)))
    });
    if let Err(e) = logged {
        e.write_unraisable(py, None);
    }
}
