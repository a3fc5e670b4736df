//! Leader election for Python: the leadership a campaign wins (`fencelock_bind`'s
//! [`Leading`]), and an observer of the leaders.

use std::sync::Arc;
use std::time::SystemTime;

use fencelock::WaitPolicy;
use fencelock::election::{Leader, Leadership as RustLeadership, Observation, Observe};
use fencelock_bind::holds::Leading;
use fencelock_bind::kept::since_epoch;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::{seconds, to_py};
use crate::follow::Follow;
use crate::held::{self, GiveBack};
use crate::operation::{Cancel, Operation, Outcome};
use crate::process::{Context, Owned, Process, Task};

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
    let wait = wait.map(|w| seconds(name, "wait", w)).transpose()?;
    Ok(campaign.wait(WaitPolicy::from(wait)))
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
    since_epoch(at).as_secs_f64()
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

    fn holds(&self) -> bool {
        self.result.is_ok()
    }

    fn undo(self: Box<Self>) -> Option<Task> {
        self.result.ok().map(GiveBack::give_back)
    }
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
    live: Owned<Leading<Arc<Process>>>,
}

impl Leadership {
    pub fn new(leadership: RustLeadership, context: Context) -> Self {
        let leading = Leading::new(leadership, context);
        Leadership {
            election: leading.election().to_owned(),
            term: leading.term(),
            since: epoch_seconds(leading.since()),
            live: Owned::new(leading),
        }
    }

    fn live(&self) -> PyResult<&Leading<Arc<Process>>> {
        self.live.get().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "the leadership of {:?} was won by this process's parent before it forked; it belongs to that process",
                self.election
            ))
        })
    }
}

#[pymethods]
impl Leadership {
    /// The value announced last in this term (through a proclaim in flight, and after the
    /// resignation).
    fn value(&self) -> String {
        self.live.get().map_or_else(String::new, Leading::value)
    }

    /// Whether this process still leads, as far as it can tell now.
    fn is_held(&self) -> bool {
        self.live.get().is_some_and(Leading::is_held)
    }

    /// `(code, message)` if the leadership is lost (or resigned) now, else `None`.
    fn lost_now(&self) -> Option<(&'static str, String)> {
        self.live.get().and_then(Leading::lost_now)
    }

    /// Answers `(code, message)` when the leadership is lost or resigned.
    fn lost(&self) -> PyResult<Operation> {
        let live = self.live()?;
        Ok(held::lost_reply(live.kept(), live.lost()))
    }

    /// Announces a new value for this term.
    fn proclaim(&self, value: String) -> PyResult<Operation> {
        let live = self.live()?;
        Ok(held::reply(
            live.kept(),
            Cancel::Abort,
            live.proclaim(value),
        ))
    }

    /// Resigns: answers `True` if this process still led. A cancelled resignation goes on to
    /// its end.
    fn resign(&self) -> PyResult<Operation> {
        Ok(held::release(self.live()?.kept()))
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
    follow: Follow<Observe>,
}

impl Observer {
    pub fn new(py: Python<'_>, stream: Observe) -> PyResult<Self> {
        Ok(Observer {
            follow: Follow::new(py, stream)?,
        })
    }
}

#[pymethods]
impl Observer {
    /// Answers the next observation, waiting at most `timeout` seconds (`None`: as long as it
    /// takes); `None` when the time ran out.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, timeout: Option<f64>) -> PyResult<Operation> {
        self.follow
            .next(timeout, |next: Option<Observation>| next.as_ref().map(seen))
    }
}
