//! How an extension of a hold is judged: the guard's `extend` and the watchdog's renewals both
//! decide here, and a hold missing on a minority is put back there (over Redlock).

use std::sync::Arc;
use std::time::Duration;

use crate::engine::ops::{self, Extended};
use crate::engine::protocol::Hold;
use crate::engine::release;
use crate::quorum::Instances;

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

/// Counts extend answers (one per instance; `None` where an instance gave no usable answer).
fn count(answers: &[Option<Extended>], e: Extended) -> usize {
    answers.iter().filter(|a| **a == Some(e)).count()
}

/// Whether the answers so far settle an extension: a majority extended, or too many say the
/// key is gone or taken for a majority to be left.
pub(crate) fn settled(instances: &Instances, answers: &[Option<Extended>]) -> bool {
    let quorum = instances.quorum();
    quorum.reached(count(answers, Extended::Yes))
        || quorum.out_of_reach(count(answers, Extended::Missing) + count(answers, Extended::Taken))
}

/// Judges one lock's extend answers. When a majority extended, the hold is put back, in the
/// background, on the instances that lost the key (see [`reassert_in_background`]).
pub(crate) fn judge_extension(
    instances: &Arc<Instances>,
    answers: &[Option<Extended>],
    hold: &Arc<Hold>,
    fence: u64,
    ttl: Duration,
) -> ExtensionTally {
    let quorum = instances.quorum();
    let (extended, missing, taken) = (
        count(answers, Extended::Yes),
        count(answers, Extended::Missing),
        count(answers, Extended::Taken),
    );
    let verdict = if quorum.reached(extended) {
        if missing > 0 && !instances.is_single() {
            let missing = (0..answers.len())
                .filter(|i| answers[*i] == Some(Extended::Missing))
                .collect();
            reassert_in_background(instances, hold.clone(), fence, ttl, missing);
        }
        Verdict::Extended
    } else if quorum.out_of_reach(missing + taken) {
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

/// Puts the hold back, in the background, on the instances in `missing` (none: nothing), which
/// answered a renewal that a majority had already extended, finding the key gone.
pub(crate) fn reassert_late(
    instances: &Arc<Instances>,
    hold: Arc<Hold>,
    fence: u64,
    ttl: Duration,
    missing: Vec<usize>,
) {
    if !missing.is_empty() && !instances.is_single() {
        reassert_in_background(instances, hold, fence, ttl, missing);
    }
}

/// Puts the hold back, in the background, on the instances in `missing` (over Redlock, after a
/// renewal found their key gone while a majority still held it), if its kind does that. Safe
/// with fencing: it only ever fills an empty key with the current holder's own value (never
/// takes a lock held by anyone else), and it raises the instance's fence key to the holder's
/// fence, so an instance that restarted empty stops handing out fences below it. Nothing is put
/// back once the hold's release has begun, and what was put back while it began is given back
/// (the release may have reached that instance first).
fn reassert_in_background(
    instances: &Arc<Instances>,
    hold: Arc<Hold>,
    fence: u64,
    ttl: Duration,
    missing: Vec<usize>,
) {
    if hold.reassert_call(fence, ttl).is_none() {
        return;
    }
    let all = instances.clone();
    instances.spawn(async move {
        if hold.is_releasing() {
            return;
        }
        let limit = all.limit(ttl);
        let answers = all
            .on_all(
                Some(&missing),
                |server| ops::reassert(server.clone(), hold.clone(), fence, ttl, limit),
                |_| false,
            )
            .await;
        let restored: Vec<usize> = (0..answers.len())
            .filter(|i| matches!(answers.get(*i), Some(Some(Ok(true)))))
            .collect();
        tracing::debug!(lock = %hold.name, restored = restored.len(), "re-asserted the hold on instances that had lost it");
        if hold.is_releasing() && !restored.is_empty() {
            let fence = hold.released_fence();
            release::release_on(&all, &hold, fence, Some(&restored), limit, false).await;
        }
    });
}
