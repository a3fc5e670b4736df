//! One native call, one handle: an [`Operation`] runs on the process's runtime and is waited on
//! (blocking, answering Ctrl-C on the main thread) or awaited (asyncio, through a callback). Its
//! result stays in Rust until Python takes it, so that a cancellation that races the result
//! undoes it here, in one place: a lock granted to a request that was cancelled is released, a
//! leadership resigned. A cancelled call's clean-up (the place in line it leaves, the result it
//! undoes: its own give-back, counted in its [`Cleanup`], not the rest of the process's
//! background work) is itself an operation, which the caller waits for, at most [`FLUSH`]. A
//! call that waits (a lock, a read) is stopped when the interpreter exits, as in Node.js (its
//! caller is not woken then), and a result that holds something and that Python has not taken
//! by then is given back by the exit: the process's keeper lists it until Python takes it.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};

use fencelock::Cleanup;
use fencelock_bind::keeper::Unclaimed;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::process::{FLUSH, Owned, Process, Task};

mod calls;

/// What a finished call gives Python, or undoes if Python never takes it.
pub trait Outcome: Send + 'static {
    /// The Python value (or exception) of the call.
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>>;

    /// What undoes it, if Python never takes it (a grant to a cancelled request).
    fn undo(self: Box<Self>) -> Option<Task> {
        None
    }

    /// Whether it holds something that [`undo`](Self::undo) gives back: the exit gives it back
    /// if Python has not taken it by then.
    fn holds(&self) -> bool {
        false
    }
}

/// An outcome that needs no undoing: its conversion to Python.
pub struct Answer<F>(pub F);

impl<F> Outcome for Answer<F>
where
    F: FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send + 'static,
{
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        (self.0)(py)
    }
}

/// An outcome from a library result: its conversion, or the library's error as its Python
/// exception.
pub fn answer<F>(convert: F) -> Box<dyn Outcome>
where
    F: FnOnce(Python<'_>) -> Result<Py<PyAny>, Failure> + Send + 'static,
{
    Box::new(Answer(move |py: Python<'_>| {
        convert(py).map_err(|e| e.into_py(py))
    }))
}

/// Why an answer could not be given: the library's error, or Python's.
pub enum Failure {
    Lock(fencelock::Error),
    Python(PyErr),
}

impl Failure {
    pub fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Lock(e) => to_py(py, &e),
            Failure::Python(e) => e,
        }
    }
}

impl From<fencelock::Error> for Failure {
    fn from(e: fencelock::Error) -> Self {
        Failure::Lock(e)
    }
}

impl From<std::convert::Infallible> for Failure {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Python(e)
    }
}

/// How a call is cancelled.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// Its future is dropped (a wait, a read): cancel-safe in the library.
    Abort,
    /// It runs to its end in the background (a release, a resignation): a release is never
    /// cancelled halfway.
    Finish,
}

enum Phase {
    Running,
    Ready(Box<dyn Outcome>),
    Taken,
    Cancelled,
    /// Ended by the interpreter's exit: stopped, or its result given back before Python took it.
    Ended,
}

struct Inner {
    phase: Phase,
    /// Its entry among the results the exit gives back, while it is `Ready` with one that holds
    /// something.
    unclaimed: Option<u64>,
    /// Called (by the answering thread) once the call is over.
    callback: Option<Py<PyAny>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

struct State {
    inner: Mutex<Inner>,
    over: Condvar,
    cancel: Cancel,
    process: Arc<Process>,
    /// What the call leaves to the background if it is dropped (a give-back): what a
    /// cancellation waits for.
    cleanup: Cleanup,
}

impl State {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the outcome out of `Ready` (leaving `next`) and forgets it among the results the
    /// exit gives back; whatever the phase was.
    fn take_phase(&self, inner: &mut Inner, next: Phase) -> Phase {
        let phase = std::mem::replace(&mut inner.phase, next);
        if let Some(id) = inner.unclaimed.take() {
            self.process.keeper().forget_unclaimed(id);
        }
        phase
    }

