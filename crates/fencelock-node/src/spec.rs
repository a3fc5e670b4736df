//! A lock request as JavaScript describes it: its kind, its name and its options, passed one by
//! one (a native object made per request, or an object read field by field, would cost more than
//! the library's own work for an uncontended lock). It is checked when the request is made
//! ([`check_spec`]) and built again by each acquisition ([`Args::spec`]); the checks and the
//! conversion are `fencelock_bind::spec`'s. Times are milliseconds.

use fencelock_bind::spec;
use napi::{Env, Result};
use napi_derive::napi;

use crate::errors::{Failure, millis_opt};

/// A request's kind, name and options, as JavaScript passes them (`undefined` or `null`: the
/// default); `kind` is one of `lock`, `fair`, `semaphore`, `read`, `write`, `reentrant`.
pub struct Args {
    pub kind: String,
    pub name: String,
    pub ttl: Option<f64>,
    pub wait: Option<f64>,
    pub queue_timeout: Option<f64>,
    pub max_hold: Option<f64>,
    pub lock_delay: Option<f64>,
    pub auto_renew: Option<bool>,
    pub permits: Option<u32>,
    pub take: Option<u32>,
    pub label: Option<String>,
}

impl Args {
    /// The checked request.
    pub fn spec(self) -> std::result::Result<spec::Spec, Failure> {
        let name = self.name;
        let options = spec::Options {
            permits: self.permits.unwrap_or(1),
            take: self.take.unwrap_or(1),
            ttl: millis_opt(&name, "ttl", self.ttl)?,
            wait: millis_opt(&name, "wait", self.wait)?,
            queue_timeout: millis_opt(&name, "queueTimeout", self.queue_timeout)?,
            max_hold: millis_opt(&name, "maxHold", self.max_hold)?,
            lock_delay: millis_opt(&name, "lockDelay", self.lock_delay)?,
            auto_renew: self.auto_renew.unwrap_or(true),
            label: self.label,
        };
        spec::Spec::new(&self.kind, name.clone(), options).map_err(|e| Failure::invalid(&name, e))
    }
}

/// Checks a request as it is made: nothing, or the `invalid_argument` error that names the lock
/// and the option.
#[napi]
#[allow(clippy::too_many_arguments)]
pub fn check_spec(
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
    label: Option<String>,
) -> Result<()> {
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
    args.spec().map(drop).map_err(|f| f.into_js(&env))
}
