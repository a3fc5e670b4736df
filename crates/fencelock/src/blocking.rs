//! A blocking facade for programs that are not async: the same locks, with the same semantics,
//! driven by a small runtime that this client owns.
//!
//! ```no_run
//! # fn main() -> fencelock::Result<()> {
//! let client = fencelock::blocking::Client::open("redis://127.0.0.1:6379")?;
//! let guard = client.lock("nightly-report").acquire()?;
//! println!("fence {}", guard.fence());
//! guard.release()?;
//! # Ok(()) }
//! ```
//!
//! Do not use it from inside an async runtime (its calls block the calling thread); use the async
//! [`Client`](crate::Client) there.
//!
//! It offers what the async client does, with one exception: following a lock's releases
//! ([`crate::Client::releases`], a `Stream`) has no blocking twin, since a watch is a loop over
//! events that an async program (or [`Client::as_async`] inside a runtime of your own) expresses
//! better than a blocking iterator. An election's leaders ([`Election::observe`]) are a blocking
//! iterator all the same, since an observer that is not async has no other way to follow them.
//! Every deployment is reached through
//! [`Client::from_builder`].

use std::sync::Arc;
use std::time::Duration;

pub use crate::election::blocking::{Campaign, Election, Leadership, Observer};
use crate::engine::WaitPolicy;
use crate::error::{Error, LostReason, Result};

/// A blocking client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Client {
    runtime: Arc<tokio::runtime::Runtime>,
    inner: crate::Client,
}

impl Client {
    /// A client for the server at `url`, with the default options.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::open`].
    pub fn open(url: &str) -> Result<Client> {
        Self::from_builder(crate::Client::builder(url))
    }

    /// A client from a configured async builder: any deployment (one server, Redlock, Cluster,
    /// Sentinel) with its options.
    ///
    /// ```no_run
    /// # fn main() -> fencelock::Result<()> {
    /// let client = fencelock::blocking::Client::from_builder(fencelock::Client::redlock([
    ///     "redis://10.0.0.1:6379",
    ///     "redis://10.0.0.2:6379",
    ///     "redis://10.0.0.3:6379",
    /// ]))?;
    /// # drop(client); Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`crate::ClientBuilder::build`]; [`Error::Config`] if the runtime cannot start.
    pub fn from_builder(builder: crate::ClientBuilder) -> Result<Client> {
        // One worker thread runs the watchdog and the release listener while the caller's
        // thread does its own work.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fencelock")
            .enable_all()
            .build()
            .map_err(|e| Error::Config {
                reason: format!("cannot start the fencelock runtime: {e}"),
            })?;
        let inner = {
            let _entered = runtime.enter();
            builder.build()?
        };
        Ok(Client {
            runtime: Arc::new(runtime),
            inner,
        })
    }

    /// The async client underneath.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// Starts a request for lock `name`.
    pub fn lock(&self, name: impl Into<String>) -> LockRequest {
        self.request(self.inner.lock(name))
    }

    /// An owner handle for the reentrant lock `name`; see [`crate::Client::reentrant_lock`].
    pub fn reentrant_lock(&self, name: impl Into<String>) -> ReentrantLock {
        ReentrantLock {
            runtime: self.runtime.clone(),
            inner: self.inner.reentrant_lock(name),
        }
    }

