//! What a guard, a leadership, a multi-lock guard or a run keeps of its hold, for JavaScript:
//! `fencelock_bind`'s [`Kept`] (the library's value, remembered by the thread's keeper so that
//! the end of the thread gives it back, and given back in the background when JavaScript's
//! garbage collector drops the object unreleased), and its calls as Promises. Watches of the
//! hold (its loss, a release request) call JavaScript back through weak thread-safe functions:
//! they never keep the process alive.

use std::future::Future;

use fencelock::LostSignal;
pub use fencelock_bind::held::GiveBack;
use napi::bindgen_prelude::{FnArgs, PromiseRaw, Status, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result};

use crate::cancel::{Stop, call};
use crate::errors::Failure;

/// A hold kept for JavaScript.
pub type Kept<T> = fencelock_bind::kept::Kept<T, ()>;

/// A JavaScript callback given `(code, message)`, which does not keep the process alive.
pub type LostCallback =
    ThreadsafeFunction<FnArgs<(String, String)>, (), FnArgs<(String, String)>, Status, false, true>;

/// A JavaScript callback given nothing, which does not keep the process alive.
pub type Callback = ThreadsafeFunction<(), (), (), Status, false, true>;

/// Runs `work` (a call of the hold's: an extend, a proclaim, a release) as a Promise that
/// nobody cancels, and that the end of the thread waits for.
pub fn run<'env, T, R, V>(
    env: &'env Env,
    kept: &Kept<T>,
    work: impl Future<Output = fencelock::Result<R>> + Send + 'static,
    convert: impl FnOnce(R) -> V + Send + 'static,
) -> Result<PromiseRaw<'env, V>>
where
    T: GiveBack,
    R: Send + 'static,
    V: ToNapiValue + 'static,
{
    // Counted as background work: the end of the thread waits for it.
    let busy = kept.context().keeper.busy();
    let work = async move {
        let result = work.await;
        drop(busy);
        result
    };
    call(env, Stop::Never, work, move |_, result| {
        result.map(convert).map_err(Failure::Lock)
    })
}

/// Gives the hold back (release, resign): `true` if it was still held (`false` once given
/// back). It goes on to its end whatever JavaScript does meanwhile.
pub fn release<'env, T: GiveBack>(
    env: &'env Env,
    kept: &Kept<T>,
) -> Result<PromiseRaw<'env, bool>> {
    run(env, kept, kept.release(), |held| held)
}

/// Ends a `using` block that held it: gives it back, and rejects `not_held` (the lock, and
/// why) if it was no longer held by then.
pub fn end_block<'env, T: GiveBack>(
    env: &'env Env,
    kept: &Kept<T>,
) -> Result<PromiseRaw<'env, ()>> {
    run(env, kept, kept.end_block(), |()| ())
}

/// Calls `callback(code, message)` once `lost` fires (the hold lost or given back).
pub fn on_lost<T: GiveBack>(kept: &Kept<T>, lost: &LostSignal, callback: LostCallback) {
    let lost = lost.clone();
    spawn(kept, async move {
        let reason = lost.wait().await;
        callback.call(
            FnArgs::from((reason.code().to_owned(), reason.to_string())),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    });
}

/// Runs `task` on the runtime (a watch that ends when the hold does).
pub fn spawn<T: GiveBack>(kept: &Kept<T>, task: impl Future<Output = ()> + Send + 'static) {
    kept.context().keeper.runtime().spawn(task);
}

/// The `[code, message]` of a lost signal that fired, else `None`.
pub fn lost_pair(lost: &LostSignal) -> Option<Vec<String>> {
    let (code, message) = fencelock_bind::kept::lost_pair(lost)?;
    Some(vec![code.to_owned(), message])
}
