//! The client, for Python: how to reach Redis (kept, so that a forked child can connect
//! afresh), and the acquisitions.

use std::sync::Mutex;
use std::time::Duration;

use fencelock::{ClientBuilder, LockGuard, ReentrantLock};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::election::{Leadership, Observer};
use crate::errors::{seconds, to_py};
use crate::guard::Guard;
use crate::request::Spec;
use crate::runtime::{self, Owner, Pending};

/// Where the servers are.
#[derive(Clone)]
enum Topology {
    Server(String),
    Redlock(Vec<String>),
    Cluster(Vec<String>),
    Sentinel(Vec<String>, String),
}

/// The builder's options, as Python gave them.
#[derive(Clone, Default)]
struct Options {
    key_prefix: Option<String>,
    command_timeout: Option<Duration>,
    instance_timeout: Option<Duration>,
    tls_ca_file: Option<String>,
    tls_client_cert: Option<(String, String)>,
    master_username: Option<String>,
    master_password: Option<String>,
}

/// A fencelock client. It connects lazily; in a process forked after it was made, it connects
/// afresh on first use (the parent's connections and locks stay the parent's).
#[pyclass(module = "fencelock._native", frozen)]
pub struct Client {
    topology: Topology,
    options: Options,
    current: Mutex<Option<Owner<fencelock::Client>>>,
}

