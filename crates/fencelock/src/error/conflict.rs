//! How a request conflicts with the lock's state.

use std::fmt;

use crate::kind::LockKind;

/// How a request conflicts with the lock's state (see
/// [`Error::Conflict`](crate::Error::Conflict)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conflict {
    /// The name is in use by another kind of lock; every user of a name must use the same kind.
    OtherKind {
        /// What the name is in use as now.
        found: LockKind,
        /// What the refused request was for.
        requested: LockKind,
    },
    /// The semaphore's current holders use another number of permits; every user of a
    /// semaphore must agree on it (it may change only while no permit is held).
    PermitsMismatch {
        /// The number this request used.
        requested: u32,
        /// The number the current holders use, as stored.
        held_with: String,
    },
    /// The owner holds a read lock and asked for the write lock: it would wait for itself
    /// forever. Release the read lock first.
    Upgrade,
    /// The owner already holds the write lock and asked for it again; the write lock is not
    /// reentrant (a read lock under it is allowed: a downgrade).
    WriteReentry,
    /// The owner already holds the reentrant lock as many times as the limit allows.
    ReentryLimit {
        /// The limit.
        limit: u32,
    },
}

impl Conflict {
    /// Every code [`code`](Self::code) gives, one per variant: its name in snake case (see
    /// [`Error::CODES`](crate::Error::CODES)).
    pub const CODES: &'static [&'static str] = &[
        "other_kind",
        "permits_mismatch",
        "upgrade",
        "write_reentry",
        "reentry_limit",
    ];

    /// This conflict's stable code, one of [`CODES`](Self::CODES).
    pub fn code(&self) -> &'static str {
        match self {
            Conflict::OtherKind { .. } => "other_kind",
            Conflict::PermitsMismatch { .. } => "permits_mismatch",
            Conflict::Upgrade => "upgrade",
            Conflict::WriteReentry => "write_reentry",
            Conflict::ReentryLimit { .. } => "reentry_limit",
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::OtherKind { found, requested } => write!(
                f,
                "the name is in use as {found}, and this request is for {requested}; every user of a name must use the same kind of lock"
            ),
            Conflict::PermitsMismatch {
                requested,
                held_with,
            } => write!(
                f,
                "the semaphore is held with {held_with} permits, and this request asks for {requested}; every user of a semaphore must agree on the number of permits"
            ),
            Conflict::Upgrade => f.write_str(
                "this owner holds a read lock and asked for the write lock, which would wait for itself forever; release the read lock first (there is no read-to-write upgrade)",
            ),
            Conflict::WriteReentry => f.write_str(
                "this owner already holds the write lock; the write lock is not reentrant",
            ),
            Conflict::ReentryLimit { limit } => write!(
                f,
                "this owner already holds the lock {limit} times, the re-entry limit"
            ),
        }
    }
}