    /// An owner handle for the read-write lock `name`; see [`crate::Client::read_write_lock`].
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock {
            runtime: self.runtime.clone(),
            inner: self.inner.read_write_lock(name),
        }
    }

    /// A request for one permit of semaphore `name`; see [`crate::Client::semaphore`].
    pub fn semaphore(&self, name: impl Into<String>, permits: u32) -> LockRequest {
        self.request(self.inner.semaphore(name, permits))
    }

    /// A request for the fair lock `name`; see [`crate::Client::fair_lock`].
    pub fn fair_lock(&self, name: impl Into<String>) -> LockRequest {
        self.request(self.inner.fair_lock(name))
    }

    /// The election `name`; see [`crate::Client::election`].
    pub fn election(&self, name: impl Into<String>) -> Election {
        Election::new(self.runtime.clone(), self.inner.election(name))
    }

    fn request(&self, inner: crate::LockRequest) -> LockRequest {
        LockRequest::new(&self.runtime, inner)
    }

    /// Takes lock `name` if it is free now; `Ok(None)` if another owner holds it.
    pub fn try_lock(&self, name: impl Into<String>) -> Result<Option<LockGuard>> {
        self.lock(name).try_acquire()
    }

    /// See [`crate::Client::inspect`].
    ///
    /// # Errors
    ///
    /// As [`crate::Client::inspect`].
    pub fn inspect(&self, name: impl Into<String>) -> Result<crate::admin::LockInfo> {
        self.runtime.block_on(self.inner.inspect(name))
    }

    /// See [`crate::Client::list`].
    ///
    /// # Errors
    ///
    /// As [`crate::Client::list`].
    pub fn list(&self, pattern: &str) -> Result<crate::admin::Listing> {
        self.runtime.block_on(self.inner.list(pattern))
    }

    /// See [`crate::Client::force_release`].
    ///
    /// # Errors
    ///
    /// As [`crate::Client::force_release`].
    pub fn force_release(&self, name: impl Into<String>) -> Result<bool> {
        self.runtime.block_on(self.inner.force_release(name))
    }

    /// See [`crate::Client::request_release`].
    ///
    /// # Errors
    ///
    /// As [`crate::Client::request_release`].
    pub fn request_release(&self, name: impl Into<String>) -> Result<bool> {
        self.runtime.block_on(self.inner.request_release(name))
    }

    /// See [`crate::Client::wait_idle`].
    pub fn wait_idle(&self, limit: Duration) -> bool {
        self.runtime.block_on(self.inner.wait_idle(limit))
    }

    /// Closes the client: see [`crate::Client::close`]. Its release listeners end, its
    /// connections are dropped (their sockets close), and every later call through it or
    /// anything made from it fails at once with [`Error::Closed`]. Holds
    /// still held are not released: release them first.
    ///
    /// ```no_run
    /// # fn example() -> fencelock::Result<()> {
    /// let client = fencelock::blocking::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.lock("migrations").acquire()?;
    /// guard.release()?;
    /// client.close();
    /// assert_eq!(client.lock("migrations").acquire().unwrap_err().code(), "closed");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// None: closing cannot fail (as [`crate::Client::close`]).
    pub fn close(&self) {
        self.runtime.block_on(self.inner.close());
    }

    /// See [`crate::Client::is_closed`].
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The fenced resource `resource` on this client's Redis (see [`crate::fenced`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::fenced_store`].
    pub fn fenced_store(&self, resource: impl Into<String>) -> Result<FencedStore> {
        Ok(FencedStore {
            runtime: self.runtime.clone(),
            inner: self.inner.fenced_store(resource)?,
        })
    }
}

/// An owner of a reentrant lock (blocking); see [`crate::ReentrantLock`]. Clones are the same
/// owner.
#[derive(Debug, Clone)]
pub struct ReentrantLock {
    runtime: Arc<tokio::runtime::Runtime>,
    inner: crate::ReentrantLock,
}

impl ReentrantLock {
    /// See [`crate::ReentrantLock::max_reentry`].
    pub fn max_reentry(mut self, limit: u32) -> Self {
        self.inner = self.inner.max_reentry(limit);
        self
    }
    /// See [`crate::ReentrantLock::request`].
    pub fn request(&self) -> LockRequest {
        LockRequest::new(&self.runtime, self.inner.request())
    }
    /// Takes one hold, blocking as long as it takes.
    pub fn acquire(&self) -> Result<LockGuard> {
        self.request().acquire()
    }
}

/// An owner of a read-write lock (blocking); see [`crate::ReadWriteLock`].
#[derive(Debug, Clone)]
pub struct ReadWriteLock {
    runtime: Arc<tokio::runtime::Runtime>,
    inner: crate::ReadWriteLock,
}

