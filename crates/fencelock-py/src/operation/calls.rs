//! What Python calls on an [`Operation`]: `wait` (blocking, answering Ctrl-C on the main
//! thread), `take`, `on_done` (asyncio's callback) and `cancel`.

use std::sync::PoisonError;
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use super::{Answer, Cancel, Operation, Outcome, Phase, call};
use crate::gil;

/// How often a blocking wait on the main thread takes the GIL back to let Python run its signal
/// handlers (Ctrl-C gives the wait up). Other threads never run signal handlers: they wait
/// without waking.
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

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
