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