impl ReadWriteLock {
    /// See [`crate::ReadWriteLock::read`].
    pub fn read(&self) -> LockRequest {
        LockRequest::new(&self.runtime, self.inner.read())
    }
    /// See [`crate::ReadWriteLock::write`].
    pub fn write(&self) -> LockRequest {
        LockRequest::new(&self.runtime, self.inner.write())
    }
}

/// A blocking lock request; see [`crate::LockRequest`] for each option.
#[derive(Debug)]
#[must_use = "a lock request does nothing until acquired"]
pub struct LockRequest {
    runtime: Arc<tokio::runtime::Runtime>,
    inner: crate::LockRequest,
}

impl LockRequest {
    fn new(runtime: &Arc<tokio::runtime::Runtime>, inner: crate::LockRequest) -> Self {
        LockRequest {
            runtime: runtime.clone(),
            inner,
        }
    }

    /// See [`crate::LockRequest::ttl`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.inner = self.inner.ttl(ttl);
        self
    }
    /// See [`crate::LockRequest::wait`].
    pub fn wait(mut self, wait: WaitPolicy) -> Self {
        self.inner = self.inner.wait(wait);
        self
    }
    /// See [`crate::LockRequest::no_wait`].
    pub fn no_wait(self) -> Self {
        self.wait(WaitPolicy::NoWait)
    }
    /// See [`crate::LockRequest::wait_up_to`].
    pub fn wait_up_to(self, limit: Duration) -> Self {
        self.wait(WaitPolicy::UpTo(limit))
    }
    /// See [`crate::LockRequest::wait_until`].
    pub fn wait_until(self, deadline: std::time::Instant) -> Self {
        self.wait(WaitPolicy::Until(deadline.into()))
    }
    /// See [`crate::LockRequest::auto_renew`].
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.inner = self.inner.auto_renew(on);
        self
    }
    /// See [`crate::LockRequest::lock_delay`].
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.inner = self.inner.lock_delay(delay);
        self
    }
    /// See [`crate::LockRequest::max_hold`].
    pub fn max_hold(mut self, limit: Duration) -> Self {
        self.inner = self.inner.max_hold(limit);
        self
    }
    /// See [`crate::LockRequest::queue_timeout`].
    pub fn queue_timeout(mut self, timeout: Duration) -> Self {
        self.inner = self.inner.queue_timeout(timeout);
        self
    }
    /// See [`crate::LockRequest::label`].
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.inner = self.inner.label(label);
        self
    }

    /// Takes the lock, blocking as the wait policy allows.
    pub fn acquire(self) -> Result<LockGuard> {
        let inner = self.runtime.block_on(self.inner.acquire())?;
        Ok(LockGuard {
            runtime: self.runtime,
            inner: Some(inner),
        })
    }

    /// Takes the lock if it is free now; `Ok(None)` if another owner holds it.
    pub fn try_acquire(self) -> Result<Option<LockGuard>> {
        let runtime = self.runtime;
        let inner = runtime.block_on(self.inner.try_acquire())?;
        Ok(inner.map(|inner| LockGuard {
            runtime,
            inner: Some(inner),
        }))
    }
}

/// A held lock (blocking); see [`crate::LockGuard`]. Dropping it releases the lock before
/// `drop` returns (bounded by the command time limit); if it is dropped inside an async runtime,
/// where blocking is not allowed, the release happens in the background instead.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    runtime: Arc<tokio::runtime::Runtime>,
    // Always `Some` until `release` takes it.
    inner: Option<crate::LockGuard>,
}

impl LockGuard {
    fn guard(&self) -> &crate::LockGuard {
        match &self.inner {
            Some(guard) => guard,
            None => unreachable!("the guard is only taken by release, which consumes self"),
        }
    }

