//! The client, for Python: how to reach Redis (kept, so that a forked child can connect afresh),
//! and every call, each one an [`Operation`].

use std::sync::{Arc, Mutex, PoisonError};

use fencelock::ClientBuilder;
use fencelock_bind::config::{Connection, Deployment, Options, Pem, Replicas, Secret};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::admin;
use crate::election::{self, Observer};
use crate::errors::{config_error, seconds, to_py};
use crate::guard::Granted;
use crate::operation::{Cancel, Operation, Outcome, answer};
use crate::process::{Context, Owned, Process};
use crate::request::Spec;

/// TLS material as Python gives it: a path, or the PEM as bytes.
fn pem(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Pem> {
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Pem::Bytes(bytes.as_bytes().to_vec()));
    }
    let path = value
        .py()
        .import("os")?
        .call_method1("fspath", (value,))
        .and_then(|p| p.extract::<String>())
        .map_err(|_| config_error(&format!("{what} must be a path or the PEM as bytes")))?;
    Ok(Pem::File(path))
}

/// A fencelock client. It connects lazily; in a process forked after it was made, it connects
/// afresh on first use (the parent's connections and locks stay the parent's).
#[pyclass(module = "fencelock._native", frozen)]
pub struct Client {
    connection: Connection,
    /// The Rust client of the process that uses it (locked with the GIL held only).
    current: Mutex<Option<Owned<Arc<fencelock::Client>>>>,
}

#[pymethods]
impl Client {
    /// `topology` is `server`, `redlock`, `cluster` or `sentinel`; `urls` the server URLs
    /// (one for `server`); `master` the Sentinel master's name.
    #[new]
    #[pyo3(signature = (topology, urls, master=None, *, key_prefix=None, command_timeout=None,
        instance_timeout=None, tls_ca=None, tls_client_cert=None, tls_client_key=None,
        master_username=None, master_password=None, wait_for_replicas=None,
        replica_timeout=None, replica_shortfall=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, one per option
    fn new(
        py: Python<'_>,
        topology: &str,
        urls: Vec<String>,
        master: Option<String>,
        key_prefix: Option<String>,
        command_timeout: Option<f64>,
        instance_timeout: Option<f64>,
        tls_ca: Option<Bound<'_, PyAny>>,
        tls_client_cert: Option<Bound<'_, PyAny>>,
        tls_client_key: Option<Bound<'_, PyAny>>,
        master_username: Option<String>,
        master_password: Option<String>,
        wait_for_replicas: Option<u32>,
        replica_timeout: Option<f64>,
        replica_shortfall: Option<String>,
    ) -> PyResult<Self> {
        let deployment = Deployment::new(topology, urls, master).map_err(|e| config_error(&e))?;
        let tls_client_cert = match (tls_client_cert, tls_client_key) {
            (Some(cert), Some(key)) => {
                Some((pem(&cert, "tls_client_cert")?, pem(&key, "tls_client_key")?))
            }
            (None, None) => None,
            _ => {
                return Err(config_error(
                    "tls_client_cert and tls_client_key go together",
                ));
            }
        };
        let replicas = match (wait_for_replicas, replica_timeout, replica_shortfall) {
            (None, None, None) => None,
            (Some(replicas), timeout, shortfall) => Some(Replicas {
                replicas,
                timeout: timeout
                    .map(|t| seconds("", "replica_timeout", t))
                    .transpose()?
                    .unwrap_or(Replicas::DEFAULT_TIMEOUT),
                shortfall: Replicas::shortfall(shortfall.as_deref())
                    .map_err(|e| config_error(&e))?,
            }),
            _ => {
                return Err(config_error(
                    "replica_timeout and replica_shortfall go with wait_for_replicas",
                ));
            }
        };
        let options = Options {
            key_prefix,
            command_timeout: command_timeout
                .map(|s| seconds("", "command_timeout", s))
                .transpose()?,
            instance_timeout: instance_timeout
                .map(|s| seconds("", "instance_timeout", s))
                .transpose()?,
            tls_ca: tls_ca.map(|ca| pem(&ca, "tls_ca")).transpose()?,
            tls_client_cert,
            master_username,
            master_password: master_password.map(Secret),
            replicas,
        };
        let client = Client {
            connection: Connection {
                deployment,
                options,
            },
            current: Mutex::new(None),
        };
        // Built once now, so that a bad URL or option is reported here.
        client.client(py)?;
        Ok(client)
    }