    /// Ends a call that the exit stopped: whoever waits for it parks (see `wait`).
    fn stopped(&self) {
        let mut inner = self.inner();
        if matches!(inner.phase, Phase::Running) {
            inner.phase = Phase::Ended;
        }
        drop(inner);
        self.over.notify_all();
    }
}

impl Unclaimed for State {
    /// The exit's give-back of a result Python has not taken. Its caller is not woken (the
    /// interpreter is ending); one woken already parks (see `wait`).
    fn give_back(&self) -> Option<Task> {
        let mut inner = self.inner();
        match self.take_phase(&mut inner, Phase::Ended) {
            Phase::Ready(outcome) => {
                drop(inner);
                outcome.undo()
            }
            other => {
                inner.phase = other;
                None
            }
        }
    }
}

/// A call running on fencelock's runtime: wait for it (`wait`), or be told when it is over
/// (`on_done`) and take its result (`take`); `cancel` gives it up.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Operation {
    state: Owned<Arc<State>>,
}

impl Operation {
    /// Starts `call` on `process`'s runtime. One that is cancelled with [`Cancel::Abort`] is
    /// also stopped when the interpreter exits (nothing answers it then).
    pub fn start<F>(process: &Arc<Process>, cancel: Cancel, call: F) -> Operation
    where
        F: Future<Output = Box<dyn Outcome>> + Send + 'static,
    {
        let state = Arc::new(State {
            inner: Mutex::new(Inner {
                phase: Phase::Running,
                unclaimed: None,
                callback: None,
                task: None,
            }),
            over: Condvar::new(),
            cancel,
            process: process.clone(),
            cleanup: Cleanup::new(),
        });
        let finished = state.clone();
        // Boxed at once: the task and its select then hold a pointer, where each held the
        // library's future (some kilobytes: an acquisition's is over 4 KB) and copied it as it
        // was made and moved.
        let mut call = Box::pin(state.cleanup.scope(call));
        // A call that runs to its end whatever happens is background work that exit waits for;
        // one that waits is stopped by exit.
        let busy = (cancel == Cancel::Finish).then(|| process.busy());
        let running = (cancel == Cancel::Abort).then(|| process.keeper().running());
        let task = process.runtime().spawn(async move {
            let outcome = match running {
                None => call.await,
                Some(mut running) => {
                    let outcome = tokio::select! {
                        biased;
                        () = running.ended() => None,
                        outcome = &mut call => Some(outcome),
                    };
                    // Counted until the call's future is gone (dropped here).
                    drop(call);
                    drop(running);
                    // Stopped by exit: its future is dropped (a waiter leaves its place), and
                    // its caller's thread parks (no callback is called). A thread that took the
                    // GIL back while the interpreter finalizes would be ended by an unwinding
                    // of its stack through this native frame (an abort).
                    let Some(outcome) = outcome else {
                        finished.stopped();
                        return;
                    };
                    outcome
                }
            };
            finish(&finished, outcome);
            drop(busy);
        });
        state.inner().task = Some(task);
        Operation {
            state: Owned::new(state),
        }
    }

    /// An operation that is over already, with `outcome`.
    pub fn ready(process: &Arc<Process>, outcome: Box<dyn Outcome>) -> Operation {
        let state = Arc::new(State {
            inner: Mutex::new(Inner {
                phase: Phase::Ready(outcome),
                unclaimed: None,
                callback: None,
                task: None,
            }),
            over: Condvar::new(),
            cancel: Cancel::Abort,
            process: process.clone(),
            cleanup: Cleanup::new(),
        });
        Operation {
            state: Owned::new(state),
        }
    }

    /// The outcome of a call that is over, once; `None` if the interpreter's exit ended it.
    fn claim(&self) -> PyResult<Option<Box<dyn Outcome>>> {
        let state = self.state()?;
        let mut inner = state.inner();
        match state.take_phase(&mut inner, Phase::Taken) {
            Phase::Ready(outcome) => Ok(Some(outcome)),
            Phase::Ended => {
                inner.phase = Phase::Ended;
                Ok(None)
            }
            other => {
                let why = match other {
                    Phase::Running => "is still running",
                    Phase::Cancelled => "was cancelled",
                    _ => "was taken already",
                };
                inner.phase = other;
                Err(PyRuntimeError::new_err(format!(
                    "this fencelock call's result cannot be taken: the call {why}"
                )))
            }
        }
    }

    fn state(&self) -> PyResult<&Arc<State>> {
        self.state.get().ok_or_else(|| {
            PyRuntimeError::new_err(
                "this fencelock call was started by the process before it forked; it belongs to that process",
            )
        })
    }

