//! The guard of a held lock: its fence, its deadline, its lost signal; extend and release.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::Shared;
use crate::engine::extend::{self, Verdict, judge_extension};
use crate::engine::ops::{self, Extended};
use crate::engine::protocol::Hold;
use crate::engine::release::{self, Abandoned};
use crate::engine::request::validate_ttl;
use crate::error::{Error, LostReason, ReleaseOutcome, Result};
use crate::lease::{Ending, Lease, LostSignal, confirm};

/// Proof of holding a lock (of any kind: a plain lock, one hold of a reentrant lock, a read or
/// write lock, a semaphore permit, a fair lock), for as long as its lease lasts.
///
/// A lock on Redis is a lease: if this process stalls longer than the lease (a long GC-like
/// pause, a stopped VM, a slow network), another process can take the lock while this guard
/// still exists. The guard therefore offers:
/// - [`fence`](Self::fence): a number larger than every earlier holder's, to hand to the
///   protected resource so that it can refuse a stale holder;
/// - [`deadline`](Self::deadline) / [`is_held`](Self::is_held): a conservative local view of
///   the lease;
/// - [`lost`](Self::lost): a signal that fires when the lock is lost.
///
/// Dropping a guard releases the lock in the background (it never blocks); prefer
/// [`release`](Self::release), which says whether the lock was still held.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    shared: Arc<Shared>,
    hold: Arc<Hold>,
    fence: u64,
    lease: Lease,
    renewal_id: Option<u64>,
    finished: bool,
    /// Counts the hold in `fencelock_held` (feature `metrics`) and traces it
    /// (`fencelock.hold`) until the lease ends (a release or a loss) or the guard is gone.
    held: crate::observe::Held,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.hold.name)
            .field("kind", &self.hold.label())
            .field("fence", &self.fence)
            .field("token", &self.hold.token)
            .field("is_held", &self.is_held())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(
        shared: Arc<Shared>,
        hold: Arc<Hold>,
        fence: u64,
        lease: Lease,
        renewal_id: Option<u64>,
    ) -> Self {
        let held = crate::observe::Held::start(hold.label(), &hold.name);
        if let Some(ender) = held.ender() {
            lease.send_if_modified(|s| {
                if s.lost.is_some() {
                    ender.end();
                } else {
                    s.held = Some(ender);
                }
                false
            });
        }
        LockGuard {
            held,
            shared,
            hold,
            fence,
            lease,
            renewal_id,
            finished: false,
        }
    }

    pub(crate) fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Traces the hold from now on (`fencelock.hold`), in the caller's context.
    pub(crate) fn trace_hold(&self) {
        self.held
            .trace(self.hold.label(), &self.hold.name, self.fence);
    }

    /// The client this guard's lock belongs to.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// This acquisition's hold.
    pub(crate) fn hold(&self) -> &Hold {
        &self.hold
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.hold.name
    }

    /// The fencing token of this acquisition: strictly larger than that of every earlier
    /// acquisition of this lock name (also across a Redis restart or flush, see the crate docs).
    ///
    /// Per kind: a plain or fair lock, a write lock and a semaphore permit get a new fence with
    /// each grant. A reentrant lock gets one when it passes from free to held, and every
    /// re-entry keeps it. A read lock gets no fence of its own: this is the fence of the last
    /// write lock granted before it (0 if there was none), so a reader can tell which write it
    /// sees. Over Redlock, where each instance counts on its own, it is at least the last
    /// write's fence and below the next write's.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The local deadline of the lease: the instant, on this process's monotonic clock, before
    /// which the lease cannot have run out on the server (measured from before the request that
    /// confirmed it was sent, minus the clock-drift margin). It moves forward on each renewal.
    pub fn deadline(&self) -> Instant {
        self.lease.borrow().deadline
    }

    /// How long until [`deadline`](Self::deadline) (zero once it has passed).
    pub fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(Instant::now())
    }

    /// Whether the lock is still held, as far as this process can tell now: not reported lost,
    /// and the deadline not passed.
    pub fn is_held(&self) -> bool {
        self.lease.borrow().lost_at(Instant::now()).is_none()
    }

    /// A signal that resolves when the lock is lost (see [`LostSignal`]).
    pub fn lost(&self) -> LostSignal {
        LostSignal::new(&self.lease)
    }

    /// Re-arms the lease to `ttl` from now (if automatic renewal is on, it goes on with this
    /// lease length). Fails with [`Error::NotHeld`] if the lock is no longer held; the guard then
    /// reports it lost. Over Redlock it succeeds only when a majority extended within the lease;
    /// a partial extension deletes nothing (the watchdog retries until the deadline).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] (the lock was lost), [`Error::InvalidArgument`] (a bad lease),
    /// [`Error::Unreachable`], [`Error::AuthFailed`], [`Error::PermissionDenied`],
    /// [`Error::Redis`], or [`Error::NoQuorum`] (Redlock) when no answer settled it; the lease
    /// is then unchanged as far as this process knows.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a dropped call may still re-arm the lease on the server, which only
    /// lengthens it; the guard's deadline is then not moved.
    pub async fn extend(&self, ttl: Duration) -> Result<()> {
        validate_ttl(&self.hold.name, ttl)?;
        let sent_at = Instant::now();
        let lost = self.lease.borrow().lost_at(sent_at);
        if let Some(reason) = lost {
            // The deadline passed, if nothing reported the loss yet (nothing if something did).
            self.hold
                .end(&self.lease, self.fence, Ending::DeadlinePassed);
            return Err(self.not_held(reason));
        }
        let shared = &self.shared;
        let instances = &shared.instances;
        let limit = instances.limit(ttl);
        // On one server, the value holds the grant's fence (see `native.rs`).
        let fence = instances.is_single().then_some(self.fence);
        // The call returns once a majority settled it; the instances still to answer go on, and
        // tell `late` what they found (every instance is called, in order: its number).
        let (late, mut heard) = tokio::sync::mpsc::unbounded_channel();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let answers = instances
            .on_all(
                None,
                |server| {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let (late, call) = (
                        late.clone(),
                        ops::extend(server.clone(), self.hold.clone(), fence, ttl, limit),
                    );
                    async move {
                        let answer = call.await;
                        if let Ok(found) = &answer {
                            let _ = late.send((i, *found));
                        }
                        answer
                    }
                },
                |answers| extend::settled(instances, &usable(answers)),
            )
            .await;
        drop(late);
        let usable = usable(&answers);
        let tally = judge_extension(&shared.instances, &usable, &self.hold, self.fence, ttl);
        match tally.verdict {
            Verdict::Extended => {
                confirm(&self.lease, sent_at, ttl, &shared.drift);
                // An instance that answers after the majority did, finding the key gone, gets
                // the hold back too, as the watchdog's renewals (which hear every instance) do.
                let unanswered: Vec<usize> = (0..usable.len())
                    .filter(|i| usable.get(*i).is_some_and(Option::is_none))
                    .collect();
                if !unanswered.is_empty() {
                    let (all, hold, fence) = (instances.clone(), self.hold.clone(), self.fence);
                    instances.spawn(async move {
                        let mut missing = Vec::new();
                        while let Some((i, found)) = heard.recv().await {
                            if found == Extended::Missing && unanswered.contains(&i) {
                                missing.push(i);
                            }
                        }
                        extend::reassert_late(&all, hold, fence, ttl, missing);
                    });
                }
                Ok(())
            }
            Verdict::Lost => {
                self.hold.end(&self.lease, self.fence, Ending::NotOwner);
                Err(self.not_held(LostReason::NotOwner))
            }
            Verdict::Failed => Err(instances.failure(
                &self.hold.name,
                "extend",
                answers,
                tally.extended,
                tally.taken,
            )),
        }
    }

    /// Releases the lock. Returns `true` if it was still held (over Redlock: on a majority),
    /// `false` if it had already been lost (the lease ran out, or an operator force-released
    /// it). Only this guard's own hold is ever deleted.
    ///
    /// # Errors
    ///
    /// If Redis cannot be reached ([`Error::Unreachable`], [`Error::NoQuorum`]) or refuses
    /// ([`Error::Redis`], [`Error::PermissionDenied`], [`Error::AuthFailed`]), the release is
    /// retried in the background and the error is returned; the lease runs out on its own if it
    /// never gets through.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the guard is consumed; if the future is dropped before the release is
    /// confirmed, the release still reaches Redis (the call in flight, or the guard's release
    /// on drop).
    pub async fn release(self) -> Result<bool> {
        self.release_outcome().await.map(|o| o.is_released())
    }

    /// Releases the lock, as [`release`](Self::release) does, and says what the release found:
    /// [`ReleaseOutcome::Released`], or [`ReleaseOutcome::NotHeld`] with the reason the lock
    /// was no longer held (Redis said another owner has it, or the key was gone:
    /// [`LostReason::NotOwner`]; the lease had run out: [`LostReason::Expired`] or
    /// [`LostReason::MaxHoldReached`]; a loss reported earlier keeps its reason).
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// use fencelock::ReleaseOutcome;
    /// let guard = client.lock("reports/nightly").acquire().await?;
    /// // ... the work ...
    /// match guard.release_outcome().await? {
    ///     ReleaseOutcome::Released => {}
    ///     ReleaseOutcome::NotHeld { lock, reason } => eprintln!("{lock} was lost: {reason}"),
    ///     _ => {}
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release): [`Error::Unreachable`], [`Error::NoQuorum`],
    /// [`Error::Redis`], [`Error::PermissionDenied`] or [`Error::AuthFailed`] when no answer
    /// settled it (the release is retried in the background).
    ///
    /// # Cancel safety
    ///
    /// As [`release`](Self::release): the guard is consumed, and the release still reaches
    /// Redis if the future is dropped.
    pub async fn release_outcome(mut self) -> Result<ReleaseOutcome> {
        self.finished = true;
        let shared = self.shared.clone();
        if let Some(id) = self.renewal_id.take() {
            shared.watchdog.stop(id);
        }
        let instances = &shared.instances;
        let ttl = self.lease.borrow().ttl;
        let limit = instances.limit(ttl);
        let sent_at = Instant::now();
        let span = tracing::debug_span!(
            "fencelock.release",
            lock = %self.hold.name,
            kind = %self.hold.protocol.label(),
            fence = self.fence
        );
        let releasing =
            release::release_on(instances, &self.hold, Some(self.fence), None, limit, true);
        let answers = if span.is_disabled() {
            releasing.await
        } else {
            tracing::Instrument::instrument(releasing, span).await
        };
        let released = release::released(&answers);
        // Instances that failed get another try in the background. Those not waited for (a
        // majority had answered) need none: their release is on its way already.
        let failed: Vec<usize> = answers
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(a, Some(Err(_))))
            .map(|(i, _)| i)
            .collect();
        let unanswered = answers.iter().filter(|a| a.is_none()).count();
        tracing::debug!(lock = %self.hold.name, fence = self.fence, released, failed = failed.len(), unanswered, "lock released");
        if !failed.is_empty() {
            self.release_in_background(None, Some(failed.clone()));
        }
        let quorum = instances.quorum();
        let outcome = if quorum.reached(released) {
            Ok(true)
        } else if quorum.out_of_reach(failed.len() + unanswered) {
            Err(instances.failure(&self.hold.name, "release", answers, released, 0))
        } else {
            Ok(false)
        };
        // A release that found the lock in other hands (or gone) ends the lease as lost, unless
        // its loss was known already: the lost signal then says why, not just "released".
        // (Past its deadline, the lease had run out: that is the loss `Released` reports.)
        let ending = match outcome {
            Ok(false) if sent_at < self.deadline() => Ending::NotOwner,
            _ => Ending::Released(sent_at),
        };
        self.hold.end(&self.lease, self.fence, ending);
        let held = outcome?;
        if held {
            return Ok(ReleaseOutcome::Released);
        }
        // The lease's first ending says why: a loss known before, the lease run out, or the
        // key in other hands (what `end` just recorded).
        let reason = self
            .lease
            .borrow()
            .lost_at(sent_at)
            .filter(|r| *r != LostReason::Released)
            .unwrap_or(LostReason::NotOwner);
        Ok(ReleaseOutcome::NotHeld {
            lock: self.hold.name.to_string(),
            reason,
        })
    }

    fn not_held(&self, reason: LostReason) -> Error {
        Error::NotHeld {
            lock: self.hold.name.to_string(),
            reason,
        }
    }

    fn release_in_background(&self, renewal_id: Option<u64>, only: Option<Vec<usize>>) {
        let shared = &self.shared;
        let sent = shared.watchdog.release(
            renewal_id,
            Abandoned::new(self.hold.clone(), Some(self.fence), only, &shared.instances),
        );
        if !sent {
            tracing::debug!(lock = %self.hold.name, "client is gone; the lease will run out on its own");
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.hold
            .end(&self.lease, self.fence, Ending::Released(Instant::now()));
        let renewal_id = self.renewal_id.take();
        self.release_in_background(renewal_id, None);
    }
}

/// The usable answers of an extend (an instance that failed or has not answered: `None`).
fn usable(answers: &[crate::quorum::Answer<Extended>]) -> Vec<Option<Extended>> {
    answers
        .iter()
        .map(|a| a.as_ref().and_then(|r| r.as_ref().ok().copied()))
        .collect()
}
