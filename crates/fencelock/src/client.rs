//! The client: one Redis server, its connection, the release listener and the watchdog.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::keys::{self, LockKeys};
use crate::lease::ClockDrift;
use crate::lock::LockRequest;
use crate::lock::hold::Kind;
use crate::lock::protocol::{self, ForceReleaseReply, StoredLock, StoredState};
use crate::quorum::Instances;
use crate::reentrant::ReentrantLock;
use crate::rwlock::ReadWriteLock;
use crate::watchdog::Watchdog;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "fencelock";
/// The default time limit for one command (a round trip to Redis).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// A fencelock client for one Redis server, or for N independent servers (Redlock). Cheap to
/// clone; clones share the connections, the release listeners and the watchdog.
///
/// With several servers ([`Client::open_redlock`]) every lock is held on a majority of them, and
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
        f.debug_struct("Client")
            .field("servers", &self.shared.description)
            .field("prefix", &self.shared.prefix)
            .finish()
    }
}

pub(crate) struct Shared {
    pub(crate) instances: Arc<Instances>,
    description: String,
    pub(crate) prefix: String,
    pub(crate) drift: ClockDrift,
    pub(crate) watchdog: Watchdog,
    next_id: AtomicU64,
}

impl Shared {
    pub(crate) fn keys(&self, name: &str) -> LockKeys {
        LockKeys::new(&self.prefix, name)
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// Configures a [`Client`].
///
/// ```no_run
/// # fn example() -> fencelock::Result<()> {
/// use std::time::Duration;
/// let client = fencelock::Client::builder("redis://127.0.0.1:6379")
///     .key_prefix("myapp-locks")
///     .command_timeout(Duration::from_millis(500))
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ClientBuilder {
    redis: Result<Vec<redis::Client>>,
    prefix: String,
    command_timeout: Duration,
    instance_timeout: Option<Duration>,
    drift: ClockDrift,
}

impl ClientBuilder {
    /// The prefix of every key (default `fencelock`). All users of a lock must agree on it.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The time limit for one command (default 2 s). A command that takes longer counts as
    /// Redis being unreachable. Renewals use the smaller of this and the time left on the lease.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Over Redlock: the time limit for one call to one instance (default: 5 % of the lease,
    /// at least 5 ms, at most the command timeout). Keep it small next to the lease, so that a
    /// stopped instance costs little.
    pub fn instance_timeout(mut self, timeout: Duration) -> Self {
        self.instance_timeout = Some(timeout);
        self
    }

    /// The clock-drift margin subtracted from every lease for the local deadline
    /// (default: 1 % of the lease + 2 ms).
    pub fn clock_drift(mut self, drift: ClockDrift) -> Self {
        self.drift = drift;
        self
    }

    /// Creates the client. No connection is made yet: the first operation connects, and a
    /// server that cannot be reached shows up as [`Error::Unreachable`] naming the lock.
    ///
    /// Must be called inside a Tokio runtime (it starts the client's background tasks); the
    /// [`blocking`](crate::blocking) module is for programs without one.
    pub fn build(self) -> Result<Client> {
        let clients = self.redis?;
        if clients.is_empty() {
            return Err(Error::Config {
                reason: "no Redis URL was given".into(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for client in &clients {
            let addr = client.get_connection_info().addr().to_string();
            if !seen.insert(addr.clone()) {
                return Err(Error::Config {
                    reason: format!("{addr} is listed twice; Redlock needs independent instances"),
                });
            }
        }
        keys::validate_prefix(&self.prefix)?;
        if self.command_timeout.is_zero() || self.instance_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::Config {
                reason: "timeouts must be longer than zero".into(),
            });
        }
        if !(0.0..0.5).contains(&self.drift.factor) {
            return Err(Error::Config {
                reason: format!(
                    "the clock drift factor must be in [0, 0.5), got {}",
                    self.drift.factor
                ),
            });
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::Config {
                reason: "fencelock::Client must be built inside a Tokio runtime; use fencelock::blocking::Client otherwise".into(),
            });
        }
        let instances = Instances::new(clients, self.command_timeout, self.instance_timeout)
            .map_err(|e| Error::Config {
                reason: format!("cannot set up the Redis connection: {e}"),
            })?;
        let instances = Arc::new(instances);
        let watchdog = Watchdog::start(instances.clone(), self.drift);
        Ok(Client {
            shared: Arc::new(Shared {
                description: instances.describe(),
                instances,
                prefix: self.prefix,
                drift: self.drift,
                watchdog,
                next_id: AtomicU64::new(1),
            }),
        })
    }
}

/// The state of a lock as Redis has it, from [`Client::inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's name.
    pub name: String,
    /// What kind of lock the name holds now (`None`: nothing is held).
    pub kind: Option<LockKind>,
    /// The exclusive holder, if any: of a plain or fair lock, of a reentrant lock (its owner),
    /// or the writer of a read-write lock.
    pub holder: Option<Holder>,
    /// The shared holders: the readers of a read-write lock (one entry per read hold, with its
    /// owner), or the permits of a semaphore (one entry per permit).
    pub shared: Vec<Holder>,
    /// How many wait in a queue: fair-lock waiters, or a read-write lock's waiting readers and
    /// writers.
    pub waiting: u64,
    /// The last fence handed out for this name (the current holder's, if held).
    pub last_fence: Option<u64>,
}

impl LockInfo {
    /// Whether anyone holds the lock (exclusively or shared).
    pub fn is_held(&self) -> bool {
        self.holder.is_some() || !self.shared.is_empty()
    }
}

/// The kind of lock a name holds, as far as Redis can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockKind {
    /// A plain lock or a fair lock (they share the held key's format).
    Lock,
    /// A reentrant lock, held this many times by its owner.
    Reentrant {
        /// The owner's hold count.
        holds: u32,
    },
    /// A read-write lock.
    ReadWrite,
    /// A counting semaphore of `permits`.
    Semaphore {
        /// N, as its holders use it.
        permits: u32,
    },
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockKind::Lock => f.write_str("lock"),
            LockKind::Reentrant { holds } => write!(f, "reentrant lock ({holds} holds)"),
            LockKind::ReadWrite => f.write_str("read-write lock"),
            LockKind::Semaphore { permits } => write!(f, "semaphore of {permits}"),
        }
    }
}

