//! The recipes for Python: several locks at once (`MultiGuard`, over `fencelock_bind`'s
//! [`HeldMulti`]) and run-once (`OnceRun`, over [`HeldRun`]).

use std::sync::Arc;

use fencelock::multi::MultiGuard as RustMultiGuard;
use fencelock::once::Begun;
use fencelock_bind::holds::{HeldMulti, HeldRun, RunEnding, undo_begun};
use fencelock_bind::kept::since_epoch;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::{invalid, seconds, to_py};
use crate::held::{self, GiveBack};
use crate::operation::{Cancel, Operation, Outcome};
use crate::process::{Context, Owned, Process, Task};

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

    fn holds(&self) -> bool {
        self.result.is_ok()
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
    live: Owned<HeldMulti<Arc<Process>>>,
}

impl MultiGuard {
    fn new(guard: RustMultiGuard, context: Context) -> Self {
        let held = HeldMulti::new(guard, context);
        MultiGuard {
            fences: held.fences().to_vec(),
            live: Owned::new(held),
        }
    }

    fn live(&self) -> PyResult<&HeldMulti<Arc<Process>>> {
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
        self.live.get().is_some_and(HeldMulti::is_held)
    }

    /// `(name, code, message)` of a name that is lost now (one lost rather than released, if
    /// any is), else `None`.
    fn lost_now(&self) -> Option<(String, &'static str, String)> {
        self.live.get().and_then(HeldMulti::lost_now)
    }

    /// Releases every name: answers `True` if every one was still held. A cancelled release
    /// goes on to its end.
    fn release(&self) -> PyResult<Operation> {
        Ok(held::release(self.live()?.kept()))
    }

    /// Releases every name at the end of a block: raises `NotHeld` (the name, and why) if one
    /// was no longer held by then. A cancelled one goes on to its end.
    fn end_block(&self) -> PyResult<Operation> {
        Ok(held::end_block(self.live()?.kept()))
    }

    /// Answers `(name, code, message)` when any of the names is lost (or released).
    fn lost(&self) -> PyResult<Operation> {
        let live = self.live()?;
        let lost = live.lost_wait();
        Ok(held::reply(live.kept(), Cancel::Abort, async move {
            let (name, reason) = lost.await;
            Ok((name, reason.code(), reason.to_string()))
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
                let at = since_epoch(done.at).as_secs_f64();
                let tick = done.tick.map(|t| since_epoch(t).as_secs_f64());
                Ok(("done", done.fence, at, tick)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind())
            }
            Ok(Begun::GaveUp(gave_up)) => {
                let tick = gave_up.tick.map(|t| since_epoch(t).as_secs_f64());
                let reply = ("gave_up", gave_up.failures, tick);
                Ok(reply.into_pyobject(py)?.into_any().unbind())
            }
            Ok(Begun::TooLate(late)) => {
                let tick = since_epoch(late.tick).as_secs_f64();
                let late = late.late.as_secs_f64();
                Ok(("late", tick, late).into_pyobject(py)?.into_any().unbind())
            }
            Err(e) => Err(to_py(py, &e)),
        }
    }

    fn holds(&self) -> bool {
        matches!(self.result, Ok(Begun::Run(_)))
    }

    fn undo(self: Box<Self>) -> Option<Task> {
        undo_begun(self.result)
    }
}

/// The lock of a run-once that has the work to do.
#[pyclass(module = "fencelock._native", frozen)]
pub struct OnceRun {
    #[pyo3(get)]
    fence: u64,
    /// The tick this run does the work for (seconds since the epoch), `None` without one.
    #[pyo3(get)]
    tick: Option<f64>,
    live: Owned<HeldRun<Arc<Process>>>,
}

impl OnceRun {
    fn new(run: fencelock::once::OnceGuard, context: Context) -> Self {
        let tick = run.tick().map(|t| since_epoch(t).as_secs_f64());
        let held = HeldRun::new(run, context);
        OnceRun {
            fence: held.fence(),
            tick,
            live: Owned::new(held),
        }
    }

    fn live(&self) -> PyResult<&HeldRun<Arc<Process>>> {
        self.live.get().ok_or_else(|| {
            PyRuntimeError::new_err("this run was begun by this process's parent before it forked")
        })
    }

    fn finish(&self, ending: RunEnding) -> PyResult<Operation> {
        let run = self.live()?;
        Ok(held::reply(run.kept(), Cancel::Finish, run.finish(ending)))
    }
}

#[pymethods]
impl OnceRun {
    /// Records the work as done and releases the lock (raises `Fenced` if this run lost its
    /// lock to a newer one: nothing recorded).
    fn done(&self) -> PyResult<Operation> {
        self.finish(RunEnding::Done)
    }

    /// Counts this run as failed (nothing recorded) and releases the lock: once as many runs
    /// failed as `attempts` allows, starts give up.
    fn failed(&self) -> PyResult<Operation> {
        self.finish(RunEnding::Failed)
    }

    /// The name of the lock the runs take turns on.
    #[getter]
    fn name(&self) -> PyResult<String> {
        Ok(self.live()?.name().to_owned())
    }

    /// Whether the run's lock is still held, as far as this process can tell now.
    fn is_held(&self) -> bool {
        self.live.get().is_some_and(|run| !run.lost().is_lost())
    }

    /// `(code, message)` if the run's lock is lost (or released) now.
    fn lost_now(&self) -> Option<(&'static str, String)> {
        self.live.get().and_then(HeldRun::lost_now)
    }

    /// Answers `(code, message)` when the run's lock is lost or released.
    fn lost(&self) -> PyResult<Operation> {
        let live = self.live()?;
        Ok(held::lost_reply(live.kept(), live.lost()))
    }

    /// Releases the lock without recording anything.
    fn give_up(&self) -> PyResult<Operation> {
        self.finish(RunEnding::GiveUp)
    }
}

/// A run-once's tick: `every` seconds by the server's clock (with `early` and `late`), or the
/// time `planned` (seconds since the epoch); neither, none.
pub fn tick(
    name: &str,
    every: Option<f64>,
    early: Option<f64>,
    late: Option<f64>,
    planned: Option<f64>,
) -> PyResult<Option<fencelock::once::Tick>> {
    use fencelock::once::Tick;
    match (every, planned) {
        (Some(_), Some(_)) => Err(invalid(
            name,
            "a tick is every so often or planned, not both".to_owned(),
        )),
        (None, Some(at)) => {
            let since = seconds(name, "the planned tick", at)?;
            Ok(Some(Tick::planned(std::time::UNIX_EPOCH + since)))
        }
        (Some(period), None) => {
            let mut tick = Tick::every(seconds(name, "the tick's period", period)?);
            if let Some(early) = early {
                tick = tick.early(seconds(name, "early", early)?);
            }
            if let Some(late) = late {
                tick = tick.late(seconds(name, "late", late)?);
            }
            Ok(Some(tick))
        }
        (None, None) => Ok(None),
    }
}
