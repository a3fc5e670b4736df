//! The fenced lock: requesting it (with a lease, a wait policy and automatic renewal), and
//! waiting for it without polling Redis in a loop.

mod guard;
pub(crate) mod protocol;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

pub use guard::LockGuard;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys::{self, LockKeys};
use crate::lease::{Lease, LeaseState};
use crate::token::OwnerToken;
use crate::watchdog::{Abandoned, Command, Renewal};
use protocol::AcquireReply;

/// The default lease.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// The shortest lease accepted.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// The longest lease accepted (about 34 years; Redis itself accepts more, but a lease this long
/// is a mistake, and instants this far ahead overflow some clocks).
pub const MAX_TTL: Duration = Duration::from_millis(1 << 40);

/// How long to wait for a lock that someone else holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Do not wait: fail with [`Error::Busy`] if the lock is held.
    NoWait,
    /// Wait up to this long, then fail with [`Error::TimedOut`].
    UpTo(Duration),
    /// Wait as long as it takes.
    Forever,
}

/// A request for a lock, built by [`Client::lock`].
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// use std::time::Duration;
/// let guard = client
///     .lock("accounts/42")
///     .ttl(Duration::from_secs(10))
///     .wait_up_to(Duration::from_secs(5))
///     .acquire()
///     .await?;
/// # guard.release().await?; Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a lock request does nothing until acquired"]
pub struct LockRequest {
    client: Client,
    name: String,
    ttl: Duration,
    wait: WaitPolicy,
    auto_renew: bool,
    max_hold: Option<Duration>,
}

impl LockRequest {
    pub(crate) fn new(client: Client, name: String) -> Self {
        LockRequest {
            client,
            name,
            ttl: DEFAULT_TTL,
            wait: WaitPolicy::Forever,
            auto_renew: true,
            max_hold: None,
        }
    }

    /// The lease (default 30 s): how long the lock outlives a holder that stops renewing it.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long to wait if the lock is held (default: forever).
    pub fn wait(mut self, wait: WaitPolicy) -> Self {
        self.wait = wait;
        self
    }

    /// Do not wait if the lock is held.
    pub fn no_wait(self) -> Self {
        self.wait(WaitPolicy::NoWait)
    }

    /// Wait at most `limit` if the lock is held.
    pub fn wait_up_to(self, limit: Duration) -> Self {
        self.wait(WaitPolicy::UpTo(limit))
    }

