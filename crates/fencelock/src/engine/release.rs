//! How a hold is released: the one release path used by a guard's `release`, by a dropped guard
//! (in the background), and by a lost acquisition round giving back what it may have taken.

use std::sync::Arc;
use std::time::Duration;

use crate::background::Running;
use crate::engine::ops;
use crate::engine::protocol::Hold;
use crate::engine::protocol::ReleaseFence;
use crate::quorum::{Answer, Instances};

/// Releases `hold` on `only` (or every) instance, raising each fence key to at least `fence`
/// first (over Redlock, for kinds that write their fence back). Each call is bounded by `limit`;
/// with `until_majority`, it returns as soon as a majority released (the rest runs on in the
/// background), otherwise it waits for every answer.
pub(crate) async fn release_on(
    instances: &Instances,
    hold: &Arc<Hold>,
    fence: Option<u64>,
    only: Option<&[usize]>,
    limit: Duration,
    until_majority: bool,
) -> Vec<Answer<bool>> {
    // Before anything is sent: a try of this hold answered from now on gives itself back.
    let fence = release_fence(instances, hold, fence);
    if let ReleaseFence::WriteBack(back) = fence {
        hold.begin_release(Some(back));
    } else {
        hold.begin_release(None);
    }
    let quorum = instances.quorum();
    instances
        .on_all(
            only,
            |server| ops::release(server.clone(), hold.clone(), fence, limit),
            |answers| until_majority && quorum.reached(released(answers)),
        )
        .await
}

/// What a release of `hold` with `fence` (if known) sends: the write-back matters only over
/// Redlock; on a single instance the fence key already holds this fence (or a larger one), and
/// the lock's value holds it too, so the script can compare the whole value.
pub(crate) fn release_fence(
    instances: &Instances,
    hold: &Hold,
    fence: Option<u64>,
) -> ReleaseFence {
    match fence {
        None => ReleaseFence::Unknown,
        Some(fence) if instances.is_single() => ReleaseFence::Held(fence),
        Some(fence) if hold.protocol.writes_fence_back() => ReleaseFence::WriteBack(fence),
        Some(_) => ReleaseFence::Unknown,
    }
}

/// How many answers say "released".
pub(crate) fn released(answers: &[Answer<bool>]) -> usize {
    answers
        .iter()
        .filter(|a| matches!(a, Some(Ok(true))))
        .count()
}

/// A hold to release in the background: a dropped guard's, or the leftovers of a failed
/// acquisition or release. It counts as background work (see `Client::wait_idle`) from the
/// moment it is handed over until its release has ended, and as the
/// [`Cleanup`](crate::Cleanup) of the future that handed it over, if that future runs in one.
pub(crate) struct Abandoned {
    hold: Arc<Hold>,
    fence: Option<u64>,
    /// The instances to release on (`None`: all).
    only: Option<Vec<usize>>,
    running: Running,
    /// Its count in the clean-up of the future that handed it over.
    own: Option<Running>,
}

impl Abandoned {
    /// `hold` to release (on `only`, or every instance of `instances`), raising fence keys to
    /// `fence` as [`release_on`] does.
    pub(crate) fn new(
        hold: Arc<Hold>,
        fence: Option<u64>,
        only: Option<Vec<usize>>,
        instances: &Instances,
    ) -> Self {
        Abandoned {
            hold,
            fence,
            only,
            running: instances.running(),
            own: crate::background::own_ticket(),
        }
    }

    /// Releases the hold, retrying a few times where instances are briefly unreachable.
    /// Whatever cannot be released runs out with its lease.
    pub(crate) async fn release(self, instances: Arc<Instances>) {
        // The ticket lives until the end of this function.
        let Abandoned {
            hold,
            fence,
            only,
            running: _running,
            own: _own,
        } = self;
        let mut pending: Option<Vec<usize>> = only;
        let mut retry = crate::backoff::RETRY;
        for _ in 0..3 {
            let limit = instances.command_timeout();
            let answers =
                release_on(&instances, &hold, fence, pending.as_deref(), limit, false).await;
            let failed: Vec<usize> = answers
                .iter()
                .enumerate()
                .filter(|(i, a)| {
                    pending.as_ref().is_none_or(|p| p.contains(i)) && !matches!(a, Some(Ok(_)))
                })
                .map(|(i, _)| i)
                .collect();
            if failed.is_empty() {
                return;
            }
            if instances.is_closed() {
                tracing::debug!(lock = %hold.name, "the client is closed: the hold runs out with its lease");
                return;
            }
            tracing::debug!(lock = %hold.name, failed = failed.len(), "background release failed; retrying");
            pending = Some(failed);
            tokio::time::sleep(retry.next_delay()).await;
        }
        tracing::debug!(lock = %hold.name, "could not release a hold on every instance; the lease will run out there");
    }
}