#[pymethods]
impl Client {
    /// `topology` is `server`, `redlock`, `cluster` or `sentinel`; `urls` the server URLs
    /// (one for `server`); `master` the Sentinel master's name.
    #[new]
    #[pyo3(signature = (topology, urls, master=None, *, key_prefix=None, command_timeout=None,
        instance_timeout=None, tls_ca_file=None, tls_client_cert=None, tls_client_key=None,
        master_username=None, master_password=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments, one per option
    fn new(
        topology: &str,
        urls: Vec<String>,
        master: Option<String>,
        key_prefix: Option<String>,
        command_timeout: Option<f64>,
        instance_timeout: Option<f64>,
        tls_ca_file: Option<String>,
        tls_client_cert: Option<String>,
        tls_client_key: Option<String>,
        master_username: Option<String>,
        master_password: Option<String>,
    ) -> PyResult<Self> {
        let config = |reason: &str| config_error(reason);
        let topology = match (topology, master) {
            ("server", None) => match urls.as_slice() {
                [url] => Topology::Server(url.clone()),
                _ => return Err(config("Client takes exactly one URL")),
            },
            ("redlock", None) => Topology::Redlock(urls),
            ("cluster", None) => Topology::Cluster(urls),
            ("sentinel", Some(master)) => Topology::Sentinel(urls, master),
            (other, _) => return Err(config(&format!("unknown deployment {other:?}"))),
        };
        let tls_client_cert = match (tls_client_cert, tls_client_key) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => return Err(config("tls_client_cert and tls_client_key go together")),
        };
        let options = Options {
            key_prefix,
            command_timeout: command_timeout
                .map(|s| seconds("", "command_timeout", s))
                .transpose()?,
            instance_timeout: instance_timeout
                .map(|s| seconds("", "instance_timeout", s))
                .transpose()?,
            tls_ca_file,
            tls_client_cert,
            master_username,
            master_password,
        };
        let client = Client {
            topology,
            options,
            current: Mutex::new(None),
        };
        // Build once now, so that a bad URL or option is reported here.
        client.client()?;
        Ok(client)
    }

    /// The server (or servers) this client talks to, without any password.
    fn server(&self) -> PyResult<String> {
        Ok(self.client()?.server().to_owned())
    }

    /// Acquires the lock `spec` describes; with `try_only`, `None` if it is held.
    #[pyo3(signature = (spec, try_only=false))]
    fn acquire(&self, py: Python<'_>, spec: &Spec, try_only: bool) -> PyResult<Option<Guard>> {
        acquire_blocking(py, spec.request(&self.client()?)?, try_only)
    }

    /// `acquire`, answering `done(True, guard or None)` or `done(False, exception)`.
    #[pyo3(signature = (spec, done, try_only=false))]
    fn acquire_async(&self, spec: &Spec, done: Py<PyAny>, try_only: bool) -> PyResult<Pending> {
        let request = spec.request(&self.client()?)?;
        runtime::spawn(acquire(request, try_only), convert_guard, done)
    }

    /// Asks the holders of lock `name` to release it; `True` if it was held.
    fn request_release(&self, py: Python<'_>, name: String) -> PyResult<bool> {
        let client = self.client()?;
        runtime::wait(py, async move { client.request_release(name).await })?
            .map_err(|e| to_py(py, &e))
    }

    /// `request_release`, answering `done`.
    fn request_release_async(&self, name: String, done: Py<PyAny>) -> PyResult<Pending> {
        let client = self.client()?;
        runtime::spawn(
            async move { client.request_release(name).await },
            |py, result| match result {
                Ok(held) => Ok(held.into_pyobject(py)?.to_owned().into_any().unbind()),
                Err(e) => Err(to_py(py, &e)),
            },
            done,
        )
    }

    /// Campaigns in election `name` with `value`, waiting as `wait` says; the leadership.
    #[pyo3(signature = (name, value, ttl=None, wait=None))]
    fn campaign(
        &self,
        py: Python<'_>,
        name: String,
        value: String,
        ttl: Option<f64>,
        wait: Option<f64>,
    ) -> PyResult<Leadership> {
        let election = self.client()?.election(name);
        let campaign = crate::election::campaign(&election, value, ttl, wait)?;
        runtime::wait(py, campaign.campaign())?
            .map(Leadership::new)
            .map_err(|e| to_py(py, &e))
    }

    /// `campaign`, answering `done`.
    #[pyo3(signature = (name, value, done, ttl=None, wait=None))]
    fn campaign_async(
        &self,
        name: String,
        value: String,
        done: Py<PyAny>,
        ttl: Option<f64>,
        wait: Option<f64>,
    ) -> PyResult<Pending> {
        let election = self.client()?.election(name);
        let campaign = crate::election::campaign(&election, value, ttl, wait)?;
        runtime::spawn(
            campaign.campaign(),
            |py, result| match result {
                Ok(leadership) => Ok(Py::new(py, Leadership::new(leadership))?.into_any()),
                Err(e) => Err(to_py(py, &e)),
            },
            done,
        )
    }

    /// The leader of election `name`: `(value, term, since)`, or `None`.
    fn leader(&self, py: Python<'_>, name: String) -> PyResult<Option<(String, u64, f64)>> {
        let election = self.client()?.election(name);
        let leader = runtime::wait(py, async move { election.leader().await })?
            .map_err(|e| to_py(py, &e))?;
        Ok(leader.as_ref().map(crate::election::leader_tuple))
    }

    /// An observer of election `name`'s leaders.
    fn observe(&self, py: Python<'_>, name: String) -> PyResult<Observer> {
        let election = self.client()?.election(name);
        runtime::wait(py, async move { election.observe().await })?
            .map(Observer::new)
            .map_err(|e| to_py(py, &e))
    }

    /// A reentrant lock's handle: the acquisitions made through it share one owner.
    #[pyo3(signature = (name, max_reentry=None))]
    fn reentrant(&self, name: String, max_reentry: Option<u32>) -> PyResult<Reentrant> {
        let mut handle = self.client()?.reentrant_lock(name.clone());
        if let Some(limit) = max_reentry {
            handle = handle.max_reentry(limit);
        }
        Ok(Reentrant {
            name,
            handle: Owner::new(handle),
        })
    }

    /// Writes `writes` to `resource` if `fence` is not older than the one it accepted last;
    /// answers the fence now accepted.
    fn fenced_apply(
        &self,
        py: Python<'_>,
        resource: String,
        fence: u64,
        writes: &Bound<'_, pyo3::types::PyList>,
    ) -> PyResult<u64> {
        let writes = crate::fenced::writes(&resource, writes)?;
        let store = self
            .client()?
            .fenced_store(resource)
            .map_err(|e| to_py(py, &e))?;
        runtime::wait(py, async move { store.apply(fence, &writes).await })?
            .map_err(|e| to_py(py, &e))
    }

    /// `fenced_apply`, answering `done`.
    fn fenced_apply_async(
        &self,
        py: Python<'_>,
        resource: String,
        fence: u64,
        writes: &Bound<'_, pyo3::types::PyList>,
        done: Py<PyAny>,
    ) -> PyResult<Pending> {
        let writes = crate::fenced::writes(&resource, writes)?;
        let store = self
            .client()?
            .fenced_store(resource)
            .map_err(|e| to_py(py, &e))?;
        runtime::spawn(
            async move { store.apply(fence, &writes).await },
            |py, result| match result {
                Ok(fence) => Ok(fence.into_pyobject(py)?.into_any().unbind()),
                Err(e) => Err(to_py(py, &e)),
            },
            done,
        )
    }

    /// The fence `resource` accepted last (0: none yet).
    fn fenced_accepted(&self, py: Python<'_>, resource: String) -> PyResult<u64> {
        let store = self
            .client()?
            .fenced_store(resource)
            .map_err(|e| to_py(py, &e))?;
        runtime::wait(py, async move { store.accepted().await })?.map_err(|e| to_py(py, &e))
    }

    fn __repr__(&self) -> String {
        match self.client() {
            Ok(client) => format!("<fencelock.Client {}>", client.server()),
            Err(_) => "<fencelock.Client>".to_owned(),
        }
    }
}

