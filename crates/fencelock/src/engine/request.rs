//! A request for a lock of any kind: its options (lease, wait policy, renewal, queue timeout)
//! and their checks. Acquiring it is [`acquire`](LockRequest::acquire), in `acquire.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::Shared;
use crate::engine::protocol::Protocol;
use crate::error::{Error, Result};
use crate::keys;

/// The default lease.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// The shortest lease accepted.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// The longest lease accepted (about 34 years; Redis itself accepts more, but a lease this long
/// is a mistake, and instants this far ahead overflow some clocks).
pub const MAX_TTL: Duration = Duration::from_millis(1 << 40);
/// How long a waiter's place in a queue (a fair lock's queue, a read-write lock's waiting entry)
/// lasts without a refresh, by default. A waiter refreshes it three times as often; one that
/// dies leaves the queue this long after its last refresh.
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(5);
/// The shortest queue timeout accepted.
pub const MIN_QUEUE_TIMEOUT: Duration = Duration::from_millis(30);

/// How long to wait for a lock that someone else holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitPolicy {
    /// Do not wait: fail with [`Error::Busy`] if the lock is held.
    NoWait,
    /// Wait up to this long, then fail with [`Error::TimedOut`].
    UpTo(Duration),
    /// Wait until this instant, then fail with [`Error::TimedOut`] (an instant already past:
    /// one try).
    Until(tokio::time::Instant),
    /// Wait as long as it takes.
    Forever,
}

/// How a language package (or a command line) says how long to wait: `None` as long as it
/// takes ([`Forever`](WaitPolicy::Forever)), zero not at all ([`NoWait`](WaitPolicy::NoWait)),
/// else up to that long ([`UpTo`](WaitPolicy::UpTo)).
///
/// ```
/// use std::time::Duration;
/// use fencelock::WaitPolicy;
/// assert_eq!(WaitPolicy::from(None), WaitPolicy::Forever);
/// assert_eq!(WaitPolicy::from(Some(Duration::ZERO)), WaitPolicy::NoWait);
/// assert_eq!(
///     WaitPolicy::from(Some(Duration::from_secs(2))),
///     WaitPolicy::UpTo(Duration::from_secs(2))
/// );
/// ```
impl From<Option<Duration>> for WaitPolicy {
    fn from(wait: Option<Duration>) -> Self {
        match wait {
            None => WaitPolicy::Forever,
            Some(d) if d.is_zero() => WaitPolicy::NoWait,
            Some(d) => WaitPolicy::UpTo(d),
        }
    }
}

impl WaitPolicy {
    /// When a request that began at `started` gives up (`None`: never).
    pub(crate) fn deadline(self, started: tokio::time::Instant) -> Option<tokio::time::Instant> {
        match self {
            WaitPolicy::NoWait => Some(started),
            WaitPolicy::UpTo(limit) => started.checked_add(limit),
            WaitPolicy::Until(deadline) => Some(deadline),
            WaitPolicy::Forever => None,
        }
    }
}

/// A request for a lock, built by [`Client::lock`](crate::Client::lock),
/// [`Client::fair_lock`](crate::Client::fair_lock), [`Client::semaphore`](crate::Client::semaphore),
/// [`ReentrantLock::request`](crate::ReentrantLock::request) or
/// [`ReadWriteLock::read`](crate::ReadWriteLock::read) / [`write`](crate::ReadWriteLock::write).
/// Every kind takes the same options and gives the same [`LockGuard`](crate::LockGuard).
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
    pub(crate) shared: Arc<Shared>,
    pub(crate) name: String,
    pub(crate) protocol: Arc<dyn Protocol>,
    pub(crate) ttl: Duration,
    pub(crate) wait: WaitPolicy,
    pub(crate) auto_renew: bool,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) queue_timeout: Duration,
    /// The lock-delay ([`LockRequest::lock_delay`]).
    pub(crate) lock_delay: Duration,
    /// The OS random source failed when the handle this request came from was made.
    pub(crate) owner_error: Option<getrandom::Error>,
    /// A [`take`](Self::take) this kind has no units for.
    pub(crate) refused_take: Option<u32>,
    /// Who holds it ([`label`](Self::label)); `None` by default.
    pub(crate) label: Option<Arc<str>>,
}

