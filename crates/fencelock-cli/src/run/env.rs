//! The `FENCELOCK_*` variables a command run under a lock (or a leadership) gets, named once.

/// The lock's name (one name).
pub(super) const NAME: &str = "FENCELOCK_NAME";
/// The fence (one name; a leadership's term).
pub(super) const FENCE: &str = "FENCELOCK_FENCE";
/// Every name held, comma-separated, in the order given (`run A B C`).
pub(super) const NAMES: &str = "FENCELOCK_NAMES";
/// Every name's fence, comma-separated, in the order of `FENCELOCK_NAMES`.
pub(super) const FENCES: &str = "FENCELOCK_FENCES";
/// A semaphore's number of permits (`--permits`).
pub(super) const PERMITS: &str = "FENCELOCK_PERMITS";
/// How many of them this command holds (`--take`).
pub(super) const TAKEN: &str = "FENCELOCK_TAKEN";
/// An election's term (`elect`): the same number as `FENCELOCK_FENCE`.
pub(super) const TERM: &str = "FENCELOCK_TERM";
/// A run-once's tick (`--every`, `--tick`): when it began, RFC 3339 in UTC.
pub(super) const TICK: &str = "FENCELOCK_TICK";

/// Every variable above: those a command's environment leaves out are not inherited from an
/// outer `fencelock`, whose lock they would describe.
pub(super) const SET_BY_FENCELOCK: [&str; 8] =
    [NAME, FENCE, NAMES, FENCES, PERMITS, TAKEN, TERM, TICK];
