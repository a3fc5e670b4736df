//! What a package keeps per process (per worker thread, in Node.js): the background work it
//! leaves running when it returns to its language (the release of a guard dropped unreleased, a
//! cancelled waiter leaving its place), the clients made, the holds to give back when the
//! process ends, and the results of calls on their way to the language (a grant its language
//! has not taken yet). [`end_all`](Keeper::end_all) is that end, within a limit: it stops the
//! calls first, then gives back the results nobody took and the holds, and from its start a
//! hold or a result that comes after is given back at once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use fencelock::{Count, Flag};
use tokio::runtime::Handle;

use crate::held::{EndAtExit, Task};

/// How long a process's end waits for what is left to the background (a waiter leaving its
/// place in line, a release), and a cancelled call for its own give-back.
pub const FLUSH: Duration = Duration::from_secs(2);

/// How long a client's close waits for its background work (the give-backs of the calls it
/// ended, a release retried) before it closes the client's connections (the library's
/// `Client::close`): a give-back still on its way then is left to its lease.
pub const CLOSE_IDLE: Duration = FLUSH;

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
    /// The results made that their language has not taken yet.
    unclaimed: Mutex<HashMap<u64, Weak<dyn Unclaimed>>>,
    next_id: AtomicU64,
}

/// What the end leaves behind it (see [`Keeper::end_all`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum After {
    /// The keeper is usable again (an explicit end, in a program that goes on).
    Reopen,
    /// The keeper stays ended (the process's end): a call that waits stops at once, and a hold
    /// or a result made later is given back at once.
    Ended,
}

