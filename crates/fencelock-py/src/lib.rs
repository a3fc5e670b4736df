//! The native part of fencelock's Python package (`fencelock._native`): the Rust library
//! behind a small surface that the Python modules (`fencelock`, `fencelock.aio`) wrap.
//!
//! Every wait releases the GIL. Blocking calls answer Ctrl-C; asyncio calls run as tasks on
//! the process's runtime and answer a callback. See `python/fencelock/` for the API users see.

mod client;
mod election;
mod errors;
mod fenced;
mod guard;
mod request;
mod runtime;

use pyo3::prelude::*;

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<client::Client>()?;
    module.add_class::<client::Reentrant>()?;
    module.add_class::<guard::Guard>()?;
    module.add_class::<election::Leadership>()?;
    module.add_class::<election::Observer>()?;
    module.add_class::<request::Spec>()?;
    module.add_class::<runtime::Pending>()?;
    module.add_function(wrap_pyfunction!(runtime::_shutdown, module)?)?;
    module.add("PROTOCOL_VERSION", 1)?;
    module.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
