//! The recipes for Python: several locks at once (`MultiGuard`) and run-once (`OnceRun`).

use fencelock::multi::MultiGuard as RustMultiGuard;
use fencelock::once::{Begun, OnceGuard};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::client::Context;
use crate::errors::to_py;
use crate::held::{GiveBack, Kept};
use crate::operation::{Answer, Cancel, Operation, Outcome};
use crate::process::{Owned, Task};

/// A finished multi-lock acquisition: its guard, released if Python never takes it.
pub struct AcquiredAll {
    pub result: fencelock::Result<RustMultiGuard>,
    pub context: Context,
}

impl Outcome for AcquiredAll {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.result {
            Ok(guard) => Ok(Py::new(py, MultiGuard::new(guard, self.context))?.into_any()),
            Err(e) => Err(to_py(py, &e)),
        }
    }

    fn undo(self: Box<Self>) -> Option<Task> {
        self.result.ok().map(GiveBack::give_back)
    }
}

/// Several locks held together.
#[pyclass(module = "fencelock._native", frozen)]
pub struct MultiGuard {
    /// `(name, fence)` in the order the names were given.
    #[pyo3(get)]
    fences: Vec<(String, u64)>,
    live: Owned<(Kept<RustMultiGuard>, Signals)>,
}

/// Each name's lost signal.
type Signals = Vec<(String, fencelock::LostSignal)>;

impl MultiGuard {
    fn new(guard: RustMultiGuard, context: Context) -> Self {
        let fences = guard.fences().map(|(n, f)| (n.to_owned(), f)).collect();
        let lost = guard
            .guards()
            .iter()
            .map(|g| (g.name().to_owned(), g.lost()))
            .collect();
        MultiGuard {
            fences,
            live: Owned::new((Kept::new(guard, context), lost)),
        }
    }

    fn live(&self) -> PyResult<&(Kept<RustMultiGuard>, Signals)> {
        self.live.get().ok_or_else(|| {
            PyRuntimeError::new_err(
                "these locks were taken by this process's parent before it forked; they belong to that process",
            )
        })
    }
}

#[pymethods]
impl MultiGuard {
    /// Whether every name is still held, as far as this process can tell now.
    fn is_held(&self) -> bool {
        self.live
            .get()
            .is_some_and(|(_, lost)| lost.iter().all(|(_, l)| !l.is_lost()))
    }

    /// `(name, code, message)` of a name that is lost now (one lost rather than released, if
    /// any is), else `None`.
    fn lost_now(&self) -> Option<(String, &'static str, String)> {
        let (_, signals) = self.live.get()?;
        let mut found = None;
        for (name, lost) in signals {
            if let Some(reason) = lost.reason() {
                let is_release = reason == fencelock::LostReason::Released;
                if found.is_none() || !is_release {
                    found = Some((name.clone(), reason.code(), reason.to_string()));
                }
                if !is_release {
                    break;
                }
            }
        }
        found
    }

    /// Releases every name: answers `True` if every one was still held. A cancelled release
    /// goes on to its end.
    fn release(&self) -> PyResult<Operation> {
        Ok(self.live()?.0.finish())
    }

    /// Answers `(name, code, message)` when any of the names is lost (or released).
    fn lost(&self) -> PyResult<Operation> {
        let (kept, signals) = self.live()?;
        let signals = signals.clone();
        Ok(kept.start(Cancel::Abort, |_| async move {
            let waits = signals
                .into_iter()
                .map(|(name, lost)| Box::pin(async move { (name, lost.wait().await) }));
            let (name, reason) = futures_util::future::select_all(waits).await.0;
            Box::new(Answer(move |py: Python<'_>| {
                Ok((name, reason.code(), reason.to_string())
                    .into_pyobject(py)?
                    .into_any()
                    .unbind())
            })) as Box<dyn Outcome>
        }))
    }
}

/// A finished `once` begin: the record, or the run's lock (released if Python never takes it).
pub struct Begin {
    pub result: fencelock::Result<Begun>,
    pub context: Context,
}

impl Outcome for Begin {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.result {
            Ok(Begun::Run(run)) => Ok(Py::new(py, OnceRun::new(*run, self.context))?.into_any()),
            Ok(Begun::AlreadyDone(done)) => {
                let at = done
                    .at
                    .duration_since(std::time::SystemTime::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                Ok((done.fence, at).into_pyobject(py)?.into_any().unbind())
            }
            Err(e) => Err(to_py(py, &e)),
        }
    }

    fn undo(self: Box<Self>) -> Option<Task> {
        match self.result {
            Ok(Begun::Run(run)) => Some(run.give_back()),
            _ => None,
        }
    }
}

/// The lock of a run-once that has the work to do.
#[pyclass(module = "fencelock._native", frozen)]
pub struct OnceRun {
    #[pyo3(get)]
    fence: u64,
    live: Owned<Kept<OnceGuard>>,
}

impl OnceRun {
    fn new(run: OnceGuard, context: Context) -> Self {
        OnceRun {
            fence: run.fence(),
            live: Owned::new(Kept::new(run, context)),
        }
    }

    fn finish(&self, record: bool) -> PyResult<Operation> {
        let kept = self.live.get().ok_or_else(|| {
            PyRuntimeError::new_err("this run was begun by this process's parent before it forked")
        })?;
        Ok(kept.start(Cancel::Finish, move |hold| async move {
            let run = hold.slot().write().await.take();
            let result = match run {
                Some(run) if record => run.done().await.map(|()| true),
                Some(run) => run.give_up().await.map(|()| true),
                None => Ok(false),
            };
            Box::new(Answer(move |py: Python<'_>| match result {
                Ok(finished) => Ok(finished.into_pyobject(py)?.to_owned().into_any().unbind()),
                Err(e) => Err(to_py(py, &e)),
            })) as Box<dyn Outcome>
        }))
    }
}

#[pymethods]
impl OnceRun {
    /// Records the work as done and releases the lock (raises `Fenced` if this run lost its
    /// lock to a newer one: nothing recorded).
    fn done(&self) -> PyResult<Operation> {
        self.finish(true)
    }

    /// Releases the lock without recording anything.
    fn give_up(&self) -> PyResult<Operation> {
        self.finish(false)
    }
}