    /// The server (or servers) this client talks to, without any password.
    fn server(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.client(py)?.server().to_owned())
    }

    /// Acquires the lock `spec` describes; with `try_only`, answers `None` if it is held.
    #[pyo3(signature = (spec, try_only=false))]
    fn acquire(&self, py: Python<'_>, spec: &Spec, try_only: bool) -> PyResult<Operation> {
        let client = self.client(py)?;
        let request = spec.request(&client)?;
        acquire(py, client, request, try_only)
    }

    /// Gives back what this client's holds still hold (its `close()`): guards released,
    /// leaderships resigned, runs given up; then closes the client (the library's
    /// `Client::close`: its listener ends, its connections close, and every later call through
    /// it fails with `ClientClosed`). Runs to its end; answers `None`.
    fn close_holds(&self, py: Python<'_>) -> PyResult<Operation> {
        let client = self.client(py)?;
        let ends = Process::get(py)?.keeper().end_client(&client);
        self.call(py, Cancel::Finish, move |client| async move {
            ends.await;
            // The give-backs of the calls the closing ended, counted as the client's background
            // work, go first (at most the packages' bound for them).
            client.wait_idle(fencelock_bind::keeper::CLOSE_IDLE).await;
            client.close().await;
            answer(move |py| Ok(py.None()))
        })
    }

    /// Asks the holders of lock `name` to release it; answers `True` if it was held.
    fn request_release(&self, py: Python<'_>, name: String) -> PyResult<Operation> {
        self.call(py, Cancel::Abort, move |client| async move {
            let result = client.request_release(name).await;
            answer(move |py| Ok(result?.into_pyobject(py)?.to_owned().into_any().unbind()))
        })
    }

    /// Campaigns in election `name` with `value`, waiting as `wait` says; answers the
    /// leadership.
    #[pyo3(signature = (name, value, ttl=None, wait=None, label=None))]
    fn campaign(
        &self,
        py: Python<'_>,
        name: String,
        value: String,
        ttl: Option<f64>,
        wait: Option<f64>,
        label: Option<String>,
    ) -> PyResult<Operation> {
        let mut campaign = election::campaign(&self.client(py)?.election(name), value, ttl, wait)?;
        if let Some(label) = label {
            campaign = campaign.label(label);
        }
        self.start(py, Cancel::Abort, |context| async move {
            let result = campaign.campaign().await;
            Box::new(election::Won { result, context }) as Box<dyn Outcome>
        })
    }

    /// The leader of election `name`: answers `(value, term, since)`, or `None`.
    fn leader(&self, py: Python<'_>, name: String) -> PyResult<Operation> {
        self.call(py, Cancel::Abort, move |client| async move {
            let result = client.election(name).leader().await;
            answer(move |py| {
                let leader = result?.as_ref().map(election::leader_tuple);
                Ok(leader.into_pyobject(py)?.into_any().unbind())
            })
        })
    }

    /// Answers an observer of election `name`'s leaders.
    fn observe(&self, py: Python<'_>, name: String) -> PyResult<Operation> {
        self.call(py, Cancel::Abort, move |client| async move {
            let result = client.election(name).observe().await;
            answer(move |py| Ok(Py::new(py, Observer::new(py, result?)?)?.into_any()))
        })
    }

    /// A reentrant lock's handle: the acquisitions made through it share one owner.
    #[pyo3(signature = (name, max_reentry=None))]
    fn reentrant(
        &self,
        py: Python<'_>,
        name: String,
        max_reentry: Option<u32>,
    ) -> PyResult<crate::reentrant::Reentrant> {
        let client = self.client(py)?;
        let mut handle = client.reentrant_lock(name.clone());
        if let Some(limit) = max_reentry {
            handle = handle.max_reentry(limit);
        }
        Ok(crate::reentrant::Reentrant {
            name,
            client: Owned::new(client),
            handle: Owned::new(handle),
        })
    }

    /// Writes `writes` to `resource` if `fence` is not older than the one it accepted last;
    /// answers the fence now accepted.
    fn fenced_apply(
        &self,
        py: Python<'_>,
        resource: String,
        fence: u64,
        writes: &Bound<'_, PyList>,
    ) -> PyResult<Operation> {
        let writes = crate::fenced::writes(&resource, writes)?;
        let store = self
            .client(py)?
            .fenced_store(resource)
            .map_err(|e| to_py(py, &e))?;
        self.call(py, Cancel::Abort, move |_| async move {
            let result = store.apply(fence, &writes).await;
            answer(move |py| Ok(result?.into_pyobject(py)?.into_any().unbind()))
        })
    }

    /// Answers the fence `resource` accepted last (0: none yet).
    fn fenced_accepted(&self, py: Python<'_>, resource: String) -> PyResult<Operation> {
        let store = self
            .client(py)?
            .fenced_store(resource)
            .map_err(|e| to_py(py, &e))?;
        self.call(py, Cancel::Abort, move |_| async move {
            let result = store.accepted().await;
            answer(move |py| Ok(result?.into_pyobject(py)?.into_any().unbind()))
        })
    }

    /// Takes every lock of `names`, or none; answers the `MultiGuard`.
    #[pyo3(signature = (names, ttl=None, wait=None, label=None))]
    fn multi_acquire(
        &self,
        py: Python<'_>,
        names: Vec<String>,
        ttl: Option<f64>,
        wait: Option<f64>,
        label: Option<String>,
    ) -> PyResult<Operation> {
        let client = self.client(py)?;
        let first = names.first().cloned().unwrap_or_default();
        let mut request = client.multi_lock(names);
        if let Some(label) = label {
            request = request.label(label);
        }
        if let Some(ttl) = ttl {
            request = request.ttl(seconds(&first, "ttl", ttl)?);
        }
        request = request.wait(wait_policy(&first, wait)?);
        self.start(py, Cancel::Abort, |context| async move {
            let result = request.acquire().await;
            Box::new(crate::recipes::AcquiredAll { result, context }) as Box<dyn Outcome>
        })
    }

    /// Begins the work to do once under `key` (on the lock `lock`, the key by default): answers
    /// `("done", fence, at, tick)` if it was done, `("late", tick, late)` if this start is too
    /// late for its tick, `("gave_up", failures, tick)` if `attempts` runs failed, else the
    /// `OnceRun` holding the lock. A tick is `every` (seconds, by
    /// the server's clock; with `early` and `late`) or `planned` (seconds since the epoch).
    #[pyo3(signature = (key, lock=None, ttl=None, wait=None, label=None, keep=None, every=None, early=None, late=None, planned=None, attempts=None))]
    #[allow(clippy::too_many_arguments)]
    fn once_begin(
        &self,
        py: Python<'_>,
        key: String,
        lock: Option<String>,
        ttl: Option<f64>,
        wait: Option<f64>,
        label: Option<String>,
        keep: Option<f64>,
        every: Option<f64>,
        early: Option<f64>,
        late: Option<f64>,
        planned: Option<f64>,
        attempts: Option<u32>,
    ) -> PyResult<Operation> {
        let client = self.client(py)?;
        let name = lock.unwrap_or_else(|| key.clone());
        let mut once = client.once(key).lock(name.clone());
        if let Some(ttl) = ttl {
            once = once.ttl(seconds(&name, "ttl", ttl)?);
        }
        once = once.wait(wait_policy(&name, wait)?);
        if let Some(label) = label {
            once = once.label(label);
        }
        if let Some(keep) = keep {
            once = once.keep(seconds(&name, "keep", keep)?);
        }
        if let Some(tick) = crate::recipes::tick(&name, every, early, late, planned)? {
            once = once.tick(tick);
        }
        if let Some(attempts) = attempts {
            once = once.attempts(attempts);
        }
        self.start(py, Cancel::Abort, |context| async move {
            let result = once.begin().await;
            Box::new(crate::recipes::Begin { result, context }) as Box<dyn Outcome>
        })
    }

    /// Answers the tick a start of the run-once `key` now belongs to (seconds since the epoch;
    /// by the server's clock for `every`), or `None` without a tick. Takes nothing.
    #[pyo3(signature = (key, lock=None, every=None, early=None, late=None, planned=None))]
    #[allow(clippy::too_many_arguments)]
    fn once_tick(
        &self,
        py: Python<'_>,
        key: String,
        lock: Option<String>,
        every: Option<f64>,
        early: Option<f64>,
        late: Option<f64>,
        planned: Option<f64>,
    ) -> PyResult<Operation> {
        let name = lock.clone().unwrap_or_else(|| key.clone());
        let tick = crate::recipes::tick(&name, every, early, late, planned)?;
        self.call(py, Cancel::Abort, move |client| async move {
            let mut once = client.once(key).lock(name);
            if let Some(tick) = tick {
                once = once.tick(tick);
            }
            let result = once.current_tick().await;
            answer(move |py| {
                let at = result?.map(|t| fencelock_bind::kept::since_epoch(t).as_secs_f64());
                Ok(at.into_pyobject(py)?.into_any().unbind())
            })
        })
    }

    /// Answers the state of lock `name` (see `fencelock.LockInfo`).
    fn inspect(&self, py: Python<'_>, name: String) -> PyResult<Operation> {
        self.call(py, Cancel::Abort, move |client| async move {
            let result = client.inspect(name).await;
            answer(move |py| Ok(admin::info(py, &result?)?))
        })
    }

    /// Answers the held locks whose name matches `pattern`: `(locks, skipped, unanswered)`.
    fn list(&self, py: Python<'_>, pattern: String) -> PyResult<Operation> {
        self.call(py, Cancel::Abort, move |client| async move {
            let result = client.list(&pattern).await;
            answer(move |py| Ok(admin::listing(py, result?)?))
        })
    }

    /// Deletes lock `name` whoever holds it (an operator's tool); answers `True` if it was
    /// held. Goes on to its end if cancelled.
    fn force_release(&self, py: Python<'_>, name: String) -> PyResult<Operation> {
        self.call(py, Cancel::Finish, move |client| async move {
            let result = client.force_release(name).await;
            answer(move |py| Ok(result?.into_pyobject(py)?.to_owned().into_any().unbind()))
        })
    }

    /// Answers a watch of lock `name`'s releases (subscribed when it answers).
    fn releases(&self, py: Python<'_>, name: String) -> PyResult<Operation> {
        self.call(py, Cancel::Abort, move |client| async move {
            let result = client.releases(name).await;
            answer(move |py| Ok(Py::new(py, admin::Releases::new(py, result?)?)?.into_any()))
        })
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.client(py) {
            Ok(client) => format!("<fencelock.Client {}>", client.server()),
            Err(_) => "<fencelock.Client>".to_owned(),
        }
    }
}

