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

use std::sync::LazyLock;

use crate::client::Client;
use crate::error::Result;
use crate::keys;
use crate::lock::hold::Kind;
use crate::lock::protocol::Lua;
use crate::lock::{DEFAULT_QUEUE_TIMEOUT, LockRequest};
use crate::token::OwnerToken;

pub(crate) static READ: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(concat!(
        include_str!("../lock/prelude.lua"),
        include_str!("scan.lua"),
        include_str!("read.lua")
    ))
});
pub(crate) static WRITE: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(concat!(
        include_str!("../lock/prelude.lua"),
        include_str!("scan.lua"),
        include_str!("write.lua")
    ))
});
pub(crate) static RELEASE: LazyLock<Lua> = lua!("release.lua");

/// An owner of a read-write lock, from [`Client::read_write_lock`]. Clones are the same owner.
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// let config = client.read_write_lock("config")?;
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
    client: Client,
    name: String,
    owner: OwnerToken,
}

impl ReadWriteLock {
    pub(crate) fn new(client: Client, name: String) -> Result<Self> {
        keys::validate_name(&name)?;
        let owner = OwnerToken::for_lock(&name)?;
        Ok(ReadWriteLock {
            client,
            name,
            owner,
        })
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A request for a read (shared) hold. Its [`queue_timeout`](LockRequest::queue_timeout)
    /// says how long its waiting entry outlives a reader that died while waiting.
    pub fn read(&self) -> LockRequest {
        LockRequest::new(
            self.client.clone(),
            self.name.clone(),
            Kind::Read {
                owner: self.owner.clone(),
                queue_timeout: DEFAULT_QUEUE_TIMEOUT,
            },
        )
    }

    /// A request for the write (exclusive) hold. Its
    /// [`queue_timeout`](LockRequest::queue_timeout) says how long its waiting entry outlives a
    /// writer that died while waiting.
    pub fn write(&self) -> LockRequest {
        LockRequest::new(
            self.client.clone(),
            self.name.clone(),
            Kind::Write {
                owner: self.owner.clone(),
                queue_timeout: DEFAULT_QUEUE_TIMEOUT,
            },
        )
    }
}
