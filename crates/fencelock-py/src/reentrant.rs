//! A reentrant lock's handle, for Python: the acquisitions made through it share one owner.

use std::sync::Arc;

use fencelock::ReentrantLock;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::client::acquire;
use crate::operation::Operation;
use crate::process::Owned;
use crate::request::Spec;

/// A reentrant lock's handle.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Reentrant {
    #[pyo3(get)]
    pub(crate) name: String,
    pub(crate) client: Owned<Arc<fencelock::Client>>,
    pub(crate) handle: Owned<ReentrantLock>,
}

#[pymethods]
impl Reentrant {
    /// Acquires the lock (again, if this handle holds it); with `try_only`, answers `None` if
    /// another owner holds it.
    #[pyo3(signature = (spec, try_only=false))]
    fn acquire(&self, py: Python<'_>, spec: &Spec, try_only: bool) -> PyResult<Operation> {
        let (Some(handle), Some(client)) = (self.handle.get(), self.client.get()) else {
            return Err(PyRuntimeError::new_err(format!(
                "the reentrant lock {:?} was made by this process's parent before it forked; make a new one in this process",
                self.name
            )));
        };
        let request = spec.configure(handle.request());
        acquire(py, client.clone(), request, try_only)
    }
}
