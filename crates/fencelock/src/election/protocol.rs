//! The election's lock as a kind of lock the engine runs: the plain lock (same value, fence),
//! whose grant also writes the leader's record and announces it (`campaign.lua`), whose renewal
//! also re-arms the record's expiry, a second past the lease (`extend.lua`, `record.lua`), and
//! whose release also announces the resignation and deletes the record (`step_down.lua`), each
//! in one script. Nobody takes a place in line: a leader's release wakes one campaign of each
//! client, which try again.

use std::sync::LazyLock;
use std::time::Duration;

use smallvec::smallvec;

use crate::engine::{Attempt, Hold, Protocol, ReleaseFence};
use crate::kind::LockKind;
use crate::script::{Arg, Call, Lua, lua};

pub(crate) static CAMPAIGN: LazyLock<Lua> =
    lua!("../kinds/plain/value.lua", "record.lua", "campaign.lua");
pub(crate) static EXTEND: LazyLock<Lua> =
    lua!("../kinds/plain/value.lua", "record.lua", "extend.lua");
pub(crate) static STEP_DOWN: LazyLock<Lua> = lua!("../kinds/plain/value.lua", "step_down.lua");

/// One campaign's protocol: the value it announces, and the election's record key.
#[derive(Debug)]
pub(super) struct Elected {
    pub(super) value: String,
    pub(super) record: String,
}

impl Protocol for Elected {
    fn label(&self) -> &'static str {
        "election"
    }

    fn is_term(&self) -> bool {
        true
    }

    fn kind(&self) -> LockKind {
        LockKind::Lock
    }

    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a> {
        let mut args = smallvec![
            hold.token_arg(),
            Arg::millis(attempt.ttl),
            Arg::Str(&self.value)
        ];
        if attempt.others_wait {
            args.push(Arg::Str("1"));
        }
        Call::new(
            &CAMPAIGN,
            &[hold.keys.lock(), hold.keys.fence(), &self.record],
            args,
        )
    }

    fn release<'a>(&'a self, hold: &'a Hold, fence: ReleaseFence) -> Call<'a> {
        let args = match fence {
            ReleaseFence::Held(fence) => smallvec![Arg::Value(hold.token.as_str(), fence)],
            ReleaseFence::WriteBack(_) | ReleaseFence::Unknown => smallvec![hold.token_arg()],
        };
        Call::new(&STEP_DOWN, &[hold.keys.lock(), &self.record], args)
    }

    fn extend<'a>(&'a self, hold: &'a Hold, ttl: Duration) -> Call<'a> {
        Call::new(
            &EXTEND,
            &[hold.keys.lock(), &self.record],
            smallvec![hold.token_arg(), Arg::millis(ttl)],
        )
    }

    /// Never by the server's compare-and-set: a renewal re-arms the record's expiry too.
    fn renews_by_value(&self) -> bool {
        false
    }

    fn redlock_refusal(&self) -> Option<&'static str> {
        Some("leader election needs one Redis server, a Redis Cluster or a Sentinel master")
    }
}
