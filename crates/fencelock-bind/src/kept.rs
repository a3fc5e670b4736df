//! A hold kept for a language: the library's value in a [`Hold`] (shared by the calls that use
//! it), remembered by the keeper so that the end of the process (of a Node.js thread) gives it
//! back, and given back in the background when the language's garbage collector drops the
//! object unreleased. What it needs of the process and client that made it is its [`Context`].

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use fencelock::LostSignal;

use crate::held::{EndAtExit, GiveBack, Hold};
use crate::keeper::Keeper;

/// What a hold needs of the process (the keeper, and the package's own `home`: Python's
/// process, for its calls) and of the client that made it.
pub struct Context<H> {
    pub keeper: Arc<Keeper>,
    pub home: H,
    pub client: Arc<fencelock::Client>,
}

impl<H: Clone> Clone for Context<H> {
    fn clone(&self) -> Self {
        Context {
            keeper: self.keeper.clone(),
            home: self.home.clone(),
            client: self.client.clone(),
        }
    }
}

/// A hold kept for a language (see the module docs).
pub struct Kept<T: GiveBack, H> {
    hold: Arc<Hold<T>>,
    context: Context<H>,
    /// Its entry among what the keeper ends at the end.
    id: u64,
}

impl<T: GiveBack, H> Kept<T, H> {
    /// Keeps `value`, and has the keeper end it at the end if it is still there then.
    pub fn new(value: T, context: Context<H>) -> Self {
        let hold = Arc::new(Hold::new(value));
        let weak: Weak<dyn EndAtExit> = Arc::downgrade(&hold) as Weak<dyn EndAtExit>;
        let id = context.keeper.add_held(&context.client, weak);
        Kept { hold, context, id }
    }

    /// The hold.
    pub fn hold(&self) -> &Arc<Hold<T>> {
        &self.hold
    }

    /// The process and client that made it.
    pub fn context(&self) -> &Context<H> {
        &self.context
    }
}

impl<T: GiveBack, H> Drop for Kept<T, H> {
    fn drop(&mut self) {
        let keeper = &self.context.keeper;
        keeper.forget_held(self.id);
        // Given back in the background (work that the end waits for), unless a call took it.
        keeper.background(self.hold.clone().end());
    }
}

/// The `(code, message)` of a lost signal that fired, else `None`.
pub fn lost_pair(lost: &LostSignal) -> Option<(&'static str, String)> {
    let reason = lost.reason()?;
    Some((reason.code(), reason.to_string()))
}

/// `at` since the epoch (zero before it).
pub fn since_epoch(at: SystemTime) -> Duration {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

impl<T: GiveBack, H> Kept<T, H> {
    /// Gives the hold back (a release, a resignation): `true` if it was still held (`false`
    /// once given back). It runs to its end as background work the end waits for.
    pub fn release(&self) -> impl Future<Output = fencelock::Result<bool>> + Send + 'static {
        let finished = self.finish();
        async move { finished.await.map(|o| o.is_released()) }
    }

    /// The end of a block of work that held it: gives it back, and fails with `NotHeld` (the
    /// lock, and why) if it was no longer held by then: the block's work ran without it for a
    /// while. Every package's `with` / `using` ends this way.
    pub fn end_block(&self) -> impl Future<Output = fencelock::Result<()>> + Send + 'static {
        let finished = self.finish();
        async move { finished.await?.into_result() }
    }

    /// Gives the hold back, counted as background work the end waits for: what it found.
    fn finish(
        &self,
    ) -> impl Future<Output = fencelock::Result<fencelock::ReleaseOutcome>> + Send + 'static {
        let hold = self.hold.clone();
        let busy = self.context.keeper.busy();
        async move {
            let outcome = hold.finish().await;
            drop(busy);
            outcome
        }
    }
}
