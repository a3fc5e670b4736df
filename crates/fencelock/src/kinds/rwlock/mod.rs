//! The read-write lock: many readers or one writer.
//!
//! - Each reader's hold is a lease of its own: a reader that crashes blocks writers for at most
//!   its lease.
//! - Waiters take turns by arrival, a phase at a time (phase-fair): a writer that finds the lock
//!   held records that it waits, and the readers that come after it wait behind it, so writers
//!   are not starved by a stream of readers; a reader that finds a writer records that it waits
//!   too, and the writers that come after it (the same writer asking again included) wait
//!   until it has read, so readers are not starved by a stream of writers. All the readers
//!   waiting go in together. A waiting entry is refreshed while its request waits and lapses
//!   after the queue timeout if the waiting process dies.
//! - Writers get a fence of their own with every grant. A reader's [`LockGuard::fence`] is the
//!   fence of the last write granted before it, so a reader can tell which write it sees (over
//!   Redlock: at least that fence, and below the next write's).
//! - Ownership belongs to a [`ReadWriteLock`] handle. An owner that holds the write lock may
//!   also take a read lock (a downgrade). An owner that holds a read lock and asks for the write
//!   lock would wait for itself forever; that is refused with `Conflict::Upgrade`.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use smallvec::smallvec;

use crate::engine::Shared;
use crate::engine::{Attempt, Hold, LockRequest, Protocol, ReleaseFence};
use crate::error::Conflict;
use crate::kind::LockKind;
use crate::kinds::{ENTRY_EXTEND, plain};
use crate::script::{Arg, Call, Lua, lua};
use crate::token::OwnerToken;

pub(crate) static READ: LazyLock<Lua> =
    lua!("../entries.lua", "fields.lua", "scan.lua", "read.lua");
pub(crate) static WRITE: LazyLock<Lua> =
    lua!("../entries.lua", "fields.lua", "scan.lua", "write.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("../entries.lua", "fields.lua", "release.lua");

/// Which side of the read-write lock a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// Shared: many readers at once.
    Read,
    /// Exclusive: one writer.
    Write,
}

/// The protocol of one side of a read-write lock. `owner` is the handle's token. While a
/// request waits it keeps a waiting entry, which lapses after the queue timeout if the waiting
/// process dies.
#[derive(Debug)]
pub(crate) struct RwSide {
    pub(crate) side: Side,
    pub(crate) owner: OwnerToken,
}

impl Protocol for RwSide {
    fn kind(&self) -> LockKind {
        LockKind::ReadWrite
    }

    fn label(&self) -> &'static str {
        match self.side {
            Side::Read => "read lock",
            Side::Write => "write lock",
        }
    }

    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a> {
        let lua: &'static Lua = match self.side {
            Side::Read => &READ,
            Side::Write => &WRITE,
        };
        Call::new(
            lua,
            &hold.lock_and_fence(),
            smallvec![
                hold.token_arg(),
                Arg::millis(attempt.ttl),
                Arg::Str(self.owner.as_str()),
                Arg::millis_or_zero(attempt.queue_timeout),
            ],
        )
    }

    fn release<'a>(&'a self, hold: &'a Hold, fence: ReleaseFence) -> Call<'a> {
        Call::new(
            &RELEASE,
            &hold.lock_and_fence(),
            plain::release_args(hold, fence),
        )
    }

    fn extend<'a>(&'a self, hold: &'a Hold, ttl: Duration) -> Call<'a> {
        let role = match self.side {
            Side::Read => "r:",
            Side::Write => "w:",
        };
        Call::new(
            &ENTRY_EXTEND,
            &[hold.keys.lock()],
            smallvec![hold.field_arg(role), Arg::millis(ttl)],
        )
    }

    fn conflict(&self, what: &str, _detail: &str) -> Option<Conflict> {
        match what {
            "upgrade" => Some(Conflict::Upgrade),
            "write-reentry" => Some(Conflict::WriteReentry),
            _ => None,
        }
    }

    fn queues(&self, _single: bool) -> bool {
        true
    }

    fn writes_fence_back(&self) -> bool {
        // A reader's fence is the last writer's, not one of its own.
        self.side == Side::Write
    }
}

/// An owner of a read-write lock, from [`Client::read_write_lock`](crate::Client::read_write_lock). Clones are the same owner.
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// let config = client.read_write_lock("config");
/// let reading = config.read().acquire().await?;
/// println!("reading what write {} left", reading.fence());
/// reading.release().await?;
///
/// let writing = config.write().acquire().await?;
/// println!("writing with fence {}", writing.fence());
/// writing.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ReadWriteLock {
    shared: Arc<Shared>,
    name: String,
    owner: OwnerToken,
    owner_error: Option<getrandom::Error>,
}

impl ReadWriteLock {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        let (owner, owner_error) = OwnerToken::for_handle();
        ReadWriteLock {
            shared,
            name,
            owner,
            owner_error,
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A request for a read (shared) hold. Its [`queue_timeout`](LockRequest::queue_timeout)
    /// says how long its waiting entry outlives a reader that died while waiting.
    pub fn read(&self) -> LockRequest {
        LockRequest::new(
            self.shared.clone(),
            self.name.clone(),
            Arc::new(RwSide {
                side: Side::Read,
                owner: self.owner.clone(),
            }),
        )
        .owned_by(self.owner_error)
    }

    /// A request for the write (exclusive) hold. Its
    /// [`queue_timeout`](LockRequest::queue_timeout) says how long its waiting entry outlives a
    /// writer that died while waiting.
    pub fn write(&self) -> LockRequest {
        LockRequest::new(
            self.shared.clone(),
            self.name.clone(),
            Arc::new(RwSide {
                side: Side::Write,
                owner: self.owner.clone(),
            }),
        )
        .owned_by(self.owner_error)
    }
}
