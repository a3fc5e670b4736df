//! A held lock, for Python: `fencelock_bind`'s [`HeldLock`] (the guard kept, so that `extend`,
//! which borrows it, and `release`, which takes it, can come from any thread or task). Every
//! watch of the guard (`lost`, `release_requested`) ends with its hold.

use std::sync::Arc;

use fencelock::LockGuard;
use fencelock_bind::holds::HeldLock;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::{seconds, to_py};
use crate::held;
use crate::operation::{Cancel, Operation, Outcome};
use crate::process::{Context, Owned, Process, Task};

/// A held lock. Dropping it unreleased (Python's garbage collector) releases it in the
/// background; the interpreter's exit releases what is still held. In a forked child it is left
/// alone (the lock belongs to the parent).
#[pyclass(module = "fencelock._native", frozen)]
pub struct Guard {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    fence: u64,
    live: Owned<HeldLock<Arc<Process>>>,
}

impl Guard {
    pub fn new(guard: LockGuard, context: Context) -> Self {
        let held = HeldLock::new(guard, context);
        Guard {
            name: held.name().to_owned(),
            fence: held.fence(),
            live: Owned::new(held),
        }
    }

    fn live(&self) -> PyResult<&HeldLock<Arc<Process>>> {
        self.live.get().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "lock {:?} was acquired by this process's parent before it forked; it belongs to that process and cannot be used here",
                self.name
            ))
        })
    }
}

#[pymethods]
impl Guard {
    /// Whether the lock is still held, as far as this process can tell now.
    fn is_held(&self) -> bool {
        self.live.get().is_some_and(HeldLock::is_held)
    }

    /// Seconds until the lease's deadline as this process knows it (0 once passed or
    /// released).
    fn remaining(&self) -> f64 {
        self.live
            .get()
            .map_or(0.0, |live| live.remaining().as_secs_f64())
    }

    /// Re-arms the lease to `ttl` seconds from now.
    fn extend(&self, ttl: f64) -> PyResult<Operation> {
        let ttl = seconds(&self.name, "ttl", ttl)?;
        let live = self.live()?;
        Ok(held::reply(live.kept(), Cancel::Abort, live.extend(ttl)))
    }

    /// Releases the lock: answers `True` if it was still held (a second release: `False`). A
    /// cancelled release goes on to its end.
    fn release(&self) -> PyResult<Operation> {
        Ok(held::release(self.live()?.kept()))
    }

    /// Releases the lock at the end of a block: raises `NotHeld` (with the reason) if it was no
    /// longer held by then. A cancelled one goes on to its end.
    fn end_block(&self) -> PyResult<Operation> {
        Ok(held::end_block(self.live()?.kept()))
    }

    /// `(code, message)` if the lock is lost (or released) now, else `None`.
    fn lost_now(&self) -> Option<(&'static str, String)> {
        self.live.get().and_then(HeldLock::lost_now)
    }

    /// Answers `(code, message)` when the lock is lost or released.
    fn lost(&self) -> PyResult<Operation> {
        let live = self.live()?;
        Ok(held::lost_reply(live.kept(), live.lost()))
    }

    /// Answers `None` when someone asks for this lock (`request_release`) while it is held;
    /// raises `NotHeld` if the hold ends first (the watch ends with it).
    fn release_requested(&self) -> PyResult<Operation> {
        let live = self.live()?;
        Ok(held::reply(
            live.kept(),
            Cancel::Abort,
            live.release_requested(),
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "<fencelock guard {:?} fence={} held={}>",
            self.name,
            self.fence,
            if self.is_held() { "yes" } else { "no" }
        )
    }
}

/// A finished acquisition: its guard for Python, or the guard given back if nobody took it.
pub struct Granted {
    result: fencelock::Result<Option<LockGuard>>,
    context: Context,
}

impl Granted {
    pub fn new(result: fencelock::Result<Option<LockGuard>>, context: Context) -> Self {
        Granted { result, context }
    }
}

impl Outcome for Granted {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.result {
            Ok(Some(guard)) => Ok(Py::new(py, Guard::new(guard, self.context))?.into_any()),
            Ok(None) => Ok(py.None()),
            Err(e) => Err(to_py(py, &e)),
        }
    }

    fn holds(&self) -> bool {
        matches!(self.result, Ok(Some(_)))
    }

    fn undo(self: Box<Self>) -> Option<Task> {
        fencelock_bind::holds::undo(self.result)
    }
}
