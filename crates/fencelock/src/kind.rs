//! The kinds of lock, as Redis records a name's use: one enum for the errors that say a name
//! is in use as another kind and for the operator's view of a lock.

use std::fmt;

/// The kind of lock a name is in use as.
///
/// Found in [`Conflict::OtherKind`](crate::Conflict::OtherKind) (what the name is in use as,
/// and what the refused request was for) and in
/// [`admin::LockInfo::kind`](crate::admin::LockInfo::kind).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// A plain lock or a fair lock ([`Client::lock`](crate::Client::lock),
    /// [`Client::fair_lock`](crate::Client::fair_lock)): they share the held key's format.
    Lock,
    /// A reentrant lock ([`Client::reentrant_lock`](crate::Client::reentrant_lock)).
    Reentrant,
    /// A read-write lock ([`Client::read_write_lock`](crate::Client::read_write_lock)).
    ReadWrite,
    /// A counting semaphore ([`Client::semaphore`](crate::Client::semaphore)).
    Semaphore,
    /// A kind this version does not know (written by a newer one), as its keys name it.
    Unknown(String),
}

impl LockKind {
    /// Every code [`code`](Self::code) gives.
    pub const CODES: &'static [&'static str] =
        &["lock", "reentrant", "read-write", "semaphore", "other"];

    /// The kind's stable code, one of [`CODES`](Self::CODES): `lock` (a plain or fair lock),
    /// `reentrant`, `read-write`, `semaphore`, or `other` for a kind this version does not know.
    /// The `kind` of `fencelock status --json` and of the Python package's `LockInfo`.
    pub fn code(&self) -> &'static str {
        match self {
            LockKind::Lock => "lock",
            LockKind::Reentrant => "reentrant",
            LockKind::ReadWrite => "read-write",
            LockKind::Semaphore => "semaphore",
            LockKind::Unknown(_) => "other",
        }
    }

    /// The kind as the scripts name it (`lock`, `reentrant`, `rw`, `semaphore`).
    pub(crate) fn from_script(kind: &str) -> Self {
        match kind {
            "lock" => LockKind::Lock,
            "reentrant" => LockKind::Reentrant,
            "rw" => LockKind::ReadWrite,
            "semaphore" => LockKind::Semaphore,
            other => LockKind::Unknown(other.to_owned()),
        }
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockKind::Lock => f.write_str("a plain or fair lock"),
            LockKind::Reentrant => f.write_str("a reentrant lock"),
            LockKind::ReadWrite => f.write_str("a read-write lock"),
            LockKind::Semaphore => f.write_str("a semaphore"),
            LockKind::Unknown(kind) => write!(f, "a lock of kind {kind:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_names_map_to_kinds_and_unknown_names_are_kept() {
        assert_eq!(LockKind::from_script("lock"), LockKind::Lock);
        assert_eq!(LockKind::from_script("reentrant"), LockKind::Reentrant);
        assert_eq!(LockKind::from_script("rw"), LockKind::ReadWrite);
        assert_eq!(LockKind::from_script("semaphore"), LockKind::Semaphore);
        assert_eq!(
            LockKind::from_script("election"),
            LockKind::Unknown("election".to_owned())
        );
        assert_eq!(LockKind::Semaphore.to_string(), "a semaphore");
        let kinds = [
            LockKind::Lock,
            LockKind::Reentrant,
            LockKind::ReadWrite,
            LockKind::Semaphore,
            LockKind::Unknown("election".to_owned()),
        ];
        let codes: Vec<&str> = kinds.iter().map(LockKind::code).collect();
        assert_eq!(codes, LockKind::CODES);
    }
}
