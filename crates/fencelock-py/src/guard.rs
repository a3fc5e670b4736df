//! A held lock, for Python: the Rust `LockGuard` kept (`held.rs`), so that `extend` (which
//! borrows it) and `release` (which takes it) can come from any thread or task. Every watch of
//! the guard (`lost`, `release_requested`) ends with its hold.

use fencelock::{LockGuard, LostSignal};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::client::Context;
use crate::errors::{HandleError, lost_pair, seconds, to_py};
use crate::held::Kept;
use crate::operation::{Answer, Cancel, Operation, Outcome};
use crate::process::Owned;

/// A held lock. Dropping it unreleased (Python's garbage collector) releases it in the
/// background; the interpreter's exit releases what is still held. In a forked child it is left
/// alone (the lock belongs to the parent).
#[pyclass(module = "fencelock._native", frozen)]
pub struct Guard {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    fence: u64,
    live: Owned<(Kept<LockGuard>, LostSignal)>,
}

impl Guard {
    pub fn new(guard: LockGuard, context: Context) -> Self {
        let name = guard.name().to_owned();
        let fence = guard.fence();
        let lost = guard.lost();
        Guard {
            name,
            fence,
            live: Owned::new((Kept::new(guard, context), lost)),
        }
    }

    fn live(&self) -> PyResult<&(Kept<LockGuard>, LostSignal)> {
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
        self.live.get().is_some_and(|(_, lost)| !lost.is_lost())
    }

    /// Seconds until the lease's deadline as this process knows it (0 once passed or
    /// released).
    fn remaining(&self) -> f64 {
        let Some((kept, _)) = self.live.get() else {
            return 0.0;
        };
        match kept.hold().slot().try_read() {
            Ok(guard) => guard.as_ref().map_or(0.0, |g| g.remaining().as_secs_f64()),
            Err(_) => 0.0,
        }
    }

    /// Re-arms the lease to `ttl` seconds from now.
    fn extend(&self, ttl: f64) -> PyResult<Operation> {
        let ttl = seconds(&self.name, "ttl", ttl)?;
        let name = self.name.clone();
        let (kept, _) = self.live()?;
        Ok(kept.start(Cancel::Abort, move |hold| async move {
            let result = {
                let guard = hold.slot().read().await;
                match guard.as_ref() {
                    Some(guard) => guard.extend(ttl).await.map_err(HandleError::Lock),
                    None => Err(HandleError::GivenBack),
                }
            };
            Box::new(Answer(move |py: Python<'_>| match result {
                Ok(()) => Ok(py.None()),
                Err(e) => Err(e.into_py(py, &name)),
            })) as Box<dyn Outcome>
        }))
    }

    /// Releases the lock: answers `True` if it was still held (a second release: `False`). A
    /// cancelled release goes on to its end.
    fn release(&self) -> PyResult<Operation> {
        Ok(self.live()?.0.finish())
    }

    /// `(code, message)` if the lock is lost (or released) now, else `None`.
    fn lost_now(&self) -> Option<(&'static str, String)> {
        self.live.get().and_then(|(_, lost)| lost_pair(lost))
    }

    /// Answers `(code, message)` when the lock is lost or released.
    fn lost(&self) -> PyResult<Operation> {
        let (kept, lost) = self.live()?;
        let lost = lost.clone();
        Ok(kept.start(Cancel::Abort, |_| async move {
            let reason = lost.wait().await;
            Box::new(Answer(move |py: Python<'_>| {
                Ok((reason.code(), reason.to_string())
                    .into_pyobject(py)?
                    .into_any()
                    .unbind())
            })) as Box<dyn Outcome>
        }))
    }

    /// Answers `None` when someone asks for this lock (`request_release`) while it is held;
    /// raises `NotHeld` if the hold ends first (the watch ends with it).
    fn release_requested(&self) -> PyResult<Operation> {
        let name = self.name.clone();
        let (kept, lost) = self.live()?;
        let lost = lost.clone();
        let requested = match kept.hold().slot().try_read() {
            Ok(guard) => guard.as_ref().map(LockGuard::release_requested),
            Err(_) => None, // being released
        };
        Ok(kept.start(Cancel::Abort, move |_| async move {
            let ended = match requested {
                Some(requested) => tokio::select! {
                    () = requested => None,
                    reason = lost.wait() => Some(reason),
                },
                None => Some(fencelock::LostReason::Released),
            };
            Box::new(Answer(move |py: Python<'_>| match ended {
                None => Ok(py.None()),
                Some(reason) => Err(to_py(py, &fencelock::Error::NotHeld { lock: name, reason })),
            })) as Box<dyn Outcome>
        }))
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
