//! The client: its servers (one, or N independent ones for Redlock), and the entry points to
//! every kind of lock. Configuring it is `builder.rs`; reading and clearing locks as an operator
//! is `crate::admin`.

mod builder;
mod tls;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

pub use builder::ClientBuilder;
use builder::{Target, Topology};

use crate::engine::{LockGuard, LockRequest, Protocol, Shared};
use crate::error::Result;
use crate::kinds::fair::Fair;
use crate::kinds::plain::Plain;
use crate::kinds::reentrant::ReentrantLock;
use crate::kinds::rwlock::ReadWriteLock;
use crate::kinds::semaphore::Permit;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "fencelock";
/// The default time limit for one command (a round trip to Redis).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// A fencelock client for one Redis server, or for N independent servers (Redlock). Cheap to
/// clone; clones share the connections, the release listeners and the watchdog.
///
/// With several servers ([`Client::redlock`]) every lock is held on a majority of them, and
/// the guard API is the same: a fence, a deadline, a lost signal, extend and release. See the
/// crate documentation for what fencing over a quorum assumes.
///
/// ```no_run
/// # async fn example() -> fencelock::Result<()> {
/// let client = fencelock::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.lock("migrations").acquire().await?;
/// println!("holding {} with fence {}", guard.name(), guard.fence());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.fmt(f)
    }
}

