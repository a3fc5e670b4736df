//! The reentrant lock: one owner may hold it several times and must release it as many times.
//!
//! Ownership belongs to a [`ReentrantLock`] handle (its random owner token), never to a thread:
//! the handle, or a clone of it, can move between tasks and threads, and every acquisition
//! through it is a re-entry while the lock is held. Each acquisition is a hold of its own (its
//! own token, its own [`LockGuard`]), recorded in the lock's hash, so a retry after a lost reply
//! cannot count twice and a release can never undo someone else's hold. The fence is handed out
//! when the lock goes from free to held; every re-entry gets the same fence.
//!
//! Over Redlock each instance hands out its own fence, and the hold's fence is the largest of
//! the granting majority's; a re-entry answered by another majority would see another largest.
//! So the handle remembers the fence of its current hold, and an acquisition granted while one
//! of the hold's guards is still held gets that fence: while that lease is valid on a majority,
//! no other owner can have held the lock, so it is the same hold. Acquisitions through one
//! handle take turns over Redlock.

use std::sync::{Arc, LazyLock};

use crate::client::Client;
use crate::error::Result;
use crate::keys;
use crate::lock::hold::{HeldFence, Kind};
use crate::lock::protocol::Lua;
use crate::lock::{LockGuard, LockRequest};
use crate::token::OwnerToken;

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("acquire.lua");
pub(crate) static EXTEND: LazyLock<Lua> = lua!("extend.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("release.lua");

/// How many holds one owner may have on a reentrant lock at once, by default.
pub const DEFAULT_MAX_REENTRY: u32 = 64;

/// An owner of a reentrant lock, from [`Client::reentrant_lock`].
///
/// Clones are the same owner: a clone may re-enter the lock that the original holds. Create
/// another handle for another owner.
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// let lock = client.reentrant_lock("accounts/42")?;
/// let outer = lock.acquire().await?;
/// let inner = lock.acquire().await?; // re-entry: no waiting, same fence
/// assert_eq!(outer.fence(), inner.fence());
/// inner.release().await?;
/// outer.release().await?; // now the lock is free
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ReentrantLock {
    client: Client,
    name: String,
    owner: OwnerToken,
    max_reentry: u32,
    held_fence: Arc<tokio::sync::Mutex<Option<HeldFence>>>,
}

impl ReentrantLock {
    pub(crate) fn new(client: Client, name: String) -> Result<Self> {
        keys::validate_name(&name)?;
        let owner = OwnerToken::for_lock(&name)?;
        Ok(ReentrantLock {
            client,
            name,
            owner,
            max_reentry: DEFAULT_MAX_REENTRY,
            held_fence: Arc::default(),
        })
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many holds this owner may have at once (default [`DEFAULT_MAX_REENTRY`]). One more
    /// fails with [`Error::Conflict`] (`Conflict::ReentryLimit`) and changes nothing.
    pub fn max_reentry(mut self, limit: u32) -> Self {
        self.max_reentry = limit;
        self
    }

    /// A request for one hold, with the usual options (lease, waiting, renewal). A re-entry
    /// never waits; the options apply when another owner holds the lock.
    pub fn request(&self) -> LockRequest {
        LockRequest::new(
            self.client.clone(),
            self.name.clone(),
            Kind::Reentrant {
                owner: self.owner.clone(),
                max_depth: self.max_reentry,
                held_fence: self.held_fence.clone(),
            },
        )
    }

    /// Takes one hold, waiting as long as it takes (30 s lease, renewed automatically).
    pub async fn acquire(&self) -> Result<LockGuard> {
        self.request().acquire().await
    }

    /// Takes one hold if this owner holds the lock or it is free; `Ok(None)` if another owner
    /// holds it.
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.request().try_acquire().await
    }
}
