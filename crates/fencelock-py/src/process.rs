//! The state fencelock keeps per process: the Tokio runtime, the thread that answers Python,
//! the background work that exit waits for, and what is still held when the interpreter ends.
//!
//! **Fork.** After `os.fork()` the child has none of the parent's threads, so nothing of the
//! parent's runtime may be used or dropped there (a dropped socket would even take the parent's
//! registration out of the epoll instance both processes share). `os.register_at_fork` bumps a
//! generation in the child ([`forked`]); every object that owns runtime state carries the
//! generation that made it ([`Owned`]), and in a later generation it is refused, and forgotten
//! rather than dropped. A fresh [`Process`] is made on first use in the child.
//!
//! **Locks.** The mutexes here are locked only by threads that hold the GIL, and never across a
//! release of the GIL: the thread that forks holds the GIL, so no other thread can hold one of
//! them at the fork, and the child never finds one locked by a thread it does not have.
//!
//! **Answers.** A task of the runtime never takes the GIL itself (a Python thread may hold it
//! for long, and the renewals that keep every lock of the process alive must not wait for it):
//! it queues the call, and one thread per process, [`deliver`](Process::deliver)'s, takes the
//! GIL and makes the calls in the order they were queued.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub use fencelock_bind::held::Task;
use fencelock_bind::keeper::{After, Keeper};
pub use fencelock_bind::keeper::{Busy, FLUSH};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::gil;
use crate::logging::{self, Job};

/// What a guard, a leadership, a multi-lock guard or a run keeps of the process and client that
/// made it.
pub type Context = fencelock_bind::kept::Context<Arc<Process>>;

/// Bumped in a child process right after `fork()`.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The process's state, made on first use in each generation.
static CURRENT: Mutex<Option<Arc<Process>>> = Mutex::new(None);

/// The generation of the running process (0 in the process that imported fencelock, one more in
/// each forked child).
pub fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}

/// Called in a forked child (`os.register_at_fork(after_in_child=...)`): everything made before
/// belongs to the parent.
#[pyfunction]
pub fn _forked() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
    gil::forked();
}

/// One process's runtime, answering thread and background work.
pub struct Process {
    generation: u64,
    runtime: &'static Runtime,
    answers: mpsc::Sender<Job>,
    /// The background work the package leaves running when it returns to Python (releases of
    /// guards dropped unreleased, the clean-up of cancelled calls), the clients, and what to
    /// end at exit.
    keeper: Arc<Keeper>,
}

impl Process {
    /// The process's state (made on first use, and again in a forked child).
    pub fn get(py: Python<'_>) -> PyResult<Arc<Process>> {
        logging::refresh(py, false);
        let generation = generation();
        let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(process) = current.as_ref()
            && process.generation == generation
        {
            return Ok(process.clone());
        }
        let process = Arc::new(Process::start(generation)?);
        // The state of a parent process is forgotten: its runtime has no threads here.
        if let Some(parent) = current.replace(process.clone()) {
            std::mem::forget(parent);
        }
        Ok(process)
    }

    fn start(generation: u64) -> PyResult<Process> {
        let (answers, queue) = mpsc::channel::<Job>();
        let sink = answers.clone();
        let runtime = fencelock_bind::keeper::runtime_builder()
            .on_thread_start(move || logging::set_sink(sink.clone()))
            .build()
            .map_err(|e| {
                PyRuntimeError::new_err(format!("fencelock could not start its runtime: {e}"))
            })?;
        // Never dropped: a runtime of a parent process has no threads to stop, and this
        // process's lives as long as the interpreter.
        let runtime: &'static Runtime = Box::leak(Box::new(runtime));
        std::thread::Builder::new()
            .name("fencelock-answers".into())
            .spawn(move || answer(&queue))
            .map_err(|e| {
                PyRuntimeError::new_err(format!("fencelock could not start a thread: {e}"))
            })?;
        Ok(Process {
            generation,
            runtime,
            answers,
            keeper: Keeper::new(runtime.handle().clone()),
        })
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The keeper of the process's background work, clients and holds.
    pub fn keeper(&self) -> &Arc<Keeper> {
        &self.keeper
    }

    /// What a hold made now with `client` keeps of them.
    pub fn context(self: &Arc<Self>, client: Arc<fencelock::Client>) -> Context {
        Context {
            keeper: self.keeper.clone(),
            home: self.clone(),
            client,
        }
    }

    pub fn runtime(&self) -> &'static Runtime {
        self.runtime
    }

