//! A lock request as JavaScript describes it, checked once when the request is made (the
//! checks and the conversion are `fencelock_bind::spec`'s); times are milliseconds.

use fencelock_bind::spec;
use napi::{Env, Result};
use napi_derive::napi;

use crate::errors::{Failure, millis_opt};

/// A checked lock request: `kind` is one of `lock`, `fair`, `semaphore`, `read`, `write`,
/// `reentrant`.
#[napi]
pub struct Spec {
    pub(crate) spec: spec::Spec,
}

#[napi]
impl Spec {
    /// The options come one by one (fewer lookups than an object's fields), in the order of
    /// `spec::Options`; `undefined` (or `null`) is the default.
    #[napi(constructor)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        env: Env,
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
    ) -> Result<Self> {
        let times = Times {
            ttl,
            wait,
            queue_timeout,
            max_hold,
            lock_delay,
        };
        Self::check(kind, name, times, auto_renew, permits, take).map_err(|f| f.into_js(&env))
    }

    /// The lock's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.spec.name().to_owned()
    }

    /// The lease in milliseconds (`null`: the default, 30 000).
    #[napi(getter)]
    pub fn ttl(&self) -> Option<f64> {
        self.spec.ttl().map(crate::errors::ms)
    }
}

/// A request's times, in milliseconds as JavaScript gives them.
struct Times {
    ttl: Option<f64>,
    wait: Option<f64>,
    queue_timeout: Option<f64>,
    max_hold: Option<f64>,
    lock_delay: Option<f64>,
}

impl Spec {
    fn check(
        kind: String,
        name: String,
        times: Times,
        auto_renew: Option<bool>,
        permits: Option<u32>,
        take: Option<u32>,
    ) -> std::result::Result<Self, Failure> {
        let options = spec::Options {
            permits: permits.unwrap_or(1),
            take: take.unwrap_or(1),
            ttl: millis_opt(&name, "ttl", times.ttl)?,
            wait: millis_opt(&name, "wait", times.wait)?,
            queue_timeout: millis_opt(&name, "queueTimeout", times.queue_timeout)?,
            max_hold: millis_opt(&name, "maxHold", times.max_hold)?,
            lock_delay: millis_opt(&name, "lockDelay", times.lock_delay)?,
            auto_renew: auto_renew.unwrap_or(true),
        };
        let spec = spec::Spec::new(&kind, name.clone(), options)
            .map_err(|e| Failure::invalid(&name, e))?;
        Ok(Spec { spec })
    }
}
