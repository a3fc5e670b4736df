//! The process's Tokio runtime, and the two ways Python waits on it: a blocking call that lets
//! other threads run and answers Ctrl-C, and a task that reports to an asyncio callback.
//!
//! After `os.fork()` the child has none of the parent's threads: the parent's runtime, and
//! everything that belongs to it, must never be dropped or used there (a dropped socket would
//! even take the parent's registration out of the epoll instance both processes share). Each
//! object that owns runtime state remembers the process that made it ([`Owner`]); in another
//! process it is forgotten, never dropped, and a fresh runtime is started on first use.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

/// How often a blocking wait takes the GIL back to let Python run its signal handlers
/// (Ctrl-C gives the wait up).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// The runtime of the current process, with the process it was made in.
static CURRENT: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

/// Set by the interpreter's `atexit`: from then on, no task calls back into Python.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// The runtime of this process, started on first use (and again in a forked child).
///
/// Runtimes are never dropped: one that belongs to a parent process has no threads to stop,
/// and this process's lives as long as the interpreter.
pub fn runtime() -> PyResult<&'static Runtime> {
    let pid = std::process::id();
    let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, runtime)) = *current
        && owner == pid
    {
        return Ok(runtime);
    }
    let threads = std::env::var("FENCELOCK_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| (1..=64).contains(n))
        // The runtime only moves bytes and timers; Python's threads are the other half of the
        // work. Half the cores (one on a 2-core machine, where the benchmark's cycles are ~10 %
        // faster than with two), at most four.
        .unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4))
        });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("fencelock")
        .enable_all()
        .build()
        .map_err(|e| {
            PyRuntimeError::new_err(format!("fencelock could not start its runtime: {e}"))
        })?;
    let runtime: &'static Runtime = Box::leak(Box::new(runtime));
    *current = Some((pid, runtime));
    Ok(runtime)
}

/// Marks the interpreter as shutting down (called from `atexit`).
#[pyfunction]
pub fn _shutdown() {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
}

/// Runs `future` to completion on the runtime with the GIL released, so that other Python
/// threads run meanwhile. Every [`SIGNAL_CHECK`] it takes the GIL to run Python's signal
/// handlers: if one raises (Ctrl-C: `KeyboardInterrupt`), the future is dropped (fencelock's
/// waits are cancel-safe: nothing stays held) and the exception is returned.
pub fn wait<F>(py: Python<'_>, future: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(PyRuntimeError::new_err(
            "a blocking fencelock call cannot run on fencelock's own threads (from one of its callbacks); use fencelock.aio or another thread",
        ));
    }
    let runtime = runtime()?;
    py.detach(|| {
        runtime.block_on(async {
            let mut future = std::pin::pin!(future);
            loop {
                if let Ok(output) = tokio::time::timeout(SIGNAL_CHECK, &mut future).await {
                    return Ok(output);
                }
                Python::attach(|py| py.check_signals())?;
            }
        })
    })
}

/// A running task whose result goes to an asyncio callback; `cancel` drops it.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Pending {
    task: tokio::task::AbortHandle,
}

#[pymethods]
impl Pending {
    /// Drops the task's future (a wait is given up with nothing held). Its callback is then
    /// never called.
    fn cancel(&self) {
        self.task.abort();
    }
}

/// Runs `future` on the runtime; its output, converted by `convert` under the GIL, goes to
/// `done(True, value)`, or `done(False, exception)`.
pub fn spawn<F, C>(future: F, convert: C, done: Py<PyAny>) -> PyResult<Pending>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    C: FnOnce(Python<'_>, F::Output) -> PyResult<Py<PyAny>> + Send + 'static,
{
    let task = runtime()?.spawn(async move {
        let output = future.await;
        call_back(move |py| {
            let answer = match convert(py, output) {
                Ok(value) => (true, value),
                Err(e) => (false, e.into_value(py).into_any()),
            };
            if let Err(e) = done.call1(py, answer) {
                // The event loop may be closed already; nobody waits for this answer then.
                e.write_unraisable(py, None);
            }
        });
    });
    Ok(Pending {
        task: task.abort_handle(),
    })
}

/// Calls into Python for a task of the runtime. It runs on the runtime's blocking pool, never on
/// a worker thread: waiting there for the GIL (which a busy Python thread may hold for long)
/// would stall the renewals that keep every lock of the process alive.
pub fn call_back(f: impl FnOnce(Python<'_>) + Send + 'static) {
    if SHUTTING_DOWN.load(Ordering::SeqCst) {
        return;
    }
    let call = move || {
        if !SHUTTING_DOWN.load(Ordering::SeqCst) {
            Python::attach(f);
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => drop(handle.spawn_blocking(call)),
        Err(_) => call(),
    }
}

/// Runtime state that belongs to the process that made it.
///
/// In a forked child, [`get`](Owner::get) refuses it and dropping it forgets it: the value
/// is never touched there.
pub struct Owner<T> {
    pid: u32,
    value: Option<T>,
}

impl<T> Owner<T> {
    /// Wraps a value made by this process.
    pub fn new(value: T) -> Self {
        Owner {
            pid: std::process::id(),
            value: Some(value),
        }
    }

    /// The value, if this is the process that made it.
    pub fn get(&self) -> Option<&T> {
        if self.pid == std::process::id() {
            self.value.as_ref()
        } else {
            None
        }
    }

    /// The process that made the value.
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

impl<T> Drop for Owner<T> {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            std::mem::forget(self.value.take());
        }
    }
}
