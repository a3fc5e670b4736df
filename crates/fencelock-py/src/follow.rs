//! A stream of the library's (an election's observations, a lock's releases) followed from
//! Python one item at a time (`fencelock_bind::follow`), each wait an operation.

use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::seconds;
use crate::operation::{Answer, Cancel, Operation, Outcome};
use crate::process::{Owned, Process};

/// A stream, and the process whose runtime polls it.
pub struct Follow<S> {
    stream: Owned<(fencelock_bind::follow::Follow<S>, Arc<Process>)>,
}

impl<S> Follow<S>
where
    S: Stream + Unpin + Send + 'static,
    S::Item: Send,
{
    pub fn new(py: Python<'_>, stream: S) -> PyResult<Self> {
        let stream = fencelock_bind::follow::Follow::new(stream);
        Ok(Follow {
            stream: Owned::new((stream, Process::get(py)?)),
        })
    }

    /// Answers `convert(item)` for the next item, waiting at most `timeout` seconds (`None`: as
    /// long as it takes), or `convert(None)` when the time ran out (or the stream ended).
    pub fn next<T, C>(&self, timeout: Option<f64>, convert: C) -> PyResult<Operation>
    where
        C: FnOnce(Option<S::Item>) -> T + Send + 'static,
        T: for<'py> IntoPyObject<'py> + Send + 'static,
    {
        let limit: Option<Duration> = timeout.map(|t| seconds("", "timeout", t)).transpose()?;
        let (stream, process) = self.stream.get().ok_or_else(|| {
            PyRuntimeError::new_err("this was made by this process's parent before it forked")
        })?;
        let next = stream.next(limit);
        Ok(Operation::start(process, Cancel::Abort, async move {
            let answer = convert(next.await);
            Box::new(Answer(move |py: Python<'_>| answer.into_py_any(py))) as Box<dyn Outcome>
        }))
    }
}