impl LockRequest {
    pub(crate) fn new(shared: Arc<Shared>, name: String, protocol: Arc<dyn Protocol>) -> Self {
        LockRequest {
            shared,
            name,
            protocol,
            ttl: DEFAULT_TTL,
            wait: WaitPolicy::Forever,
            auto_renew: true,
            max_hold: None,
            queue_timeout: DEFAULT_QUEUE_TIMEOUT,
            lock_delay: Duration::ZERO,
            owner_error: None,
            refused_take: None,
            label: None,
        }
    }

    /// This request for a handle whose owner token could not be made.
    pub(crate) fn owned_by(mut self, owner_error: Option<getrandom::Error>) -> Self {
        self.owner_error = owner_error;
        self
    }

    /// A semaphore's request for `permits` permits at once (default 1), held with one lease and
    /// one fence, granted only when that many are free. Permits go first come, first served: a
    /// request is granted only when its permits are free after those of every request that has
    /// waited longer, so a large request is not starved by a stream of small ones (as Tokio's
    /// `Semaphore::acquire_many`). The request must wait (`no_wait` takes no place in line and
    /// yields to every waiting request). Other kinds refuse it
    /// ([`Error::InvalidArgument`] at the acquisition), as does a semaphore asked for 0 permits
    /// or for more than it has.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// let three = client.semaphore("licences", 5).take(3).acquire().await?;
    /// println!("3 of 5 licences, fence {}", three.fence());
    /// three.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn take(mut self, permits: u32) -> Self {
        match self.protocol.with_take(permits) {
            Some(protocol) => self.protocol = protocol,
            None => self.refused_take = Some(permits),
        }
        self
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

    /// Wait until `deadline` at the latest if the lock is held (a deadline shared by several
    /// steps of a job, as `lock_api`'s `try_lock_until`). Takes a `std` or a Tokio instant.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// use std::time::{Duration, Instant};
    ///
    /// let deadline = Instant::now() + Duration::from_secs(30);
    /// let first = client.lock("step-1").wait_until(deadline).acquire().await?;
    /// let second = client.lock("step-2").wait_until(deadline).acquire().await?;
    /// # drop((first, second)); Ok(()) }
    /// ```
    pub fn wait_until(self, deadline: impl Into<tokio::time::Instant>) -> Self {
        self.wait(WaitPolicy::Until(deadline.into()))
    }

    /// Whether the client's watchdog renews the lease while the guard lives (default: yes).
    /// Without renewal the lock is lost when its lease runs out, unless the holder calls
    /// [`LockGuard::extend`](crate::LockGuard::extend).
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