/// Who holds a lock, as far as it is safe to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The first 8 hex digits of the holder's owner token (enough to tell holders apart in
    /// logs, far too little to impersonate one).
    pub token_prefix: String,
    /// The holder's fence (a reader's: none).
    pub fence: Option<u64>,
    /// What is left of the holder's lease (`None`: the key has no expiry).
    pub remaining: Option<Duration>,
}

impl Client {
    /// A client for the server at `url` (`redis://[user:password@]host:port[/db]`), with the
    /// default options. See [`ClientBuilder::build`] for what this does and does not do.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// A builder for a client of the server at `url`.
    pub fn builder(url: &str) -> ClientBuilder {
        Self::builder_with(open_url(url).map(|client| vec![client]))
    }

    /// A Redlock client over independent servers (an odd number, 3 or more, is recommended;
    /// one URL behaves like [`Client::open`]).
    pub fn open_redlock<I, S>(urls: I) -> Result<Client>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Client::builder_redlock(urls).build()
    }

    /// A builder for a Redlock client over independent servers.
    pub fn builder_redlock<I, S>(urls: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let clients = urls
            .into_iter()
            .map(|url| open_url(url.as_ref()))
            .collect::<Result<Vec<_>>>();
        Self::builder_with(clients)
    }

    /// A builder for a client over an existing `redis` client.
    pub fn builder_from_redis(client: redis::Client) -> ClientBuilder {
        Self::builder_with(Ok(vec![client]))
    }

    fn builder_with(redis: Result<Vec<redis::Client>>) -> ClientBuilder {
        ClientBuilder {
            redis,
            prefix: DEFAULT_PREFIX.to_owned(),
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            instance_timeout: None,
            drift: ClockDrift::default(),
        }
    }

    /// The servers this client talks to, as `host:port` (comma-separated for Redlock).
    pub fn server(&self) -> &str {
        &self.shared.description
    }

    /// Starts a request for the lock `name`; set its options, then call
    /// [`acquire`](LockRequest::acquire) or [`try_acquire`](LockRequest::try_acquire).
    pub fn lock(&self, name: impl Into<String>) -> LockRequest {
        LockRequest::new(self.clone(), name.into(), Kind::Plain)
    }

    /// An owner handle for the reentrant lock `name` (see [`ReentrantLock`]). Fails only for a
    /// bad name or a failing OS random source.
    pub fn reentrant_lock(&self, name: impl Into<String>) -> Result<ReentrantLock> {
        ReentrantLock::new(self.clone(), name.into())
    }

    /// An owner handle for the read-write lock `name` (see [`ReadWriteLock`]). Fails only for a
    /// bad name or a failing OS random source.
    pub fn read_write_lock(&self, name: impl Into<String>) -> Result<ReadWriteLock> {
        ReadWriteLock::new(self.clone(), name.into())
    }

    /// A request for one permit of the counting semaphore `name`, which lets at most `permits`
    /// holders in at once. Each permit is a lease of its own: a crashed holder's permit comes
    /// back when its lease runs out. Every user of the name must use the same `permits` while
    /// any permit is held ([`Error::Conflict`] otherwise). Not available over Redlock
    /// ([`Error::Unsupported`]).
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// let permit = client.semaphore("licences", 5).acquire().await?;
    /// println!("one of 5 licences, fence {}", permit.fence());
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: impl Into<String>, permits: u32) -> LockRequest {
        LockRequest::new(self.clone(), name.into(), Kind::Permit { permits })
    }

    /// A request for the fair lock `name`: granted in request order, and a waiter that dies
    /// leaves the queue after the [`queue_timeout`](LockRequest::queue_timeout). Not available
    /// over Redlock ([`Error::Unsupported`]).
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// let guard = client.fair_lock("deploys").acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: impl Into<String>) -> LockRequest {
        LockRequest::new(
            self.clone(),
            name.into(),
            Kind::Fair {
                queue_timeout: crate::lock::DEFAULT_QUEUE_TIMEOUT,
            },
        )
    }

    /// Takes the lock `name` if it is free right now (30 s lease, renewed automatically), or
    /// returns `Ok(None)` if another owner holds it.
    pub async fn try_lock(&self, name: impl Into<String>) -> Result<Option<crate::LockGuard>> {
        self.lock(name).try_acquire().await
    }

    /// Reads the state of lock `name` (of any kind) without changing it. Over Redlock, a
    /// holder is reported when it is found on a majority of the instances.
    pub async fn inspect(&self, name: &str) -> Result<LockInfo> {
        keys::validate_name(name)?;
        let instances = &self.shared.instances;
        let keys = Arc::new(self.shared.keys(name));
        let limit = instances.command_timeout();
        let answers = instances
            .on_all(
                None,
                |server| protocol::inspect(server.clone(), keys.clone(), limit),
                |_| false,
            )
            .await;
        let mut states = Vec::new();
        for answer in &answers {
            match answer {
                Some(Ok(StoredState::Foreign { key, found })) => {
                    return Err(Error::WrongType {
                        lock: name.to_owned(),
                        key: key.clone(),
                        found: found.clone(),
                    });
                }
                Some(Ok(StoredState::Lock(stored))) => states.push(stored.clone()),
                _ => {}
            }
        }
        if states.len() < instances.quorum() {
            let answered = states.len();
            return Err(instances.failure(name, "inspect", answers, answered, 0));
        }
        Ok(merge_inspected(name, &states, instances.quorum()))
    }

    /// Waits (at most `limit`) until the calls this client still has under way in the background
    /// have finished, and says whether they all did.
    ///
    /// Over Redlock an operation returns as soon as a majority decided it: a release returns once
    /// a majority confirmed it, while the call to the slowest instance runs on. Those calls end
    /// with the process; call this before a short-lived program exits (the `fencelock` command
    /// does), so that the slowest instance does not keep a released lock until its lease runs
    /// out. With a single server there is nothing in the background and it returns at once.
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
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        self.shared.instances.wait_idle(limit).await
    }

    /// Deletes lock `name` whoever holds it, on every instance, and wakes its waiters: an
    /// operator's tool for a holder known to be gone. The holder, if alive, learns it lost the
    /// lock at its next renewal. Returns whether it was held anywhere.
    pub async fn force_release(&self, name: &str) -> Result<bool> {
        keys::validate_name(name)?;
        let instances = &self.shared.instances;
        let keys = Arc::new(self.shared.keys(name));
        let limit = instances.command_timeout();
        let answers = instances
            .on_all(
                None,
                |server| protocol::force_release(server.clone(), keys.clone(), limit),
                |_| false,
            )
            .await;
        let mut released = false;
        let mut answered = 0;
        for answer in &answers {
            match answer {
                Some(Ok(ForceReleaseReply::Foreign { key, found })) => {
                    return Err(Error::WrongType {
                        lock: name.to_owned(),
                        key: key.clone(),
                        found: found.clone(),
                    });
                }
                Some(Ok(reply)) => {
                    answered += 1;
                    released |= *reply == ForceReleaseReply::Released;
                }
                _ => {}
            }
        }
        if answered < instances.servers().len()
            && (answered < instances.quorum() || instances.is_single())
        {
            return Err(instances.failure(name, "force-release", answers, answered, 0));
        }
        Ok(released)
    }
}

