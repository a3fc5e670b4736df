//! The counting semaphore: at most N holders at once, each permit a lease of its own.
//!
//! A permit whose holder crashed comes back when its lease runs out (the next acquire drops
//! it), and the watchdog renews every permit held, like any lock. Every grant gets a fence of
//! its own. All users of a semaphore must agree on N: a request with another N, while permits
//! are held with the stored one, fails with `Conflict::PermitsMismatch` and changes nothing
//! (N may change while no permit is held).
//!
//! A hold may take several permits at once ([`LockRequest::take`](crate::LockRequest::take)):
//! k fields with one lease and one fence. Waiting requests keep a place (`w:<token>`, with how
//! many they want and when they arrived), and a request is granted only when its permits are
//! free after those of every request that waits longer: first come, first served.
//!
//! Not offered over Redlock: majority voting does not bound the holders to N.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use smallvec::smallvec;

use crate::engine::{Attempt, Hold, Protocol, ReleaseFence};
use crate::error::Conflict;
use crate::kind::LockKind;
use crate::kinds::{ENTRY_EXTEND, plain};
use crate::script::{Arg, Call, Lua, lua};

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("../entries.lua", "fields.lua", "acquire.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("../entries.lua", "fields.lua", "release.lua");
pub(crate) static EXTEND: LazyLock<Lua> = lua!("../entries.lua", "fields.lua", "extend.lua");

/// A hold of `take` permits of a counting semaphore of `permits`.
#[derive(Debug)]
pub(crate) struct Permit {
    pub(crate) permits: u32,
    pub(crate) take: u32,
}

impl Protocol for Permit {
    fn kind(&self) -> LockKind {
        LockKind::Semaphore
    }

    fn label(&self) -> &'static str {
        "semaphore"
    }

    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a> {
        let mut args = smallvec![
            hold.token_arg(),
            Arg::millis(attempt.ttl),
            Arg::Int(u64::from(self.permits)),
        ];
        // Left out where they say nothing: every argument is a string the server makes (and the
        // two go as one, `<k>:<place ms>`).
        if attempt.queue_timeout.is_zero() {
            if self.take > 1 {
                args.push(Arg::Int(u64::from(self.take)));
            }
        } else {
            let place = crate::script::lease_millis(attempt.queue_timeout);
            args.push(Arg::Text(format!("{}:{place}", self.take)));
        }
        Call::new(&ACQUIRE, &hold.lock_and_fence(), args)
    }

    fn release<'a>(&'a self, hold: &'a Hold, fence: ReleaseFence) -> Call<'a> {
        let mut args = plain::release_args(hold, fence);
        if self.take > 1 {
            args.push(Arg::Int(u64::from(self.take)));
        }
        Call::new(&RELEASE, &[hold.keys.lock()], args)
    }

    fn extend<'a>(&'a self, hold: &'a Hold, ttl: Duration) -> Call<'a> {
        if self.take > 1 {
            return Call::new(
                &EXTEND,
                &[hold.keys.lock()],
                smallvec![
                    hold.token_arg(),
                    Arg::millis(ttl),
                    Arg::Int(u64::from(self.take))
                ],
            );
        }
        Call::new(
            &ENTRY_EXTEND,
            &[hold.keys.lock()],
            smallvec![hold.field_arg("p:"), Arg::millis(ttl)],
        )
    }

    fn queues(&self, single: bool) -> bool {
        // A waiting request keeps a place (`w:<token>`), so that permits go first come, first
        // served; over Redlock a semaphore is refused anyway.
        single
    }

    fn with_take(&self, permits: u32) -> Option<Arc<dyn Protocol>> {
        Some(Arc::new(Permit {
            permits: self.permits,
            take: permits,
        }))
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
        if self.take == 0 {
            return Err("a hold takes at least 1 permit".to_owned());
        }
        if self.take > self.permits {
            return Err(format!(
                "take({}) asks for more than the semaphore's {} permits",
                self.take, self.permits
            ));
        }
        Ok(())
    }
}