impl Client {
    /// A client for the server at `url` (`redis://[user:password@]host:port[/db]`, or
    /// `rediss://` for TLS), with the default options: `Client::builder(url).build()`. See
    /// [`ClientBuilder::build`] for what this does and does not do.
    ///
    /// Every deployment has one constructor, which returns a [`ClientBuilder`] for the options
    /// (TLS, credentials, prefix, timeouts): [`builder`](Self::builder) (one server),
    /// [`redlock`](Self::redlock), [`cluster`](Self::cluster), [`sentinel`](Self::sentinel)
    /// and [`from_redis`](Self::from_redis) (a `redis::Client` configured elsewhere).
    ///
    /// # Errors
    ///
    /// As [`ClientBuilder::build`].
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// A builder for a client of the server at `url`.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(Topology::Instances(vec![Target::Url(url.to_owned())]))
    }

    /// A builder for a Redlock client over independent servers (an odd number, 3 or more, is
    /// recommended; one URL behaves like [`Client::builder`]). Every lock is held on a majority
    /// of them.
    ///
    /// ```no_run
    /// # async fn example() -> fencelock::Result<()> {
    /// let client = fencelock::Client::redlock([
    ///     "redis://10.0.0.1:6379",
    ///     "redis://10.0.0.2:6379",
    ///     "redis://10.0.0.3:6379",
    /// ])
    /// .build()?;
    /// let guard = client.lock("nightly-report").acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn redlock<I, S>(urls: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let urls = urls
            .into_iter()
            .map(|url| Target::Url(url.as_ref().to_owned()));
        ClientBuilder::new(Topology::Instances(urls.collect()))
    }

    /// A builder for a client of a Redis Cluster, given the URLs of some of its nodes (seeds;
    /// one is enough, more survive a seed being down). Every kind of lock works: all keys of
    /// one lock share a hash tag, so each operation is one script call on the master of the
    /// lock's slot, and waiters are woken by sharded pub/sub (`SSUBSCRIBE`, Redis 7 or later)
    /// in that slot. The client follows slot moves and failovers. Credentials and TLS come
    /// from the first URL (every seed must agree); the builder's TLS options apply to every
    /// node.
    ///
    /// ```no_run
    /// # async fn example() -> fencelock::Result<()> {
    /// let client = fencelock::Client::cluster([
    ///     "redis://10.0.0.1:7000",
    ///     "redis://10.0.0.2:7000",
    /// ])
    /// .build()?;
    /// let guard = client.lock("nightly-report").acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// A failover can lose a granted lock (replication is asynchronous): the holder is told by
    /// [`LockGuard::lost`], and the fences of later holders keep growing.
    #[cfg(feature = "cluster")]
    pub fn cluster<I, S>(seed_urls: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let seeds = seed_urls.into_iter().map(|u| u.as_ref().to_owned());
        ClientBuilder::new(Topology::Cluster(seeds.collect()))
    }

    /// A builder for a client of the master that the sentinels at `sentinel_urls` name
    /// `master_name`. The client asks the sentinels for the master before its first command,
    /// and again whenever the master it follows answers `READONLY` or cannot be reached (an
    /// operation that failed that way is sent once more, to the new master). The master's own
    /// credentials are set with [`ClientBuilder::master_credentials`]; the sentinels' go in
    /// their URLs.
    ///
    /// ```no_run
    /// # async fn example() -> fencelock::Result<()> {
    /// let client = fencelock::Client::sentinel(
    ///     ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"],
    ///     "mymaster",
    /// )
    /// .master_credentials(Some("locker"), "s3cret")
    /// .build()?;
    /// let guard = client.lock("nightly-report").acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// A failover can lose a granted lock (replication is asynchronous): the holder is told by
    /// [`LockGuard::lost`], and the fences of later holders keep growing.
    #[cfg(feature = "sentinel")]
    pub fn sentinel<I, S>(sentinel_urls: I, master_name: &str) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let sentinels = sentinel_urls.into_iter().map(|u| u.as_ref().to_owned());
        ClientBuilder::new(Topology::Sentinel {
            sentinels: sentinels.collect(),
            master: master_name.to_owned(),
        })
    }

    /// A builder for a client over an existing `redis` client (its own TLS and credentials
    /// apply; the builder's TLS options cannot).
    pub fn from_redis(client: redis::Client) -> ClientBuilder {
        ClientBuilder::new(Topology::Instances(vec![Target::Client(Box::new(client))]))
    }

    /// The servers this client talks to, as `host:port` (comma-separated for Redlock).
    pub fn server(&self) -> &str {
        &self.shared.description
    }

    /// Starts a request for the lock `name`; set its options, then call
    /// [`acquire`](LockRequest::acquire) or [`try_acquire`](LockRequest::try_acquire).
    pub fn lock(&self, name: impl Into<String>) -> LockRequest {
        LockRequest::new(self.shared.clone(), name.into(), PLAIN.clone())
    }

    /// An owner handle for the reentrant lock `name` (see [`ReentrantLock`]). Like every entry
    /// point it sends nothing and cannot fail: a bad name is reported by the acquisition.
    pub fn reentrant_lock(&self, name: impl Into<String>) -> ReentrantLock {
        ReentrantLock::new(self.shared.clone(), name.into())
    }

    /// An owner handle for the read-write lock `name` (see [`ReadWriteLock`]). Like every entry
    /// point it sends nothing and cannot fail: a bad name is reported by the acquisition.
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self.shared.clone(), name.into())
    }

    /// A request for one permit of the counting semaphore `name`, which lets at most `permits`
    /// holders in at once. Each permit is a lease of its own: a crashed holder's permit comes
    /// back when its lease runs out. Every user of the name must use the same `permits` while
    /// any permit is held ([`Error::Conflict`](crate::Error::Conflict) otherwise). Not available over Redlock
    /// ([`Error::Unsupported`](crate::Error::Unsupported)).
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// let permit = client.semaphore("licences", 5).acquire().await?;
    /// println!("one of 5 licences, fence {}", permit.fence());
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<String>, permits: u32) -> LockRequest {
        LockRequest::new(
            self.shared.clone(),
            name.into(),
            Arc::new(Permit { permits, take: 1 }),
        )
    }

    /// A request for the fair lock `name`: granted in request order, and a waiter that dies
    /// leaves the queue after the [`queue_timeout`](LockRequest::queue_timeout). Not available
    /// over Redlock ([`Error::Unsupported`](crate::Error::Unsupported)).
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// let guard = client.fair_lock("deploys").acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: impl Into<String>) -> LockRequest {
        LockRequest::new(self.shared.clone(), name.into(), FAIR.clone())
    }

    /// Takes the lock `name` if it is free right now (30 s lease, renewed automatically), or
    /// returns `Ok(None)` if another owner holds it.
    ///
    /// # Errors
    ///
    /// As [`LockRequest::try_acquire`].
    ///
    /// # Cancel safety
    ///
    /// As [`LockRequest::acquire`].
    pub async fn try_lock(&self, name: impl Into<String>) -> Result<Option<LockGuard>> {
        self.lock(name).try_acquire().await
    }

    /// Waits (at most `limit`) until the work this client still has under way in the
    /// background has finished, and says whether it all has: releases of dropped guards, give-
    /// backs of cancelled or lost acquisitions, and, over Redlock, the calls to the slower
    /// instances after an operation was decided by a majority. A `limit` of `Duration::MAX`
    /// waits as long as it takes.
    ///
    /// Over Redlock an operation returns as soon as a majority decided it: a release returns once
    /// a majority confirmed it, while the call to the slowest instance runs on. Background work
    /// ends with the process; call this before a short-lived program exits (the `fencelock`
    /// command does), so that no server keeps a released lock until its lease runs out.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// use std::time::Duration;
    ///
    /// let guard = client.lock("nightly-report").acquire().await?;
    /// // ... the work ...
    /// guard.release().await?;
    /// client.wait_idle(Duration::from_secs(2)).await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only waits; the background work goes on.
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        self.shared.instances.wait_idle(limit).await
    }

    /// Closes the client: its release listeners end (and unsubscribe, with the connection
    /// they listened on), and its command connections are dropped (one server's; a Redis
    /// Cluster's two, for commands and for subscriptions; a Sentinel-followed master's and the
    /// one to a sentinel that announces failovers; every Redlock instance's), so that their
    /// sockets close now, even while guards, requests or handles made from this client (or
    /// its clones, which share all this) still exist. Each socket closes as soon as the calls
    /// on their way on it when the client closed have ended: those may finish.
    ///
    /// Every later call through the client, its clones, or anything made from it (an
    /// acquisition, a guard's `extend` or `release`, an election, a fenced store, the
    /// operator's calls) fails at once with [`Error::Closed`](crate::Error::Closed) naming the
    /// lock, and nothing is sent. A request waiting for a lock is woken and fails the same
    /// way at its next try; a reader of release messages or of an election's leaders hears
    /// the loss of its subscription, and nothing more.
    ///
    /// Holds still held are **not released** by the close: release them first
    /// ([`LockGuard::release`]) for their locks to be free at once (the Python and Node.js
    /// packages give every hold back before they close their client). A hold left is no
    /// longer renewed: its guard's [`lost`](LockGuard::lost) signal fires at its deadline,
    /// and Redis frees the lock when its lease runs out; a guard dropped later cannot release
    /// it either. Closing again does nothing more.
    ///
    /// ```no_run
    /// # async fn example() -> fencelock::Result<()> {
    /// let client = fencelock::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.lock("migrations").acquire().await?;
    /// guard.release().await?;
    /// client.close().await;
    /// let err = client.lock("migrations").acquire().await.unwrap_err();
    /// assert!(matches!(err, fencelock::Error::Closed { ref lock } if lock == "migrations"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// None: closing cannot fail. It waits for the listeners' tasks, which end where they
    /// are, and for nothing on the network.
    ///
    /// # Cancel safety
    ///
    /// Once polled, the client is closed whether or not the future completes: a cancelled
    /// close only stops waiting for the listeners' tasks to end, which they do on their own.
    pub async fn close(&self) {
        self.shared.instances.close().await;
    }

    /// Whether [`close`](Self::close) was called on this client or one of its clones.
    pub fn is_closed(&self) -> bool {
        self.shared.instances.is_closed()
    }
}

/// The protocols without options, shared by every request.
static PLAIN: LazyLock<Arc<dyn Protocol>> = LazyLock::new(|| Arc::new(Plain));
static FAIR: LazyLock<Arc<dyn Protocol>> = LazyLock::new(|| Arc::new(Fair));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_errors_do_not_leak_passwords() {
        let err = Client::builder("nonsense://u:s3cret@h:1")
            .build()
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("invalid Redis URL"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn building_outside_a_runtime_is_a_clear_error() {
        let err = Client::open("redis://127.0.0.1:1").unwrap_err().to_string();
        assert!(err.contains("Tokio runtime"), "{err}");
    }
}
