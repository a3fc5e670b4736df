//! The recipes for JavaScript: several locks at once (`MultiGuard`, over `fencelock_bind`'s
//! [`HeldMulti`]) and run-once (`OnceRun` over [`HeldRun`], `OnceDone`).

use fencelock::multi::MultiGuard as RustMultiGuard;
use fencelock::once::Begun;
use fencelock_bind::holds::{HeldMulti, HeldRun};
use napi::bindgen_prelude::{Either, FnArgs, PromiseRaw};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Result};
use napi_derive::napi;

use crate::election::epoch_ms;
use crate::env::Context;
use crate::held::{self, LostCallback};

/// Several locks held together.
#[napi]
pub struct MultiGuard {
    held: HeldMulti<()>,
}

impl MultiGuard {
    pub fn new(guard: RustMultiGuard, context: Context) -> Self {
        MultiGuard {
            held: HeldMulti::new(guard, context),
        }
    }
}

#[napi]
impl MultiGuard {
    /// `[name, fence]` for each name, in the order given.
    #[napi(ts_return_type = "Array<[string, bigint]>")]
    pub fn fences(&self) -> Vec<(String, u64)> {
        self.held.fences().to_vec()
    }

    /// Whether every name is still held, as far as this process can tell now.
    #[napi]
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// `[name, code, message]` of a name lost now (one lost rather than released, if any is),
    /// else `null`.
    #[napi(ts_return_type = "[string, string, string] | null")]
    pub fn lost_now(&self) -> Option<Vec<String>> {
        let (name, code, message) = self.held.lost_now()?;
        Some(vec![name, code.to_owned(), message])
    }

    /// Calls `callback(code, message)` when any of the names is lost (or released).
    #[napi(ts_args_type = "callback: (code: string, message: string) => void")]
    pub fn on_lost(&self, callback: LostCallback) {
        let lost = self.held.lost_wait();
        held::spawn(self.held.kept(), async move {
            let (name, reason) = lost.await;
            callback.call(
                FnArgs::from((reason.code().to_owned(), format!("lock {name:?}: {reason}"))),
                ThreadsafeFunctionCallMode::NonBlocking,
            );
        });
    }

    /// Releases every name: `true` if every one was still held.
    #[napi]
    pub fn release<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        held::release(env, self.held.kept())
    }

    /// Releases every name at the end of a block: rejects `not_held` (the name, and why) if
    /// one was no longer held by then.
    #[napi]
    pub fn end_block<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        held::end_block(env, self.held.kept())
    }
}

/// The record of work done once: its fence, and when (milliseconds since the epoch).
#[napi(object, object_from_js = false)]
pub struct OnceDone {
    pub fence: u64,
    pub at: f64,
}

/// The lock of a run-once that has the work to do.
#[napi]
pub struct OnceRun {
    held: HeldRun<()>,
}

/// The JavaScript value of a begun run-once.
pub fn begun(begun: Begun, context: Context) -> Either<OnceRun, OnceDone> {
    match begun {
        Begun::Run(run) => Either::A(OnceRun {
            held: HeldRun::new(*run, context),
        }),
        Begun::AlreadyDone(done) => Either::B(OnceDone {
            fence: done.fence,
            at: epoch_ms(done.at),
        }),
        // Only a run-once with a tick starts too late, and Node's sets none: nothing ran, as
        // for work done (at the tick's beginning, with no fence).
        Begun::TooLate(late) => Either::B(OnceDone {
            fence: 0,
            at: epoch_ms(late.tick),
        }),
    }
}

#[napi]
impl OnceRun {
    /// The run's fence: the record carries it.
    #[napi(getter)]
    pub fn fence(&self) -> u64 {
        self.held.fence()
    }

    /// Records the work as done and releases the lock (fails with `fenced` if this run lost its
    /// lock to a newer one: nothing recorded). `true` if it recorded.
    #[napi]
    pub fn done<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        held::run(env, self.held.kept(), self.held.finish(true), |f| f)
    }

    /// Releases the lock without recording anything.
    #[napi]
    pub fn give_up<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        held::run(env, self.held.kept(), self.held.finish(false), |f| f)
    }
}