    /// See [`crate::LockGuard::name`].
    pub fn name(&self) -> &str {
        self.guard().name()
    }
    /// See [`crate::LockGuard::fence`].
    pub fn fence(&self) -> u64 {
        self.guard().fence()
    }
    /// See [`crate::LockGuard::deadline`].
    pub fn deadline(&self) -> std::time::Instant {
        self.guard().deadline().into_std()
    }
    /// See [`crate::LockGuard::remaining`].
    pub fn remaining(&self) -> Duration {
        self.guard().remaining()
    }
    /// See [`crate::LockGuard::is_held`].
    pub fn is_held(&self) -> bool {
        self.guard().is_held()
    }
    /// Blocks until the lock is lost, or `limit` passes (`None`).
    pub fn wait_lost(&self, limit: Duration) -> Option<LostReason> {
        let signal = self.guard().lost();
        self.runtime
            .block_on(async { tokio::time::timeout(limit, signal.wait()).await.ok() })
    }
    /// See [`crate::LockGuard::extend`].
    pub fn extend(&self, ttl: Duration) -> Result<()> {
        self.runtime.block_on(self.guard().extend(ttl))
    }
    /// See [`crate::LockGuard::release`].
    pub fn release(self) -> Result<bool> {
        self.release_outcome().map(|o| o.is_released())
    }
    /// See [`crate::LockGuard::release_outcome`].
    ///
    /// # Errors
    ///
    /// As [`crate::LockGuard::release_outcome`].
    pub fn release_outcome(mut self) -> Result<crate::ReleaseOutcome> {
        match self.inner.take() {
            Some(guard) => self.runtime.block_on(guard.release_outcome()),
            None => unreachable!("the guard is only taken by release, which consumes self"),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(guard) = self.inner.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside some async runtime: never block it. The async guard's own drop releases
            // in the background.
            drop(guard);
            return;
        }
        if let Err(err) = self.runtime.block_on(guard.release()) {
            tracing::debug!(%err, "release on drop failed; the lease will run out");
        }
    }
}

/// A fenced resource in Redis, blocking (see [`crate::fenced::FencedStore`]).
#[derive(Debug, Clone)]
pub struct FencedStore {
    runtime: Arc<tokio::runtime::Runtime>,
    inner: crate::fenced::FencedStore,
}

impl FencedStore {
    /// Applies `writes` if `fence` is not older than what the resource accepted (see
    /// [`crate::fenced::FencedStore::apply`]).
    ///
    /// # Errors
    ///
    /// As [`crate::fenced::FencedStore::apply`]; [`crate::Error::Fenced`] for a stale fence.
    pub fn apply(&self, fence: u64, writes: &crate::fenced::Writes) -> Result<u64> {
        self.runtime.block_on(self.inner.apply(fence, writes))
    }

    /// The largest fence the resource has accepted (0 if none).
    ///
    /// # Errors
    ///
    /// As [`crate::fenced::FencedStore::accepted`].
    pub fn accepted(&self) -> Result<u64> {
        self.runtime.block_on(self.inner.accepted())
    }

    /// A caller's own fenced Lua body (see [`crate::fenced::FencedStore::script`]).
    pub fn script(&self, body: &str) -> FencedScript {
        FencedScript {
            runtime: self.runtime.clone(),
            inner: self.inner.script(body),
        }
    }
}

/// A caller's fenced Lua body, blocking (see [`crate::fenced::FencedScript`]).
#[derive(Debug, Clone)]
pub struct FencedScript {
    runtime: Arc<tokio::runtime::Runtime>,
    inner: crate::fenced::FencedScript,
}

impl FencedScript {
    /// Runs the body if `fence` is not older than what the resource accepted (see
    /// [`crate::fenced::FencedScript::apply`]).
    ///
    /// # Errors
    ///
    /// As [`crate::fenced::FencedScript::apply`]; [`crate::Error::Fenced`] for a stale fence.
    pub fn apply<T: redis::FromRedisValue>(
        &self,
        fence: u64,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T> {
        self.runtime.block_on(self.inner.apply(fence, keys, args))
    }
}
