//! A hold a package keeps for its language: the library's value (a guard, a leadership, a
//! multi-lock guard, a run-once) behind a lock, so that calls from any thread or task can
//! borrow it and the one that gives it back can take it.

use std::future::Future;
use std::pin::Pin;

use fencelock::LockGuard;
use fencelock::election::Leadership;
use fencelock::multi::MultiGuard;
use fencelock::once::OnceGuard;
use tokio::sync::RwLock;

/// A future that owns what it needs.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The answer of a give-back: whether it was still held.
pub type GivenBack = Pin<Box<dyn Future<Output = fencelock::Result<bool>> + Send>>;

/// A hold the library gives back: a lock released, a leadership resigned.
pub trait GiveBack: Send + Sync + Sized + 'static {
    /// Gives it back: whether it was still held.
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
    fn finish(self) -> GivenBack {
        Box::pin(self.release())
    }
}

impl GiveBack for Leadership {
    fn finish(self) -> GivenBack {
        Box::pin(self.resign())
    }
}

impl GiveBack for MultiGuard {
    fn finish(self) -> GivenBack {
        Box::pin(self.release())
    }
}

impl GiveBack for OnceGuard {
    fn finish(self) -> GivenBack {
        Box::pin(async move { self.give_up().await.map(|()| true) })
    }
}

/// Something a process ends when it ends, if it is still held then: a guard's lock (released),
/// a leadership (resigned).
pub trait EndAtExit: Send + Sync {
    /// The give-back, or `None` if there is nothing left to end.
    fn end(&self) -> Option<Task>;
}

/// The hold, while nobody has taken it to give it back; shared by the calls that use it.
pub struct Hold<T>(RwLock<Option<T>>);

impl<T> Hold<T> {
    pub fn new(value: T) -> Self {
        Hold(RwLock::new(Some(value)))
    }

    /// The hold behind its lock: read it to use it, write it to take it.
    pub fn slot(&self) -> &RwLock<Option<T>> {
        &self.0
    }

    /// Whatever `read` makes of the hold now, if it is there and nobody is taking it.
    pub fn peek<R>(&self, read: impl FnOnce(&T) -> R) -> Option<R> {
        self.0.try_read().ok()?.as_ref().map(read)
    }
}

impl<T: GiveBack> Hold<T> {
    /// Takes the hold and gives it back: whether it was still held (`false` once taken).
    pub async fn finish(&self) -> fencelock::Result<bool> {
        let value = self.0.write().await.take();
        match value {
            Some(value) => value.finish().await,
            None => Ok(false),
        }
    }
}

impl<T: GiveBack> EndAtExit for Hold<T> {
    fn end(&self) -> Option<Task> {
        // One being given back (its slot taken for writing) is ended by that call.
        let value = self.0.try_write().ok()?.take()?;
        Some(value.give_back())
    }
}
