//! Where the library's log goes: standard error (the default), or the application's logger.
//! The package's JavaScript sets a sink ([`set_log_sink`]) while a client has a `logger`
//! option; each event, formatted as one line, is then handed to it with its level instead of
//! being written to standard error. The sink is a weak thread-safe function: it never keeps the
//! process alive.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use napi::Status;
use napi::bindgen_prelude::FnArgs;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use tracing_subscriber::fmt::MakeWriter;

/// A JavaScript callback given `(level, line)`, which does not keep the process alive.
pub type LogSink =
    ThreadsafeFunction<FnArgs<(String, String)>, (), FnArgs<(String, String)>, Status, false, true>;

static SINK: Mutex<Option<LogSink>> = Mutex::new(None);

/// Sends the library's log to `callback(level, line)` (`level`: `error`, `warn`, `info`,
/// `debug` or `trace`); `null` sends it to standard error again.
#[napi(ts_args_type = "callback: ((level: string, line: string) => void) | null")]
pub fn set_log_sink(callback: Option<LogSink>) {
    *SINK.lock().unwrap_or_else(PoisonError::into_inner) = callback;
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
        if self.text.is_empty() {
            return;
        }
        let sink = SINK.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sink) = sink.as_ref() {
            let line = String::from_utf8_lossy(&self.text).trim_end().to_owned();
            sink.call(
                FnArgs::from((self.level.to_owned(), line)),
                ThreadsafeFunctionCallMode::NonBlocking,
            );
        } else {
            drop(sink);
            // Nowhere else to say it if standard error fails.
            let _ = std::io::stderr().write_all(&self.text);
        }
    }
}