    /// Whether the client's watchdog renews the lease while the guard lives (default: yes).
    /// Without renewal the lock is lost when its lease runs out, unless the holder calls
    /// [`LockGuard::extend`].
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.auto_renew = on;
        self
    }

    /// Stop renewing after this long, so that a holder that is stuck but alive cannot keep the
    /// lock forever. The lock is then lost when the last lease runs out (at most one TTL later).
    pub fn max_hold(mut self, limit: Duration) -> Self {
        self.max_hold = Some(limit);
        self
    }

    fn validate(&self) -> Result<()> {
        keys::validate_name(&self.name)?;
        validate_ttl(&self.name, self.ttl)?;
        if let Some(limit) = self.max_hold
            && limit < self.ttl
        {
            return Err(Error::invalid(
                &self.name,
                format!(
                    "max_hold ({limit:?}) is shorter than the lease ({:?}); the lease alone outlasts it",
                    self.ttl
                ),
            ));
        }
        Ok(())
    }

    /// Takes the lock, waiting as the [`WaitPolicy`] allows.
    ///
    /// Errors: [`Error::Busy`] (held, and no waiting), [`Error::TimedOut`], [`Error::Unreachable`],
    /// [`Error::Redis`], [`Error::WrongType`], [`Error::InvalidArgument`]. On any error nothing is
    /// left held.
    pub async fn acquire(self) -> Result<LockGuard> {
        self.validate()?;
        let shared = &self.client.shared;
        let keys = Arc::new(shared.keys(&self.name));
        let mut token = self.new_token()?;
        let started = Instant::now();
        let give_up_at = match self.wait {
            WaitPolicy::NoWait => Some(started),
            WaitPolicy::UpTo(limit) => started.checked_add(limit),
            WaitPolicy::Forever => None,
        };
        let mut subscription = None;
        loop {
            let (reply, sent_at) = self.attempt(&keys, &token).await?;
            let remaining = match reply {
                AcquireReply::Granted { fence } => {
                    let lease = LeaseState::new(sent_at, self.ttl, &shared.drift);
                    if lease.deadline > Instant::now() {
                        return Ok(self.guard(keys, token, fence, lease, started));
                    }
                    // The reply came so late that the lease may already be over: useless.
                    tracing::debug!(lock = %self.name, "grant arrived after its own deadline; giving it back");
                    self.abandon(&keys, &token);
                    // A retry with the same token would be confirmed by the idempotent acquire
                    // and then deleted by the background release: use a new one.
                    token = self.new_token()?;
                    Some(Duration::ZERO)
                }
                AcquireReply::Held { remaining: None } => {
                    return Err(Error::WrongType {
                        lock: self.name.clone(),
                        key: keys.lock.clone(),
                        found: "a string with no expiry".into(),
                    });
                }
                AcquireReply::Held { remaining } => remaining,
                AcquireReply::Foreign { key, found } => {
                    return Err(Error::WrongType {
                        lock: self.name.clone(),
                        key,
                        found,
                    });
                }
            };
            let now = Instant::now();
            if give_up_at.is_some_and(|at| now >= at) {
                return Err(match self.wait {
                    WaitPolicy::NoWait => Error::Busy {
                        lock: self.name.clone(),
                        remaining,
                    },
                    _ => Error::TimedOut {
                        lock: self.name.clone(),
                        waited: now - started,
                    },
                });
            }
            let Some(waiting) = &subscription else {
                // Subscribe, then try again at once: a release between the first try and the
                // subscription would otherwise go unnoticed.
                subscription = Some(shared.notifier.subscribe(&keys.channel).await);
                continue;
            };
            // Sleep until a release message, the holder's lease running out (plus a little
            // jitter so that waiters of many clients do not all retry at the same instant), or
            // the caller's limit.
            let lease_end = now + remaining.unwrap_or_default() + jitter(remaining);
            let wake_at = give_up_at.map_or(lease_end, |at| at.min(lease_end));
            tokio::select! {
                () = waiting.released() => {}
                () = tokio::time::sleep_until(wake_at) => {}
            }
        }
    }

    /// Takes the lock if it is free now; `Ok(None)` if another owner holds it.
    pub async fn try_acquire(self) -> Result<Option<LockGuard>> {
        match self.no_wait().acquire().await {
            Ok(guard) => Ok(Some(guard)),
            Err(Error::Busy { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn new_token(&self) -> Result<OwnerToken> {
        OwnerToken::generate()
            .map_err(|e| Error::invalid(&self.name, format!("the OS random source failed: {e}")))
    }

    /// One acquire round trip, retried with the same token if Redis could not be reached (the
    /// script is idempotent for one token, so a retry after a lost reply is safe). Returns the
    /// reply and when the request that produced it was sent.
    async fn attempt(
        &self,
        keys: &Arc<LockKeys>,
        token: &OwnerToken,
    ) -> Result<(AcquireReply, Instant)> {
        let server = &self.client.shared.server;
        let mut backoff = Duration::from_millis(50);
        let mut tries = 0;
        loop {
            let sent_at = Instant::now();
            match protocol::acquire(server, keys, token, self.ttl).await {
                Ok(reply) => return Ok((reply, sent_at)),
                Err(err) if crate::connection::is_unreachable(&err) && tries < 2 => {
                    tracing::debug!(lock = %self.name, %err, "acquire failed; retrying with the same token");
                    tries += 1;
                    tokio::time::sleep(backoff).await;
                    backoff *= 4;
                }
                Err(err) => {
                    if crate::connection::is_unreachable(&err) {
                        // The request may have been applied: give it back in the background.
                        self.abandon(keys, token);
                    }
                    return Err(server.error(&self.name, "acquire", err));
                }
            }
        }
    }

    /// Releases `token`'s hold on the lock in the background.
    fn abandon(&self, keys: &Arc<LockKeys>, token: &OwnerToken) {
        let shared = &self.client.shared;
        shared.watchdog.send(Command::Release {
            id: None,
            lock: Abandoned {
                name: Arc::from(self.name.as_str()),
                keys: Arc::clone(keys),
                token: token.clone(),
            },
        });
    }

    fn guard(
        self,
        keys: Arc<LockKeys>,
        token: OwnerToken,
        fence: u64,
        lease: LeaseState,
        started: Instant,
    ) -> LockGuard {
        let shared = &self.client.shared;
        let lease: Lease = Arc::new(watch::channel(lease).0);
        let name: Arc<str> = Arc::from(self.name.as_str());
        let renewal_id = self.auto_renew.then(|| {
            let id = shared.next_id();
            shared.watchdog.send(Command::Renew {
                id,
                renewal: Renewal {
                    name: name.clone(),
                    keys: keys.clone(),
                    token: token.clone(),
                    lease: lease.clone(),
                    hold_until: self.max_hold.and_then(|limit| started.checked_add(limit)),
                },
            });
            id
        });
        tracing::debug!(lock = %name, fence, "lock acquired");
        LockGuard::new(self.client, name, keys, token, fence, lease, renewal_id)
    }
}

/// Checks a lease length.
pub(crate) fn validate_ttl(name: &str, ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL {
        return Err(Error::invalid(
            name,
            format!("the lease {ttl:?} is shorter than the minimum of {MIN_TTL:?}"),
        ));
    }
    if ttl > MAX_TTL {
        return Err(Error::invalid(
            name,
            format!("the lease {ttl:?} is longer than the maximum of {MAX_TTL:?}"),
        ));
    }
    Ok(())
}

/// A random delay of up to 1/16 of the holder's remaining lease, at most 10 ms.
fn jitter(remaining: Option<Duration>) -> Duration {
    let cap = remaining
        .unwrap_or_default()
        .div_f64(16.0)
        .min(Duration::from_millis(10));
    let mut byte = [0u8; 2];
    if getrandom::fill(&mut byte).is_err() {
        return cap / 2;
    }
    cap.mul_f64(f64::from(u16::from_le_bytes(byte)) / f64::from(u16::MAX))
}
