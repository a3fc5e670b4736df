//! What a package keeps per process (per worker thread, in Node.js): the background work it
//! leaves running when it returns to its language (the release of a guard dropped unreleased, a
//! cancelled waiter leaving its place), the clients made, and the holds to give back when the
//! process ends. [`end_all`](Keeper::end_all) is that end, within a limit.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::runtime::Handle;

use crate::count::{Count, Flag};
use crate::held::{EndAtExit, Task};

/// How long a process's end waits for what is left to the background (a waiter leaving its
/// place in line, a release), and a cancelled call for its own give-back.
pub const FLUSH: Duration = Duration::from_secs(2);

/// The runtime a package runs the library on, to build (with `enable_all` and any hook of its
/// own): the library only moves bytes and timers, and the language's threads are the other
/// half of the work. Half the cores (one on a 2-core machine, where the Python benchmark's
/// cycles are ~10 % faster than with two), at most four; `FENCELOCK_THREADS` overrides.
pub fn runtime_builder() -> tokio::runtime::Builder {
    let threads = std::env::var("FENCELOCK_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| (1..=64).contains(n))
        .unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4))
        });
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(threads)
        .thread_name("fencelock")
        .enable_all();
    builder
}

/// One process's background work, clients and holds (see the module docs).
pub struct Keeper {
    runtime: Handle,
    background: Count,
    /// The calls that the end stops (a wait, a read), and the signal that stops them.
    running: Count,
    ending: Flag,
    clients: Mutex<Vec<Weak<fencelock::Client>>>,
    held: Mutex<HashMap<u64, Held>>,
    next_id: AtomicU64,
}

/// A hold the end gives back: whose client made it (the client's address, as
/// [`client_key`] gives it), and the hold.
struct Held {
    client: usize,
    hold: Weak<dyn EndAtExit>,
}

/// A client's identity among the holds: its address (a hold keeps its client alive, so no
/// other client has it while the hold is remembered).
fn client_key(client: &Arc<fencelock::Client>) -> usize {
    Arc::as_ptr(client) as usize
}

impl Keeper {
    /// A keeper whose background work runs on `runtime`.
    pub fn new(runtime: Handle) -> Arc<Keeper> {
        Arc::new(Keeper {
            runtime,
            background: Count::default(),
            running: Count::default(),
            ending: Flag::default(),
            clients: Mutex::new(Vec::new()),
            held: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        })
    }

    /// The runtime the work runs on.
    pub fn runtime(&self) -> &Handle {
        &self.runtime
    }

    /// Runs `task` on the runtime as background work that the end waits for.
    pub fn background(self: &Arc<Self>, task: impl Future<Output = ()> + Send + 'static) {
        let busy = self.busy();
        self.runtime.spawn(async move {
            task.await;
            drop(busy);
        });
    }

    /// Counts background work that the end waits for, until the [`Busy`] is dropped.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.background.up();
        Busy(self.clone())
    }

    /// Counts a call that the end stops (a wait for a lock, a read), until the [`Running`] is
    /// dropped; the call selects on [`Running::ended`] and stops when it fires.
    pub fn running(self: &Arc<Self>) -> Running {
        self.running.up();
        Running(self.clone())
    }

    /// Remembers `client` for the end's wait for its background work.
    pub fn add_client(&self, client: &Arc<fencelock::Client>) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|c| c.strong_count() > 0);
        clients.push(Arc::downgrade(client));
    }

    /// Remembers `held`, a hold of `client`'s, to end it at the end (until
    /// [`forget_held`](Self::forget_held)) or when the client closes
    /// ([`end_client`](Self::end_client)); its id.
    pub fn add_held(&self, client: &Arc<fencelock::Client>, held: Weak<dyn EndAtExit>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let held = Held {
            client: client_key(client),
            hold: held,
        };
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, held);
        id
    }

    /// Gives back what `client`'s holds still hold (a client's close): done when every
    /// give-back is.
    pub fn end_client(
        &self,
        client: &Arc<fencelock::Client>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let key = client_key(client);
        let ends: Vec<Task> = {
            let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            held.values()
                .filter(|h| h.client == key)
                .filter_map(|h| h.hold.upgrade())
                .map(EndAtExit::end)
                .collect()
        };
        async move {
            futures_util::future::join_all(ends).await;
        }
    }

    pub fn forget_held(&self, id: u64) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// How many holds are kept now.
    pub fn held_count(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.values().filter(|h| h.hold.strong_count() > 0).count()
    }

    /// Waits, at most `limit`, until the background work of the package and of `clients` is
    /// done; whether it is.
    pub async fn idle(&self, clients: &[Arc<fencelock::Client>], limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let ours = tokio::time::timeout_at(deadline, self.background.zero())
            .await
            .is_ok();
        let mut theirs = true;
        for client in clients {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            theirs &= client.wait_idle(left).await;
        }
        ours && theirs
    }

    /// The clients still in use.
    fn live_clients(&self) -> Vec<Arc<fencelock::Client>> {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The end: stops the calls still waiting, gives back what is still held, then waits for the background work (of the
    /// package and of every client), all within `limit`. Whether it all finished in time.
    pub fn end_all(&self, limit: Duration) -> impl Future<Output = bool> + Send + '_ {
        let ends: Vec<Task> = {
            let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            held.values()
                .filter_map(|h| h.hold.upgrade())
                .map(EndAtExit::end)
                .collect()
        };
        let clients = self.live_clients();
        async move {
            let deadline = tokio::time::Instant::now() + limit;
            // The calls still waiting stop first: a waiter leaves its place in line (work it
            // hands to its client's background, which the wait below includes).
            self.ending.raise();
            let stopped = tokio::time::timeout_at(deadline, self.running.zero())
                .await
                .is_ok();
            let ended =
                tokio::time::timeout_at(deadline, futures_util::future::join_all(ends)).await;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let idle = self.idle(&clients, left).await;
            // Usable again (an explicit end, in a program that goes on).
            self.ending.lower();
            stopped && idle && ended.is_ok()
        }
    }
}

/// Background work in progress (see [`Keeper::busy`]).
pub struct Busy(Arc<Keeper>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.background.down();
    }
}

/// A call that the end stops (see [`Keeper::running`]).
pub struct Running(Arc<Keeper>);

impl Running {
    /// Over when the end begins.
    pub async fn ended(&mut self) {
        self.0.ending.raised().await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.down();
    }
}
