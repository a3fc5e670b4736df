//! A lock request as Python describes it: the kind, the name and the options, checked once
//! when Python makes the request and turned into a Rust `LockRequest` at each acquisition.

use std::time::Duration;

use fencelock::LockRequest;
use pyo3::prelude::*;

use crate::errors::{invalid, seconds};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lock,
    Fair,
    Semaphore,
    Read,
    Write,
    Reentrant,
}

/// What to wait for when the lock is held.
#[derive(Clone, Copy)]
enum Wait {
    Forever,
    No,
    UpTo(Duration),
}

/// A checked lock request: `kind` is one of `lock`, `fair`, `semaphore`, `read`, `write`,
/// `reentrant`; times are seconds; `wait=None` waits as long as it takes, `0` not at all.
#[pyclass(module = "fencelock._native", frozen)]
#[derive(Clone)]
pub struct Spec {
    kind: Kind,
    #[pyo3(get)]
    name: String,
    permits: u32,
    take: u32,
    ttl: Option<Duration>,
    wait: Wait,
    queue_timeout: Option<Duration>,
    max_hold: Option<Duration>,
    lock_delay: Option<Duration>,
    auto_renew: bool,
}

#[pymethods]
impl Spec {
    #[new]
    #[pyo3(signature = (kind, name, *, permits=1, ttl=None, wait=None, queue_timeout=None, max_hold=None, auto_renew=true, lock_delay=None, take=1))]
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
    ) -> PyResult<Self> {
        let kind = match kind {
            "lock" => Kind::Lock,
            "fair" => Kind::Fair,
            "semaphore" => Kind::Semaphore,
            "read" => Kind::Read,
            "write" => Kind::Write,
            "reentrant" => Kind::Reentrant,
            other => return Err(invalid(&name, format!("unknown lock kind {other:?}"))),
        };
        if take != 1 && kind != Kind::Semaphore {
            return Err(invalid(
                &name,
                format!("take={take} is for a semaphore's permits; this lock has none"),
            ));
        }
        let optional = |what: &str, value: Option<f64>| -> PyResult<Option<Duration>> {
            value.map(|v| seconds(&name, what, v)).transpose()
        };
        let wait = match optional("wait", wait)? {
            None => Wait::Forever,
            Some(d) if d.is_zero() => Wait::No,
            Some(d) => Wait::UpTo(d),
        };
        Ok(Spec {
            ttl: optional("ttl", ttl)?,
            queue_timeout: optional("queue_timeout", queue_timeout)?,
            max_hold: optional("max_hold", max_hold)?,
            lock_delay: optional("lock_delay", lock_delay)?,
            kind,
            permits,
            take,
            wait,
            auto_renew,
            name,
        })
    }

    /// The lease in seconds (`None`: the default, 30 s).
    #[getter]
    fn ttl(&self) -> Option<f64> {
        self.ttl.map(|d| d.as_secs_f64())
    }
}

impl Spec {
    /// The Rust request made from `client` (for a reentrant lock, made by its handle:
    /// [`configure`](Self::configure) its `request()`).
    pub fn request(&self, client: &fencelock::Client) -> PyResult<LockRequest> {
        let name = self.name.clone();
        let request = match self.kind {
            Kind::Lock => client.lock(name),
            Kind::Fair => client.fair_lock(name),
            Kind::Semaphore => client.semaphore(name, self.permits).take(self.take),
            Kind::Read => client.read_write_lock(name).read(),
            Kind::Write => client.read_write_lock(name).write(),
            Kind::Reentrant => {
                return Err(invalid(
                    &self.name,
                    "a reentrant lock is acquired through its handle",
                ));
            }
        };
        Ok(self.configure(request))
    }

    /// `request` with this spec's options.
    pub fn configure(&self, request: LockRequest) -> LockRequest {
        let mut request = request.auto_renew(self.auto_renew);
        if let Some(ttl) = self.ttl {
            request = request.ttl(ttl);
        }
        if let Some(timeout) = self.queue_timeout {
            request = request.queue_timeout(timeout);
        }
        if let Some(limit) = self.max_hold {
            request = request.max_hold(limit);
        }
        if let Some(delay) = self.lock_delay {
            request = request.lock_delay(delay);
        }
        match self.wait {
            Wait::Forever => request,
            Wait::No => request.no_wait(),
            Wait::UpTo(limit) => request.wait_up_to(limit),
        }
    }
}
