//! The plain fenced lock: one holder at a time, a new fence with every grant.
//!
//! The lock key holds `<owner token>:<fence>` with the lease as its TTL (`value.lua`). Acquire
//! is `SET NX PX` plus the next fence in one script, or the holder's remaining lease; it is
//! idempotent for one owner token, so a retry after a lost reply confirms the same fence.
//! Release is compare-and-delete; extend is compare-and-`PEXPIRE`.
//!
//! Lock passing (on one server, or a cluster's slot master): a waiting request takes a place
//! in a line of waiters (`acquire.lua`: token -> when its place lapses), refreshed each time it
//! tries again (every third of the queue timeout at the latest). A release that finds the lock
//! waited for hands it straight to the waiter whose place lapses first (`release.lua`): a new
//! fence, a lease that ends when that place would have lapsed, and a message
//! `to:<token>:<fence>:<lapses>` that the waiter takes as its grant without sending anything.
//! The lock is never free while someone waits, and a handoff is one script run plus one
//! message. The waiter's conservative deadline counts from the send time of the try that set
//! the place the release read (it matches `lapses` against its tries' replies), and its
//! watchdog confirms the full lease a third of the way into that place (a lock held briefly
//! costs no confirmation). A waiter that died since its last refresh costs at most its
//! place's remaining time; one that gave up takes its place back (the release script, when it
//! finds the lock not held by the caller); a lost message costs at most a refresh period, since
//! the waiter's next try finds the lock held by its own token and is granted it (acquire is
//! idempotent). Over Redlock nobody queues: each instance would pass to a waiter of its own;
//! there a release wakes one waiter of each client and the waiters race.
//!
//! Over Redlock, a renewal that finds the key gone on an instance that restarted empty puts the
//! hold back there (`reassert.lua`).

use std::sync::LazyLock;
use std::time::Duration;

use smallvec::smallvec;

use crate::engine::{Attempt, Hold, Protocol, ReleaseFence};
use crate::kind::LockKind;
use crate::script::{Arg, Call, Lua, lua};

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("value.lua", "acquire.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("value.lua", "release.lua");
pub(crate) static EXTEND: LazyLock<Lua> = lua!("value.lua", "extend.lua");
pub(crate) static REASSERT: LazyLock<Lua> = lua!("reassert.lua");

/// The plain lock's protocol.
#[derive(Debug)]
pub(crate) struct Plain;

impl Protocol for Plain {
    fn kind(&self) -> LockKind {
        LockKind::Lock
    }

    fn label(&self) -> &'static str {
        "lock"
    }

    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a> {
        // One key: the script names the fence key and the line of waiters (see acquire.lua).
        // A waiter takes a place in line (refreshed with each try) so that a release can pass
        // the lock to it; a request's first try, before it waits, takes none. Arguments that
        // say nothing are left out: every one is a string the server makes for each run.
        let mut args = smallvec![hold.token_arg(), Arg::millis(attempt.ttl)];
        let place = attempt.waiting && !attempt.queue_timeout.is_zero();
        if attempt.others_wait || place {
            args.push(Arg::Str(if attempt.others_wait { "1" } else { "" }));
        }
        if place {
            args.push(Arg::millis(attempt.queue_timeout));
        }
        Call::new(&ACQUIRE, &[hold.keys.lock()], args)
    }

    fn release<'a>(&'a self, hold: &'a Hold, fence: ReleaseFence) -> Call<'a> {
        // The lock's other keys and its channel are named by the script (see release.lua).
        let args = match fence {
            // The whole value the grant wrote, compared as it is (see release.lua).
            ReleaseFence::Held(fence) => smallvec![Arg::Value(hold.token.as_str(), fence)],
            ReleaseFence::WriteBack(fence) => smallvec![hold.token_arg(), Arg::Int(fence)],
            ReleaseFence::Unknown => smallvec![hold.token_arg()],
        };
        Call::new(&RELEASE, &[hold.keys.lock()], args)
    }

    fn extend<'a>(&'a self, hold: &'a Hold, ttl: Duration) -> Call<'a> {
        Call::new(
            &EXTEND,
            &[hold.keys.lock()],
            smallvec![hold.token_arg(), Arg::millis(ttl)],
        )
    }

    fn renews_by_value(&self) -> bool {
        true
    }

    fn queues(&self, single: bool) -> bool {
        single
    }

    fn passes_to_waiters(&self, single: bool) -> bool {
        single
    }

    fn place_lasts(&self, queue_timeout: Duration, ttl: Duration) -> Duration {
        queue_timeout.min(ttl)
    }

    fn reassert<'a>(&'a self, hold: &'a Hold, fence: u64, ttl: Duration) -> Option<Call<'a>> {
        Some(Call::new(
            &REASSERT,
            &hold.lock_and_fence(),
            smallvec![hold.token_arg(), Arg::millis(ttl), Arg::Int(fence)],
        ))
    }
}

/// The arguments of the other kinds' release scripts (reentrant, read-write, semaphore, fair):
/// the hold's token, the release channel, and the fence to write back as a floor (`''`: none).
/// The plain lock's own release takes its value and names its keys itself (`release.lua`).
pub(crate) fn release_args(hold: &Hold, fence: ReleaseFence) -> crate::script::Args<'_> {
    smallvec![
        hold.token_arg(),
        Arg::Str(hold.keys.channel()),
        fence.write_back().map_or(Arg::Str(""), Arg::Int),
    ]
}
