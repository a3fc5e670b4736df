//! The operator's calls for Python: a lock's state (`inspect`), the held locks (`list`), and a
//! watch of a lock's releases. The state goes to Python as dicts of plain values, which
//! `fencelock` makes into its `LockInfo`, `Holder` and `Waiter`.

use std::time::Duration;

use fencelock::admin::{Holder, LockInfo, Release, Waiter};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::to_py;
use crate::follow::Follow;
use crate::operation::Operation;

fn secs(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

fn holder<'py>(py: Python<'py>, holder: &Holder) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("token_prefix", &holder.token_prefix)?;
    dict.set_item("fence", holder.fence)?;
    dict.set_item("remaining", secs(holder.remaining))?;
    dict.set_item("holds", holder.holds)?;
    dict.set_item("permits", holder.permits)?;
    dict.set_item("label", &holder.label)?;
    Ok(dict)
}

fn waiter<'py>(py: Python<'py>, waiter: &Waiter) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("place", waiter.place)?;
    dict.set_item("waited", secs(waiter.waited))?;
    dict.set_item("token_prefix", &waiter.token_prefix)?;
    dict.set_item("side", waiter.side.as_ref().map(|s| s.code()))?;
    Ok(dict)
}

/// A lock's state as a dict: `name`, `kind` (a `LockKind` code or `None`), `permits`, `holder`,
/// `shared`, `waiting`, `waiters`, `last_fence`.
pub fn info(py: Python<'_>, info: &LockInfo) -> PyResult<Py<PyAny>> {
    let dict = PyDict::new(py);
    dict.set_item("name", &info.name)?;
    dict.set_item("kind", info.kind.as_ref().map(|k| k.code()))?;
    dict.set_item("permits", info.permits)?;
    dict.set_item(
        "holder",
        info.holder.as_ref().map(|h| holder(py, h)).transpose()?,
    )?;
    let shared = PyList::empty(py);
    for h in &info.shared {
        shared.append(holder(py, h)?)?;
    }
    dict.set_item("shared", shared)?;
    dict.set_item("waiting", info.waiting)?;
    let waiters = PyList::empty(py);
    for w in &info.waiters {
        waiters.append(waiter(py, w)?)?;
    }
    dict.set_item("waiters", waiters)?;
    dict.set_item("last_fence", info.last_fence)?;
    Ok(dict.into_any().unbind())
}

/// What `list` found: `(locks, skipped, unanswered)`, the locks as [`info`]'s dicts, the names
/// skipped as their exceptions, the Redlock instances that did not answer as strings.
pub fn listing(py: Python<'_>, listing: fencelock::admin::Listing) -> PyResult<Py<PyAny>> {
    let locks = PyList::empty(py);
    for lock in &listing.locks {
        locks.append(info(py, lock)?)?;
    }
    let skipped = PyList::empty(py);
    for error in &listing.skipped {
        skipped.append(to_py(py, error).into_value(py))?;
    }
    Ok((locks, skipped, listing.unanswered)
        .into_pyobject(py)?
        .into_any()
        .unbind())
}

/// A watch of one lock's releases.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Releases {
    follow: Follow<fencelock::admin::Releases>,
}

impl Releases {
    pub fn new(py: Python<'_>, stream: fencelock::admin::Releases) -> PyResult<Self> {
        Ok(Releases {
            follow: Follow::new(py, stream)?,
        })
    }
}

#[pymethods]
impl Releases {
    /// Answers `True` at the lock's next release (a release may have been missed across a lost
    /// connection: it counts as one), waiting at most `timeout` seconds (`None`: as long as it
    /// takes); `False` when the time ran out.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, timeout: Option<f64>) -> PyResult<Operation> {
        self.follow
            .next(timeout, |next: Option<Release>| next.is_some())
    }
}
