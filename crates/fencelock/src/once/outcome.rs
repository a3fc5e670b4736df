//! What a run-once comes to: the work ran, failed, was done before, came too late for its
//! tick, or gave up after as many failed runs as allowed.

use std::time::{Duration, SystemTime};

use super::OnceGuard;
#[cfg(doc)]
use super::{Once, Tick};

/// The record of work done once (see [`Once`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Done {
    /// The fence of the run that did it.
    pub fence: u64,
    /// When it was recorded, by the server's clock.
    pub at: SystemTime,
    /// The tick it was done for (see [`Once::tick`]).
    pub tick: Option<SystemTime>,
}

/// A start too late for its tick (see [`Tick::late`]): nothing ran.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Late {
    /// When the tick began (UTC).
    pub tick: SystemTime,
    /// How long after it the run started, by the server's clock.
    pub late: Duration,
}

/// A key (or tick) whose runs failed as many times as [`Once::attempts`] allows: nothing runs
/// any more.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GaveUp {
    /// How many runs failed.
    pub failures: u64,
    /// The tick (see [`Once::tick`]).
    pub tick: Option<SystemTime>,
}

/// What [`Once::run`] came to.
#[derive(Debug)]
#[non_exhaustive]
pub enum Outcome<T, E> {
    /// This run did the work, and recorded it.
    Ran(T),
    /// This run's work failed: nothing was recorded, the failure was counted (the next run
    /// tries again, unless [`Once::attempts`] runs have failed).
    Failed(E),
    /// The work was done before (also by a run this one waited for): nothing ran.
    AlreadyDone(Done),
    /// The run started too late for its tick (see [`Tick::late`]): nothing ran.
    TooLate(Late),
    /// As many runs failed as [`Once::attempts`] allows: nothing ran.
    GaveUp(GaveUp),
}

/// What [`Once::begin`] found.
#[derive(Debug)]
#[must_use = "dropping a run releases its lock without recording anything"]
pub enum Begun {
    /// Not done yet, and this process holds the lock: do the work, then
    /// [`done`](OnceGuard::done) (or drop the guard if the work failed).
    Run(Box<OnceGuard>),
    /// Done before: nothing to do.
    AlreadyDone(Done),
    /// Too late for its tick (see [`Tick::late`]): nothing to do.
    TooLate(Late),
    /// As many runs failed as [`Once::attempts`] allows: nothing to do.
    GaveUp(GaveUp),
}
