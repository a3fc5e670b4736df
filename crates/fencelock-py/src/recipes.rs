//! The recipes for Python: several locks at once (`MultiGuard`) and run-once (`OnceRun`).

use std::sync::{Arc, Weak};

use fencelock::multi::MultiGuard as RustMultiGuard;
use fencelock::once::{Begun, OnceGuard};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::client::Context;
use crate::errors::to_py;
use crate::operation::{Answer, Cancel, Operation, Outcome};
use crate::process::{EndAtExit, Owned, Task};

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
        let guard = self.result.ok()?;
        Some(Box::pin(async move {
            let _ = guard.release().await;
        }))
    }
}

/// The guard's locks, shared by its calls, and released at exit if still held.
struct HeldAll {
    slot: tokio::sync::Mutex<Option<RustMultiGuard>>,
}

impl EndAtExit for HeldAll {
    fn end(&self) -> Option<Task> {
        let guard = self.slot.try_lock().ok()?.take()?;
        Some(Box::pin(async move {
            let _ = guard.release().await;
        }))
    }
}

struct LiveAll {
    held: Arc<HeldAll>,
    lost: Vec<(String, fencelock::LostSignal)>,
    context: Context,
    id: u64,
}

/// Several locks held together.
#[pyclass(module = "fencelock._native", frozen)]
pub struct MultiGuard {
    /// `(name, fence)` in the order the names were given.
    #[pyo3(get)]
    fences: Vec<(String, u64)>,
    live: Owned<LiveAll>,
}

impl MultiGuard {
    fn new(guard: RustMultiGuard, context: Context) -> Self {
        let fences = guard.fences().map(|(n, f)| (n.to_owned(), f)).collect();
        let lost = guard
            .guards()
            .iter()
            .map(|g| (g.name().to_owned(), g.lost()))
            .collect();
        let held = Arc::new(HeldAll {
            slot: tokio::sync::Mutex::new(Some(guard)),
        });
        let weak: Weak<dyn EndAtExit> = Arc::downgrade(&held) as Weak<dyn EndAtExit>;
        let id = context.process.add_held(weak);
        MultiGuard {
            fences,
            live: Owned::new(LiveAll {
                held,
                lost,
                context,
                id,
            }),
        }
    }

    fn live(&self) -> PyResult<&LiveAll> {
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
            .is_some_and(|live| live.lost.iter().all(|(_, l)| !l.is_lost()))
    }

    /// `(name, code, message)` of a name that is lost now (one lost rather than released, if
    /// any is), else `None`.
    fn lost_now(&self) -> Option<(String, &'static str, String)> {
        let live = self.live.get()?;
        let mut found = None;
        for (name, lost) in &live.lost {
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
        let live = self.live()?;
        let held = live.held.clone();
        let Context { process, client } = &live.context;
        Ok(Operation::start(
            process,
            Some(client.clone()),
            Cancel::Finish,
            async move {
                let guard = held.slot.lock().await.take();
                let result = match guard {
                    Some(guard) => guard.release().await,
                    None => Ok(false),
                };
                Box::new(Answer(move |py: Python<'_>| match result {
                    Ok(all) => Ok(all.into_pyobject(py)?.to_owned().into_any().unbind()),
                    Err(e) => Err(to_py(py, &e)),
                })) as Box<dyn Outcome>
            },
        ))
    }

    /// Answers `(name, code, message)` when any of the names is lost (or released).
    fn lost(&self) -> PyResult<Operation> {
        let live = self.live()?;
        let signals = live.lost.clone();
        let Context { process, client } = &live.context;
        Ok(Operation::start(
            process,
            Some(client.clone()),
            Cancel::Abort,
            async move {
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
            },
        ))
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        let Some(live) = self.live.get() else {
            return;
        };
        live.context.process.forget_held(live.id);
        if let Some(task) = live.held.end() {
            live.context.process.background(task);
        }
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
            Ok(Begun::Run(run)) => Some(Box::pin(async move {
                let _ = run.give_up().await;
            })),
            _ => None,
        }
    }
}

struct HeldRun {
    slot: tokio::sync::Mutex<Option<OnceGuard>>,
}

impl EndAtExit for HeldRun {
    fn end(&self) -> Option<Task> {
        let run = self.slot.try_lock().ok()?.take()?;
        Some(Box::pin(async move {
            let _ = run.give_up().await;
        }))
    }
}

/// The lock of a run-once that has the work to do.
#[pyclass(module = "fencelock._native", frozen)]
pub struct OnceRun {
    #[pyo3(get)]
    fence: u64,
    live: Owned<(Arc<HeldRun>, Context, u64)>,
}

impl OnceRun {
    fn new(run: OnceGuard, context: Context) -> Self {
        let fence = run.fence();
        let held = Arc::new(HeldRun {
            slot: tokio::sync::Mutex::new(Some(run)),
        });
        let weak: Weak<dyn EndAtExit> = Arc::downgrade(&held) as Weak<dyn EndAtExit>;
        let id = context.process.add_held(weak);
        OnceRun {
            fence,
            live: Owned::new((held, context, id)),
        }
    }

    fn finish(&self, record: bool) -> PyResult<Operation> {
        let (held, context, _) = self.live.get().ok_or_else(|| {
            PyRuntimeError::new_err("this run was begun by this process's parent before it forked")
        })?;
        let held = held.clone();
        Ok(Operation::start(
            &context.process,
            Some(context.client.clone()),
            Cancel::Finish,
            async move {
                let run = held.slot.lock().await.take();
                let result = match run {
                    Some(run) if record => run.done().await.map(|()| true),
                    Some(run) => run.give_up().await.map(|()| true),
                    None => Ok(false),
                };
                Box::new(Answer(move |py: Python<'_>| match result {
                    Ok(finished) => Ok(finished.into_pyobject(py)?.to_owned().into_any().unbind()),
                    Err(e) => Err(to_py(py, &e)),
                })) as Box<dyn Outcome>
            },
        ))
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

impl Drop for OnceRun {
    fn drop(&mut self) {
        let Some((held, context, id)) = self.live.get() else {
            return;
        };
        context.process.forget_held(*id);
        if let Some(task) = held.end() {
            context.process.background(task);
        }
    }
}
