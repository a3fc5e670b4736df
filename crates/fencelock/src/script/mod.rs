//! fencelock's Lua scripts as the engine runs them: how a script is composed from its `.lua`
//! files ([`lua!`]), how one call (script, keys, arguments) is encoded and sent, and the wake-up
//! payloads that release scripts publish and the release listener reads.
//!
//! Every script is the helpers of `prelude.lua` that it calls, with the wake-up payloads in
//! front, then the parts its module names: helpers of that kind (`value.lua`, `fields.lua`,
//! `queue.lua`, ...) and the script itself. A script is run by SHA and loaded again when the
//! server answers `NOSCRIPT`, so each operation stays one round trip.

//!
//! - `compose.rs`: [`Lua`] and [`lua!`], a script and its batch form as composed from its parts;
//! - `helpers.rs`: which of the prelude's helpers a script uses (the helper tree shaker);
//! - `call.rs`: one call of a script, its arguments and their encoding;
//! - `reply.rs`: reading replies; `prelude.lua`, `batch.lua`: the shared Lua.

mod call;
mod compose;
mod helpers;
pub(crate) mod reply;

pub(crate) use call::{Arg, Args, Call, Encoded, lease_millis};
pub(crate) use compose::{Batch, Lua, Variant, compact_replies, lua};
#[cfg(test)]
pub(crate) use helpers::helpers_only;

/// The release message that lets exactly one waiter in (a plain lock, a reentrant lock's last
/// hold, a semaphore permit). Defined once for Rust and Lua (see [`lua!`]).
macro_rules! wake_one {
    () => {
        "one"
    };
}
/// The release message that wakes every waiter (a read-write lock, an operator's release).
macro_rules! wake_all {
    () => {
        "all"
    };
}
/// The prefix of a release message that wakes only the waiter whose request has the owner token
/// that follows (a fair lock's next holder).
macro_rules! wake_to {
    () => {
        "to:"
    };
}

/// How long a lock passed to a waiter in line is its own before it confirms it, in milliseconds:
/// the passed lease (or less, if the waiter's place lapses sooner). A waiter that died since its
/// last refresh keeps the lock idle no longer than this. Defined once for Rust and Lua.
macro_rules! pass_claim_ms {
    () => {
        "1000"
    };
}

pub(crate) use {pass_claim_ms, wake_all, wake_one, wake_to};

/// See [`pass_claim_ms!`].
pub(crate) const PASS_CLAIM: std::time::Duration = std::time::Duration::from_millis(1000);

/// See [`wake_one!`].
pub(crate) const WAKE_ONE: &str = wake_one!();
/// See [`wake_all!`]. The listener never needs to match it: every payload but the other two
/// wakes every waiter.
#[cfg(test)]
pub(crate) const WAKE_ALL: &str = wake_all!();
/// See [`wake_to!`].
pub(crate) const WAKE_TO: &str = wake_to!();
