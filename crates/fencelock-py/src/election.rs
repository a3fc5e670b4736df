//! Leader election for Python: the leadership a campaign wins, and an observer of the leaders.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use fencelock::LostSignal;
use fencelock::election::{Leader, Leadership as RustLeadership, Observation, Observe};
use futures_util::StreamExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::client::Context;
use crate::errors::{HandleError, lost_pair, seconds, to_py};
use crate::operation::{Answer, Cancel, Operation, Outcome};
use crate::process::{EndAtExit, Owned, Task};

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
    (
        leader.value.clone(),
        leader.term,
        epoch_seconds(leader.since),
    )
}

fn epoch_seconds(at: SystemTime) -> f64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A finished campaign: the leadership, resigned if Python never takes it.
pub struct Won {
    pub result: fencelock::Result<RustLeadership>,
    pub context: Context,
}

impl Outcome for Won {
    fn into_py(self: Box<Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.result {
            Ok(leadership) => {
                Ok(Py::new(py, Leadership::new(leadership, self.context))?.into_any())
            }
            Err(e) => Err(to_py(py, &e)),
        }
    }

    fn undo(self: Box<Self>) -> Option<Task> {
        let leadership = self.result.ok()?;
        Some(Box::pin(async move {
            let _ = leadership.resign().await;
        }))
    }
}

/// The leadership, shared by its calls, and resigned at exit if still held.
struct Held {
    slot: tokio::sync::Mutex<Option<RustLeadership>>,
    /// The value announced last: kept through a proclaim in flight and after the resignation.
    value: Mutex<String>,
}

impl EndAtExit for Held {
    fn end(&self) -> Option<Task> {
        let leadership = self.slot.try_lock().ok()?.take()?;
        Some(Box::pin(async move {
            let _ = leadership.resign().await;
        }))
    }
}

struct Live {
    held: Arc<Held>,
    lost: LostSignal,
    context: Context,
    id: u64,
}

/// A leadership: held until resigned or lost. Dropped unresigned, it is resigned in the
/// background; the interpreter's exit resigns what still leads.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Leadership {
    #[pyo3(get)]
    election: String,
    #[pyo3(get)]
    term: u64,
    #[pyo3(get)]
    since: f64,
    live: Owned<Live>,
}

impl Leadership {
    pub fn new(leadership: RustLeadership, context: Context) -> Self {
        let election = leadership.election().name().to_owned();
        let term = leadership.term();
        let since = epoch_seconds(leadership.since());
        let lost = leadership.lost();
        let held = Arc::new(Held {
            value: Mutex::new(leadership.value().to_owned()),
            slot: tokio::sync::Mutex::new(Some(leadership)),
        });
        let weak: Weak<dyn EndAtExit> = Arc::downgrade(&held) as Weak<dyn EndAtExit>;
        let id = context.process.add_held(weak);
        Leadership {
            election,
            term,
            since,
            live: Owned::new(Live {
                held,
                lost,
                context,
                id,
            }),
        }
    }

    fn live(&self) -> PyResult<&Live> {
        self.live.get().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "the leadership of {:?} was won by this process's parent before it forked; it belongs to that process",
                self.election
            ))
        })
    }

    fn start<F>(
        &self,
        cancel: Cancel,
        call: impl FnOnce(Arc<Held>, LostSignal) -> F,
    ) -> PyResult<Operation>
    where
        F: Future<Output = Box<dyn Outcome>> + Send + 'static,
    {
        let live = self.live()?;
        let Context { process, client } = &live.context;
        Ok(Operation::start(
            process,
            Some(client.clone()),
            cancel,
            call(live.held.clone(), live.lost.clone()),
        ))
    }
}

