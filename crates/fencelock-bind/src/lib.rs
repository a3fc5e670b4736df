//! What fencelock's language packages (Python, Node.js) share, whatever the language: how a
//! client is described ([`config`]), how a lock request is ([`spec`]), the fields each error
//! carries ([`fields`]), and the holds a process gives back when it ends ([`held`], [`keeper`]).
//!
//! A package's native side converts its language's values to these and back; what a value
//! means, and what is checked, is decided here once. Durations are [`Duration`]s here: each
//! package converts its language's unit (seconds in Python, milliseconds in Node.js), and
//! names that unit in its own errors.
//!
//! [`Duration`]: std::time::Duration

pub mod config;
pub mod fields;
pub mod held;
pub mod keeper;
pub mod spec;

/// The version of the wire protocol the packages speak (PROTOCOL.md).
pub const PROTOCOL_VERSION: u32 = 1;
