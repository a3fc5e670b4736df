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
use std::time::Duration;

use smallvec::smallvec;

use crate::engine::{Attempt, Hold, Protocol, ReleaseFence};
use crate::error::Conflict;
use crate::kind::LockKind;
use crate::kinds::{ENTRY_EXTEND, plain};
use crate::script::{Arg, Call, Lua, lua};

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("../entries.lua", "fields.lua", "acquire.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("../entries.lua", "fields.lua", "release.lua");

/// One permit of a counting semaphore of `permits`.
#[derive(Debug)]
pub(crate) struct Permit {
    pub(crate) permits: u32,
}

impl Protocol for Permit {
    fn kind(&self) -> LockKind {
        LockKind::Semaphore
    }

    fn label(&self) -> &'static str {
        "semaphore"
    }

    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a> {
        Call::new(
            &ACQUIRE,
            &hold.lock_and_fence(),
            smallvec![
                hold.token_arg(),
                Arg::millis(attempt.ttl),
                Arg::Int(u64::from(self.permits)),
            ],
        )
    }

    fn release<'a>(&'a self, hold: &'a Hold, fence: ReleaseFence) -> Call<'a> {
        Call::new(
            &RELEASE,
            &[hold.keys.lock()],
            plain::release_args(hold, fence),
        )
    }

    fn extend<'a>(&'a self, hold: &'a Hold, ttl: Duration) -> Call<'a> {
        Call::new(
            &ENTRY_EXTEND,
            &[hold.keys.lock()],
            smallvec![hold.field_arg("p:"), Arg::millis(ttl)],
        )
    }

    fn conflict(&self, what: &str, detail: &str) -> Option<Conflict> {
        (what == "permits").then(|| Conflict::PermitsMismatch {
            requested: self.permits,
            held_with: detail.to_owned(),
        })
    }

    fn redlock_refusal(&self) -> Option<&'static str> {
        Some(
            "a semaphore cannot be held over Redlock: majority voting does not bound the \
             holders to N (with 3 instances and 2 permits, three holders can each win a \
             different majority); use one Redis server, a Redis Cluster or a Sentinel-managed \
             master for semaphores",
        )
    }

    fn writes_fence_back(&self) -> bool {
        // Never over Redlock, where a write-back matters.
        false
    }

    fn check(&self) -> Result<(), String> {
        if self.permits == 0 {
            return Err("a semaphore needs at least 1 permit".to_owned());
        }
        Ok(())
    }
}
