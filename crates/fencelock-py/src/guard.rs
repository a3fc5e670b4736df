//! A held lock, for Python: the Rust `LockGuard` behind a lock, so that `extend` (which
//! borrows it) and `release` (which takes it) can come from any thread or task.

use std::future::Future;
use std::sync::Arc;

use fencelock::{LockGuard, LostSignal};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio::sync::RwLock;

use crate::errors::{HandleError, lost_code, seconds, to_py};
use crate::runtime::{self, Owner, Pending};

type Slot = Arc<RwLock<Option<LockGuard>>>;

/// A held lock. Dropping it unreleased (Python's garbage collector) releases it in the
/// background, as the Rust guard's drop does; in a forked child it is left alone (the lock
/// belongs to the parent).
#[pyclass(module = "fencelock._native", frozen)]
pub struct Guard {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    fence: u64,
    slot: Owner<Slot>,
    lost: Owner<LostSignal>,
}

impl Guard {
    pub fn new(guard: LockGuard) -> Self {
        Guard {
            name: guard.name().to_owned(),
            fence: guard.fence(),
            lost: Owner::new(guard.lost()),
            slot: Owner::new(Arc::new(RwLock::new(Some(guard)))),
        }
    }

    fn slot(&self) -> PyResult<Slot> {
        self.slot
            .get()
            .cloned()
            .ok_or_else(|| forked(&self.name, self.slot.pid()))
    }
}

fn forked(name: &str, pid: u32) -> PyErr {
    PyRuntimeError::new_err(format!(
        "lock {name:?} was acquired by process {pid} before it forked; it belongs to that process and cannot be used here"
    ))
}

#[pymethods]
impl Guard {
    /// Whether the lock is still held, as far as this process can tell now.
    fn is_held(&self) -> bool {
        self.lost.get().is_some_and(|lost| !lost.is_lost())
    }

    /// Seconds until the lease's deadline as this process knows it (0 once passed or
    /// released).
    fn remaining(&self) -> f64 {
        let Some(slot) = self.slot.get() else {
            return 0.0;
        };
        match slot.try_read() {
            Ok(guard) => guard.as_ref().map_or(0.0, |g| g.remaining().as_secs_f64()),
            Err(_) => 0.0,
        }
    }

    /// Re-arms the lease to `ttl` seconds from now.
    fn extend(&self, py: Python<'_>, ttl: f64) -> PyResult<()> {
        let ttl = seconds(&self.name, "ttl", ttl)?;
        let slot = self.slot()?;
        let name = self.name.clone();
        runtime::wait(py, async move { extend(&slot, ttl).await })?
            .map_err(|e| e.into_py(py, &name))
    }

    /// `extend`, answering `done`.
    fn extend_async(&self, ttl: f64, done: Py<PyAny>) -> PyResult<Pending> {
        let ttl = seconds(&self.name, "ttl", ttl)?;
        let slot = self.slot()?;
        let name = self.name.clone();
        runtime::spawn(
            async move { extend(&slot, ttl).await },
            move |py, result| match result {
                Ok(()) => Ok(py.None()),
                Err(e) => Err(e.into_py(py, &name)),
            },
            done,
        )
    }

    /// Releases the lock: `True` if it was still held. A second release answers `False`.
    fn release(&self, py: Python<'_>) -> PyResult<bool> {
        let slot = self.slot()?;
        runtime::wait(py, async move { release(&slot).await })?.map_err(|e| to_py(py, &e))
    }

    /// `release`, answering `done`.
    fn release_async(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let slot = self.slot()?;
        runtime::spawn(
            async move { release(&slot).await },
            |py, result| match result {
                Ok(held) => Ok(held.into_pyobject(py)?.to_owned().into_any().unbind()),
                Err(e) => Err(to_py(py, &e)),
            },
            done,
        )
    }

    /// `(code, message)` if the lock is lost (or released) now, else `None`.
    fn lost_now(&self) -> PyResult<Option<(&'static str, String)>> {
        let Some(lost) = self.lost.get() else {
            return Ok(None);
        };
        if !lost.is_lost() {
            return Ok(None);
        }
        // Lost already: the wait answers at its first poll (in the runtime's context, which
        // its timer would need).
        let _entered = runtime::runtime()?.enter();
        let mut wait = std::pin::pin!(lost.wait());
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        Ok(match wait.as_mut().poll(&mut context) {
            std::task::Poll::Ready(reason) => Some((lost_code(&reason), reason.to_string())),
            std::task::Poll::Pending => None,
        })
    }

    /// Calls `callback()` once, from a runtime thread, when someone asks for this lock
    /// (`request_release`) while it is held.
    fn on_release_requested(&self, callback: Py<PyAny>) -> PyResult<()> {
        let slot = self.slot()?;
        // The future owns what it needs: the guard is borrowed only to make it.
        let requested = match slot.try_read() {
            Ok(guard) => guard.as_ref().map(LockGuard::release_requested),
            Err(_) => None, // being released
        };
        let Some(requested) = requested else {
            return Ok(());
        };
        runtime::runtime()?.spawn(async move {
            requested.await;
            runtime::call_back(move |py| {
                if let Err(e) = callback.call0(py) {
                    e.write_unraisable(py, None);
                }
            });
        });
        Ok(())
    }

    /// Calls `callback(code, message)` once, from a runtime thread, when the lock is lost or
    /// released (`code`: `not_owner`, `expired`, `max_hold_reached` or `released`).
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<()> {
        let lost = self
            .lost
            .get()
            .cloned()
            .ok_or_else(|| forked(&self.name, self.lost.pid()))?;
        runtime::runtime()?.spawn(async move {
            let reason = lost.wait().await;
            runtime::call_back(move |py| {
                let message = reason.to_string();
                if let Err(e) = callback.call1(py, (lost_code(&reason), message)) {
                    e.write_unraisable(py, None);
                }
            });
        });
        Ok(())
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

async fn extend(slot: &Slot, ttl: std::time::Duration) -> Result<(), HandleError> {
    let guard = slot.read().await;
    match guard.as_ref() {
        Some(guard) => guard.extend(ttl).await.map_err(HandleError::Lock),
        None => Err(HandleError::GivenBack),
    }
}

async fn release(slot: &Slot) -> fencelock::Result<bool> {
    let guard = slot.write().await.take();
    match guard {
        Some(guard) => guard.release().await,
        None => Ok(false),
    }
}
