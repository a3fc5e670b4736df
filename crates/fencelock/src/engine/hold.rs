//! What one acquisition holds in Redis: the lock's name and keys, the token of this acquisition,
//! and the [`Protocol`] of its kind, which says which scripts act on it. The request loop, the
//! guard and the watchdog work on a [`Hold`] and never need to know the kind.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::protocol::{Attempt, Protocol, ReleaseFence};
use crate::keys::LockKeys;
use crate::lease::{Lease, LeaseState};
use crate::script::{Arg, Call};
use crate::token::OwnerToken;

/// One acquisition's hold: what the guard, the watchdog and a give-back act on.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) name: Arc<str>,
    pub(crate) protocol: Arc<dyn Protocol>,
    /// In the hold itself (no `Arc` of their own): a renewal reads them with one pointer less
    /// to follow, through memory that thousands of holds spread far apart.
    pub(crate) keys: LockKeys,
    /// The token of this acquisition (each hold has its own, also under a shared owner).
    pub(crate) token: OwnerToken,
}

impl Hold {
    /// The token as a script argument.
    pub(crate) fn token_arg(&self) -> Arg<'_> {
        Arg::Str(self.token.as_str())
    }

    /// The hash field `<role><token>` of this hold, for kinds that keep their holders in a hash.
    pub(crate) fn field_arg(&self, role: &str) -> Arg<'_> {
        Arg::Text(format!("{role}{}", self.token.as_str()))
    }

    /// The lock and fence keys, the first two keys of most scripts.
    pub(crate) fn lock_and_fence(&self) -> [&str; 2] {
        [self.keys.lock(), self.keys.fence()]
    }

    /// What to call the kind in messages.
    pub(crate) fn label(&self) -> &'static str {
        self.protocol.label()
    }

    pub(crate) fn acquire_call(&self, attempt: Attempt) -> Call<'_> {
        self.protocol.acquire(self, attempt)
    }

    pub(crate) fn release_call(&self, fence: ReleaseFence) -> Call<'_> {
        self.protocol.release(self, fence)
    }

    pub(crate) fn extend_call(&self, ttl: Duration) -> Call<'_> {
        self.protocol.extend(self, ttl)
    }

    pub(crate) fn reassert_call(&self, fence: u64, ttl: Duration) -> Option<Call<'_>> {
        self.protocol.reassert(self, fence, ttl)
    }
}

/// Over Redlock, a handle's memory of its current hold (see [`Protocol::fence_memory`]): the
/// fence it was given, and the leases of the guards taken into it. The hold lasts while one of
/// them is still held.
#[derive(Debug)]
pub(crate) struct FenceMemory {
    fence: u64,
    /// A receiver of each guard's lease: closed once the guard and the watchdog let go of it.
    leases: Vec<tokio::sync::watch::Receiver<LeaseState>>,
}

impl FenceMemory {
    /// The fence for a grant of `granted` through the handle whose memory this is: the current
    /// hold's, while one of its guards is still held (no other owner can have had the lock in
    /// the meantime, so this grant is a re-entry into it); otherwise `granted`, which starts a
    /// new hold.
    pub(crate) fn settle(memory: &mut Option<FenceMemory>, granted: u64) -> u64 {
        if let Some(held) = memory.as_mut().and_then(FenceMemory::current) {
            return held;
        }
        *memory = Some(FenceMemory {
            fence: granted,
            leases: Vec::new(),
        });
        granted
    }

    /// Records a guard taken into the current hold.
    pub(crate) fn add(&mut self, lease: &Lease) {
        self.leases.push(lease.subscribe());
    }

    /// The fence, if a guard of this hold is still held now.
    fn current(&mut self) -> Option<u64> {
        let now = tokio::time::Instant::now();
        self.leases.retain(|lease| {
            // (An error: every sender is gone, the guard with it.)
            lease.has_changed().is_ok() && lease.borrow().lost_at(now).is_none()
        });
        (!self.leases.is_empty()).then_some(self.fence)
    }
}
