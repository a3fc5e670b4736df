//! What fencelock's language packages (Python, Node.js) share, whatever the language: how a
//! client is described ([`config`]), how a lock request is ([`spec`]), the fields each error
//! carries ([`fields`]), each hold's lifecycle ([`holds`]: a lock, a leadership, several locks,
//! a run-once) kept for the language ([`kept`], [`held`]), the keeper of a process's background
//! work and of what it gives back when it ends ([`keeper`]), and a stream followed one item at
//! a time ([`follow`]), and the process's metrics as a package exports them ([`metrics`]).
//!
//! A package's native side converts its language's values to these and back; what a value
//! means, and what is checked, is decided here once. Durations are [`Duration`]s here: each
//! package converts its language's unit (seconds in Python, milliseconds in Node.js), and
//! names that unit in its own errors.
//!
//! [`Duration`]: std::time::Duration

pub mod config;
pub mod fields;
pub mod follow;
pub mod held;
pub mod holds;
pub mod keeper;
pub mod kept;
pub mod log_fields;
pub mod metrics;
pub mod spec;

/// The version of the wire protocol the packages speak (PROTOCOL.md).
pub const PROTOCOL_VERSION: u32 = 1;