    /// The clean-up of a cancellation, as a future: the call stopped (or, for a release, over),
    /// its result undone if Python never took it, and its own give-back (a place in line left,
    /// a grant released) done, within [`FLUSH`]; not the rest of the process's background work.
    fn clean_up(state: &Arc<State>) -> Task {
        let (task, undo, callback) = {
            let mut inner = state.inner();
            let undo = match state.take_phase(&mut inner, Phase::Cancelled) {
                Phase::Ready(outcome) => outcome.undo(),
                Phase::Running | Phase::Cancelled => None,
                kept @ (Phase::Taken | Phase::Ended) => {
                    inner.phase = kept;
                    None
                }
            };
            (inner.task.take(), undo, inner.callback.take())
        };
        // Whoever waits for the call (another thread, a task: a client's close() cancels calls
        // it did not start) learns that it is over: cancelled.
        state.over.notify_all();
        if let Some(callback) = callback {
            state.process.deliver(move |py| call(py, &callback));
        }
        let cancel = state.cancel;
        let cleanup = state.cleanup.clone();
        let process = state.process.clone();
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + FLUSH;
            if let Some(task) = task {
                if cancel == Cancel::Abort {
                    task.abort();
                }
                // Over when its future is dropped (whatever it held handed to the client's
                // background work) or done (a result it made is undone by `finish`).
                let _ = tokio::time::timeout_at(deadline, task).await;
            }
            // Counted as the process's background work (exit waits for it, if this wait is
            // given up), and waited for here.
            if let Some(undo) = undo {
                let (over, undone) = tokio::sync::oneshot::channel::<()>();
                process.background(async move {
                    undo.await;
                    let _ = over.send(());
                });
                let _ = tokio::time::timeout_at(deadline, undone).await;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            cleanup.done(left).await;
        })
    }
}

/// Records the call's outcome (or undoes it, if the call was cancelled meanwhile, or the
/// interpreter's exit has begun) and tells the callback.
fn finish(state: &Arc<State>, outcome: Box<dyn Outcome>) {
    let (callback, undo) = {
        let mut inner = state.inner();
        match inner.phase {
            Phase::Running if outcome.holds() => {
                // Listed for the exit while Python has not taken it (its own lock held: the
                // exit cannot look at it before it is here).
                let weak = Arc::downgrade(state) as Weak<dyn Unclaimed>;
                match state.process.keeper().add_unclaimed(weak) {
                    Some(id) => {
                        inner.unclaimed = Some(id);
                        inner.phase = Phase::Ready(outcome);
                        (inner.callback.take(), None)
                    }
                    // The exit has begun: given back at once; its caller parks.
                    None => {
                        inner.phase = Phase::Ended;
                        (None, outcome.undo())
                    }
                }
            }
            Phase::Running => {
                inner.phase = Phase::Ready(outcome);
                (inner.callback.take(), None)
            }
            _ => (None, outcome.undo()),
        }
    };
    state.over.notify_all();
    if let Some(undo) = undo {
        state.process.background(undo);
    }
    if let Some(callback) = callback {
        state.process.deliver(move |py| call(py, &callback));
    }
}

fn call(py: Python<'_>, callback: &Py<PyAny>) {
    if let Err(e) = callback.call0(py) {
        // The event loop may be closed already; nobody waits for this answer then.
        e.write_unraisable(py, None);
    }
}

impl Drop for Operation {
    fn drop(&mut self) {
        // A result Python never took (the caller was gone: a garbage-collected call) is
        // undone; a running call goes on and undoes its own result when it finishes.
        let Some(state) = self.state.get() else {
            return;
        };
        let (undo, stop) = {
            let mut inner = state.inner();
            match state.take_phase(&mut inner, Phase::Cancelled) {
                Phase::Ready(outcome) => (outcome.undo(), None),
                // A wait nobody waits for is stopped; a release goes on. Either way, a result
                // the task still makes is undone when it finishes.
                Phase::Running if state.cancel == Cancel::Abort => (None, inner.task.take()),
                Phase::Running => (None, None),
                other => {
                    inner.phase = other;
                    (None, None)
                }
            }
        };
        if let Some(task) = stop {
            task.abort();
        }
        if let Some(undo) = undo {
            state.process.background(undo);
        }
    }
}
