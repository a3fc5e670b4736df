//! What a command runs under ([`Held`]): a lock's guard, several locks, a run-once's lock, or
//! an election's leadership (its impl is in `elect.rs`); how it is lost, given back and asked
//! for.

use std::future::{Future, IntoFuture};
use std::pin::Pin;

/// How the give-back after the command's end went.
#[derive(Debug)]
pub(super) enum Finish {
    /// Given back (a run-once: recorded as done, or nothing to record).
    Done,
    /// It had been lost before (a run-once: a newer run's fence was accepted, nothing recorded).
    WasLost,
    /// A run-once's record could not be written, or its replicas did not acknowledge it: the
    /// next run does the work again. The lock was given back.
    NotRecorded(fencelock::Error),
}

impl From<bool> for Finish {
    /// What a release that says whether it was still held means.
    fn from(held: bool) -> Finish {
        if held { Finish::Done } else { Finish::WasLost }
    }
}

/// A loss of what is held: resolves when it is lost, with the reason.
pub(super) type Loss = Pin<Box<dyn Future<Output = fencelock::LostReason> + Send>>;

/// What a command runs under: a lock's guard, several locks, a run-once's lock, or an
/// election's leadership.
pub(super) trait Held {
    /// The fence (a leadership's term; the first name's, for several).
    fn fence(&self) -> u64;
    /// Resolves when it is lost (any of several names).
    fn lost(&self) -> Loss;
    /// Whether it is still held, as far as this process can tell now (not reported lost, the
    /// lease's deadline not passed; every name, for several).
    fn is_held(&self) -> bool;
    /// Gives it back (releases, or resigns); whether it was still held.
    fn give_back(self) -> impl Future<Output = fencelock::Result<bool>>;
    /// Gives it back after the command ended with `code`. A run-once records its key here when
    /// the code is 0. An error: the give-back failed (the lease runs out).
    fn finish(self, code: u8) -> impl Future<Output = fencelock::Result<Finish>>
    where
        Self: Sized,
    {
        let _ = code;
        async move { self.give_back().await.map(Finish::from) }
    }
    /// Resolves when someone asks for it (`fencelock release --ask`); never, where nobody can.
    fn release_requested(&self) -> impl Future<Output = ()> + 'static {
        std::future::pending()
    }
}

impl Held for fencelock::LockGuard {
    fn fence(&self) -> u64 {
        fencelock::LockGuard::fence(self)
    }
    fn lost(&self) -> Loss {
        Box::pin(fencelock::LockGuard::lost(self).into_future())
    }
    fn is_held(&self) -> bool {
        fencelock::LockGuard::is_held(self)
    }
    fn give_back(self) -> impl Future<Output = fencelock::Result<bool>> {
        self.release()
    }
    fn release_requested(&self) -> impl Future<Output = ()> + 'static {
        fencelock::LockGuard::release_requested(self)
    }
}

impl Held for fencelock::multi::MultiGuard {
    fn fence(&self) -> u64 {
        self.fences().next().map_or(0, |(_, fence)| fence)
    }
    fn lost(&self) -> Loss {
        let signals: Vec<_> = self
            .guards()
            .iter()
            .map(fencelock::LockGuard::lost)
            .collect();
        Box::pin(async move {
            let waits = signals
                .into_iter()
                .map(|s| Box::pin(async move { s.wait().await }));
            futures_util::future::select_all(waits).await.0
        })
    }
    fn is_held(&self) -> bool {
        fencelock::multi::MultiGuard::is_held(self)
    }
    fn give_back(self) -> impl Future<Output = fencelock::Result<bool>> {
        self.release()
    }
    fn release_requested(&self) -> impl Future<Output = ()> + 'static {
        let asked: Vec<_> = self
            .guards()
            .iter()
            .map(|g| Box::pin(g.release_requested()))
            .collect();
        async move {
            futures_util::future::select_all(asked).await;
        }
    }
}

impl Held for fencelock::once::OnceGuard {
    fn fence(&self) -> u64 {
        fencelock::once::OnceGuard::fence(self)
    }
    fn lost(&self) -> Loss {
        Box::pin(self.guard().lost().into_future())
    }
    fn is_held(&self) -> bool {
        self.guard().is_held()
    }
    async fn give_back(self) -> fencelock::Result<bool> {
        self.give_up().await.map(|()| true)
    }
    async fn finish(self, code: u8) -> fencelock::Result<Finish> {
        if code != 0 {
            // A failed run: counted (see `--attempts`), nothing recorded.
            return self.failed().await.map(|_| Finish::Done);
        }
        // The record, then the release (whatever the record's fate).
        match self.done().await {
            Ok(()) => Ok(Finish::Done),
            // A newer run's fence was accepted: this one lost its lock on the way.
            Err(fencelock::Error::Fenced { .. }) => Ok(Finish::WasLost),
            Err(e) => Ok(Finish::NotRecorded(e)),
        }
    }
    fn release_requested(&self) -> impl Future<Output = ()> + 'static {
        self.guard().release_requested()
    }
}