impl Client {
    /// The Rust client of this process (built afresh in a forked child).
    fn client(&self) -> PyResult<fencelock::Client> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(client) = current.as_ref().and_then(|owner| owner.get()) {
            return Ok(client.clone());
        }
        let runtime = runtime::runtime()?;
        // `build` starts the client's background tasks on the runtime it is called in.
        let _entered = runtime.enter();
        let client = self
            .builder()
            .build()
            .map_err(|e| Python::attach(|py| to_py(py, &e)))?;
        // A client of the parent process is forgotten by `Owner`'s drop, never dropped here.
        *current = Some(Owner::new(client.clone()));
        Ok(client)
    }

    fn builder(&self) -> ClientBuilder {
        let mut builder = match &self.topology {
            Topology::Server(url) => fencelock::Client::builder(url),
            Topology::Redlock(urls) => fencelock::Client::redlock(urls),
            Topology::Cluster(urls) => fencelock::Client::cluster(urls),
            Topology::Sentinel(urls, master) => fencelock::Client::sentinel(urls, master),
        };
        let options = &self.options;
        if let Some(prefix) = &options.key_prefix {
            builder = builder.key_prefix(prefix.clone());
        }
        if let Some(timeout) = options.command_timeout {
            builder = builder.command_timeout(timeout);
        }
        if let Some(timeout) = options.instance_timeout {
            builder = builder.instance_timeout(timeout);
        }
        if let Some(ca) = &options.tls_ca_file {
            builder = builder.tls_ca_file(ca);
        }
        if let Some((cert, key)) = &options.tls_client_cert {
            builder = builder.tls_client_cert_files(cert, key);
        }
        if let Some(password) = &options.master_password {
            builder = builder.master_credentials(options.master_username.as_deref(), password);
        }
        builder
    }
}

fn config_error(reason: &str) -> PyErr {
    let message = format!("invalid fencelock configuration: {reason}");
    crate::errors::python_error(
        "ConfigError",
        message,
        &[("lock", None), ("reason", Some(reason))],
    )
}

/// A reentrant lock's handle.
#[pyclass(module = "fencelock._native", frozen)]
pub struct Reentrant {
    #[pyo3(get)]
    name: String,
    handle: Owner<ReentrantLock>,
}

impl Reentrant {
    fn request(&self, spec: &Spec) -> PyResult<fencelock::LockRequest> {
        let handle = self.handle.get().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "the reentrant lock {:?} was made by process {} before it forked; make a new one in this process",
                self.name,
                self.handle.pid()
            ))
        })?;
        Ok(spec.configure(handle.request()))
    }
}

#[pymethods]
impl Reentrant {
    /// Acquires the lock (again, if this handle holds it); with `try_only`, `None` if another
    /// owner holds it.
    #[pyo3(signature = (spec, try_only=false))]
    fn acquire(&self, py: Python<'_>, spec: &Spec, try_only: bool) -> PyResult<Option<Guard>> {
        acquire_blocking(py, self.request(spec)?, try_only)
    }

    /// `acquire`, answering `done`.
    #[pyo3(signature = (spec, done, try_only=false))]
    fn acquire_async(&self, spec: &Spec, done: Py<PyAny>, try_only: bool) -> PyResult<Pending> {
        let request = self.request(spec)?;
        runtime::spawn(acquire(request, try_only), convert_guard, done)
    }
}

/// Waits for `request` with the GIL released.
fn acquire_blocking(
    py: Python<'_>,
    request: fencelock::LockRequest,
    try_only: bool,
) -> PyResult<Option<Guard>> {
    let result = runtime::wait(py, acquire(request, try_only))?;
    result
        .map(|held| held.map(Guard::new))
        .map_err(|e| to_py(py, &e))
}

async fn acquire(
    request: fencelock::LockRequest,
    try_only: bool,
) -> fencelock::Result<Option<LockGuard>> {
    if try_only {
        request.try_acquire().await
    } else {
        request.acquire().await.map(Some)
    }
}

fn convert_guard(
    py: Python<'_>,
    result: fencelock::Result<Option<LockGuard>>,
) -> PyResult<Py<PyAny>> {
    match result {
        Ok(Some(guard)) => Ok(Py::new(py, Guard::new(guard))?.into_any()),
        Ok(None) => Ok(py.None()),
        Err(e) => Err(to_py(py, &e)),
    }
}
