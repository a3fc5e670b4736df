//! The client: one Redis server, its connection, the release listener and the watchdog.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::connection::Server;
use crate::error::{Error, Result};
use crate::keys::{self, LockKeys};
use crate::lease::ClockDrift;
use crate::lock::LockRequest;
use crate::lock::protocol::{self, ForceReleaseReply, StoredState};
use crate::notify::ReleaseNotifier;
use crate::watchdog::Watchdog;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "fencelock";
/// The default time limit for one command (a round trip to Redis).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// A fencelock client for one Redis server. Cheap to clone; clones share the connection, the
/// release listener and the watchdog.
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
            .field("server", &self.shared.server.addr)
            .field("prefix", &self.shared.prefix)
            .finish()
    }
}

pub(crate) struct Shared {
    pub(crate) server: Server,
    pub(crate) prefix: String,
    pub(crate) drift: ClockDrift,
    pub(crate) notifier: ReleaseNotifier,
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
    redis: Result<redis::Client>,
    prefix: String,
    command_timeout: Duration,
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
        let redis = self.redis?;
        keys::validate_prefix(&self.prefix)?;
        if self.command_timeout.is_zero() {
            return Err(Error::Config {
                reason: "the command timeout must be longer than zero".into(),
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
        let server =
            Server::new(redis.clone(), self.command_timeout).map_err(|e| Error::Config {
                reason: format!("cannot set up the Redis connection: {e}"),
            })?;
        let notifier = ReleaseNotifier::start(redis, self.command_timeout);
        let watchdog = Watchdog::start(server.clone(), self.drift);
        Ok(Client {
            shared: Arc::new(Shared {
                server,
                prefix: self.prefix,
                drift: self.drift,
                notifier,
                watchdog,
                next_id: AtomicU64::new(1),
            }),
        })
    }
}

/// The state of a lock as Redis has it, from [`Client::inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The lock's name.
    pub name: String,
    /// The current holder, if the lock is held.
    pub holder: Option<Holder>,
    /// The last fence handed out for this name (the current holder's, if held).
    pub last_fence: Option<u64>,
}

/// Who holds a lock, as far as it is safe to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The first 8 hex digits of the holder's owner token (enough to tell holders apart in
    /// logs, far too little to impersonate one).
    pub token_prefix: String,
    /// The holder's fence.
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
        let redis = redis::Client::open(url).map_err(|e| Error::Config {
            reason: format!("invalid Redis URL: {}", redact_url_error(&e, url)),
        });
        Self::builder_with(redis)
    }

    /// A builder for a client over an existing `redis` client.
    pub fn builder_from_redis(client: redis::Client) -> ClientBuilder {
        Self::builder_with(Ok(client))
    }

    fn builder_with(redis: Result<redis::Client>) -> ClientBuilder {
        ClientBuilder {
            redis,
            prefix: DEFAULT_PREFIX.to_owned(),
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
            drift: ClockDrift::default(),
        }
    }

    /// The server this client talks to, as `host:port`.
    pub fn server(&self) -> &str {
        &self.shared.server.addr
    }

    /// Starts a request for the lock `name`; set its options, then call
    /// [`acquire`](LockRequest::acquire) or [`try_acquire`](LockRequest::try_acquire).
    pub fn lock(&self, name: impl Into<String>) -> LockRequest {
        LockRequest::new(self.clone(), name.into())
    }

    /// Takes the lock `name` if it is free right now (30 s lease, renewed automatically), or
    /// returns `Ok(None)` if another owner holds it.
    pub async fn try_lock(&self, name: impl Into<String>) -> Result<Option<crate::LockGuard>> {
        self.lock(name).try_acquire().await
    }

    /// Reads the state of lock `name` without changing it.
    pub async fn inspect(&self, name: &str) -> Result<LockInfo> {
        keys::validate_name(name)?;
        let shared = &self.shared;
        let keys = shared.keys(name);
        let state = protocol::inspect(&shared.server, &keys)
            .await
            .map_err(|e| shared.server.error(name, "inspect", e))?;
        match state {
            StoredState::Foreign { key, found } => Err(Error::WrongType {
                lock: name.to_owned(),
                key,
                found,
            }),
            StoredState::Lock {
                value,
                pttl,
                last_fence,
            } => Ok(LockInfo {
                name: name.to_owned(),
                holder: value.map(|v| {
                    let (token, fence) = v.split_once(':').unwrap_or((v.as_str(), ""));
                    Holder {
                        token_prefix: token.chars().take(8).collect(),
                        fence: fence.parse().ok(),
                        remaining: u64::try_from(pttl).ok().map(Duration::from_millis),
                    }
                }),
                last_fence,
            }),
        }
    }

    /// Deletes lock `name` whoever holds it, and wakes its waiters: an operator's tool for a
    /// holder known to be gone. The holder, if alive, learns it lost the lock at its next renewal
    /// (and the fence of the next holder is larger than its own). Returns whether it was held.
    pub async fn force_release(&self, name: &str) -> Result<bool> {
        keys::validate_name(name)?;
        let shared = &self.shared;
        let keys = shared.keys(name);
        let reply = protocol::force_release(&shared.server, &keys)
            .await
            .map_err(|e| shared.server.error(name, "force-release", e))?;
        match reply {
            ForceReleaseReply::Released => Ok(true),
            ForceReleaseReply::WasFree => Ok(false),
            ForceReleaseReply::Foreign { key, found } => Err(Error::WrongType {
                lock: name.to_owned(),
                key,
                found,
            }),
        }
    }
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
