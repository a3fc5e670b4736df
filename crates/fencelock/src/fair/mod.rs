//! The fair lock: granted in request order.
//!
//! A waiter takes a ticket in a queue on its first attempt and keeps its place by trying again
//! at least every third of the queue timeout; the lock goes to the head of the queue only. A
//! waiter that dies stops refreshing its place and leaves the queue one queue timeout
//! (default 5 s) after its last refresh, so it never blocks the others for longer (Redisson's
//! fair lock waits for dead waiters for 5 minutes and is known to hang). A waiter that gives up
//! or is cancelled leaves the queue at once.
//!
//! A release wakes only the waiter at the head of the queue (the message names its owner token),
//! not every waiter: a handoff costs one script run, however long the queue. The others sleep
//! until the head's place would lapse at the latest, so a head that died while queued delays
//! them by at most its queue timeout. A lock that is free with nobody queued is taken without a
//! place in the queue.
//!
//! The held lock is the plain lock's key (`<token>:<fence>`), so extend and renewal are the
//! plain lock's. Not offered over Redlock: each instance would order its own queue.

use std::sync::LazyLock;

use crate::lock::protocol::Lua;

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("acquire.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("release.lua");
