//! fencelock's errors as Python exceptions: one class per variant (defined in
//! `fencelock/errors.py`), each carrying the lock name and the variant's fields as attributes.

use fencelock::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The Python exception for a fencelock error: the class of `fencelock.errors` whose `code` is
/// the error's ([`fencelock::Error::code`]), with the lock's name and the variant's fields.
pub fn to_py(py: Python<'_>, error: &Error) -> PyErr {
    match build(py, error) {
        Ok(exception) => exception,
        Err(e) => e,
    }
}

fn build(py: Python<'_>, error: &Error) -> PyResult<PyErr> {
    let fields = PyDict::new(py);
    fields.set_item("lock", error.lock_name())?;
    add_fields(error, &fields)?;
    let module = py.import("fencelock.errors")?;
    // A code this package's Python does not know yet: its base class, with the code.
    let class = module
        .getattr("_BY_CODE")?
        .call_method1("get", (error.code(), module.getattr("Error")?))?;
    fields.set_item("code", error.code())?;
    let exception = class.call((error.to_string(),), Some(&fields))?;
    Ok(PyErr::from_value(exception))
}

/// Adds the fields of `error`'s variant to `fields` (durations in seconds).
fn add_fields(error: &Error, fields: &Bound<'_, PyDict>) -> PyResult<()> {
    use fencelock_bind::fields::Value;
    for (name, value) in fencelock_bind::fields::fields(error) {
        match value {
            Value::Text(text) => fields.set_item(name, text)?,
            Value::Word(word) => fields.set_item(name, word)?,
            Value::Count(n) | Value::Fence(n) => fields.set_item(name, n)?,
            Value::Time(d) => fields.set_item(name, d.as_secs_f64())?,
            Value::None => fields.set_item(name, fields.py().None())?,
        }
    }
    Ok(())
}

/// The Python exception `class` (of `fencelock.errors`) with `message` and `fields`, for an
/// error the Rust library has no value for (it is found before anything reaches it).
pub fn python_error(class: &str, message: String, fields: &[(&str, Option<&str>)]) -> PyErr {
    Python::attach(|py| {
        let make = || -> PyResult<PyErr> {
            let kwargs = PyDict::new(py);
            for (name, value) in fields {
                kwargs.set_item(name, value)?;
            }
            let module = py.import("fencelock.errors")?;
            let exception = module.getattr(class)?.call((message,), Some(&kwargs))?;
            Ok(PyErr::from_value(exception))
        };
        make().unwrap_or_else(|e| e)
    })
}

/// `fencelock.ConfigError` for a bad client configuration, found before the library sees it.
pub fn config_error(reason: &str) -> PyErr {
    let message = format!("invalid fencelock configuration: {reason}");
    python_error(
        "ConfigError",
        message,
        &[("lock", None), ("reason", Some(reason))],
    )
}

/// `fencelock.InvalidArgument` for a bad argument of lock `lock` (checked before anything is
/// sent).
pub fn invalid(lock: &str, reason: impl Into<String>) -> PyErr {
    let reason = reason.into();
    let message = format!("invalid argument for lock {lock:?}: {reason}");
    python_error(
        "InvalidArgument",
        message,
        &[("lock", Some(lock)), ("reason", Some(&reason))],
    )
}

/// Seconds given by Python as a duration, or `InvalidArgument` naming the lock and `what`.
pub fn seconds(lock: &str, what: &str, value: f64) -> PyResult<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(value).map_err(|_| {
        invalid(
            lock,
            format!("{what} must be a finite, non-negative number of seconds, not {value}"),
        )
    })
}
