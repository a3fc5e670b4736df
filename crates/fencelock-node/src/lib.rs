//! The native part of fencelock's Node.js package: the Rust library behind a small surface that
//! the package's JavaScript (`index.js`) wraps. It only converts arguments and answers.
//!
//! Every call returns a Promise that napi resolves on the JavaScript thread. A call that can
//! wait takes a `Cancel` (`cancel.rs`), which gives the wait up; a result that races the
//! cancellation is undone when it reaches the JavaScript thread (`cancel.rs`). What is still
//! held when a thread's environment ends (the process exits, a worker ends) is given back
//! (`env.rs`). The codes of errors, losses, conflicts and observations are the library's
//! (`fencelock::Error::CODES` and the others), exported here for the JavaScript side.
//! The process's metrics are read by the package's exporters through `metrics.rs`.

// Under `cfg(test)` (clippy's `--all-targets`), napi's macros leave the exported functions
// unregistered, so a function that only JavaScript calls looks unused there.
#![cfg_attr(test, allow(dead_code))]

mod acquire;
mod admin;
mod bridge;
mod cancel;
mod client;
mod election;
mod env;
mod errors;
mod fenced;
mod guard;
mod held;
mod logger;
mod metrics;
mod recipes;
mod spec;

use napi_derive::napi;

/// The addon's own (Rust) allocations go to mimalloc rather than the C library's allocator:
/// a call's futures, replies and buffers are made on one thread and freed on another (0.89× the
/// instructions per cycle, docs/BENCHMARKS.md). Its thread-local state is the dynamic kind, as
/// a library that Node.js loads with `dlopen` needs; without transparent huge pages, which cost
/// megabytes of memory for nothing measurable.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The runtime: the library only moves bytes and timers; JavaScript's thread is the other half
/// of the work (`fencelock_bind::keeper::runtime_builder`, as in Python).
#[napi_derive::module_init]
fn init() {
    // napi builds its default runtime if this one cannot be made.
    if let Ok(runtime) = fencelock_bind::keeper::runtime_builder().build() {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
    env::install_logging();
    fencelock_bind::metrics::record_once_enabled();
}

/// The package's version.
#[napi]
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version of the wire protocol (PROTOCOL.md).
#[napi]
pub const PROTOCOL_VERSION: u32 = fencelock_bind::PROTOCOL_VERSION;

/// The library's codes, by vocabulary: `error`, `lost`, `conflict`, `observation`, `kind`.
#[napi]
pub fn codes(vocabulary: String) -> Vec<&'static str> {
    match vocabulary.as_str() {
        "error" => fencelock::Error::CODES.to_vec(),
        "lost" => fencelock::LostReason::CODES.to_vec(),
        "conflict" => fencelock::Conflict::CODES.to_vec(),
        "observation" => fencelock::election::Observation::CODES.to_vec(),
        "kind" => fencelock::LockKind::CODES.to_vec(),
        _ => Vec::new(),
    }
}
