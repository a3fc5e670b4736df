//! What one round means for a request: a guard (replicas confirmed, the fence settled with a
//! reentrant handle's memory), another try at once, or a wait; and the acquisition in progress
//! whose tries it settles.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::guard::LockGuard;
use crate::engine::memory::FenceMemory;
use crate::engine::protocol::Hold;
use crate::engine::release;
use crate::engine::replicas;
use crate::engine::request::LockRequest;
use crate::engine::round::{Place, Round};
use crate::engine::shared::Shared;
use crate::error::Result;
use crate::lease::LeaseState;

impl LockRequest {
    /// What a round means for the request: a guard, another try at once (a retry with the
    /// same token, or a grant that came too late), or a wait.
    pub(super) async fn settle(
        &self,
        shared: &Arc<Shared>,
        in_flight: &mut InFlight<'_>,
        memory: Option<&mut Option<FenceMemory>>,
        round: Round,
    ) -> Result<Step> {
        match round {
            Round::Won {
                fence,
                sent_at,
                granted,
            } => {
                let won = (fence, sent_at, granted.as_slice());
                if let Some(guard) = self.on_won(shared, in_flight, won, memory).await? {
                    return Ok(Step::Granted(guard));
                }
                // The grant came so late that the lease may already be over: useless.
                tracing::debug!(lock = %self.name, "grant arrived after its own deadline; giving it back");
                self.abandon(&in_flight.hold, Some(fence), None);
                self.fresh_token(in_flight)?;
                Ok(Step::Wait {
                    remaining: Some(Duration::ZERO),
                    split: true,
                })
            }
            Round::Failed {
                error,
                unreachable,
                give_back,
            } => {
                // Unreachable instances may come back at once (a reconnection). The acquire is
                // idempotent for one token, so the retry reuses it, and nothing is given back
                // in between: a release still in flight could otherwise delete what the retry
                // is granted.
                if unreachable && in_flight.retries < 2 {
                    in_flight.retries += 1;
                    tracing::debug!(lock = %self.name, %error, "acquire failed; retrying with the same token");
                    tokio::time::sleep(in_flight.retry.next_delay()).await;
                    return Ok(Step::Again);
                }
                self.give_back(shared, &in_flight.hold, give_back).await;
                Err(error)
            }
            Round::Contended {
                remaining,
                split,
                give_back,
                place,
            } => {
                if self.give_back(shared, &in_flight.hold, give_back).await {
                    // A queued waiter (fair, or a read-write waiter) also left a waiting entry
                    // under this token on the instances that refused it: take those back too,
                    // or they hold the others back until they lapse.
                    if !self.place_lasts().is_zero() {
                        self.abandon(&in_flight.hold, None, None);
                    }
                    self.fresh_token(in_flight)?;
                }
                if let Some(place) = place {
                    in_flight.places.push(place);
                }
                Ok(Step::Wait { remaining, split })
            }
        }
    }

    /// A new token for the next tries: releases of the old one may still be in flight, so it
    /// is never reused; the places in line it left are forgotten.
    fn fresh_token(&self, in_flight: &mut InFlight<'_>) -> Result<()> {
        in_flight.hold = self.hold(&in_flight.hold.name, in_flight.hold.keys.clone())?;
        in_flight.places.clear();
        Ok(())
    }

    /// A won round as a guard: replicas confirmed where asked (else given back, and the
    /// error), the fence settled with the handle's memory over Redlock. `Ok(None)`: the grant
    /// came after its own deadline, and is the caller's to give back.
    /// `won`: the granted fence, when the winning try was sent, and the instances that granted.
    async fn on_won(
        &self,
        shared: &Arc<Shared>,
        in_flight: &InFlight<'_>,
        (fence, sent_at, granted): (u64, Instant, &[usize]),
        memory: Option<&mut Option<FenceMemory>>,
    ) -> Result<Option<LockGuard>> {
        let hold = &in_flight.hold;
        if let Some(ack) = shared.replica_ack
            && let Err(err) = replicas::confirm(&shared.instances, hold, granted, ack).await
        {
            // Given back at once: the holder never learns of the grant.
            let limit = shared.instances.limit(self.ttl);
            release::release_on(&shared.instances, hold, None, None, limit, false).await;
            return Err(err);
        }
        let lease = LeaseState::new(sent_at, self.ttl, &shared.drift);
        if lease.deadline <= Instant::now() {
            return Ok(None);
        }
        // Over Redlock, a reentrant grant while the handle's hold is still held is a re-entry
        // into that hold and keeps its fence.
        let mut fence = fence;
        let mut memory = memory;
        if let Some(memory) = memory.as_deref_mut() {
            fence = FenceMemory::settle(memory, fence);
        }
        // Granted by a master the client has left since: checked on the new one now, not a
        // third of a lease later.
        let moved = in_flight.switch_epoch != shared.instances.switch_epoch();
        let guard = self.guard(
            hold.clone(),
            fence,
            lease,
            in_flight.started,
            moved.then(Instant::now),
        );
        if let Some(memory) = memory.and_then(Option::as_mut) {
            memory.add(guard.lease());
        }
        Ok(Some(guard))
    }
}

/// What a round means for the request (see `LockRequest::settle`).
pub(super) enum Step {
    Granted(LockGuard),
    Again,
    Wait {
        remaining: Option<Duration>,
        split: bool,
    },
}

/// An acquisition in progress, and what its tries carry from round to round: the hold they try
/// with (a fresh token after a give-back), the places in line it left, the retries of
/// unreachable instances, when the request started, and the client's master switches as the
/// current round began. If the `acquire` future is dropped while armed, whatever the hold's
/// token may have been granted is released in the background.
pub(super) struct InFlight<'a> {
    pub(super) request: &'a LockRequest,
    pub(super) hold: Arc<Hold>,
    pub(super) armed: bool,
    pub(super) places: Places,
    pub(super) retry: crate::backoff::Backoff,
    pub(super) retries: u32,
    pub(super) started: Instant,
    pub(super) switch_epoch: u64,
}

impl<'a> InFlight<'a> {
    pub(super) fn new(request: &'a LockRequest, hold: Arc<Hold>) -> Self {
        InFlight {
            request,
            hold,
            armed: true,
            places: Places::default(),
            retry: crate::backoff::RETRY,
            retries: 0,
            started: Instant::now(),
            switch_epoch: 0,
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(lock = %self.request.name, "acquire cancelled; giving back what it may hold");
            self.request.abandon(&self.hold, None, None);
        }
    }
}

/// The places in line that a waiting token's last few tries left: a release that passes the lock
/// names one of them (by when it lapses), usually the last.
#[derive(Default)]
pub(super) struct Places(Vec<Place>);

impl Places {
    /// More than a waiter's tries within one queue timeout (it tries again every third of it,
    /// and on release messages addressed to others it is not woken).
    const KEPT: usize = 8;

    pub(super) fn push(&mut self, place: Place) {
        if self.0.len() == Self::KEPT {
            self.0.remove(0);
        }
        self.0.push(place);
    }

    pub(super) fn find(&self, lapses: u64) -> Option<Place> {
        self.0.iter().rev().find(|p| p.lapses == lapses).copied()
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}
