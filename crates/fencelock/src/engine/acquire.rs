//! Acquiring a lock of any kind: the request loop. Each try is one round over the instances
//! (`round.rs`); between tries a waiter sleeps until a release message, the holder's lease
//! running out, or its own deadline, and never polls Redis in a loop. A release message may
//! pass the lock to the waiter (a kind that keeps a line of waiters on one server): it is then
//! granted without another try.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::engine::guard::LockGuard;
use crate::engine::label;
use crate::engine::memory::FenceMemory;
use crate::engine::protocol::Hold;
use crate::engine::release::{self, Abandoned};
use crate::engine::request::{LockRequest, WaitPolicy};
use crate::engine::round::GiveBack;
use crate::engine::settle::{InFlight, Places, Step};
use crate::engine::shared::Shared;
use crate::engine::watchdog::Renewal;
use crate::error::{Error, Result};
use crate::keys::LockKeys;
use crate::lease::{Lease, LeaseState};
use crate::notify::{Addressed, Pass};
use crate::quorum::Subscriptions;
use crate::script::PASS_CLAIM;

impl LockRequest {
    /// Takes the lock if it is free now; `Ok(None)` if another owner holds it.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), but for [`Error::Busy`], which is `Ok(None)`.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(self) -> Result<Option<LockGuard>> {
        match self.no_wait().acquire().await {
            Ok(guard) => Ok(Some(guard)),
            Err(Error::Busy { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Takes the lock, waiting as the [`WaitPolicy`] allows.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`] (held, and no waiting), [`Error::TimedOut`], [`Error::Unreachable`],
    /// [`Error::AuthFailed`], [`Error::PermissionDenied`], [`Error::Redis`],
    /// [`Error::NoQuorum`] (Redlock), [`Error::WrongType`], [`Error::Conflict`] (the name is
    /// used differently), [`Error::Unsupported`] (this kind over Redlock),
    /// [`Error::InvalidArgument`]. On any error nothing is left held, and a waiter's place in a
    /// queue is given back.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: if the returned future is dropped before it completes (in a `select!`, or
    /// by a timeout), whatever it may have been granted is released in the background (see
    /// [`Client::wait_idle`](crate::Client::wait_idle)).
    pub async fn acquire(self) -> Result<LockGuard> {
        let kind = self.protocol.label();
        let span = tracing::debug_span!("fencelock.acquire", lock = %self.name, kind = %kind, fence = tracing::field::Empty);
        let started = crate::observe::Started::now(kind, &self.name);
        // Not boxed: the allocation and the copy into it cost more than the moves of the
        // state machine in place (callgrind: 3.6 % of the client's instructions per W2 cycle).
        let inner = self.acquire_inner();
        // A disabled span (no subscriber, or its level filtered out) is not worth entering and
        // leaving at every poll.
        let result = if span.is_disabled() {
            inner.await
        } else {
            tracing::Instrument::instrument(inner, span.clone()).await
        };
        match &result {
            Ok(guard) => {
                span.record("fence", guard.fence());
                tracing::debug!(parent: &span, "granted");
                guard.trace_hold();
            }
            Err(err) => tracing::debug!(parent: &span, %err, "not granted"),
        }
        crate::observe::acquisition(&result, started);
        result
    }

    async fn acquire_inner(self) -> Result<LockGuard> {
        self.validate()?;
        let shared = self.shared.clone();
        let keys = shared.keys(&self.name);
        let name: Arc<str> = Arc::from(self.name.as_str());
        // Over Redlock, a handle that remembers its hold's fence (reentrant) has its acquisitions
        // take turns, so that the memory follows the order of the grants.
        let mut memory = match self.protocol.fence_memory() {
            Some(memory) if !shared.instances.is_single() => {
                Some(memory.clone().lock_owned().await)
            }
            _ => None,
        };
        let mut in_flight = InFlight::new(&self, self.hold(&name, keys)?);
        let result = self
            .acquire_with(&shared, &mut in_flight, memory.as_deref_mut())
            .await;
        in_flight.armed = false;
        if result.is_err() && !self.place_lasts().is_zero() {
            // A waiter that gives up may have left a place in a queue: take it back before
            // returning, so that the next request does not find it there. Where that fails, the
            // armed guard retries in the background.
            let limit = shared.instances.limit(self.ttl);
            let answers =
                release::release_on(&shared.instances, &in_flight.hold, None, None, limit, false)
                    .await;
            in_flight.armed = answers.iter().any(|a| !matches!(a, Some(Ok(_))));
        }
        // A labelled hold's label, written once the hold is ours (an unlabelled one sends
        // nothing here).
        if let Ok(guard) = &result
            && guard.hold().holder_label.is_some()
        {
            label::write_on_all(&shared.instances, guard.hold(), self.ttl).await;
        }
        result
    }

    /// A hold for this request with a fresh token.
    pub(super) fn hold(&self, name: &Arc<str>, keys: LockKeys) -> Result<Arc<Hold>> {
        Ok(Arc::new(Hold {
            name: name.clone(),
            protocol: self.protocol.clone(),
            keys,
            token: self.shared.tokens.for_lock(&self.name)?,
            linger: self.lock_delay,
            marked: Default::default(),
            releasing: Default::default(),
            released_fence: Default::default(),
            holder_label: self.label.clone(),
        }))
    }

    async fn acquire_with(
        &self,
        shared: &Arc<Shared>,
        in_flight: &mut InFlight<'_>,
        mut memory: Option<&mut Option<FenceMemory>>,
    ) -> Result<LockGuard> {
        let started = in_flight.started;
        let give_up_at = self.give_up_at(started);
        // A request that may wait tries as a waiter from its first try (taking its place in
        // line, where its kind keeps one) when its release channel is subscribed already:
        // nothing said on the channel from here on is missed, and the try that would follow
        // the subscription is saved. Otherwise it subscribes after a first try that found the
        // lock held.
        let passed_by_token = self.passed_by_token();
        let mut subscription: Option<Subscriptions> = match self.wait {
            WaitPolicy::NoWait => None,
            _ => shared
                .instances
                .subscribed_already(in_flight.hold.keys.channel()),
        };
        // Counts this request in `fencelock_waiters` from its first wait until it returns.
        let mut _counted: Option<crate::observe::Waiting> = None;
        loop {
            // A fair lock's release wakes the next waiter by its token: answer to it before
            // each try, or a release between the try and the wait below would be lost (the
            // waiter would sleep until it refreshes its place).
            if let Some(waiting) = &mut subscription {
                waiting.answer_to(in_flight.hold.token.as_str());
            }
            in_flight.switch_epoch = shared.instances.switch_epoch();
            let round = self
                .round(shared, &in_flight.hold, subscription.is_some())
                .await?;
            let (remaining, split) = match self
                .settle(shared, in_flight, memory.as_deref_mut(), round)
                .await?
            {
                Step::Granted(guard) => return Ok(guard),
                Step::Again => continue,
                Step::Wait { remaining, split } => (remaining, split),
            };
            let now = Instant::now();
            if give_up_at.is_some_and(|at| now >= at) {
                return Err(self.gave_up(remaining, now - started));
            }
            let Some(waiting) = &mut subscription else {
                // Subscribe, then try again at once: a release between the first try and the
                // subscription would otherwise go unnoticed.
                let limit = shared.instances.limit(self.ttl);
                let channel = in_flight.hold.keys.channel();
                subscription = Some(shared.instances.subscribe(channel, limit).await);
                continue;
            };
            if _counted.is_none() {
                _counted = Some(crate::observe::Waiting::start(
                    self.protocol.label(),
                    &self.name,
                ));
            }
            // In line now: a pass to this request goes on its own channel first.
            if passed_by_token {
                waiting.listen_on_own_channel();
            }
            let pause = self.pause(split, remaining);
            let mut wake_at = give_up_at.map_or(now + pause, |at| at.min(now + pause));
            let wait = tracing::debug_span!("fencelock.wait", lock = %self.name);
            let passed = tracing::Instrument::instrument(
                async {
                    loop {
                        tokio::select! {
                            woken = waiting.released() => match woken {
                                Some(Addressed::Passed(pass)) => break Some(pass),
                                // Passed to the waiter ahead: try when its claim runs out, if
                                // that is sooner than planned.
                                Some(Addressed::Behind(at)) => wake_at = wake_at.min(at),
                                None => break None,
                            },
                            () = tokio::time::sleep_until(wake_at) => break None,
                        }
                    }
                },
                wait,
            )
            .await;
            if let Some(pass) = passed
                && let Some(guard) =
                    self.take_pass(shared, &in_flight.hold, pass, &in_flight.places, started)
            {
                return Ok(guard);
            }
        }
    }

    /// When the caller's wait policy gives up (`None`: never).
    fn give_up_at(&self, started: Instant) -> Option<Instant> {
        self.wait.deadline(started)
    }

    /// The error of a request whose wait ran out: busy for one that did not wait.
    fn gave_up(&self, remaining: Option<Duration>, waited: Duration) -> Error {
        match self.wait {
            WaitPolicy::NoWait => Error::Busy {
                lock: self.name.clone(),
                remaining,
            },
            _ => Error::TimedOut {
                lock: self.name.clone(),
                waited,
            },
        }
    }

    /// How long a waiter sleeps before its next try, unless a release message wakes it: until
    /// the holder's lease runs out (plus a little jitter, so that waiters of many clients do
    /// not all retry at the same instant), or after a split vote a short random delay; a
    /// queued waiter comes back in time to keep its place.
    fn pause(&self, split: bool, remaining: Option<Duration>) -> Duration {
        let pause = if split {
            random_up_to((self.ttl / 10).min(Duration::from_millis(50)))
        } else {
            let remaining = remaining.unwrap_or_default();
            remaining + random_up_to((remaining / 16).min(Duration::from_millis(10)))
        };
        let place_lasts = self.place_lasts();
        if place_lasts.is_zero() {
            pause
        } else {
            pause.min(place_lasts / 3)
        }
    }

    /// The lock a release passed to this waiter, as a guard at once. The passed lease is a
    /// claim that ends at a server millisecond the message names, at the latest when the place
    /// the release read would have lapsed; that place was set by one of this token's tries (the
    /// one whose reply named the same instant), which ran at a known server millisecond and was
    /// sent before it ran: the conservative deadline counts from its send time. The watchdog
    /// confirms the full lease a third of the way into the claim, so a lock held briefly costs
    /// no confirmation, and a waiter that died costs no more than the claim.
    ///
    /// `None` leaves the grant to the next try, which finds the lock held by this token and
    /// confirms it (acquire is idempotent): a place this request does not know (a try whose
    /// reply was lost), a lease that may be over already, a request renewed by hand (its
    /// lease is counted from a grant of the full length), or replicas that must acknowledge the
    /// grant first (`WAIT` covers this client's own writes only).
    fn take_pass(
        &self,
        shared: &Shared,
        hold: &Arc<Hold>,
        pass: Pass,
        places: &Places,
        started: Instant,
    ) -> Option<LockGuard> {
        let kind = self.protocol.label();
        if !self.auto_renew || shared.replica_ack.is_some() {
            // The next try finds the lock held by this token and confirms it.
            crate::observe::pass(kind, &self.name, true);
            return None;
        }
        let Some(place) = places.find(pass.lapses) else {
            crate::observe::pass(kind, &self.name, true);
            return None;
        };
        // The try that set the place was sent at `sent_at` and ran at the server millisecond
        // `lapses - place_lasts`: the passed lease, which ends at `ends` (the claim; when the
        // place lapses without one), lasts this long from `sent_at` at the least.
        let cut = pass.ends.map_or(0, |ends| pass.lapses.saturating_sub(ends));
        let passed_for = self
            .place_lasts()
            .saturating_sub(Duration::from_millis(cut));
        let mut lease = LeaseState::new(place.sent_at, passed_for, &shared.drift);
        // The watchdog renews with the lease the request asked for.
        lease.ttl = self.ttl;
        if lease.deadline <= Instant::now() {
            crate::observe::pass(kind, &self.name, false);
            return None;
        }
        crate::observe::pass(kind, &self.name, true);
        tracing::debug!(lock = %self.name, fence = pass.fence, "passed the lock by its release");
        // The full lease is confirmed once a third of the claim has passed (a hold that ends
        // sooner costs no confirmation), at once if that is behind us.
        let claim = passed_for.min(PASS_CLAIM).min(self.ttl);
        let first_due = place
            .sent_at
            .checked_add(passed_for)?
            .checked_sub(claim * 2 / 3)?;
        Some(self.guard(hold.clone(), pass.fence, lease, started, Some(first_due)))
    }

    /// Gives back what a lost round may hold: releases where it was granted (waiting for the
    /// answers, so the lock is free for others at once) and, in the background, where the
    /// outcome is unknown. Returns whether anything was given back.
    pub(crate) async fn give_back(
        &self,
        shared: &Shared,
        hold: &Arc<Hold>,
        give_back: GiveBack,
    ) -> bool {
        let GiveBack { granted, unknown } = give_back;
        let gave = !granted.is_empty() || !unknown.is_empty();
        if !granted.is_empty() {
            let limit = shared.instances.limit(self.ttl);
            release::release_on(&shared.instances, hold, None, Some(&granted), limit, false).await;
        }
        if !unknown.is_empty() {
            self.abandon(hold, None, Some(unknown.into_vec()));
        }
        gave
    }

    /// Releases `hold` in the background (on `only`, or on every instance).
    pub(crate) fn abandon(&self, hold: &Arc<Hold>, fence: Option<u64>, only: Option<Vec<usize>>) {
        let shared = &self.shared;
        shared.watchdog.release(
            None,
            Abandoned::new(hold.clone(), fence, only, &shared.instances),
        );
    }

    /// The guard of a grant. `first_due`: when the watchdog renews it first, if not a third of
    /// a lease after the grant was asked for (see [`Watchdog::renew`](crate::engine::watchdog::Watchdog::renew)).
    pub(super) fn guard(
        &self,
        hold: Arc<Hold>,
        fence: u64,
        lease: LeaseState,
        started: Instant,
        first_due: Option<Instant>,
    ) -> LockGuard {
        let shared = &self.shared;
        let lease: Lease = watch::channel(lease).0;
        // Renewed by the watchdog, or (not renewed) watched by it until the deadline, when it
        // reports the loss of a lock still held.
        let id = shared.next_id();
        let renewal = Renewal {
            hold: hold.clone(),
            fence,
            lease: lease.clone(),
            hold_until: self.max_hold.and_then(|limit| started.checked_add(limit)),
        };
        if self.auto_renew {
            shared.watchdog.renew(id, renewal, first_due);
        } else {
            shared.watchdog.watch(id, renewal);
        }
        let renewal_id = Some(id);
        tracing::debug!(lock = %hold.name, kind = hold.label(), fence, "lock acquired");
        LockGuard::new(self.shared.clone(), hold, fence, lease, renewal_id)
    }
}

/// A random duration in `[0, cap]`.
fn random_up_to(cap: Duration) -> Duration {
    let mut bytes = [0u8; 2];
    if getrandom::fill(&mut bytes).is_err() {
        return cap / 2;
    }
    cap.mul_f64(f64::from(u16::from_le_bytes(bytes)) / f64::from(u16::MAX))
}
