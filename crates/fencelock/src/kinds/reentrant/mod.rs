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
use std::time::Duration;

use smallvec::smallvec;

use crate::engine::Shared;
use crate::engine::{Attempt, FenceMemory, Hold, LockGuard, LockRequest, Protocol, ReleaseFence};
use crate::error::{Conflict, Result};
use crate::kind::LockKind;
use crate::kinds::plain;
use crate::script::{Arg, Call, Lua, lua};
use crate::token::OwnerToken;

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("fields.lua", "acquire.lua");
pub(crate) static EXTEND: LazyLock<Lua> = lua!("extend.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("fields.lua", "release.lua");

/// The reentrant lock's protocol: `owner` is the handle's token, shared by all its holds;
/// `memory` is the handle's memory of the fence its current hold was given (over Redlock).
#[derive(Debug)]
pub(crate) struct Reentrant {
    pub(crate) owner: OwnerToken,
    pub(crate) max_depth: u32,
    pub(crate) memory: Arc<tokio::sync::Mutex<Option<FenceMemory>>>,
}

impl Protocol for Reentrant {
    fn kind(&self) -> LockKind {
        LockKind::Reentrant
    }

    fn label(&self) -> &'static str {
        "reentrant lock"
    }

    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a> {
        Call::new(
            &ACQUIRE,
            &hold.lock_and_fence(),
            smallvec![
                hold.token_arg(),
                Arg::millis(attempt.ttl),
                Arg::Str(self.owner.as_str()),
                Arg::Int(u64::from(self.max_depth)),
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
        Call::new(
            &EXTEND,
            &[hold.keys.lock()],
            smallvec![hold.token_arg(), Arg::millis(ttl)],
        )
    }

    fn conflict(&self, what: &str, detail: &str) -> Option<Conflict> {
        (what == "depth").then(|| Conflict::ReentryLimit {
            limit: detail.parse().unwrap_or(self.max_depth),
        })
    }

    fn check(&self) -> Result<(), String> {
        if self.max_depth == 0 {
            return Err("the re-entry limit must be at least 1".to_owned());
        }
        Ok(())
    }

    fn fence_memory(&self) -> Option<&Arc<tokio::sync::Mutex<Option<FenceMemory>>>> {
        Some(&self.memory)
    }
}

/// How many holds one owner may have on a reentrant lock at once, by default.
pub const DEFAULT_MAX_REENTRY: u32 = 64;

/// An owner of a reentrant lock, from [`Client::reentrant_lock`](crate::Client::reentrant_lock).
///
/// Clones are the same owner: a clone may re-enter the lock that the original holds. Create
/// another handle for another owner.
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// let lock = client.reentrant_lock("accounts/42");
/// let outer = lock.acquire().await?;
/// let inner = lock.acquire().await?; // re-entry: no waiting, same fence
/// assert_eq!(outer.fence(), inner.fence());
/// inner.release().await?;
/// outer.release().await?; // now the lock is free
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ReentrantLock {
    shared: Arc<Shared>,
    name: String,
    owner: OwnerToken,
    owner_error: Option<getrandom::Error>,
    max_reentry: u32,
    memory: Arc<tokio::sync::Mutex<Option<FenceMemory>>>,
}

impl ReentrantLock {
    pub(crate) fn new(shared: Arc<Shared>, name: String) -> Self {
        let (owner, owner_error) = OwnerToken::for_handle();
        ReentrantLock {
            shared,
            name,
            owner,
            owner_error,
            max_reentry: DEFAULT_MAX_REENTRY,
            memory: Arc::default(),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many holds this owner may have at once (default [`DEFAULT_MAX_REENTRY`]). One more
    /// fails with [`Error::Conflict`](crate::Error::Conflict) (`Conflict::ReentryLimit`) and changes nothing.
    pub fn max_reentry(mut self, limit: u32) -> Self {
        self.max_reentry = limit;
        self
    }

    /// A request for one hold, with the usual options (lease, waiting, renewal). A re-entry
    /// never waits; the options apply when another owner holds the lock.
    pub fn request(&self) -> LockRequest {
        LockRequest::new(
            self.shared.clone(),
            self.name.clone(),
            Arc::new(Reentrant {
                owner: self.owner.clone(),
                max_depth: self.max_reentry,
                memory: self.memory.clone(),
            }),
        )
        .owned_by(self.owner_error)
    }

    /// Takes one hold, waiting as long as it takes (30 s lease, renewed automatically).
    ///
    /// # Errors
    ///
    /// As [`LockRequest::acquire`]; also [`Conflict::ReentryLimit`] in an
    /// [`Error::Conflict`](crate::Error::Conflict) once this owner holds it
    /// [`max_reentry`](Self::max_reentry) times.
    ///
    /// # Cancel safety
    ///
    /// As [`LockRequest::acquire`].
    pub async fn acquire(&self) -> Result<LockGuard> {
        self.request().acquire().await
    }

    /// Takes one hold if this owner holds the lock or it is free; `Ok(None)` if another owner
    /// holds it.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), but for a busy lock, which is `Ok(None)`.
    ///
    /// # Cancel safety
    ///
    /// As [`LockRequest::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.request().try_acquire().await
    }
}
