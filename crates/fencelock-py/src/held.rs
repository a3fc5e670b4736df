//! What a guard, a leadership, a multi-lock guard or a run-once keeps of its hold: the library's
//! value behind a lock (so that calls from any thread or task can borrow it, and the one that
//! gives it back can take it), given back at the interpreter's exit if it is still there, and in
//! the background when Python drops the object unreleased.

use std::future::Future;
use std::sync::{Arc, Weak};

pub use fencelock_bind::held::{GiveBack, Hold};
use pyo3::prelude::*;

use crate::client::Context;
use crate::errors::to_py;
use crate::operation::{Answer, Cancel, Operation, Outcome};
use crate::process::EndAtExit;

/// A hold kept for Python (see the module docs).
pub struct Kept<T: GiveBack> {
    hold: Arc<Hold<T>>,
    context: Context,
    /// Its entry among what the process ends at exit.
    id: u64,
}

impl<T: GiveBack> Kept<T> {
    /// Keeps `value`, and has the process end it at exit if it is still there then.
    pub fn new(value: T, context: Context) -> Self {
        let hold = Arc::new(Hold::new(value));
        let weak: Weak<dyn EndAtExit> = Arc::downgrade(&hold) as Weak<dyn EndAtExit>;
        let id = context.process.add_held(weak);
        Kept { hold, context, id }
    }

    /// The hold.
    pub fn hold(&self) -> &Hold<T> {
        &self.hold
    }

    /// Gives the hold back (release, resign) as an operation: answers `True` if it was still
    /// held (`False` once given back). A cancelled one goes on to its end.
    pub fn finish(&self) -> Operation {
        self.start(Cancel::Finish, |hold| async move {
            let result = hold.finish().await;
            Box::new(Answer(move |py: Python<'_>| match result {
                Ok(held) => Ok(held.into_pyobject(py)?.to_owned().into_any().unbind()),
                Err(e) => Err(to_py(py, &e)),
            })) as Box<dyn Outcome>
        })
    }

    /// Starts `call`, given the hold, as an operation of the hold's client.
    pub fn start<F>(&self, cancel: Cancel, call: impl FnOnce(Arc<Hold<T>>) -> F) -> Operation
    where
        F: Future<Output = Box<dyn Outcome>> + Send + 'static,
    {
        let Context { process, client } = &self.context;
        Operation::start(
            process,
            Some(client.clone()),
            cancel,
            call(self.hold.clone()),
        )
    }
}

impl<T: GiveBack> Drop for Kept<T> {
    fn drop(&mut self) {
        let process = &self.context.process;
        process.forget_held(self.id);
        // Given back in the background (work that exit waits for), unless a call took it.
        if let Some(task) = self.hold.end() {
            process.background(task);
        }
    }
}
