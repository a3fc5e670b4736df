//! The reasons a held lock can be lost.

use std::fmt;

/// Why a guard stopped holding its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// Redis answered that the key no longer carries this owner's token: it was deleted
    /// (for instance by an operator's force-release) or it expired and another owner took it.
    NotOwner,
    /// The local deadline passed without a confirmed renewal: the lease may have expired on the
    /// server. `last_error` tells why the renewals failed, when they did.
    Expired {
        /// The last renewal error, if any renewal was attempted and failed.
        last_error: Option<String>,
    },
    /// Renewal stopped because the lock reached its `max_hold` cap, and the lease then ran out.
    MaxHoldReached,
    /// The guard released the lock (or was dropped).
    Released,
}

impl LostReason {
    /// Every code [`code`](Self::code) gives, one per variant: its name in snake case (see
    /// [`Error::CODES`](crate::Error::CODES)).
    pub const CODES: &'static [&'static str] =
        &["not_owner", "expired", "max_hold_reached", "released"];

    /// This reason's stable code, one of [`CODES`](Self::CODES): the `reason` label of the
    /// `fencelock_losses_total` counter, the Python guard's `lost_reason`.
    pub fn code(&self) -> &'static str {
        match self {
            LostReason::NotOwner => "not_owner",
            LostReason::Expired { .. } => "expired",
            LostReason::MaxHoldReached => "max_hold_reached",
            LostReason::Released => "released",
        }
    }
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::NotOwner => {
                f.write_str("Redis says another owner has it, or the key was deleted")
            }
            LostReason::Expired { last_error: None } => {
                f.write_str("the lease ran out before it was renewed")
            }
            LostReason::Expired {
                last_error: Some(e),
            } => write!(f, "the lease ran out before it could be renewed ({e})"),
            LostReason::MaxHoldReached => f.write_str("the maximum hold time was reached"),
            LostReason::Released => f.write_str("it was released"),
        }
    }
}

/// What a release found: the lock released, or no longer held and why (see
/// [`LockGuard::release_outcome`](crate::LockGuard::release_outcome)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// It was still held, and is released now.
    Released,
    /// It was no longer held when the release came: `lock` (of several, the first in the
    /// order given that was lost) and why.
    NotHeld {
        /// The lock.
        lock: String,
        /// Why it was no longer held: [`LostReason::NotOwner`], [`LostReason::Expired`],
        /// [`LostReason::MaxHoldReached`], or [`LostReason::Released`] (given back already).
        reason: LostReason,
    },
}

impl ReleaseOutcome {
    /// Whether the lock was still held (what [`LockGuard::release`](crate::LockGuard::release)
    /// answers).
    pub fn is_released(&self) -> bool {
        matches!(self, ReleaseOutcome::Released)
    }

    /// `Ok(())` if it was released, else the [`Error::NotHeld`](crate::Error::NotHeld) it
    /// describes: the answer of a block of work that must have held its lock to the end.
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`](crate::Error::NotHeld) with this outcome's lock and reason.
    pub fn into_result(self) -> crate::Result<()> {
        match self {
            ReleaseOutcome::Released => Ok(()),
            ReleaseOutcome::NotHeld { lock, reason } => Err(crate::Error::NotHeld { lock, reason }),
        }
    }
}
