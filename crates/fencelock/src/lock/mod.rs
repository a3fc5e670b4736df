//! Requesting a lock of any kind (with a lease, a wait policy and automatic renewal), waiting
//! for it without polling Redis in a loop, and the one place that says how a hold is released.
//! What differs between kinds (plain, reentrant, read-write, semaphore, fair) is only which
//! scripts run; see [`hold`].

mod guard;
pub(crate) mod hold;
#[macro_use]
pub(crate) mod protocol;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

pub use guard::LockGuard;

use crate::client::{Client, Shared};
use crate::connection::is_unreachable;
use crate::error::{Error, Result};
use crate::keys::{self, LockKeys};
use crate::lease::{Lease, LeaseState};
use crate::quorum::{Answer, Instances};
use crate::token::OwnerToken;
use crate::watchdog::{Abandoned, Command, Renewal};
use hold::{HeldFence, Hold, Kind};
use protocol::AcquireReply;

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
pub enum WaitPolicy {
    /// Do not wait: fail with [`Error::Busy`] if the lock is held.
    NoWait,
    /// Wait up to this long, then fail with [`Error::TimedOut`].
    UpTo(Duration),
    /// Wait as long as it takes.
    Forever,
}

/// A request for a lock, built by [`Client::lock`], [`Client::fair_lock`], [`Client::semaphore`],
/// [`ReentrantLock::request`](crate::ReentrantLock::request) or
/// [`ReadWriteLock::read`](crate::ReadWriteLock::read) / [`write`](crate::ReadWriteLock::write).
/// Every kind takes the same options and gives the same [`LockGuard`].
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
    kind: Kind,
    ttl: Duration,
    wait: WaitPolicy,
    auto_renew: bool,
    max_hold: Option<Duration>,
}

/// The outcome of one acquisition round over the instances.
enum Round {
    /// A majority granted the lock.
    Won { fence: u64, sent_at: Instant },
    /// Held by another owner (on enough instances to deny a majority). `remaining` is the
    /// shortest lease among the holders' instances; `split` is true when this round had
    /// some grants (a split vote with other contenders).
    Contended {
        remaining: Option<Duration>,
        split: bool,
        give_back: GiveBack,
    },
    /// Too many instances failed for a majority; the error says which and how.
    Failed {
        error: Error,
        unreachable: bool,
        give_back: GiveBack,
    },
}

/// The instances where a lost round may have been granted to its token: those that granted,
/// and those whose answer is unknown (failed or not waited for; the request may still apply).
#[derive(Default)]
struct GiveBack {
    granted: Vec<usize>,
    unknown: Vec<usize>,
}