/// One view of a lock from the instances' states: each holder that a majority (`quorum`) of
/// them agrees on, with the shortest lease and the largest fence seen.
fn merge_inspected(name: &str, states: &[StoredLock], quorum: usize) -> LockInfo {
    // (role, token prefix) -> (holder, on how many instances)
    let mut seen: Vec<(String, Holder, usize)> = Vec::new();
    for state in states {
        for entry in &state.entries {
            let this = Holder {
                token_prefix: entry.token.chars().take(8).collect(),
                fence: entry.fence,
                remaining: u64::try_from(entry.remaining_ms)
                    .ok()
                    .map(Duration::from_millis),
            };
            match seen
                .iter_mut()
                .find(|(role, h, _)| *role == entry.role && h.token_prefix == this.token_prefix)
            {
                Some((_, held, count)) => {
                    *count += 1;
                    held.fence = held.fence.max(this.fence);
                    held.remaining = match (held.remaining, this.remaining) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                None => seen.push((entry.role.clone(), this, 1)),
            }
        }
    }
    let mut holder = None;
    let mut shared = Vec::new();
    for (role, h, count) in seen {
        if count < quorum {
            continue;
        }
        if role == "reader" || role == "permit" {
            shared.push(h);
        } else {
            holder = Some(h);
        }
    }
    let kind = if holder.is_none() && shared.is_empty() {
        None
    } else {
        // The kind that the instances with holders report (they agree unless the name was
        // used by two kinds on different instances).
        states
            .iter()
            .find(|s| !s.entries.is_empty())
            .and_then(|s| match s.kind.as_str() {
                "lock" => Some(LockKind::Lock),
                "reentrant" => Some(LockKind::Reentrant {
                    holds: s.detail.unwrap_or(0),
                }),
                "rw" => Some(LockKind::ReadWrite),
                "semaphore" => Some(LockKind::Semaphore {
                    permits: s.detail.unwrap_or(0),
                }),
                _ => None,
            })
    };
    LockInfo {
        name: name.to_owned(),
        kind,
        holder,
        shared,
        waiting: states.iter().map(|s| s.waiting).max().unwrap_or(0),
        last_fence: states.iter().filter_map(|s| s.last_fence).max(),
    }
}

fn open_url(url: &str) -> Result<redis::Client> {
    redis::Client::open(url).map_err(|e| Error::Config {
        reason: format!("invalid Redis URL: {}", redact_url_error(&e, url)),
    })
}

/// The URL parser's message, without the URL's password if the message quotes it.
fn redact_url_error(err: &redis::RedisError, url: &str) -> String {
    let message = err.to_string();
    match url::password(url) {
        Some(password) if !password.is_empty() => message.replace(password, "***"),
        _ => message,
    }
}

mod url {
    /// The password part of `scheme://user:password@host`, if any.
    pub(super) fn password(url: &str) -> Option<&str> {
        let rest = url.split_once("://")?.1;
        let userinfo = rest.split_once('@')?.0;
        Some(userinfo.split_once(':')?.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_errors_do_not_leak_passwords() {
        assert_eq!(url::password("redis://u:s3cret@h:1"), Some("s3cret"));
        assert_eq!(url::password("redis://h:1"), None);
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
