//! Over Redlock, the fence that the acquisitions through one reentrant handle share while one
//! of them is held.

use crate::lease::{Lease, LeaseState};

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
