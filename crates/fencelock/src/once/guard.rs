//! A run-once's lock while its work runs: the record when the work is done, the count of
//! failed runs when it failed.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

#[cfg(doc)]
use super::Once;
use crate::engine::LockGuard;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::fenced::FencedStore;
use crate::script::{Lua, lua};

/// Records the work as done, if the run's fence is still the newest accepted.
pub(crate) static RECORD: LazyLock<Lua> = lua!("../fenced/check.lua", "record.lua");
/// Counts a failed run, if the run's fence is still the newest accepted.
pub(crate) static FAIL: LazyLock<Lua> = lua!("../fenced/check.lua", "fail.lua");

/// The lock of a run that has the work to do (see [`Once::begin`]).
#[derive(Debug)]
pub struct OnceGuard {
    pub(super) guard: LockGuard,
    pub(super) store: FencedStore,
    pub(super) record: String,
    /// The count of the record's failed runs.
    pub(super) failures: String,
    pub(super) replicas: Option<crate::engine::ReplicaAck>,
    pub(super) keep: Option<Duration>,
    pub(super) tick: Option<SystemTime>,
    /// The job's key (without its tick), for its series.
    pub(super) job: String,
}

impl OnceGuard {
    /// The lock's fence: hand it to what the work writes.
    pub fn fence(&self) -> u64 {
        self.guard.fence()
    }

    /// The lock's guard (its deadline, its lost signal).
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// The tick this run does the work for (see [`Once::tick`]).
    pub fn tick(&self) -> Option<SystemTime> {
        self.tick
    }

    /// Records the work as done (a fenced write with the lock's fence, at the server's clock;
    /// with `wait_for_replicas`, acknowledged by the replicas) and releases the lock.
    ///
    /// # Errors
    ///
    /// [`Error::Fenced`] if a newer holder's fence was accepted (this run lost its lock: nothing
    /// was recorded); [`Error::NotReplicated`] if fewer replicas than asked acknowledged the
    /// record (it was written on the master; with [`Shortfall::Warn`](crate::Shortfall::Warn) a
    /// warning instead); connection errors. The lock is released in any case.
    pub async fn done(self) -> Result<()> {
        let fence = self.guard.fence();
        let mut recorded = self
            .store
            .run_checked(
                &RECORD,
                fence,
                &[&self.record, &self.failures],
                &[self.keep_ms()],
                "record run-once",
            )
            .await
            .map(|_| ());
        if let (Ok(()), Some(ack)) = (&recorded, self.replicas) {
            recorded = self
                .store
                .confirm_replicas(ack, self.guard.name(), &self.record, "record")
                .await;
        }
        let released = self.guard.release().await;
        let outcome = if recorded.is_ok() { "ran" } else { "failed" };
        crate::observe::once(&self.job, outcome);
        recorded?;
        released.map(|_| ())
    }

    /// Counts this run as failed (a fenced write: not counted if this run lost its lock to a
    /// newer one), then releases the lock without recording anything: the next run tries
    /// again, unless as many runs have failed as [`Once::attempts`] allows. The count of
    /// failures, or `None` if it could not be counted.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::release`]. A count that could not be written (a newer holder's fence,
    /// Redis unreachable) is logged and `None`: the lock is released in any case.
    pub async fn failed(self) -> Result<Option<u64>> {
        let counted = self
            .store
            .run_checked(
                &FAIL,
                self.guard.fence(),
                &[&self.failures],
                &[self.keep_ms()],
                "count a failed run-once",
            )
            .await;
        let failures = match counted {
            Ok(rest) => rest
                .first()
                .and_then(|v| crate::script::reply::as_u64(v).ok()),
            Err(e) => {
                tracing::warn!(lock = self.guard.name(), error = %e, "failed run not counted");
                None
            }
        };
        crate::observe::once(&self.job, "failed");
        self.guard.release().await?;
        Ok(failures)
    }

    /// How long the record (and the count of failures) is kept, in milliseconds (0: for ever).
    fn keep_ms(&self) -> u64 {
        self.keep.map_or(0, |keep| {
            u64::try_from(keep.as_millis()).unwrap_or(u64::MAX).max(1)
        })
    }

    /// Releases the lock without recording anything, and without counting a failure (the work
    /// did not fail: it was stopped, or never began): the next run tries again.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::release`].
    pub async fn give_up(self) -> Result<()> {
        self.guard.release().await.map(|_| ())
    }
}
