//! `fencelock watch --prometheus ADDR`: what `watch` sees of its locks, served on
//! `http://ADDR/metrics` in the Prometheus text format for a fleet's dashboard (held, waiters,
//! fences, lease left), refreshed at each read of the locks.
//!
//! The server answers a `GET` of `/metrics` and nothing else (404), one request per
//! connection: what a Prometheus scrape sends. A request must arrive whole within
//! [`REQUEST_LIMIT`] and fit in [`REQUEST_BYTES`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fencelock::admin::LockInfo;
use fencelock::metrics::{Instrument, InstrumentKind, Series, Value, render};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::error::CliError;

/// How long a request may take to arrive.
const REQUEST_LIMIT: Duration = Duration::from_secs(5);
/// The most of a request that is read.
const REQUEST_BYTES: usize = 8192;

/// The series `watch` serves (docs/observability.md, "fencelock watch --prometheus").
pub const WATCHED: &[Instrument] = &[
    Instrument::new(
        "fencelock_lock_held",
        InstrumentKind::Gauge,
        "",
        &["lock"],
        "Holds of the lock now: 1 for an exclusive holder, the number of shared holds (readers, a semaphore's holders), 0 if free.",
    ),
    Instrument::new(
        "fencelock_lock_waiters",
        InstrumentKind::Gauge,
        "",
        &["lock"],
        "Requests waiting for the lock with a place in Redis.",
    ),
    Instrument::new(
        "fencelock_lock_fence",
        InstrumentKind::Gauge,
        "",
        &["lock"],
        "The last fence handed out for the lock (0: none).",
    ),
    Instrument::new(
        "fencelock_lock_lease_remaining_seconds",
        InstrumentKind::Gauge,
        "seconds",
        &["lock"],
        "The exclusive holder's lease left (absent when nobody holds it exclusively).",
    ),
    Instrument::new(
        "fencelock_watch_up",
        InstrumentKind::Gauge,
        "",
        &[],
        "1 if the last read of the locks succeeded, 0 if Redis could not be read (the other series are then the last read's).",
    ),
];

/// What is served, replaced at each read.
#[derive(Clone, Default)]
pub struct Served {
    locks: Arc<Mutex<Vec<Series>>>,
    up: Arc<Mutex<bool>>,
}

impl Served {
    /// Records a read of the locks: `infos`, or `None` if it failed.
    pub fn read(&self, infos: Option<&[LockInfo]>) {
        let up = infos.is_some();
        if let Some(infos) = infos {
            let series = infos.iter().flat_map(series_of).collect();
            *self.locks.lock().unwrap_or_else(PoisonError::into_inner) = series;
        }
        *self.up.lock().unwrap_or_else(PoisonError::into_inner) = up;
    }

    fn text(&self) -> String {
        let mut series = self
            .locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let up = *self.up.lock().unwrap_or_else(PoisonError::into_inner);
        series.push(Series::new(
            "fencelock_watch_up",
            std::iter::empty::<(String, String)>(),
            Value::Gauge(if up { 1.0 } else { 0.0 }),
        ));
        series.sort_by(|a, b| (&a.name, &a.labels).cmp(&(&b.name, &b.labels)));
        render(&series, WATCHED)
    }
}

/// The series of one lock.
fn series_of(info: &LockInfo) -> Vec<Series> {
    let lock = [("lock", info.name.as_str())];
    let holds = if info.holder.is_some() {
        1
    } else {
        info.shared.len()
    };
    let gauge = |name: &str, v: f64| Series::new(name, lock, Value::Gauge(v));
    let mut series = vec![
        gauge("fencelock_lock_held", holds as f64),
        gauge("fencelock_lock_waiters", info.waiting as f64),
        gauge(
            "fencelock_lock_fence",
            info.last_fence.unwrap_or_default() as f64,
        ),
    ];
    if let Some(left) = info.holder.as_ref().and_then(|h| h.remaining) {
        series.push(gauge(
            "fencelock_lock_lease_remaining_seconds",
            left.as_secs_f64(),
        ));
    }
    series
}

/// Listens on `addr` and serves `served` until the process ends; says where on stderr.
///
/// # Errors
///
/// A usage error if `addr` cannot be listened on.
pub async fn serve(addr: &str, served: Served) -> Result<(), CliError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::Usage(format!("--prometheus {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| CliError::Usage(format!("--prometheus {addr}: {e}")))?;
    eprintln!("fencelock: serving the locks' metrics on http://{local}/metrics");
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(answer(stream, served.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a metrics request");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(())
}

/// Answers one request.
async fn answer(mut stream: tokio::net::TcpStream, served: Served) {
    let mut request = Vec::with_capacity(512);
    let read = tokio::time::timeout(REQUEST_LIMIT, async {
        let mut chunk = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < REQUEST_BYTES {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            }
        }
    })
    .await;
    if read.is_err() {
        return;
    }
    let line = request.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut words = line.split(|b| *b == b' ');
    let (method, target) = (words.next(), words.next());
    let path = target.map(|t| t.split(|b| *b == b'?').next().unwrap_or_default());
    let response = match (method, path) {
        (Some(b"GET"), Some(b"/metrics")) => {
            let body = served.text();
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        }
        _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
