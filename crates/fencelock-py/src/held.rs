//! What a guard, a leadership, a multi-lock guard or a run-once keeps of its hold, for Python:
//! `fencelock_bind`'s [`Kept`] (the library's value behind a lock, given back at the
//! interpreter's exit if it is still there, and in the background when Python drops the object
//! unreleased), and its calls as operations.

use std::future::Future;
use std::sync::Arc;

pub use fencelock_bind::held::GiveBack;
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::operation::{Answer, Cancel, Operation, Outcome};
use crate::process::Process;

/// A hold kept for Python.
pub type Kept<T> = fencelock_bind::kept::Kept<T, Arc<Process>>;

/// Starts `call` as an operation of the hold's client.
pub fn start<T: GiveBack>(
    kept: &Kept<T>,
    cancel: Cancel,
    call: impl Future<Output = Box<dyn Outcome>> + Send + 'static,
) -> Operation {
    Operation::start(&kept.context().home, cancel, call)
}

/// Answers `(code, message)` when `lost` fires: the hold lost, or given back.
pub fn lost_reply<T: GiveBack>(kept: &Kept<T>, lost: &fencelock::LostSignal) -> Operation {
    let lost = lost.clone();
    reply(kept, Cancel::Abort, async move {
        let reason = lost.wait().await;
        Ok((reason.code(), reason.to_string()))
    })
}

/// Starts `call` as an operation of the hold's client, answering its result (the library's
/// error as its Python exception).
pub fn reply<T, V>(
    kept: &Kept<T>,
    cancel: Cancel,
    call: impl Future<Output = fencelock::Result<V>> + Send + 'static,
) -> Operation
where
    T: GiveBack,
    V: for<'py> IntoPyObject<'py> + Send + 'static,
{
    start(kept, cancel, async move {
        let result = call.await;
        Box::new(Answer(move |py: Python<'_>| match result {
            Ok(value) => value.into_py_any(py),
            Err(e) => Err(to_py(py, &e)),
        })) as Box<dyn Outcome>
    })
}

/// Gives the hold back (release, resign) as an operation: answers `True` if it was still held
/// (`False` once given back). A cancelled one goes on to its end.
pub fn release<T: GiveBack>(kept: &Kept<T>) -> Operation {
    reply(kept, Cancel::Finish, kept.release())
}

/// Ends a `with` block that held it: gives it back, and raises `NotHeld` (the lock, and why) if
/// it was no longer held by then. A cancelled one goes on to its end.
pub fn end_block<T: GiveBack>(kept: &Kept<T>) -> Operation {
    reply(kept, Cancel::Finish, kept.end_block())
}
