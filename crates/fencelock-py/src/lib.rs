//! The native part of fencelock's Python package (`fencelock._native`): the Rust library
//! behind a small surface that the Python modules (`fencelock`, `fencelock.aio`) wrap.
//!
//! Every call is an `Operation` (`operation.rs`) on the process's runtime, waited on
//! with the GIL released (answering Ctrl-C) or awaited through a callback; its result stays in
//! Rust until Python takes it, so that a cancelled call's result is undone in one place. The
//! codes of errors, losses, conflicts and observations are the library's
//! (`fencelock::Error::CODES` and the others), exported here for the Python side to map.

mod admin;
mod client;
mod election;
mod errors;
mod fenced;

mod follow;
mod gil;
mod guard;
mod held;
mod logging;
mod metrics;
mod operation;
mod process;
mod recipes;
mod reentrant;
mod request;

use pyo3::prelude::*;

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<client::Client>()?;
    module.add_class::<reentrant::Reentrant>()?;
    module.add_class::<guard::Guard>()?;
    module.add_class::<election::Leadership>()?;
    module.add_class::<election::Observer>()?;
    module.add_class::<admin::Releases>()?;
    module.add_class::<recipes::MultiGuard>()?;
    module.add_class::<recipes::OnceRun>()?;
    module.add_class::<request::Spec>()?;
    module.add_class::<operation::Operation>()?;
    module.add_function(wrap_pyfunction!(process::_shutdown, module)?)?;
    module.add_function(wrap_pyfunction!(process::_forked, module)?)?;
    metrics::add(module)?;
    module.add("PROTOCOL_VERSION", 1)?;
    module.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    module.add("ERROR_CODES", fencelock::Error::CODES.to_vec())?;
    module.add("LOST_CODES", fencelock::LostReason::CODES.to_vec())?;
    module.add("CONFLICT_CODES", fencelock::Conflict::CODES.to_vec())?;
    module.add(
        "OBSERVATION_CODES",
        fencelock::election::Observation::CODES.to_vec(),
    )?;
    module.add("KIND_CODES", fencelock::LockKind::CODES.to_vec())?;
    logging::install(module.py())?;
    fencelock_bind::metrics::record_once_enabled();
    Ok(())
}
