//! The fair lock: granted in request order.
//!
//! A waiter takes a ticket in a queue on its first attempt and keeps its place by trying again
//! at least every third of the queue timeout; the lock goes to the head of the queue only. A
//! waiter that dies stops refreshing its place and leaves the queue one queue timeout
//! (default 5 s) after its last refresh, so it never blocks the others for longer (Redisson's
//! fair lock waits for dead waiters for 5 minutes and is known to hang). A waiter that gives up
//! or is cancelled leaves the queue at once.
//!
//! A release passes the lock to the waiter at the head of the queue (lock passing, as the plain
//! lock's: a new fence, a lease that is the claim (`PASS_CLAIM`, 1 s, or less if the head's place
//! lapses sooner), and a message `to:<token>:<fence>:<lapses>:<ends>` that the head takes as its
//! grant and confirms within the claim), not to every waiter: a handoff costs one script run,
//! however long the queue, and the head sends no acquire. The message names the waiter behind
//! the head (`:<token>`), which tries again once the claim has run out, so a head that died while
//! queued keeps the lock idle for the claim, as a plain lock's dead waiter does. A lock that is
//! free with nobody queued is taken without a place in the queue.
//!
//! The held lock is the plain lock's key (`<token>:<fence>`), so extend and renewal are the
//! plain lock's. Not offered over Redlock: each instance would order its own queue.

use std::borrow::Cow;
use std::sync::LazyLock;
use std::time::Duration;

use smallvec::smallvec;

use crate::engine::{Attempt, Hold, Protocol, ReleaseFence};
use crate::kind::LockKind;
use crate::kinds::plain;
use crate::script::{Arg, Args, Call, Lua, lua};

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("../plain/value.lua", "queue.lua", "acquire.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("../plain/value.lua", "queue.lua", "release.lua");

/// The fair lock's protocol.
#[derive(Debug)]
pub(crate) struct Fair;

/// A call with the fair lock's keys: the lock, its fence, and the queue keys derived from them.
fn fair_call<'a>(lua: &'static Lua, hold: &'a Hold, args: Args<'a>) -> Call<'a> {
    let keys = &hold.keys;
    Call {
        lua,
        keys: smallvec![
            Cow::Borrowed(keys.lock()),
            Cow::Borrowed(keys.fence()),
            Cow::Owned(keys.queue()),
            Cow::Owned(keys.alive()),
        ],
        args,
    }
}

impl Protocol for Fair {
    fn kind(&self) -> LockKind {
        LockKind::Lock
    }

    fn label(&self) -> &'static str {
        "fair lock"
    }

    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a> {
        fair_call(
            &ACQUIRE,
            hold,
            smallvec![
                hold.token_arg(),
                Arg::millis(attempt.ttl),
                Arg::millis_or_zero(attempt.queue_timeout),
            ],
        )
    }

    fn release<'a>(&'a self, hold: &'a Hold, fence: ReleaseFence) -> Call<'a> {
        fair_call(&RELEASE, hold, plain::release_args(hold, fence))
    }

    fn extend<'a>(&'a self, hold: &'a Hold, ttl: Duration) -> Call<'a> {
        plain::Plain.extend(hold, ttl)
    }

    fn queues(&self, _single: bool) -> bool {
        true
    }

    fn passes_to_waiters(&self, _single: bool) -> bool {
        true
    }

    fn redlock_refusal(&self) -> Option<&'static str> {
        Some(
            "a fair lock cannot be held over Redlock: each instance orders its own queue, so no \
             request order holds across a majority; use a single Redis server for fair locks, \
             or a plain lock over Redlock",
        )
    }
}
