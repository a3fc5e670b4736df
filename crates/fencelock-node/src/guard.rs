//! A held lock, for JavaScript: the library's `LockGuard` kept (`held.rs`), so that `extend`
//! (which borrows it) and `release` (which takes it) can come at any time. Its loss and a
//! release request are told through callbacks that never keep the process alive.

use fencelock::{LockGuard, LostSignal};
use napi::bindgen_prelude::PromiseRaw;
use napi::{Env, Result};
use napi_derive::napi;

use crate::client::Context;
use crate::errors::{Failure, millis, ms};
use crate::held::{Callback, Kept, LostCallback, lost_pair};

/// A held lock. Dropped unreleased (by the garbage collector), it is released in the
/// background; the end of the thread releases what is still held.
#[napi]
pub struct Guard {
    name: String,
    fence: u64,
    kept: Kept<LockGuard>,
    lost: LostSignal,
}

impl Guard {
    pub fn new(guard: LockGuard, context: Context) -> Self {
        let name = guard.name().to_owned();
        let fence = guard.fence();
        let lost = guard.lost();
        Guard {
            name,
            fence,
            kept: Kept::new(guard, context.keeper),
            lost,
        }
    }
}

#[napi]
impl Guard {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// The fencing token: strictly larger than every earlier fence of the name.
    #[napi(getter)]
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Whether the lock is still held, as far as this process can tell now.
    #[napi]
    pub fn is_held(&self) -> bool {
        !self.lost.is_lost()
    }

    /// Milliseconds until the lease's deadline as this process knows it (0 once passed or
    /// released).
    #[napi]
    pub fn remaining(&self) -> f64 {
        self.kept.hold().peek(|g| ms(g.remaining())).unwrap_or(0.0)
    }

    /// Re-arms the lease to `ttl` milliseconds from now.
    #[napi]
    pub fn extend<'env>(&self, env: &'env Env, ttl: f64) -> Result<PromiseRaw<'env, ()>> {
        let ttl = millis(&self.name, "ttl", ttl).map_err(|f| f.into_js(env))?;
        let name = self.name.clone();
        self.kept.run(
            env,
            |hold| async move {
                let guard = hold.slot().read().await;
                match guard.as_ref() {
                    Some(guard) => guard.extend(ttl).await.map_err(Failure::Lock),
                    None => Err(Failure::GivenBack { lock: name }),
                }
            },
            |()| (),
        )
    }

    /// Releases the lock: `true` if it was still held (a second release: `false`).
    #[napi]
    pub fn release<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        self.kept.finish(env)
    }

    /// `[code, message]` if the lock is lost (or released) now, else `null`.
    #[napi(ts_return_type = "[string, string] | null")]
    pub fn lost_now(&self) -> Option<Vec<String>> {
        lost_pair(&self.lost)
    }

    /// Calls `callback(code, message)` when the lock is lost or released.
    #[napi(ts_args_type = "callback: (code: string, message: string) => void")]
    pub fn on_lost(&self, callback: LostCallback) {
        self.kept.on_lost(&self.lost, callback);
    }

    /// Calls `callback()` when someone asks for this lock (`requestRelease`) while it is held.
    #[napi(ts_args_type = "callback: () => void")]
    pub fn on_release_requested(&self, callback: Callback) {
        let requested = self.kept.hold().peek(|guard| guard.release_requested());
        if let Some(requested) = requested {
            self.kept.watch(&self.lost, async move {
                requested.await;
                callback.call(
                    (),
                    napi::threadsafe_function::ThreadsafeFunctionCallMode::NonBlocking,
                );
            });
        }
    }
}
