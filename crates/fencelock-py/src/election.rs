//! Leader election for Python: campaigns (blocking or answering a callback), the leadership,
//! the leader, and an observer of the leaders.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fencelock::election::{Leader, Leadership as RustLeadership, Observation, Observe};
use futures_util::StreamExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio::sync::Mutex;

use crate::errors::{HandleError, lost_code, seconds, to_py};
use crate::runtime::{self, Owner, Pending};

type Slot = Arc<Mutex<Option<RustLeadership>>>;

/// How a campaign waits: `None` as long as it takes, `0` not at all, else seconds.
pub fn campaign(
    election: &fencelock::election::Election,
    value: String,
    ttl: Option<f64>,
    wait: Option<f64>,
) -> PyResult<fencelock::election::Campaign> {
    let name = election.name();
    let mut campaign = election.campaign(value);
    if let Some(ttl) = ttl {
        campaign = campaign.ttl(seconds(name, "ttl", ttl)?);
    }
    Ok(match wait.map(|w| seconds(name, "wait", w)).transpose()? {
        None => campaign,
        Some(d) if d.is_zero() => campaign.no_wait(),
        Some(d) => campaign.wait_up_to(d),
    })
}

/// The leader as Python sees it: `(value, term, since)`, `since` in seconds since the epoch.
pub fn leader_tuple(leader: &Leader) -> (String, u64, f64) {
    let since = leader
        .since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    (leader.value.clone(), leader.term, since)
}

/// A leadership: held until resigned or lost.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Leadership {
    #[pyo3(get)]
    election: String,
    #[pyo3(get)]
    term: u64,
    #[pyo3(get)]
    since: f64,
    slot: Owner<Slot>,
    lost: Owner<fencelock::LostSignal>,
}

impl Leadership {
    pub fn new(leadership: RustLeadership) -> Self {
        let since = leadership
            .since()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Leadership {
            election: leadership.election().name().to_owned(),
            term: leadership.term(),
            since,
            lost: Owner::new(leadership.lost()),
            slot: Owner::new(Arc::new(Mutex::new(Some(leadership)))),
        }
    }

    fn slot(&self) -> PyResult<Slot> {
        self.slot.get().cloned().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "the leadership of {:?} was won by process {} before it forked; it belongs to that process",
                self.election,
                self.slot.pid()
            ))
        })
    }
}

#[pymethods]
impl Leadership {
    /// The value the leader announced last.
    fn value(&self) -> String {
        self.slot
            .get()
            .and_then(|slot| {
                slot.try_lock()
                    .ok()
                    .and_then(|l| l.as_ref().map(|l| l.value().to_owned()))
            })
            .unwrap_or_default()
    }

    /// Whether this process still leads, as far as it can tell now.
    fn is_held(&self) -> bool {
        self.lost.get().is_some_and(|lost| !lost.is_lost())
    }

    /// Calls `callback(code, message)` once when the leadership is lost (or resigned).
    fn on_lost(&self, callback: Py<PyAny>) -> PyResult<()> {
        let Some(lost) = self.lost.get().cloned() else {
            return Ok(());
        };
        runtime::runtime()?.spawn(async move {
            let reason = lost.wait().await;
            runtime::call_back(move |py| {
                if let Err(e) = callback.call1(py, (lost_code(&reason), reason.to_string())) {
                    e.write_unraisable(py, None);
                }
            });
        });
        Ok(())
    }

    /// Announces a new value for this term.
    fn proclaim(&self, py: Python<'_>, value: String) -> PyResult<()> {
        let slot = self.slot()?;
        let election = self.election.clone();
        runtime::wait(py, proclaim(slot, value))?.map_err(|e| e.into_py(py, &election))
    }

    /// `proclaim`, answering `done`.
    fn proclaim_async(&self, value: String, done: Py<PyAny>) -> PyResult<Pending> {
        let slot = self.slot()?;
        let election = self.election.clone();
        runtime::spawn(
            proclaim(slot, value),
            move |py, result| match result {
                Ok(()) => Ok(py.None()),
                Err(e) => Err(e.into_py(py, &election)),
            },
            done,
        )
    }

    /// Resigns: `True` if this process still led.
    fn resign(&self, py: Python<'_>) -> PyResult<bool> {
        let slot = self.slot()?;
        runtime::wait(py, resign(slot))?.map_err(|e| to_py(py, &e))
    }

    /// `resign`, answering `done`.
    fn resign_async(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let slot = self.slot()?;
        runtime::spawn(
            resign(slot),
            |py, result| match result {
                Ok(led) => Ok(led.into_pyobject(py)?.to_owned().into_any().unbind()),
                Err(e) => Err(to_py(py, &e)),
            },
            done,
        )
    }
}

async fn proclaim(slot: Slot, value: String) -> Result<(), HandleError> {
    let mut leadership = slot.lock().await;
    match leadership.as_mut() {
        Some(leadership) => leadership.proclaim(value).await.map_err(HandleError::Lock),
        None => Err(HandleError::GivenBack),
    }
}

async fn resign(slot: Slot) -> fencelock::Result<bool> {
    let leadership = slot.lock().await.take();
    match leadership {
        Some(leadership) => leadership.resign().await,
        None => Ok(false),
    }
}

/// The leaders of an election, one observation at a time: `("leader", (value, term, since))`,
/// `("vacant", None)` or `("gap", None)`.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Observer {
    stream: Owner<Arc<Mutex<Observe>>>,
}

impl Observer {
    pub fn new(stream: Observe) -> Self {
        Observer {
            stream: Owner::new(Arc::new(Mutex::new(stream))),
        }
    }
}

type Seen = (&'static str, Option<(String, u64, f64)>);

async fn next(stream: Arc<Mutex<Observe>>, limit: Option<Duration>) -> Option<Seen> {
    let mut stream = stream.lock().await;
    let next = match limit {
        Some(limit) => tokio::time::timeout(limit, stream.next()).await.ok()?,
        None => stream.next().await,
    };
    Some(match next? {
        Observation::Leader(leader) => ("leader", Some(leader_tuple(&leader))),
        Observation::Vacant => ("vacant", None),
        _ => ("gap", None),
    })
}

#[pymethods]
impl Observer {
    /// The next observation, waiting at most `timeout` seconds (`None`: as long as it takes);
    /// `None` when the time ran out.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Seen>> {
        let limit = timeout.map(|t| seconds("", "timeout", t)).transpose()?;
        let stream = self
            .stream
            .get()
            .cloned()
            .ok_or_else(|| PyRuntimeError::new_err("this observer was made before a fork"))?;
        runtime::wait(py, next(stream, limit))
    }

    /// `next()` without a limit, answering `done`.
    fn next_async(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let stream = self
            .stream
            .get()
            .cloned()
            .ok_or_else(|| PyRuntimeError::new_err("this observer was made before a fork"))?;
        runtime::spawn(
            next(stream, None),
            |py, seen| Ok(seen.into_pyobject(py)?.into_any().unbind()),
            done,
        )
    }
}
