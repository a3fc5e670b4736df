//! The recipes for JavaScript: several locks at once (`MultiGuard`) and run-once (`OnceRun`,
//! `OnceDone`).

use fencelock::multi::MultiGuard as RustMultiGuard;
use fencelock::once::{Begun, OnceGuard};
use fencelock::{LostReason, LostSignal};
use fencelock_bind::held::{GiveBack, Task};
use napi::bindgen_prelude::{Either, FnArgs, PromiseRaw};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Result};
use napi_derive::napi;

use crate::client::Context;
use crate::election::epoch_ms;
use crate::errors::Failure;
use crate::held::{Kept, LostCallback};

/// Several locks held together.
#[napi]
pub struct MultiGuard {
    /// `(name, fence)` in the order the names were given.
    fences: Vec<(String, u64)>,
    kept: Kept<RustMultiGuard>,
    /// Each name's lost signal.
    lost: Vec<(String, LostSignal)>,
}

impl MultiGuard {
    pub fn new(guard: RustMultiGuard, context: Context) -> Self {
        let fences = guard.fences().map(|(n, f)| (n.to_owned(), f)).collect();
        let lost = guard
            .guards()
            .iter()
            .map(|g| (g.name().to_owned(), g.lost()))
            .collect();
        MultiGuard {
            fences,
            kept: Kept::new(guard, context.keeper),
            lost,
        }
    }
}

#[napi]
impl MultiGuard {
    /// `[name, fence]` for each name, in the order given.
    #[napi(ts_return_type = "Array<[string, bigint]>")]
    pub fn fences(&self) -> Vec<(String, u64)> {
        self.fences.clone()
    }

    /// Whether every name is still held, as far as this process can tell now.
    #[napi]
    pub fn is_held(&self) -> bool {
        self.lost.iter().all(|(_, l)| !l.is_lost())
    }

    /// `[name, code, message]` of a name lost now (one lost rather than released, if any is),
    /// else `null`.
    #[napi(ts_return_type = "[string, string, string] | null")]
    pub fn lost_now(&self) -> Option<Vec<String>> {
        let mut found = None;
        for (name, lost) in &self.lost {
            if let Some(reason) = lost.reason() {
                let is_release = reason == LostReason::Released;
                if found.is_none() || !is_release {
                    found = Some(vec![
                        name.clone(),
                        reason.code().to_owned(),
                        reason.to_string(),
                    ]);
                }
                if !is_release {
                    break;
                }
            }
        }
        found
    }

    /// Calls `callback(code, message)` when any of the names is lost (or released).
    #[napi(ts_args_type = "callback: (code: string, message: string) => void")]
    pub fn on_lost(&self, callback: LostCallback) {
        let signals = self.lost.clone();
        let watch = async move {
            let waits = signals
                .into_iter()
                .map(|(name, lost)| Box::pin(async move { (name, lost.wait().await) }));
            let (name, reason) = futures_util::future::select_all(waits).await.0;
            callback.call(
                FnArgs::from((reason.code().to_owned(), format!("lock {name:?}: {reason}"))),
                ThreadsafeFunctionCallMode::NonBlocking,
            );
        };
        self.kept.spawn(watch);
    }

    /// Releases every name: `true` if every one was still held.
    #[napi]
    pub fn release<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        self.kept.finish(env)
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
    fence: u64,
    kept: Kept<OnceGuard>,
}

/// The JavaScript value of a begun run-once.
pub fn begun(begun: Begun, context: Context) -> Either<OnceRun, OnceDone> {
    match begun {
        Begun::Run(run) => Either::A(OnceRun {
            fence: run.fence(),
            kept: Kept::new(*run, context.keeper),
        }),
        Begun::AlreadyDone(done) => Either::B(OnceDone {
            fence: done.fence,
            at: epoch_ms(done.at),
        }),
    }
}

/// Gives back a run's lock that nobody took.
pub fn undo_begun(begun: fencelock::Result<Begun>) -> Option<Task> {
    match begun {
        Ok(Begun::Run(run)) => Some(run.give_back()),
        _ => None,
    }
}

#[napi]
impl OnceRun {
    /// The run's fence: the record carries it.
    #[napi(getter)]
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Records the work as done and releases the lock (fails with `fenced` if this run lost its
    /// lock to a newer one: nothing recorded). `true` if it recorded.
    #[napi]
    pub fn done<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        self.finish(env, true)
    }

    /// Releases the lock without recording anything.
    #[napi]
    pub fn give_up<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        self.finish(env, false)
    }
}

impl OnceRun {
    fn finish<'env>(&self, env: &'env Env, record: bool) -> Result<PromiseRaw<'env, bool>> {
        self.kept.run(
            env,
            move |hold| async move {
                let run = hold.slot().write().await.take();
                match run {
                    Some(run) if record => run.done().await.map(|()| true).map_err(Failure::Lock),
                    Some(run) => run.give_up().await.map(|()| true).map_err(Failure::Lock),
                    None => Ok(false),
                }
            },
            |finished| finished,
        )
    }
}
