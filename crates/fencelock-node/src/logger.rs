//! Where the library's log goes: standard error (the default), or the application's loggers.
//! The package's JavaScript of each thread (the main thread, each worker) sets its thread's sink
//! ([`set_log_sink`]) while a client of that thread has a `logger` option, and removes it; a
//! thread's sink never replaces or removes another thread's. Each event, formatted as one line,
//! is handed with its level and its fields (the event's merged over its spans', gathered by
//! `fencelock_bind::log_fields::Gather`: the lock, its kind and fence, a loss's reason) to every
//! thread's sink (the library's events do not say which thread's client they are about), and
//! written to standard error when no thread has one. A sink is a weak thread-safe function: it
//! never keeps the process (or a worker) alive, and it is removed when its thread's environment
//! ends.

use std::cell::Cell;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use fencelock_bind::log_fields::{Fields, Value};
use napi::bindgen_prelude::{Either3, FnArgs};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;
use tracing_subscriber::fmt::MakeWriter;

/// One field of an event, as JavaScript gets it: a number when it is a safe integer (every
/// fence: microseconds of the server's clock), a `bigint` when it is a larger one, else text.
#[napi(object, object_from_js = false)]
pub struct LogField {
    pub name: String,
    pub value: Either3<i64, i128, String>,
}

/// The largest integer a JavaScript number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

impl LogField {
    fn new(name: &str, value: &Value) -> Self {
        let value = match value {
            Value::Int(n) => match i64::try_from(*n) {
                Ok(small) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&small) => {
                    Either3::A(small)
                }
                _ => Either3::B(*n),
            },
            Value::Text(text) => Either3::C(text.clone()),
        };
        LogField {
            name: name.to_owned(),
            value,
        }
    }
}

/// What a sink is given: the level, the line, and the event's fields in order.
type SinkArgs = FnArgs<(String, String, Vec<LogField>)>;

/// A JavaScript callback given `(level, line, fields)`, which does not keep the process alive.
pub type LogSink = ThreadsafeFunction<SinkArgs, (), SinkArgs, Status, false, true>;

/// Each thread's sink, by the thread's key.
static SINKS: Mutex<Vec<(u64, LogSink)>> = Mutex::new(Vec::new());

/// The next thread's key.
static NEXT_THREAD: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's key among the sinks, given with its first sink.
    static THREAD: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Sends the library's log to `callback(level, line, fields)` (`level`: `error`, `warn`,
/// `info`, `debug` or `trace`; `fields`: the event's, as `{ name, value }` in order) as this
/// thread's sink, beside the other threads'; `null` removes this thread's sink (the log goes to
/// standard error again once no thread has one).
#[napi(
    ts_args_type = "callback: ((level: string, line: string, fields: Array<{ name: string, value: number | bigint | string }>) => void) | null"
)]
pub fn set_log_sink(env: &Env, callback: Option<LogSink>) -> Result<()> {
    let key = match THREAD.with(Cell::get) {
        Some(key) => key,
        None => {
            let key = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            // A worker that ends with its sink set (terminated, or its client never closed)
            // leaves nothing behind.
            env.add_env_cleanup_hook(key, |key| set(key, None))?;
            THREAD.with(|slot| slot.set(Some(key)));
            key
        }
    };
    set(key, callback);
    Ok(())
}

/// Sets (or, with `None`, removes) the sink of the thread whose key is `key`.
fn set(key: u64, sink: Option<LogSink>) {
    let removed = {
        let mut sinks = SINKS.lock().unwrap_or_else(PoisonError::into_inner);
        let removed: Vec<(u64, LogSink)> = match sinks.iter().position(|(k, _)| *k == key) {
            Some(at) => vec![sinks.swap_remove(at)],
            None => Vec::new(),
        };
        if let Some(sink) = sink {
            sinks.push((key, sink));
        }
        removed
    };
    // Released outside the lock.
    drop(removed);
}

/// The log's writer: one line per event, to the sink if there is one, else to standard error.
pub struct Writer;

impl<'a> MakeWriter<'a> for Writer {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line {
            level: "info",
            text: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Line {
        let level = match *meta.level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warn",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        Line {
            level,
            text: Vec::new(),
        }
    }
}

/// One event's line, sent where it goes when the formatter is done with it.
pub struct Line {
    level: &'static str,
    text: Vec<u8>,
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        // Taken whatever happens to the line: they are this event's only.
        let fields = fencelock_bind::log_fields::take().unwrap_or_default();
        if self.text.is_empty() {
            return;
        }
        let sinks = SINKS.lock().unwrap_or_else(PoisonError::into_inner);
        if sinks.is_empty() {
            drop(sinks);
            // Nowhere else to say it if standard error fails.
            let _ = std::io::stderr().write_all(&self.text);
            return;
        }
        let line = String::from_utf8_lossy(&self.text).trim_end().to_owned();
        for (_, sink) in sinks.iter() {
            sink.call(
                FnArgs::from((self.level.to_owned(), line.clone(), js_fields(&fields))),
                ThreadsafeFunctionCallMode::NonBlocking,
            );
        }
    }
}

/// An event's fields for a sink (each sink gets its own: they are moved into the call).
fn js_fields(fields: &Fields) -> Vec<LogField> {
    fields
        .0
        .iter()
        .map(|(name, value)| LogField::new(name, value))
        .collect()
}
