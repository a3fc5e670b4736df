//! A held lock, for JavaScript: `fencelock_bind`'s [`HeldLock`] (the guard kept, so that
//! `extend`, which borrows it, and `release`, which takes it, can come at any time). Its loss
//! and a release request are told through callbacks that never keep the process alive.

use fencelock::LockGuard;
use fencelock_bind::holds::HeldLock;
use napi::bindgen_prelude::PromiseRaw;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, Result};
use napi_derive::napi;

use crate::env::Context;
use crate::errors::{millis, ms};
use crate::held::{self, Callback, LostCallback, lost_pair};

/// A held lock. Dropped unreleased (by the garbage collector), it is released in the
/// background; the end of the thread releases what is still held.
#[napi]
pub struct Guard {
    held: HeldLock<()>,
}

impl Guard {
    pub fn new(guard: LockGuard, context: Context) -> Self {
        Guard {
            held: HeldLock::new(guard, context),
        }
    }
}

#[napi]
impl Guard {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.held.name().to_owned()
    }

    /// The fencing token: strictly larger than every earlier fence of the name.
    #[napi(getter)]
    pub fn fence(&self) -> u64 {
        self.held.fence()
    }

    /// Whether the lock is still held, as far as this process can tell now.
    #[napi]
    pub fn is_held(&self) -> bool {
        self.held.is_held()
    }

    /// Milliseconds until the lease's deadline as this process knows it (0 once passed or
    /// released).
    #[napi]
    pub fn remaining(&self) -> f64 {
        ms(self.held.remaining())
    }

    /// Re-arms the lease to `ttl` milliseconds from now.
    #[napi]
    pub fn extend<'env>(&self, env: &'env Env, ttl: f64) -> Result<PromiseRaw<'env, ()>> {
        let ttl = millis(self.held.name(), "ttl", ttl).map_err(|f| f.into_js(env))?;
        held::run(env, self.held.kept(), self.held.extend(ttl), |()| ())
    }

    /// Releases the lock: `true` if it was still held (a second release: `false`).
    #[napi]
    pub fn release<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        held::release(env, self.held.kept())
    }

    /// Releases the lock at the end of a block: rejects `not_held` (with the reason) if it was
    /// no longer held by then.
    #[napi]
    pub fn end_block<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        held::end_block(env, self.held.kept())
    }

    /// `[code, message]` if the lock is lost (or released) now, else `null`.
    #[napi(ts_return_type = "[string, string] | null")]
    pub fn lost_now(&self) -> Option<Vec<String>> {
        lost_pair(self.held.lost())
    }

    /// Calls `callback(code, message)` when the lock is lost or released.
    #[napi(ts_args_type = "callback: (code: string, message: string) => void")]
    pub fn on_lost(&self, callback: LostCallback) {
        held::on_lost(self.held.kept(), self.held.lost(), callback);
    }

    /// Calls `callback()` when someone asks for this lock (`requestRelease`) while it is held.
    #[napi(ts_args_type = "callback: () => void")]
    pub fn on_release_requested(&self, callback: Callback) {
        let requested = self.held.release_requested();
        held::spawn(self.held.kept(), async move {
            if requested.await.is_ok() {
                callback.call((), ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
    }
}
