//! fencelock's errors as JavaScript errors: an `Error` with the library's `code`
//! ([`fencelock::Error::code`]), the lock's name as `lock`, and the variant's fields as
//! properties (durations in milliseconds, fences as bigints). The package's JavaScript makes
//! each into its `FencelockError`.

use std::time::Duration;

use fencelock_bind::fields::{Value, fields};
use napi::bindgen_prelude::{JsValue, Object, Status};
use napi::{Env, Error, Result};

/// Why a call failed.
pub enum Failure {
    /// The library's error.
    Lock(fencelock::Error),
    /// A bad argument for lock `lock`, found before anything was sent.
    Invalid { lock: String, reason: String },
    /// A bad client configuration, found before the library saw it.
    Config(String),
    /// The call was cancelled (its `AbortSignal` aborted): the JavaScript side throws the
    /// signal's reason instead.
    Cancelled,
}

impl From<fencelock::Error> for Failure {
    fn from(e: fencelock::Error) -> Self {
        Failure::Lock(e)
    }
}

impl Failure {
    pub fn invalid(lock: &str, reason: impl Into<String>) -> Self {
        Failure::Invalid {
            lock: lock.to_owned(),
            reason: reason.into(),
        }
    }

    /// The JavaScript error, made on `env`'s thread.
    pub fn into_js(self, env: &Env) -> Error {
        match self.build(env) {
            Ok(error) => error,
            Err(e) => e,
        }
    }

    fn build(self, env: &Env) -> Result<Error> {
        let (message, code, lock, fields): (String, &str, Option<String>, Vec<(&str, Value)>) =
            match self {
                Failure::Lock(e) => {
                    let lock = e.lock_name().map(str::to_owned);
                    (e.to_string(), e.code(), lock, fields(&e))
                }
                Failure::Invalid { lock, reason } => (
                    format!("invalid argument for lock {lock:?}: {reason}"),
                    "invalid_argument",
                    Some(lock),
                    vec![("reason", Value::Text(reason))],
                ),
                Failure::Config(reason) => (
                    format!("invalid fencelock configuration: {reason}"),
                    "config",
                    None,
                    vec![("reason", Value::Text(reason))],
                ),
                Failure::Cancelled => (
                    "the call was cancelled".to_owned(),
                    "cancelled",
                    None,
                    Vec::new(),
                ),
            };
        let mut object: Object<'_> =
            env.create_error(Error::new(Status::GenericFailure, message))?;
        object.set("code", code)?;
        object.set("lock", lock)?;
        for (name, value) in fields {
            set(&mut object, name, value)?;
        }
        Ok(Error::from(object.to_unknown()))
    }
}

/// Sets `value` as `name` on `object`: text as a string, a count or a duration (milliseconds)
/// as a number, a fence as a bigint, an absent value as `null`.
pub fn set(object: &mut Object<'_>, name: &str, value: Value) -> Result<()> {
    match value {
        Value::Text(text) => object.set(name, text),
        Value::Word(word) => object.set(name, word),
        #[allow(clippy::cast_precision_loss)] // counts of servers and replicas
        Value::Count(n) => object.set(name, n as f64),
        Value::Fence(n) => object.set(name, n),
        Value::Time(d) => object.set(name, ms(d)),
        Value::None => object.set(name, Option::<()>::None),
    }
}

/// A duration as JavaScript gives them: milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Milliseconds given by JavaScript as a duration, or `InvalidArgument` naming the lock and
/// `what`.
pub fn millis(lock: &str, what: &str, value: f64) -> std::result::Result<Duration, Failure> {
    Duration::try_from_secs_f64(value / 1000.0).map_err(|_| {
        Failure::invalid(
            lock,
            format!("{what} must be a finite, non-negative number of milliseconds, not {value}"),
        )
    })
}

/// [`millis`] of an optional value.
pub fn millis_opt(
    lock: &str,
    what: &str,
    value: Option<f64>,
) -> std::result::Result<Option<Duration>, Failure> {
    value.map(|v| millis(lock, what, v)).transpose()
}