impl Client {
    /// The Rust client of this process (built afresh in a forked child).
    fn client(&self, py: Python<'_>) -> PyResult<Arc<fencelock::Client>> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = current.as_ref().and_then(|owned| owned.get()) {
            return Ok(client.clone());
        }
        let process = Process::get(py)?;
        // `build` starts the client's background tasks on the runtime it is called in.
        let _entered = process.runtime().enter();
        let client = Arc::new(self.builder()?.build().map_err(|e| to_py(py, &e))?);
        process.add_client(&client);
        // A client of the parent process is forgotten by `Owned`'s drop, never dropped here.
        *current = Some(Owned::new(client.clone()));
        Ok(client)
    }

    /// Starts `call` with this process's client, as an operation cancelled as `cancel` says.
    fn call<F, Fut>(&self, py: Python<'_>, cancel: Cancel, call: F) -> PyResult<Operation>
    where
        F: FnOnce(Arc<fencelock::Client>) -> Fut,
        Fut: Future<Output = Box<dyn Outcome>> + Send + 'static,
    {
        self.start(py, cancel, |context| call(context.client))
    }

    /// Starts `call` with the process and client a hold it makes keeps (its [`Context`]).
    fn start<F, Fut>(&self, py: Python<'_>, cancel: Cancel, call: F) -> PyResult<Operation>
    where
        F: FnOnce(Context) -> Fut,
        Fut: Future<Output = Box<dyn Outcome>> + Send + 'static,
    {
        start(py, self.client(py)?, cancel, call)
    }

    fn builder(&self) -> PyResult<ClientBuilder> {
        self.connection.builder().map_err(|e| config_error(&e))
    }
}

/// `wait` as Python gives it: `None` as long as it takes, `0` not at all, else seconds.
fn wait_policy(name: &str, wait: Option<f64>) -> PyResult<fencelock::WaitPolicy> {
    let wait = wait.map(|w| seconds(name, "wait", w)).transpose()?;
    Ok(fencelock::WaitPolicy::from(wait))
}

/// The acquisition of `request` as an operation whose guard, if Python never takes it, is
/// released.
pub(crate) fn acquire(
    py: Python<'_>,
    client: Arc<fencelock::Client>,
    request: fencelock::LockRequest,
    try_only: bool,
) -> PyResult<Operation> {
    start(py, client, Cancel::Abort, |context| async move {
        let result = if try_only {
            request.try_acquire().await
        } else {
            request.acquire().await.map(Some)
        };
        Box::new(Granted::new(result, context)) as Box<dyn Outcome>
    })
}

/// Starts `call` with `client` and this process (a hold it makes keeps them: [`Context`]).
fn start<F, Fut>(
    py: Python<'_>,
    client: Arc<fencelock::Client>,
    cancel: Cancel,
    call: F,
) -> PyResult<Operation>
where
    F: FnOnce(Context) -> Fut,
    Fut: Future<Output = Box<dyn Outcome>> + Send + 'static,
{
    let process = Process::get(py)?;
    let context = process.context(client);
    Ok(Operation::start(&process, cancel, call(context)))
}
