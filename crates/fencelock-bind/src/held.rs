//! A hold a package keeps for its language: the library's value (a guard, a leadership, a
//! multi-lock guard, a run-once) behind a lock, so that calls from any thread or task can
//! borrow it and the one that gives it back can take it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use fencelock::election::Leadership;
use fencelock::multi::MultiGuard;
use fencelock::once::OnceGuard;
use fencelock::{LockGuard, LostReason, ReleaseOutcome};
use tokio::sync::RwLock;

/// A future that owns what it needs.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The answer of a give-back: what it found (released, or no longer held and why).
pub type GivenBack = Pin<Box<dyn Future<Output = fencelock::Result<ReleaseOutcome>> + Send>>;

/// A hold the library gives back: a lock released, a leadership resigned.
pub trait GiveBack: Send + Sync + Sized + 'static {
    /// The name its errors carry (the lock, the first of several, the election).
    fn label(&self) -> String;

    /// Gives it back: what the give-back found.
    fn finish(self) -> GivenBack;

    /// Gives it back, for nobody's answer.
    fn give_back(self) -> Task {
        let finished = self.finish();
        Box::pin(async move {
            let _ = finished.await;
        })
    }
}

impl GiveBack for LockGuard {
    fn label(&self) -> String {
        self.name().to_owned()
    }

    fn finish(self) -> GivenBack {
        Box::pin(self.release_outcome())
    }
}

impl GiveBack for Leadership {
    fn label(&self) -> String {
        self.election().name().to_owned()
    }

    fn finish(self) -> GivenBack {
        let lock = self.label();
        let lost = self.lost();
        Box::pin(async move {
            if self.resign().await? {
                return Ok(ReleaseOutcome::Released);
            }
            let reason = lost
                .reason()
                .filter(|r| *r != LostReason::Released)
                .unwrap_or(LostReason::NotOwner);
            Ok(ReleaseOutcome::NotHeld { lock, reason })
        })
    }
}

impl GiveBack for MultiGuard {
    fn label(&self) -> String {
        self.fences()
            .next()
            .map(|(name, _)| name.to_owned())
            .unwrap_or_default()
    }

    fn finish(self) -> GivenBack {
        Box::pin(self.release_outcome())
    }
}

impl GiveBack for OnceGuard {
    fn label(&self) -> String {
        String::new()
    }

    fn finish(self) -> GivenBack {
        Box::pin(async move { self.give_up().await.map(|()| ReleaseOutcome::Released) })
    }
}

/// Something a process ends when it ends, if it is still held then: a guard's lock (released),
/// a leadership (resigned).
pub trait EndAtExit: Send + Sync {
    /// The give-back: it waits for a call that borrows the hold now (an extend, a proclaim in
    /// flight), then gives back what is still there (nothing, if a release took it).
    fn end(self: Arc<Self>) -> Task;
}

/// The hold, while nobody has taken it to give it back; shared by the calls that use it.
pub struct Hold<T> {
    slot: RwLock<Option<T>>,
    label: String,
}

impl<T: GiveBack> Hold<T> {
    pub fn new(value: T) -> Self {
        Hold {
            label: value.label(),
            slot: RwLock::new(Some(value)),
        }
    }

    /// Takes the hold and gives it back: what it found (once taken:
    /// [`ReleaseOutcome::NotHeld`] for [`LostReason::Released`]).
    pub async fn finish(&self) -> fencelock::Result<ReleaseOutcome> {
        let value = self.slot.write().await.take();
        match value {
            Some(value) => value.finish().await,
            None => Ok(self.given_back()),
        }
    }

    /// What a hold given back already answers.
    pub fn given_back(&self) -> ReleaseOutcome {
        ReleaseOutcome::NotHeld {
            lock: self.label.clone(),
            reason: LostReason::Released,
        }
    }

    /// The error of a call on a hold given back already.
    pub fn given_back_error(&self) -> fencelock::Error {
        fencelock::Error::NotHeld {
            lock: self.label.clone(),
            reason: LostReason::Released,
        }
    }
}

impl<T> Hold<T> {
    /// The hold behind its lock: read it to use it, write it to take it.
    pub fn slot(&self) -> &RwLock<Option<T>> {
        &self.slot
    }

    /// Whatever `read` makes of the hold now, if it is there and nobody is taking it.
    pub fn peek<R>(&self, read: impl FnOnce(&T) -> R) -> Option<R> {
        self.slot.try_read().ok()?.as_ref().map(read)
    }
}

impl<T: GiveBack> EndAtExit for Hold<T> {
    fn end(self: Arc<Self>) -> Task {
        Box::pin(async move {
            // After a call that borrows it; one giving it back (its slot taken for writing)
            // leaves nothing.
            let value = self.slot.write().await.take();
            if let Some(value) = value {
                let _ = value.finish().await;
            }
        })
    }
}