impl LockRequest {
    pub(crate) fn new(client: Client, name: String, kind: Kind) -> Self {
        LockRequest {
            client,
            name,
            kind,
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

    /// For a fair lock, a read lock or a write lock: how long a waiter's place in the queue
    /// lasts without a refresh (default [`DEFAULT_QUEUE_TIMEOUT`]). A waiting request refreshes
    /// it three times as often; if the waiting process dies, the others move on this long
    /// after. Other kinds have no queue and ignore it.
    pub fn queue_timeout(mut self, timeout: Duration) -> Self {
        match &mut self.kind {
            Kind::Read { queue_timeout, .. }
            | Kind::Write { queue_timeout, .. }
            | Kind::Fair { queue_timeout } => {
                *queue_timeout = timeout;
            }
            _ => {}
        }
        self
    }

    fn validate(&self) -> Result<()> {
        keys::validate_name(&self.name)?;
        validate_ttl(&self.name, self.ttl)?;
        if let Some(refresh) = self.kind.refresh_every()
            && refresh * 3 < MIN_QUEUE_TIMEOUT
        {
            return Err(Error::invalid(
                &self.name,
                format!(
                    "the queue timeout {:?} is shorter than the minimum of {MIN_QUEUE_TIMEOUT:?}",
                    refresh * 3
                ),
            ));
        }
        if let Kind::Permit { permits: 0 } = self.kind {
            return Err(Error::invalid(
                &self.name,
                "a semaphore needs at least 1 permit",
            ));
        }
        if let Kind::Reentrant { max_depth: 0, .. } = self.kind {
            return Err(Error::invalid(
                &self.name,
                "the re-entry limit must be at least 1",
            ));
        }
        if !self.client.shared.instances.is_single()
            && let Some(reason) = self.kind.redlock_refusal()
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

    /// Takes the lock, waiting as the [`WaitPolicy`] allows.
    ///
    /// Errors: [`Error::Busy`] (held, and no waiting), [`Error::TimedOut`], [`Error::Unreachable`],
    /// [`Error::Redis`], [`Error::NoQuorum`] (Redlock), [`Error::WrongType`],
    /// [`Error::Conflict`] (the name is used differently), [`Error::Unsupported`] (this kind
    /// over Redlock), [`Error::InvalidArgument`]. On any error nothing is left held, and a
    /// waiter's place in a queue is given back.
    ///
    /// Cancel-safe: if the returned future is dropped before it completes (in a `select!`, or
    /// by a timeout), whatever it may have been granted is released in the background.
    pub async fn acquire(mut self) -> Result<LockGuard> {
        self.validate()?;
        if matches!(self.wait, WaitPolicy::NoWait) {
            // A request that does not wait takes no place in a queue (and has none to give back).
            self.kind = self.kind.without_queue();
        }
        let shared = self.client.shared.clone();
        let keys = Arc::new(shared.keys(&self.name));
        let name: Arc<str> = Arc::from(self.name.as_str());
        // Over Redlock, a reentrant handle remembers its hold's fence; its acquisitions take
        // turns so that the memory follows the order of the grants.
        let mut held_fence = match &self.kind {
            Kind::Reentrant { held_fence, .. } if !shared.instances.is_single() => {
                Some(held_fence.clone().lock_owned().await)
            }
            _ => None,
        };
        let mut in_flight = InFlight {
            request: &self,
            hold: self.hold(&name, &keys)?,
            armed: true,
        };
        let result = self
            .acquire_with(
                &shared,
                &name,
                &keys,
                &mut in_flight,
                held_fence.as_deref_mut(),
            )
            .await;
        in_flight.armed = false;
        if result.is_err() && self.kind.queues() {
            // A waiter that gives up may have left a place in a queue: take it back before
            // returning, so that the next request does not find it there. Where that fails, the
            // armed guard retries in the background.
            let limit = shared.instances.limit(self.ttl);
            let answers =
                release_on(&shared.instances, &in_flight.hold, None, None, limit, false).await;
            in_flight.armed = answers.iter().any(|a| !matches!(a, Some(Ok(_))));
        }
        result
    }

    /// A hold for this request with a fresh token.
    fn hold(&self, name: &Arc<str>, keys: &Arc<LockKeys>) -> Result<Arc<Hold>> {
        Ok(Arc::new(Hold {
            name: name.clone(),
            kind: self.kind.clone(),
            keys: keys.clone(),
            token: OwnerToken::for_lock(&self.name)?,
        }))
    }

    async fn acquire_with(
        &self,
        shared: &Arc<Shared>,
        name: &Arc<str>,
        keys: &Arc<LockKeys>,
        in_flight: &mut InFlight<'_>,
        mut held_fence: Option<&mut Option<HeldFence>>,
    ) -> Result<LockGuard> {
        let mut hold = in_flight.hold.clone();
        let started = Instant::now();
        let give_up_at = match self.wait {
            WaitPolicy::NoWait => Some(started),
            WaitPolicy::UpTo(limit) => started.checked_add(limit),
            WaitPolicy::Forever => None,
        };
        let mut subscription: Option<crate::quorum::Subscriptions> = None;
        let mut retries = 0;
        loop {
            // A fair lock's release wakes the next waiter by its token: answer to it before
            // each try, or a release between the try and the wait below would be lost (the
            // waiter would sleep until it refreshes its place).
            if let Some(waiting) = &mut subscription {
                waiting.answer_to(hold.token.as_str());
            }
            let (remaining, split) = match self.round(shared, &hold).await? {
                Round::Won { mut fence, sent_at } => {
                    let lease = LeaseState::new(sent_at, self.ttl, &shared.drift);
                    if lease.deadline > Instant::now() {
                        // Over Redlock, a reentrant grant while the handle's hold is still
                        // held is a re-entry into that hold and keeps its fence.
                        if let Some(memory) = held_fence.as_deref_mut() {
                            fence = HeldFence::settle(memory, fence);
                        }
                        let guard = self.guard(hold, fence, lease, started);
                        if let Some(memory) = held_fence.as_deref_mut().and_then(Option::as_mut) {
                            memory.leases.push(Arc::downgrade(guard.lease()));
                        }
                        return Ok(guard);
                    }
                    // The grant came so late that the lease may already be over: useless.
                    tracing::debug!(lock = %self.name, "grant arrived after its own deadline; giving it back");
                    self.abandon(&hold, Some(fence), None);
                    hold = self.hold(name, keys)?;
                    in_flight.hold = hold.clone();
                    (Some(Duration::ZERO), true)
                }
                Round::Failed {
                    error,
                    unreachable,
                    give_back,
                } => {
                    // Unreachable instances may come back at once (a reconnection). The acquire
                    // is idempotent for one token, so the retry reuses it, and nothing is given
                    // back in between: a release still in flight could otherwise delete what
                    // the retry is granted.
                    if unreachable && retries < 2 {
                        retries += 1;
                        tracing::debug!(lock = %self.name, %error, "acquire failed; retrying with the same token");
                        tokio::time::sleep(Duration::from_millis(50) * 4u32.pow(retries - 1)).await;
                        continue;
                    }
                    self.give_back(shared, &hold, give_back).await;
                    return Err(error);
                }
                Round::Contended {
                    remaining,
                    split,
                    give_back,
                } => {
                    if self.give_back(shared, &hold, give_back).await {
                        // A queued waiter (fair, or a read-write waiter) also left a waiting
                        // entry under this token on the instances that refused it: take those
                        // back too, or they hold the others back until they lapse.
                        if self.kind.queues() {
                            self.abandon(&hold, None, None);
                        }
                        // Releases of this token may still be in flight: never reuse it.
                        hold = self.hold(name, keys)?;
                        in_flight.hold = hold.clone();
                    }
                    (remaining, split)
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
            let Some(waiting) = &mut subscription else {
                // Subscribe, then try again at once: a release between the first try and the
                // subscription would otherwise go unnoticed.
                let limit = shared.instances.limit(self.ttl);
                subscription = Some(shared.instances.subscribe(&keys.channel, limit).await);
                continue;
            };
            // Sleep until a release message, the holder's lease running out (plus a little
            // jitter so that waiters of many clients do not all retry at the same instant), or
            // the caller's limit. After a split vote, retry after a short random delay instead.
            let mut pause = if split {
                random_up_to((self.ttl / 10).min(Duration::from_millis(50)))
            } else {
                let remaining = remaining.unwrap_or_default();
                remaining + random_up_to((remaining / 16).min(Duration::from_millis(10)))
            };
            // A queued waiter comes back in time to keep its place.
            if let Some(refresh) = self.kind.refresh_every() {
                pause = pause.min(refresh);
            }
            let wake_at = give_up_at.map_or(now + pause, |at| at.min(now + pause));
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

    /// One acquisition round: the acquire script on every instance at once, decided as soon as
    /// a majority granted or can no longer grant. A round that is not won gives back what it may
    /// have taken before it returns.
    async fn round(&self, shared: &Shared, hold: &Arc<Hold>) -> Result<Round> {
        let instances = &shared.instances;
        let total = instances.servers().len();
        let quorum = instances.quorum();
        let limit = instances.limit(self.ttl);
        let ttl = self.ttl;
        // A queued waiter (fair, or a read-write waiter) hears every instance out when it loses
        // a round: an instance not waited for would have to be given back under a new token,
        // and that give-back's release message would wake this waiter at once, round after
        // round, each round leaving a waiting entry behind.
        let queues = hold.kind.queues();
        let sent_at = Instant::now();
        let answers = instances
            .on_all(
                None,
                |server| protocol::acquire(server.clone(), hold.clone(), ttl, limit),
                |answers| {
                    let granted = answers.iter().filter(|a| is_grant(a)).count();
                    let against = answers
                        .iter()
                        .filter(|a| a.is_some() && !is_grant(a))
                        .count();
                    granted >= quorum || (!queues && against > total - quorum)
                },
            )
            .await;

        let mut fence = None;
        let mut granted = 0;
        let mut refused = 0;
        let mut remaining: Option<Duration> = None;
        let mut failed = 0;
        let mut unreachable = true;
        let mut foreign = None;
        let mut conflict = None;
        let mut conflicts = 0;
        let mut give_back = GiveBack::default();
        for (i, answer) in answers.iter().enumerate() {
            match answer {
                Some(Ok(AcquireReply::Granted { fence: f })) => {
                    granted += 1;
                    fence = fence.max(Some(*f));
                    give_back.granted.push(i);
                }
                Some(Ok(AcquireReply::Held { remaining: Some(r) })) => {
                    refused += 1;
                    remaining = Some(remaining.map_or(*r, |m| m.min(*r)));
                }
                Some(Ok(AcquireReply::Held { remaining: None })) => {
                    foreign = Some((hold.keys.lock.clone(), "a key with no expiry".to_owned()));
                }
                Some(Ok(AcquireReply::Refused(c))) => {
                    conflicts += 1;
                    conflict.get_or_insert_with(|| c.clone());
                }
                Some(Ok(AcquireReply::Foreign { key, found })) => {
                    foreign = Some((key.clone(), found.clone()));
                }
                Some(Err(err)) => {
                    failed += 1;
                    unreachable &= is_unreachable(err);
                    give_back.unknown.push(i);
                }
                None => give_back.unknown.push(i),
            }
        }
        if let (true, Some(fence)) = (granted >= quorum, fence) {
            return Ok(Round::Won { fence, sent_at });
        }
        // A conflict is the lock's state only where a majority says so. Over Redlock a minority
        // can lag behind (a release of this owner's last hold still on its way there) and
        // answer with a conflict that no longer holds: that counts as a refusal.
        if let Some(conflict) = conflict.filter(|_| conflicts >= quorum) {
            self.give_back(shared, hold, give_back).await;
            return Err(Error::Conflict {
                lock: self.name.clone(),
                conflict,
            });
        }
        refused += conflicts;
        if let Some((key, found)) = foreign {
            self.give_back(shared, hold, give_back).await;
            return Err(Error::WrongType {
                lock: self.name.clone(),
                key,
                found,
            });
        }
        if failed > total - quorum {
            let error = instances.failure(&self.name, "acquire", answers, granted, refused);
            return Ok(Round::Failed {
                error,
                unreachable,
                give_back,
            });
        }
        Ok(Round::Contended {
            remaining,
            split: granted > 0,
            give_back,
        })
    }

    /// Gives back what a lost round may hold: releases where it was granted (waiting for the
    /// answers, so the lock is free for others at once) and, in the background, where the
    /// outcome is unknown. Returns whether anything was given back.
    async fn give_back(&self, shared: &Shared, hold: &Arc<Hold>, give_back: GiveBack) -> bool {
        let GiveBack { granted, unknown } = give_back;
        let gave = !granted.is_empty() || !unknown.is_empty();
        if !granted.is_empty() {
            let limit = shared.instances.limit(self.ttl);
            release_on(&shared.instances, hold, None, Some(&granted), limit, false).await;
        }
        if !unknown.is_empty() {
            self.abandon(hold, None, Some(unknown));
        }
        gave
    }

    /// Releases `hold` in the background (on `only`, or on every instance).
    fn abandon(&self, hold: &Arc<Hold>, fence: Option<u64>, only: Option<Vec<usize>>) {
        self.client.shared.watchdog.send(Command::Release {
            id: None,
            lock: Abandoned {
                hold: hold.clone(),
                fence,
                only,
            },
        });
    }

    fn guard(&self, hold: Arc<Hold>, fence: u64, lease: LeaseState, started: Instant) -> LockGuard {
        let shared = &self.client.shared;
        let lease: Lease = Arc::new(watch::channel(lease).0);
        let renewal_id = self.auto_renew.then(|| {
            let id = shared.next_id();
            shared.watchdog.send(Command::Renew {
                id,
                renewal: Renewal {
                    hold: hold.clone(),
                    fence,
                    lease: lease.clone(),
                    hold_until: self.max_hold.and_then(|limit| started.checked_add(limit)),
                },
            });
            id
        });
        tracing::debug!(lock = %hold.name, kind = hold.kind.label(), fence, "lock acquired");
        LockGuard::new(self.client.clone(), hold, fence, lease, renewal_id)
    }
}

/// The token of an acquisition in progress: if the `acquire` future is dropped while armed,
/// whatever the token may have been granted is released in the background.
struct InFlight<'a> {
    request: &'a LockRequest,
    hold: Arc<Hold>,
    armed: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(lock = %self.request.name, "acquire cancelled; giving back what it may hold");
            self.request.abandon(&self.hold, None, None);
        }
    }
}

fn is_grant(answer: &Answer<AcquireReply>) -> bool {
    matches!(answer, Some(Ok(AcquireReply::Granted { .. })))
}

/// Releases `token`'s hold on `only` (or every) instance, raising each fence key to at least
/// `fence` first. Each call is bounded by `limit`; with `until_majority`, it returns as soon as a
/// majority released (the caller then finishes the rest in the background), otherwise it waits
/// for every answer. This is how every hold is released: by its guard, by a dropped guard in the
/// background, and by a lost acquisition round giving back its partial grants.
pub(crate) async fn release_on(
    instances: &Instances,
    hold: &Arc<Hold>,
    fence: Option<u64>,
    only: Option<&[usize]>,
    limit: Duration,
    until_majority: bool,
) -> Vec<Answer<bool>> {
    let quorum = instances.quorum();
    // The write-back matters only over Redlock; on a single instance the fence key already
    // holds this fence (or a larger one).
    let fence = if instances.is_single() || !hold.writes_fence_back() {
        None
    } else {
        fence
    };
    instances
        .on_all(
            only,
            |server| protocol::release(server.clone(), hold.clone(), fence, limit),
            |answers| {
                until_majority
                    && answers
                        .iter()
                        .filter(|a| matches!(a, Some(Ok(true))))
                        .count()
                        >= quorum
            },
        )
        .await
}

/// What one extension of one lock amounts to, over every instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A majority extended the lease.
    Extended,
    /// So many instances say the key is gone or taken that no majority is left.
    Lost,
    /// Neither: instances failed. Nothing was deleted; retry while the lease lasts.
    Failed,
}

/// The tally of one lock's extension.
pub(crate) struct ExtensionTally {
    pub(crate) verdict: Verdict,
    pub(crate) extended: usize,
    pub(crate) taken: usize,
}

/// Judges one lock's extend answers (one per instance; `None` where an instance gave no usable
/// answer). When a majority extended, the hold is put back, in the background, on the instances
/// that lost the key (see [`reassert_in_background`]). The guard's `extend` and the watchdog's
/// renewals both decide here.
pub(crate) fn judge_extension(
    instances: &Arc<Instances>,
    answers: &[Option<protocol::Extended>],
    hold: &Arc<Hold>,
    fence: u64,
    ttl: Duration,
) -> ExtensionTally {
    use protocol::Extended;
    let count = |e: Extended| answers.iter().filter(|a| **a == Some(e)).count();
    let (extended, missing, taken) = (
        count(Extended::Yes),
        count(Extended::Missing),
        count(Extended::Taken),
    );
    let verdict = if extended >= instances.quorum() {
        if missing > 0 && !instances.is_single() && hold.reasserts() {
            let missing = (0..answers.len())
                .filter(|i| answers[*i] == Some(Extended::Missing))
                .collect();
            reassert_in_background(instances.clone(), hold.clone(), fence, ttl, missing);
        }
        Verdict::Extended
    } else if missing + taken > instances.servers().len() - instances.quorum() {
        Verdict::Lost
    } else {
        Verdict::Failed
    };
    ExtensionTally {
        verdict,
        extended,
        taken,
    }
}

/// Puts `token`'s hold back, in the background, on the instances in `missing` (over Redlock,
/// after a renewal found their key gone while a majority still held it). Safe with fencing: it
/// only ever fills an empty key with the current holder's own value (never takes a lock held by
/// anyone else), and it raises the instance's fence key to the holder's fence, so an instance
/// that restarted empty stops handing out fences below it.
fn reassert_in_background(
    instances: Arc<Instances>,
    hold: Arc<Hold>,
    fence: u64,
    ttl: Duration,
    missing: Vec<usize>,
) {
    tokio::spawn(async move {
        let limit = instances.limit(ttl);
        let answers = instances
            .on_all(
                Some(&missing),
                |server| protocol::reassert(server.clone(), hold.clone(), fence, ttl, limit),
                |_| false,
            )
            .await;
        let restored = answers
            .iter()
            .filter(|a| matches!(a, Some(Ok(true))))
            .count();
        tracing::debug!(lock = %hold.name, restored, "re-asserted the hold on instances that had lost it");
    });
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

/// A random duration in `[0, cap]`.
fn random_up_to(cap: Duration) -> Duration {
    let mut bytes = [0u8; 2];
    if getrandom::fill(&mut bytes).is_err() {
        return cap / 2;
    }
    cap.mul_f64(f64::from(u16::from_le_bytes(bytes)) / f64::from(u16::MAX))
}