    /// Queues `job` for the answering thread (from any thread; it never waits).
    pub fn deliver(&self, job: impl FnOnce(Python<'_>) + Send + 'static) {
        if !gil::shutting_down() {
            // The thread is gone only when the process is: nobody to answer then.
            let _ = self.answers.send(Box::new(job));
        }
    }

    /// Runs `task` on the runtime as background work that exit waits for.
    pub fn background(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.keeper.background(task);
    }

    /// Counts background work that exit waits for, until the [`Busy`] is dropped.
    pub fn busy(&self) -> Busy {
        self.keeper.busy()
    }

    /// Remembers `client` for the exit's wait for its background work.
    pub fn add_client(&self, client: &Arc<fencelock::Client>) {
        self.keeper.add_client(client);
    }

    /// The interpreter's exit: stops the waits, gives back the results nobody took and what is
    /// still held, then waits for the background work, all within [`FLUSH`]. The keeper stays
    /// ended: a call that waits stops at once from then on, and a hold or a result made later
    /// is given back at once.
    fn shut_down(&self, py: Python<'_>) {
        let end = self.keeper.end_all(FLUSH, After::Ended);
        py.detach(|| self.runtime.block_on(end));
    }
}

/// Whether the answering thread is making calls into Python now (exit waits until it is not,
/// so that it never holds the GIL while the interpreter finalizes).
static ANSWERING: AtomicBool = AtomicBool::new(false);

/// The answering thread: takes the GIL for each call, and for the calls queued meanwhile.
fn answer(queue: &mpsc::Receiver<Job>) {
    while let Ok(job) = queue.recv() {
        ANSWERING.store(true, Ordering::SeqCst);
        if gil::shutting_down() {
            ANSWERING.store(false, Ordering::SeqCst);
            continue;
        }
        // Not during the interpreter's finalization: nobody waits for an answer then.
        let _ = Python::try_attach(|py| {
            job(py);
            // What arrived meanwhile, without giving the GIL back in between (a few at most,
            // so that Python's threads are not kept waiting).
            for _ in 0..64 {
                match queue.try_recv() {
                    Ok(job) => job(py),
                    Err(_) => break,
                }
            }
        });
        ANSWERING.store(false, Ordering::SeqCst);
    }
}

/// The interpreter's exit (`atexit`): releases what is still held, waits at most [`FLUSH`] for
/// the background work (a waiter leaving its place, a dropped guard's release), then stops
/// calling into Python.
#[pyfunction]
pub fn _shutdown(py: Python<'_>) {
    // This thread finalizes the interpreter next: it never parks.
    gil::ending_here();
    let process = CURRENT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .filter(|p| p.generation == generation());
    if let Some(process) = process {
        process.shut_down(py);
    }
    gil::shut_down();
    // The answering thread ends the calls it is making (it needs the GIL for that) and makes
    // no more; the Python threads inside fencelock's native code get out of it (or park).
    py.detach(|| {
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while (ANSWERING.load(Ordering::SeqCst) || gil::inside_now())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Runtime state that belongs to the generation (the process) that made it.
///
/// In a forked child, [`get`](Owned::get) refuses it and dropping it forgets it: the value is
/// never touched there.
pub struct Owned<T> {
    generation: u64,
    value: Option<T>,
}

impl<T> Owned<T> {
    /// Wraps a value made by this process.
    pub fn new(value: T) -> Self {
        Owned {
            generation: generation(),
            value: Some(value),
        }
    }

    /// The value, if this is the process that made it.
    pub fn get(&self) -> Option<&T> {
        if self.generation == generation() {
            self.value.as_ref()
        } else {
            None
        }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if self.generation != generation() {
            std::mem::forget(self.value.take());
        }
    }
}