    /// A lock-delay, as Consul's and Chubby's: if this holder's lease runs out without a
    /// release (it crashed, froze or was cut off), the lock is not granted again for `delay`
    /// after that, so that a resource that cannot check fences has time to notice the holder
    /// is gone before the next one starts. A release (also the background release of a dropped
    /// guard) ends the delay at once. Default: none.
    ///
    /// The server keeps the hold for the lease plus the delay (`fencelock status` shows that
    /// time); the holder's own deadline, and when it reports a loss, still follow the lease.
    /// The lease and the delay together may not exceed [`MAX_TTL`].
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// use std::time::Duration;
    /// let guard = client
    ///     .lock("printer")
    ///     .ttl(Duration::from_secs(10))
    ///     .lock_delay(Duration::from_secs(15)) // after a crash: free again 10 + 15 s on
    ///     .acquire()
    ///     .await?;
    /// # guard.release().await?; Ok(()) }
    /// ```
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = delay;
        self
    }

    /// For a fair lock, a read lock, a write lock, and a plain lock on one server (where a
    /// release passes the lock to a waiter in line): how long a waiter's place in the queue
    /// lasts without a refresh (default [`DEFAULT_QUEUE_TIMEOUT`]). A waiting request refreshes
    /// it three times as often; if the waiting process dies, the others move on this long
    /// after (a plain lock passed to a waiter that died lapses then too). A plain lock's place
    /// lasts no longer than its lease, so that a waiter that died costs no more than a holder
    /// that died. Other kinds (and a plain lock over Redlock) have no queue and ignore it.
    pub fn queue_timeout(mut self, timeout: Duration) -> Self {
        self.queue_timeout = timeout;
        self
    }

    /// A label for this hold: who holds the lock, in the holder's own words (a host and a
    /// process id, a job's name), shown by [`Client::inspect`](crate::Client::inspect) (and
    /// `fencelock status` / `list`) beside the holder's token. At most
    /// [`MAX_LABEL_LEN`](crate::MAX_LABEL_LEN) bytes, without control characters
    /// ([`Error::InvalidArgument`] at the acquisition otherwise). Default: none.
    ///
    /// The label is kept beside the lock, in `PREFIX:{NAME}:label:<hold token>`: written after
    /// the grant, re-armed with each renewal and deleted with the release, so that it lapses
    /// with the lease of a holder that stops renewing. That is one command more per grant,
    /// renewal and release of a labelled hold; an unlabelled one sends nothing more. A label
    /// is information only: a server that refuses it (an ACL) is logged, and the hold goes on.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// let guard = client.lock("nightly-report").label("worker-3:4711").acquire().await?;
    /// # guard.release().await?; Ok(()) }
    /// ```
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(Arc::from(label.into()));
        self
    }

    /// How long this request's place in a queue lasts without a refresh: zero when it takes
    /// none (a request that does not wait, or a kind without a queue); else what the kind makes
    /// of the queue timeout and the lease ([`Protocol::place_lasts`]).
    pub(crate) fn place_lasts(&self) -> Duration {
        if self.takes_place() {
            self.protocol.place_lasts(self.queue_timeout, self.ttl)
        } else {
            Duration::ZERO
        }
    }

    /// Whether a release may pass the lock to this request, or wake it, by its owner token
    /// while it waits ([`Protocol::passes_to_waiters`]).
    pub(crate) fn passed_by_token(&self) -> bool {
        self.protocol
            .passes_to_waiters(self.shared.instances.is_single())
    }

    /// Whether this request takes a place in a queue when it waits.
    fn takes_place(&self) -> bool {
        let single = self.shared.instances.is_single();
        self.protocol.queues(single) && self.wait != WaitPolicy::NoWait
    }

    /// Checks the request before anything is sent.
    pub(crate) fn validate(&self) -> Result<()> {
        keys::validate_name(&self.name)?;
        if let Some(e) = self.owner_error {
            return Err(Error::RandomSource {
                lock: self.name.clone(),
                reason: e.to_string(),
            });
        }
        if let Some(permits) = self.refused_take {
            return Err(Error::invalid(
                &self.name,
                format!(
                    "take({permits}) is for a semaphore's permits; a {} has none",
                    self.protocol.label()
                ),
            ));
        }
        validate_ttl(&self.name, self.ttl)?;
        if let Some(label) = &self.label {
            crate::engine::label::validate(&self.name, label)?;
        }
        if self.ttl.saturating_add(self.lock_delay) > MAX_TTL {
            return Err(Error::invalid(
                &self.name,
                format!(
                    "the lease {:?} and the lock-delay {:?} together are longer than the maximum of {MAX_TTL:?}",
                    self.ttl, self.lock_delay
                ),
            ));
        }
        let queue_timeout = self.queue_timeout;
        if self.takes_place() && queue_timeout < MIN_QUEUE_TIMEOUT {
            return Err(Error::invalid(
                &self.name,
                format!(
                    "the queue timeout {queue_timeout:?} is shorter than the minimum of {MIN_QUEUE_TIMEOUT:?}"
                ),
            ));
        }
        // A passed lock's lease is counted over the queue timeout: bounded like a lease.
        if self.takes_place() && queue_timeout > MAX_TTL {
            return Err(Error::invalid(
                &self.name,
                format!(
                    "the queue timeout {queue_timeout:?} is longer than the maximum of {MAX_TTL:?}"
                ),
            ));
        }
        self.protocol
            .check()
            .map_err(|reason| Error::invalid(&self.name, reason))?;
        if !self.shared.instances.is_single()
            && let Some(reason) = self.protocol.redlock_refusal()
        {
            return Err(Error::Unsupported {
                lock: self.name.clone(),
                reason: reason.to_owned(),
            });
        }
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
