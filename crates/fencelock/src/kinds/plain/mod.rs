//! The plain fenced lock: one holder at a time, a new fence with every grant.
//!
//! The lock key holds `<owner token>:<fence>` with the lease as its TTL (`value.lua`). Acquire
//! is `SET NX PX` plus the next fence in one script, or the holder's remaining lease; it is
//! idempotent for one owner token, so a retry after a lost reply confirms the same fence.
//! Release is compare-and-delete plus a message that wakes one waiter; extend is
//! compare-and-`PEXPIRE`. Over Redlock, a renewal that finds the key gone on an instance that
//! restarted empty puts the hold back there (`reassert.lua`).

use std::sync::LazyLock;
use std::time::Duration;

use smallvec::smallvec;

use crate::engine::{Attempt, Hold, Protocol};
use crate::script::{Arg, Call, Lua, lua};

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("value.lua", "acquire.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("value.lua", "release.lua");
pub(crate) static EXTEND: LazyLock<Lua> = lua!("value.lua", "extend.lua");
pub(crate) static REASSERT: LazyLock<Lua> = lua!("reassert.lua");

/// The plain lock's protocol.
#[derive(Debug)]
pub(crate) struct Plain;

impl Protocol for Plain {
    fn label(&self) -> &'static str {
        "lock"
    }

    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a> {
        Call::new(
            &ACQUIRE,
            &hold.lock_and_fence(),
            smallvec![
                hold.token_arg(),
                Arg::millis(attempt.ttl),
                Arg::Str(if attempt.others_wait { "1" } else { "" }),
            ],
        )
    }

    fn release<'a>(&'a self, hold: &'a Hold, fence: Option<u64>) -> Call<'a> {
        Call::new(&RELEASE, &hold.lock_and_fence(), release_args(hold, fence))
    }

    fn extend<'a>(&'a self, hold: &'a Hold, ttl: Duration) -> Call<'a> {
        Call::new(
            &EXTEND,
            &[hold.keys.lock()],
            smallvec![hold.token_arg(), Arg::millis(ttl)],
        )
    }

    fn reassert<'a>(&'a self, hold: &'a Hold, fence: u64, ttl: Duration) -> Option<Call<'a>> {
        Some(Call::new(
            &REASSERT,
            &hold.lock_and_fence(),
            smallvec![hold.token_arg(), Arg::millis(ttl), Arg::Int(fence)],
        ))
    }
}

/// The arguments every release script takes: the hold's token, the release channel, and the
/// fence to write back as a floor (`''`: none).
pub(crate) fn release_args(hold: &Hold, fence: Option<u64>) -> crate::script::Args<'_> {
    smallvec![
        hold.token_arg(),
        Arg::Str(hold.keys.channel()),
        fence.map_or(Arg::Str(""), Arg::Int),
    ]
}
