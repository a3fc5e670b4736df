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
use std::time::Duration;

use fencelock::Cleanup;
use fencelock_bind::keeper::Unclaimed;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::gil;
use crate::process::{FLUSH, Owned, Process, Task};

/// How often a blocking wait on the main thread takes the GIL back to let Python run its signal
/// handlers (Ctrl-C gives the wait up). Other threads never run signal handlers: they wait
/// without waking.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

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
        let call = state.cleanup.scope(call);
        // A call that runs to its end whatever happens is background work that exit waits for;
        // one that waits is stopped by exit.
        let busy = (cancel == Cancel::Finish).then(|| process.busy());
        let running = (cancel == Cancel::Abort).then(|| process.keeper().running());
        // Boxed: the task's cell then holds a pointer, not the whole future, which tokio
        // copies on its way in and again when the task finishes.
        let task = process.runtime().spawn(Box::pin(async move {
            let outcome = match running {
                None => call.await,
                Some(mut running) => {
                    let outcome = tokio::select! {
                        biased;
                        () = running.ended() => None,
                        outcome = call => Some(outcome),
                    };
                    // Counted until the call's future is gone.
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
        }));
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

thread_local! {
    /// Whether this thread is the interpreter's main thread (the only one that runs signal
    /// handlers), once asked.
    static MAIN: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

fn on_main_thread(py: Python<'_>) -> bool {
    if let Some(main) = MAIN.get() {
        return main;
    }
    let main = (|| -> PyResult<bool> {
        let threading = py.import("threading")?;
        let main = threading.call_method0("main_thread")?.getattr("ident")?;
        let this = threading.call_method0("get_ident")?;
        main.eq(this)
    })()
    .unwrap_or(false);
    MAIN.set(Some(main));
    main
}

#[pymethods]
impl Operation {
    /// Whether the call is over.
    fn done(&self) -> PyResult<bool> {
        Ok(!matches!(self.state()?.inner().phase, Phase::Running))
    }

    /// Waits for the call with the GIL released and returns its result (or raises its
    /// error). On the main thread, Ctrl-C (any exception a signal handler raises) cancels the
    /// call, waits for its clean-up (at most 2 s: whatever it holds given back, its place in
    /// line left) and raises.
    fn wait(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let state = self.state()?.clone();
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(PyRuntimeError::new_err(
                "a blocking fencelock call cannot run on fencelock's own threads (from one of its callbacks); use fencelock.aio or another thread",
            ));
        }
        // (Python code, run under this native frame: not once the interpreter's exit began;
        // this thread then parks at the detach below.)
        let main = gil::enter(py).is_some_and(|_inside| on_main_thread(py));
        loop {
            // The GIL is taken back only if the interpreter is not ending (else this thread
            // parks for good), and this thread is counted until its call is over: see
            // `gil::Inside`.
            let (interrupted, _inside) = gil::detach(py, || {
                let mut inner = state.inner();
                while matches!(inner.phase, Phase::Running) {
                    if main {
                        let (next, _) = state
                            .over
                            .wait_timeout(inner, SIGNAL_CHECK)
                            .unwrap_or_else(PoisonError::into_inner);
                        inner = next;
                        if matches!(inner.phase, Phase::Running) {
                            return true;
                        }
                    } else {
                        inner = state
                            .over
                            .wait(inner)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                }
                false
            });
            if !interrupted {
                return match self.claim()? {
                    Some(outcome) => outcome.into_py(py),
                    // The exit ended it: not answered (this thread parks for good), unless
                    // this is the thread ending the interpreter.
                    None => Err(gil::ended(py, _inside)),
                };
            }
            if let Err(signal) = py.check_signals() {
                let clean_up = Operation::clean_up(&state);
                let runtime = state.process.runtime();
                let ((), _inside) = gil::detach(py, || runtime.block_on(clean_up));
                return Err(signal);
            }
        }
    }

    /// The result of a call that is over (raises its error); once.
    fn take(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.claim()? {
            Some(outcome) => outcome.into_py(py),
            None => Err(PyRuntimeError::new_err(
                "this fencelock call's result cannot be taken: the interpreter's exit ended the call",
            )),
        }
    }

    /// Calls `callback()` once the call is over (from fencelock's answering thread; at once,
    /// from this thread, if it is over already).
    fn on_done(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        let state = self.state()?;
        let now = {
            let mut inner = state.inner();
            if matches!(inner.phase, Phase::Running) {
                inner.callback = Some(callback);
                None
            } else {
                Some(callback)
            }
        };
        // (Not once the interpreter's exit began: nobody waits for an answer then.)
        if let Some(callback) = now
            && let Some(_inside) = gil::enter(py)
        {
            call(py, &callback);
        }
        Ok(())
    }

    /// Gives the call up: a wait or a read is stopped, a release or a resignation goes on to
    /// its end. A result Python has not taken is undone. Returns the clean-up as an operation
    /// (over when the call is stopped, its result undone and the client's background work
    /// done, at most 2 s), for the caller to wait for.
    fn cancel(&self) -> PyResult<Operation> {
        let state = self.state()?;
        let clean_up = Operation::clean_up(state);
        let process = state.process.clone();
        // Only a wait: what it waits for goes on if it is given up.
        Ok(Operation::start(&process, Cancel::Abort, async move {
            clean_up.await;
            Box::new(Answer(|py: Python<'_>| Ok(py.None()))) as Box<dyn Outcome>
        }))
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
