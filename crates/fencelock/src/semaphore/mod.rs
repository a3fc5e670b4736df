//! The counting semaphore: at most N holders at once, each permit a lease of its own.
//!
//! A permit whose holder crashed comes back when its lease runs out (the next acquire drops
//! it), and the watchdog renews every permit held, like any lock. Every grant gets a fence of
//! its own. All users of a semaphore must agree on N: a request with another N, while permits
//! are held with the stored one, fails with `Conflict::PermitsMismatch` and changes nothing
//! (N may change while no permit is held).
//!
//! Not offered over Redlock: majority voting does not bound the holders to N.

use std::sync::LazyLock;

use crate::lock::protocol::Lua;

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("acquire.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("release.lua");
