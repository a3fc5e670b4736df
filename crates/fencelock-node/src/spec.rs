//! A lock request as JavaScript describes it, checked once when the request is made (the
//! checks and the conversion are `fencelock_bind::spec`'s); times are milliseconds.

use fencelock_bind::spec;
use napi::{Env, Result};
use napi_derive::napi;

use crate::errors::{Failure, millis_opt};

/// A request's options, as the package's JavaScript passes them (milliseconds).
#[napi(object)]
pub struct SpecOptions {
    pub permits: Option<u32>,
    pub take: Option<u32>,
    pub ttl: Option<f64>,
    /// `undefined`: as long as it takes; `0`: not at all.
    pub wait: Option<f64>,
    pub queue_timeout: Option<f64>,
    pub max_hold: Option<f64>,
    pub lock_delay: Option<f64>,
    pub auto_renew: Option<bool>,
}

/// A checked lock request: `kind` is one of `lock`, `fair`, `semaphore`, `read`, `write`,
/// `reentrant`.
#[napi]
pub struct Spec {
    pub(crate) spec: spec::Spec,
}

#[napi]
impl Spec {
    #[napi(constructor)]
    pub fn new(env: Env, kind: String, name: String, options: Option<SpecOptions>) -> Result<Self> {
        Self::check(kind, name, options).map_err(|f| f.into_js(&env))
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

impl Spec {
    fn check(
        kind: String,
        name: String,
        options: Option<SpecOptions>,
    ) -> std::result::Result<Self, Failure> {
        let o = options.unwrap_or(SpecOptions {
            permits: None,
            take: None,
            ttl: None,
            wait: None,
            queue_timeout: None,
            max_hold: None,
            lock_delay: None,
            auto_renew: None,
        });
        let options = spec::Options {
            permits: o.permits.unwrap_or(1),
            take: o.take.unwrap_or(1),
            ttl: millis_opt(&name, "ttl", o.ttl)?,
            wait: millis_opt(&name, "wait", o.wait)?,
            queue_timeout: millis_opt(&name, "queueTimeout", o.queue_timeout)?,
            max_hold: millis_opt(&name, "maxHold", o.max_hold)?,
            lock_delay: millis_opt(&name, "lockDelay", o.lock_delay)?,
            auto_renew: o.auto_renew.unwrap_or(true),
        };
        let spec = spec::Spec::new(&kind, name.clone(), options)
            .map_err(|e| Failure::invalid(&name, e))?;
        Ok(Spec { spec })
    }
}
