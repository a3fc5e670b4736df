//! An acquisition for JavaScript: a lock request acquired as a Promise (its guard; released if
//! a cancellation came first), and a reentrant lock's handle, whose acquisitions share its owner.

use std::sync::Arc;

use fencelock::{LockGuard, LockRequest, ReentrantLock};
use napi::bindgen_prelude::PromiseRaw;
use napi::{Env, Result};
use napi_derive::napi;

use crate::cancel::{Cancel, Stop, call_holding};
use crate::env::{Context, context};
use crate::guard::Guard;
use crate::spec::Args;

/// A reentrant lock's handle.
#[napi]
pub struct Reentrant {
    pub(crate) name: String,
    pub(crate) client: Arc<fencelock::Client>,
    pub(crate) handle: ReentrantLock,
}

#[napi]
impl Reentrant {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.name.clone()
    }

    /// Acquires the lock (again, if this handle holds it); `null` with `tryOnly` when another
    /// owner holds it.
    #[napi(ts_return_type = "Promise<Guard | null>")]
    #[allow(clippy::too_many_arguments)]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        kind: String,
        name: String,
        ttl: Option<f64>,
        wait: Option<f64>,
        queue_timeout: Option<f64>,
        max_hold: Option<f64>,
        lock_delay: Option<f64>,
        auto_renew: Option<bool>,
        permits: Option<u32>,
        take: Option<u32>,
        label: Option<String>,
        try_only: bool,
        cancel: Option<&Cancel>,
    ) -> Result<PromiseRaw<'env, Option<Guard>>> {
        let args = Args {
            kind,
            name,
            ttl,
            wait,
            queue_timeout,
            max_hold,
            lock_delay,
            auto_renew,
            permits,
            take,
            label,
        };
        let spec = args.spec().map_err(|f| f.into_js(env))?;
        let request = spec.configure(self.handle.request());
        acquire(
            env,
            context(env, self.client.clone())?,
            request,
            try_only,
            cancel,
        )
    }
}

/// The acquisition of `request`: its guard, released if a cancellation came first.
pub(crate) fn acquire<'env>(
    env: &'env Env,
    context: Context,
    request: LockRequest,
    try_only: bool,
    cancel: Option<&Cancel>,
) -> Result<PromiseRaw<'env, Option<Guard>>> {
    let work = async move {
        if try_only {
            request.try_acquire().await
        } else {
            request.acquire().await.map(Some)
        }
    };
    call_holding(
        env,
        Stop::AtEnd(cancel),
        work,
        move |_, result: fencelock::Result<Option<LockGuard>>| {
            Ok(result?.map(|guard| Guard::new(guard, context)))
        },
        fencelock_bind::holds::undo,
    )
}
