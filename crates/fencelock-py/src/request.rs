//! A lock request as Python describes it, checked once when Python makes the request (the
//! checks and the conversion to a Rust `LockRequest` are `fencelock_bind::spec`'s).

use fencelock::LockRequest;
use fencelock_bind::spec;
use pyo3::prelude::*;

use crate::errors::{invalid, seconds};

/// A checked lock request: `kind` is one of `lock`, `fair`, `semaphore`, `read`, `write`,
/// `reentrant`; times are seconds; `wait=None` waits as long as it takes, `0` not at all.
#[pyclass(module = "fencelock._native", frozen)]
#[derive(Clone)]
pub struct Spec(spec::Spec);

#[pymethods]
impl Spec {
    #[new]
    #[pyo3(signature = (kind, name, *, permits=1, ttl=None, wait=None, queue_timeout=None, max_hold=None, auto_renew=true, lock_delay=None, take=1, label=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, one per option
    fn new(
        kind: &str,
        name: String,
        permits: u32,
        ttl: Option<f64>,
        wait: Option<f64>,
        queue_timeout: Option<f64>,
        max_hold: Option<f64>,
        auto_renew: bool,
        lock_delay: Option<f64>,
        take: u32,
        label: Option<String>,
    ) -> PyResult<Self> {
        let optional =
            |what: &str, value: Option<f64>| value.map(|v| seconds(&name, what, v)).transpose();
        let options = spec::Options {
            permits,
            take,
            ttl: optional("ttl", ttl)?,
            wait: optional("wait", wait)?,
            queue_timeout: optional("queue_timeout", queue_timeout)?,
            max_hold: optional("max_hold", max_hold)?,
            lock_delay: optional("lock_delay", lock_delay)?,
            auto_renew,
            label,
        };
        let checked =
            spec::Spec::new(kind, name.clone(), options).map_err(|e| invalid(&name, e))?;
        Ok(Spec(checked))
    }

    #[getter]
    fn name(&self) -> &str {
        self.0.name()
    }

    /// The lease in seconds (`None`: the default, 30 s).
    #[getter]
    fn ttl(&self) -> Option<f64> {
        self.0.ttl().map(|d| d.as_secs_f64())
    }
}

impl Spec {
    /// The Rust request made from `client` (for a reentrant lock, made by its handle:
    /// [`configure`](Self::configure) its `request()`).
    pub fn request(&self, client: &fencelock::Client) -> PyResult<LockRequest> {
        self.0.request(client).ok_or_else(|| {
            invalid(
                self.0.name(),
                "a reentrant lock is acquired through its handle",
            )
        })
    }

    /// `request` with this spec's options.
    pub fn configure(&self, request: LockRequest) -> LockRequest {
        self.0.configure(request)
    }
}
