//! The recipes for JavaScript: several locks at once (`MultiGuard`, over `fencelock_bind`'s
//! [`HeldMulti`]) and run-once (`OnceRun` over [`HeldRun`], `OnceDone`, `OnceLate`,
//! `OnceGaveUp`; its tick, `OnceTick`).

use std::time::SystemTime;

use fencelock::multi::MultiGuard as RustMultiGuard;
use fencelock::once::{Begun, Tick};
use fencelock_bind::holds::{HeldMulti, HeldRun, RunEnding};
use napi::bindgen_prelude::{Either4, FnArgs, PromiseRaw};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Result};
use napi_derive::napi;

use crate::election::epoch_ms;
use crate::env::Context;
use crate::errors::{Failure, millis, millis_opt, ms};
use crate::held::{self, LostCallback, lost_pair};

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

/// The record of work done once: its fence, when (milliseconds since the epoch), and the tick
/// it was done for (milliseconds since the epoch; `null` without a tick).
#[napi(object, object_from_js = false)]
pub struct OnceDone {
    pub fence: u64,
    pub at: f64,
    pub tick: Option<f64>,
}

/// A start too late for its tick: when the tick began (milliseconds since the epoch) and how
/// long after it the run started (milliseconds, by the server's clock). Nothing ran.
#[napi(object, object_from_js = false)]
pub struct OnceLate {
    pub tick: f64,
    pub late: f64,
}

/// A start that gave up: as many runs of the key (of its tick) failed as `attempts` allows.
/// How many failed, and the tick (milliseconds since the epoch; `null` without a tick).
/// Nothing ran.
#[napi(object, object_from_js = false)]
pub struct OnceGaveUp {
    pub failures: f64,
    pub tick: Option<f64>,
}

/// A run-once's tick as JavaScript gives it (milliseconds): `every` (with `early` and `late`),
/// or `planned` (since the epoch).
#[napi(object, object_to_js = false)]
pub struct OnceTick {
    pub every: Option<f64>,
    pub early: Option<f64>,
    pub late: Option<f64>,
    pub planned: Option<f64>,
}

/// The first millisecond a record's key cannot name (`10000-01-01T00:00:00Z`: RFC 3339 has four
/// digits for the year).
const PLANNED_END_MS: f64 = 253_402_300_800_000.0;

impl OnceTick {
    /// The library's tick; an error names `lock` and the option.
    pub fn tick(self, lock: &str) -> std::result::Result<Tick, Failure> {
        match (self.every, self.planned) {
            (Some(every), None) => {
                let mut tick = Tick::every(millis(lock, "tick.every", every)?);
                if let Some(early) = millis_opt(lock, "tick.early", self.early)? {
                    tick = tick.early(early);
                }
                if let Some(late) = millis_opt(lock, "tick.late", self.late)? {
                    tick = tick.late(late);
                }
                Ok(tick)
            }
            (None, Some(planned)) => {
                if self.early.is_some() || self.late.is_some() {
                    return Err(Failure::invalid(
                        lock,
                        "tick.early and tick.late go with tick.every, not tick.planned",
                    ));
                }
                let since = millis(lock, "tick.planned", planned)?;
                match SystemTime::UNIX_EPOCH.checked_add(since) {
                    Some(at) if planned < PLANNED_END_MS => Ok(Tick::planned(at)),
                    _ => Err(Failure::invalid(
                        lock,
                        format!("tick.planned must be before the year 10000, not {planned}"),
                    )),
                }
            }
            (Some(_), Some(_)) => Err(Failure::invalid(
                lock,
                "a tick is tick.every or tick.planned, not both",
            )),
            (None, None) => Err(Failure::invalid(
                lock,
                "a tick needs tick.every or tick.planned",
            )),
        }
    }
}

/// The lock of a run-once that has the work to do.
#[napi]
pub struct OnceRun {
    held: HeldRun<()>,
    tick: Option<f64>,
}

/// The JavaScript value of a begun run-once.
pub fn begun(begun: Begun, context: Context) -> Either4<OnceRun, OnceDone, OnceLate, OnceGaveUp> {
    match begun {
        Begun::Run(run) => Either4::A(OnceRun {
            tick: run.tick().map(epoch_ms),
            held: HeldRun::new(*run, context),
        }),
        Begun::AlreadyDone(done) => Either4::B(OnceDone {
            fence: done.fence,
            at: epoch_ms(done.at),
            tick: done.tick.map(epoch_ms),
        }),
        Begun::TooLate(late) => Either4::C(OnceLate {
            tick: epoch_ms(late.tick),
            late: ms(late.late),
        }),
        Begun::GaveUp(gave_up) => {
            #[allow(clippy::cast_precision_loss)] // a count of failed runs
            let failures = gave_up.failures as f64;
            Either4::D(OnceGaveUp {
                failures,
                tick: gave_up.tick.map(epoch_ms),
            })
        }
    }
}

#[napi]
impl OnceRun {
    /// The name of the lock the runs take turns on.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.held.name().to_owned()
    }

    /// The run's fence: the record carries it.
    #[napi(getter)]
    pub fn fence(&self) -> u64 {
        self.held.fence()
    }

    /// The tick this run does the work for (milliseconds since the epoch), `null` without one.
    #[napi(getter)]
    pub fn tick(&self) -> Option<f64> {
        self.tick
    }

    /// `[code, message]` if the run's lock is lost (or released) now, else `null`.
    #[napi(ts_return_type = "[string, string] | null")]
    pub fn lost_now(&self) -> Option<Vec<String>> {
        lost_pair(self.held.lost())
    }

    /// Calls `callback(code, message)` when the run's lock is lost or released (a release is
    /// not a loss: the caller tells them apart by `code`).
    #[napi(ts_args_type = "callback: (code: string, message: string) => void")]
    pub fn on_lost(&self, callback: LostCallback) {
        held::on_lost(self.held.kept(), self.held.lost(), callback);
    }

    /// Records the work as done and releases the lock (fails with `fenced` if this run lost its
    /// lock to a newer one: nothing recorded). `true` if it recorded.
    #[napi]
    pub fn done<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        held::run(
            env,
            self.held.kept(),
            self.held.finish(RunEnding::Done),
            |f| f,
        )
    }

    /// Counts this run as failed (its work threw; not counted if this run lost its lock to a
    /// newer one) and releases the lock without recording anything. `true` if this call ended
    /// the run (`false`: ended already).
    #[napi]
    pub fn failed<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        held::run(
            env,
            self.held.kept(),
            self.held.finish(RunEnding::Failed),
            |f| f,
        )
    }

    /// Releases the lock without recording anything, and without counting a failure (the run
    /// was stopped, not failed).
    #[napi]
    pub fn give_up<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        held::run(
            env,
            self.held.kept(),
            self.held.finish(RunEnding::GiveUp),
            |f| f,
        )
    }
}