#[pymethods]
impl Leadership {
    /// The value announced last in this term (through a proclaim in flight, and after the
    /// resignation).
    fn value(&self) -> String {
        self.live.get().map_or_else(String::new, |live| {
            live.held
                .value
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }

    /// Whether this process still leads, as far as it can tell now.
    fn is_held(&self) -> bool {
        self.live.get().is_some_and(|live| !live.lost.is_lost())
    }

    /// `(code, message)` if the leadership is lost (or resigned) now, else `None`.
    fn lost_now(&self) -> Option<(&'static str, String)> {
        self.live.get().and_then(|live| lost_pair(&live.lost))
    }

    /// Answers `(code, message)` when the leadership is lost or resigned.
    fn lost(&self) -> PyResult<Operation> {
        self.start(Cancel::Abort, |_, lost| async move {
            let reason = lost.wait().await;
            Box::new(Answer(move |py: Python<'_>| {
                Ok((reason.code(), reason.to_string())
                    .into_pyobject(py)?
                    .into_any()
                    .unbind())
            })) as Box<dyn Outcome>
        })
    }

    /// Announces a new value for this term.
    fn proclaim(&self, value: String) -> PyResult<Operation> {
        let election = self.election.clone();
        self.start(Cancel::Abort, move |held, _| async move {
            let result = {
                let mut leadership = held.slot.lock().await;
                match leadership.as_mut() {
                    Some(leadership) => {
                        let result = leadership.proclaim(value).await.map_err(HandleError::Lock);
                        if result.is_ok() {
                            leadership.value().clone_into(
                                &mut held.value.lock().unwrap_or_else(PoisonError::into_inner),
                            );
                        }
                        result
                    }
                    None => Err(HandleError::GivenBack),
                }
            };
            Box::new(Answer(move |py: Python<'_>| match result {
                Ok(()) => Ok(py.None()),
                Err(e) => Err(e.into_py(py, &election)),
            })) as Box<dyn Outcome>
        })
    }

    /// Resigns: answers `True` if this process still led. A cancelled resignation goes on to
    /// its end.
    fn resign(&self) -> PyResult<Operation> {
        self.start(Cancel::Finish, |held, _| async move {
            let leadership = held.slot.lock().await.take();
            let result = match leadership {
                Some(leadership) => leadership.resign().await,
                None => Ok(false),
            };
            Box::new(Answer(move |py: Python<'_>| match result {
                Ok(led) => Ok(led.into_pyobject(py)?.to_owned().into_any().unbind()),
                Err(e) => Err(to_py(py, &e)),
            })) as Box<dyn Outcome>
        })
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let Some(live) = self.live.get() else {
            return;
        };
        live.context.process.forget_held(live.id);
        if let Some(task) = live.held.end() {
            live.context.process.background(task);
        }
    }
}

/// `(code, leader)`: `("leader", (value, term, since))`, `("vacant", None)`, `("gap", None)`.
type Seen = (&'static str, Option<(String, u64, f64)>);

fn seen(observation: &Observation) -> Seen {
    let leader = match observation {
        Observation::Leader(leader) => Some(leader_tuple(leader)),
        _ => None,
    };
    (observation.code(), leader)
}

/// The leaders of an election, one observation at a time.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Observer {
    stream: Owned<(
        Arc<tokio::sync::Mutex<Observe>>,
        Arc<crate::process::Process>,
    )>,
}

impl Observer {
    pub fn new(py: Python<'_>, stream: Observe) -> PyResult<Self> {
        Ok(Observer {
            stream: Owned::new((
                Arc::new(tokio::sync::Mutex::new(stream)),
                crate::process::Process::get(py)?,
            )),
        })
    }
}

#[pymethods]
impl Observer {
    /// Answers the next observation, waiting at most `timeout` seconds (`None`: as long as it
    /// takes); `None` when the time ran out.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, timeout: Option<f64>) -> PyResult<Operation> {
        let limit: Option<Duration> = timeout.map(|t| seconds("", "timeout", t)).transpose()?;
        let (stream, process) = self
            .stream
            .get()
            .ok_or_else(|| PyRuntimeError::new_err("this observer was made before a fork"))?;
        let stream = stream.clone();
        Ok(Operation::start(process, None, Cancel::Abort, async move {
            let next = {
                let mut stream = stream.lock().await;
                match limit {
                    Some(limit) => tokio::time::timeout(limit, stream.next())
                        .await
                        .ok()
                        .flatten(),
                    None => stream.next().await,
                }
            };
            let next = next.as_ref().map(seen);
            Box::new(Answer(move |py: Python<'_>| {
                Ok(next.into_pyobject(py)?.into_any().unbind())
            })) as Box<dyn Outcome>
        }))
    }
}