/// A result a call made that its language has not taken yet (a grant on its way to the
/// caller): the end takes it and gives it back, unless the language took it first.
pub trait Unclaimed: Send + Sync {
    /// Takes the result, if nobody has, and gives it back: what does.
    fn give_back(&self) -> Option<Task>;
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
            unclaimed: Mutex::new(HashMap::new()),
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
    /// ([`end_client`](Self::end_client)); its id. Once the end has begun, it is given back at
    /// once instead (in the background, which the end waits for).
    pub fn add_held(
        self: &Arc<Self>,
        client: &Arc<fencelock::Client>,
        held: Weak<dyn EndAtExit>,
    ) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let late = {
            let mut holds = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            // Under the lock the end lists the holds with, after it raised the flag: a hold is
            // either listed by the end or sees the flag here.
            if self.ending.is_up() {
                held.upgrade()
            } else {
                let held = Held {
                    client: client_key(client),
                    hold: held,
                };
                holds.insert(id, held);
                None
            }
        };
        if let Some(late) = late {
            self.background(late.end());
        }
        id
    }

    /// Remembers `result` until its language takes it ([`forget_unclaimed`]), for the end to
    /// give back if nobody has by then: its id. `None` once the end has begun: the caller gives
    /// it back at once. Called once the result is there (or with its own lock held until it
    /// is), so that the end cannot look at it before.
    ///
    /// [`forget_unclaimed`]: Self::forget_unclaimed
    pub fn add_unclaimed(&self, result: Weak<dyn Unclaimed>) -> Option<u64> {
        let mut unclaimed = self
            .unclaimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // As in `add_held`: listed by the end, or the flag seen here.
        if self.ending.is_up() {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        unclaimed.insert(id, result);
        Some(id)
    }

    /// Forgets a result its language took.
    pub fn forget_unclaimed(&self, id: u64) {
        self.unclaimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }

    /// Keeps `value`, a call's result on its way to its language, until it is
    /// [claimed](Delivery::claim); the end gives it back with `undo` if nobody has by then (and
    /// a delivery dropped unclaimed gives it back too). Once the end has begun, it is given back
    /// at once: the delivery then claims nothing.
    pub fn deliver<T, U>(self: &Arc<Self>, value: T, undo: U) -> Delivery<T, U>
    where
        T: Send + 'static,
        U: FnOnce(T) -> Option<Task> + Send + 'static,
    {
        let slot = Arc::new(Slot(Mutex::new(Some((value, undo)))));
        let weak: Weak<dyn Unclaimed> = Arc::downgrade(&slot) as Weak<dyn Unclaimed>;
        let id = self.add_unclaimed(weak);
        if id.is_none()
            && let Some(undone) = slot.give_back()
        {
            self.background(undone);
        }
        Delivery {
            slot,
            keeper: self.clone(),
            id,
        }
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

    /// The end: stops the calls still waiting, then gives back the results nobody took and
    /// what is still held, then waits for the background work (of the package and of every
    /// client), all within `limit`; `after` says whether the keeper is usable again then.
    /// Whether it all finished in time.
    ///
    /// The calls stop first, so that a grant that lands while the end runs is not missed: from
    /// the moment the end begins, a call that waits stops at once, and a hold or a result made
    /// later is given back at once ([`add_held`](Self::add_held),
    /// [`add_unclaimed`](Self::add_unclaimed)).
    pub fn end_all(
        self: &Arc<Self>,
        limit: Duration,
        after: After,
    ) -> impl Future<Output = bool> + Send + 'static {
        let keeper = self.clone();
        // Raised now, not when the future is first polled: what comes from here on is the
        // end's.
        keeper.ending.raise();
        async move {
            let deadline = tokio::time::Instant::now() + limit;
            // The calls still waiting stop first: a waiter leaves its place in line (work it
            // hands to its client's background, which the wait below includes), and a call
            // that was granted meanwhile leaves its result to the lists below.
            let stopped = tokio::time::timeout_at(deadline, keeper.running.zero())
                .await
                .is_ok();
            let mut ends: Vec<Task> = keeper.take_unclaimed();
            {
                let held = keeper.held.lock().unwrap_or_else(PoisonError::into_inner);
                ends.extend(
                    held.values()
                        .filter_map(|h| h.hold.upgrade())
                        .map(EndAtExit::end),
                );
            }
            let clients = keeper.live_clients();
            let ended =
                tokio::time::timeout_at(deadline, futures_util::future::join_all(ends)).await;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let idle = keeper.idle(&clients, left).await;
            if after == After::Reopen {
                keeper.ending.lower();
            }
            stopped && idle && ended.is_ok()
        }
    }

    /// The give-backs of every result nobody took (each taken from its slot here).
    fn take_unclaimed(&self) -> Vec<Task> {
        let unclaimed: Vec<Weak<dyn Unclaimed>> = {
            let mut unclaimed = self
                .unclaimed
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            unclaimed.drain().map(|(_, result)| result).collect()
        };
        unclaimed
            .iter()
            .filter_map(Weak::upgrade)
            .filter_map(|result| result.give_back())
            .collect()
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

/// A call's result on its way to its language (see [`Keeper::deliver`]).
pub struct Delivery<T, U>
where
    T: Send + 'static,
    U: FnOnce(T) -> Option<Task> + Send + 'static,
{
    slot: Arc<Slot<T, U>>,
    keeper: Arc<Keeper>,
    /// Its entry among the results the end gives back (none once the end had begun).
    id: Option<u64>,
}

impl<T, U> Delivery<T, U>
where
    T: Send + 'static,
    U: FnOnce(T) -> Option<Task> + Send + 'static,
{
    /// The result and what undoes it, unless the end gave it back first.
    pub fn claim(self) -> Option<(T, U)> {
        self.slot.take()
    }
}

impl<T, U> Drop for Delivery<T, U>
where
    T: Send + 'static,
    U: FnOnce(T) -> Option<Task> + Send + 'static,
{
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.keeper.forget_unclaimed(id);
        }
        // Dropped unclaimed (its language's queue gone): given back.
        if let Some(undone) = self.slot.give_back() {
            self.keeper.background(undone);
        }
    }
}

/// A delivery's result and what undoes it, until someone takes them.
struct Slot<T, U>(Mutex<Option<(T, U)>>);

impl<T, U> Slot<T, U> {
    fn take(&self) -> Option<(T, U)> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl<T, U> Unclaimed for Slot<T, U>
where
    T: Send + 'static,
    U: FnOnce(T) -> Option<Task> + Send + 'static,
{
    fn give_back(&self) -> Option<Task> {
        let (value, undo) = self.take()?;
        undo(value)
    }
}

#[cfg(test)]
mod tests;
