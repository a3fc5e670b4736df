//! What a guard, a leadership, a multi-lock guard or a run keeps of its hold: the library's
//! value in a [`Hold`] (shared by the calls that use it), remembered by the thread's keeper so
//! that the end of the thread gives it back, and given back in the background when JavaScript's
//! garbage collector drops the object unreleased. Watches of the hold (its loss, a release
//! request) call JavaScript back through weak thread-safe functions: they never keep the
//! process alive.

use std::future::Future;
use std::sync::{Arc, Weak};

use fencelock::{LostReason, LostSignal};
use fencelock_bind::held::EndAtExit;
pub use fencelock_bind::held::{GiveBack, Hold};
use fencelock_bind::keeper::Keeper;
use napi::bindgen_prelude::{FnArgs, PromiseRaw, Status, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result};

use crate::cancel::{Stop, call};
use crate::errors::Failure;

/// A JavaScript callback given `(code, message)`, which does not keep the process alive.
pub type LostCallback =
    ThreadsafeFunction<FnArgs<(String, String)>, (), FnArgs<(String, String)>, Status, false, true>;

/// A JavaScript callback given nothing, which does not keep the process alive.
pub type Callback = ThreadsafeFunction<(), (), (), Status, false, true>;

/// A hold kept for JavaScript (see the module docs).
pub struct Kept<T: GiveBack> {
    hold: Arc<Hold<T>>,
    keeper: Arc<Keeper>,
    /// Its entry among what the thread ends at its end.
    id: u64,
}

impl<T: GiveBack> Kept<T> {
    pub fn new(value: T, keeper: Arc<Keeper>) -> Self {
        let hold = Arc::new(Hold::new(value));
        let weak: Weak<dyn EndAtExit> = Arc::downgrade(&hold) as Weak<dyn EndAtExit>;
        let id = keeper.add_held(weak);
        Kept { hold, keeper, id }
    }

    pub fn hold(&self) -> &Arc<Hold<T>> {
        &self.hold
    }

    /// Gives the hold back (release, resign): answers `true` if it was still held (`false`
    /// once given back). It goes on to its end whatever JavaScript does meanwhile.
    pub fn finish<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        let hold = self.hold.clone();
        let busy = self.keeper.busy();
        let work = async move {
            let result = hold.finish().await;
            drop(busy);
            result
        };
        call(
            env,
            Stop::Never,
            work,
            |_, r| r.map_err(Failure::Lock),
            |_| None,
        )
    }

    /// Runs `work` on the hold: a call of the hold's that nobody cancels, and that the end of
    /// the thread waits for.
    pub fn run<'env, R, V, F, W>(
        &self,
        env: &'env Env,
        work: impl FnOnce(Arc<Hold<T>>) -> F,
        convert: W,
    ) -> Result<PromiseRaw<'env, V>>
    where
        R: Send + 'static,
        V: ToNapiValue + 'static,
        F: Future<Output = std::result::Result<R, Failure>> + Send + 'static,
        W: FnOnce(R) -> V + Send + 'static,
    {
        // Counted as background work: the end of the thread waits for it.
        let busy = self.keeper.busy();
        let work = work(self.hold.clone());
        let work = async move {
            let result = work.await;
            drop(busy);
            result
        };
        call(
            env,
            Stop::Never,
            work,
            move |_, result| result.map(convert),
            |_| None,
        )
    }

    /// Calls `callback(code, message)` once `lost` fires (the hold lost or given back).
    pub fn on_lost(&self, lost: &LostSignal, callback: LostCallback) {
        let lost = lost.clone();
        self.keeper.runtime().spawn(async move {
            let reason: LostReason = lost.wait().await;
            callback.call(
                FnArgs::from((reason.code().to_owned(), reason.to_string())),
                ThreadsafeFunctionCallMode::NonBlocking,
            );
        });
    }

    /// Runs `task` on the runtime (a watch that ends when the hold does).
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.keeper.runtime().spawn(task);
    }

    /// Runs `watch` on the runtime until it ends or the hold does (`lost` fires).
    pub fn watch(&self, lost: &LostSignal, watch: impl Future<Output = ()> + Send + 'static) {
        let lost = lost.clone();
        self.keeper.runtime().spawn(async move {
            tokio::select! {
                () = watch => {}
                _ = lost.wait() => {}
            }
        });
    }
}

impl<T: GiveBack> Drop for Kept<T> {
    fn drop(&mut self) {
        self.keeper.forget_held(self.id);
        // Given back in the background (work that the end waits for), unless a call took it.
        if let Some(task) = self.hold.end() {
            self.keeper.background(task);
        }
    }
}

/// The `(code, message)` of a lost signal that fired, else `None`.
pub fn lost_pair(lost: &LostSignal) -> Option<Vec<String>> {
    let reason = lost.reason()?;
    Some(vec![reason.code().to_owned(), reason.to_string()])
}
