//! What an operator needs: reading a lock's state ([`Client::inspect`]), finding the held locks
//! ([`Client::list`]), following a lock's releases ([`Client::releases`]), the run-once records
//! under a lock's name ([`Client::once_records`]), and clearing a lock whoever holds it
//! ([`Client::force_release`]). Over Redlock a holder counts when a majority of
//! the instances agree on it. The scripts here read every kind's layout, which is why they live
//! apart from the engine.
//!
//! ```no_run
//! # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
//! let info = client.inspect("reports/nightly").await?;
//! if let Some(holder) = &info.holder {
//!     println!("held by {}… with fence {:?}", holder.token_prefix, holder.fence);
//! }
//! if let Some(next) = info.waiters.first() {
//!     println!("{} waiting, {}… first in line", info.waiting, next.token_prefix);
//! }
//! # Ok(()) }
//! ```

mod list;
mod once;
mod releases;
mod stored;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

pub use crate::redact::redact_password;
pub use list::Listing;
pub use once::OnceRecord;
pub use releases::{Release, Releases};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys;
use crate::kind::LockKind;
use crate::script::{Lua, lua};
use stored::{ForceReleaseReply, StoredLock, StoredState};

pub(crate) static INSPECT: LazyLock<Lua> = lua!(
    "../kinds/entries.lua",
    "../kinds/reentrant/fields.lua",
    "inspect.lua"
);
pub(crate) static FORCE_RELEASE: LazyLock<Lua> = lua!("force_release.lua");

/// The state of a lock as Redis has it, from [`Client::inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The lock's name.
    pub name: String,
    /// What kind of lock the name holds now (`None`: nothing is held).
    pub kind: Option<LockKind>,
    /// A semaphore's number of permits, as its holders use it (`None` for other kinds).
    pub permits: Option<u32>,
    /// The exclusive holder, if any: of a plain or fair lock, of a reentrant lock (its owner),
    /// or the writer of a read-write lock.
    pub holder: Option<Holder>,
    /// The shared holders: the readers of a read-write lock (one entry per read hold, with its
    /// owner), or the holders of a semaphore's permits (one entry per hold; [`Holder::permits`] says how many).
    pub shared: Vec<Holder>,
    /// How many wait for it: `waiters.len()`.
    pub waiting: u64,
    /// Who waits for it, in line order (place 1 first): a plain lock's line (on one server), a
    /// fair lock's queue, a read-write lock's waiting readers and writers, a semaphore's
    /// waiting requests (by arrival). Only requests that keep a place in Redis are seen: a
    /// reentrant lock's waiters keep none (they wait for a release message), nor does a request
    /// that does not wait, or any request of a plain lock over Redlock. Over Redlock, a waiter counts when a majority of the
    /// instances have its place.
    pub waiters: Vec<Waiter>,
    /// The last fence handed out for this name (the current holder's, if held).
    pub last_fence: Option<u64>,
}

impl LockInfo {
    /// Whether anyone holds the lock (exclusively or shared).
    pub fn is_held(&self) -> bool {
        self.holder.is_some() || !self.shared.is_empty()
    }
}

/// Who holds a lock, as far as it is safe to show.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The first 8 hex digits of the holder's owner token (enough to tell holders apart in
    /// logs, far too little to impersonate one).
    pub token_prefix: String,
    /// The holder's fence (a reader's: none).
    pub fence: Option<u64>,
    /// What is left of the holder's lease (`None`: the key has no expiry).
    pub remaining: Option<Duration>,
    /// How many times the owner of a reentrant lock holds it (`None` for other kinds).
    pub holds: Option<u32>,
    /// How many permits a semaphore's holder holds (a hold of several: see
    /// [`LockRequest::take`](crate::LockRequest::take)); `None` for other kinds.
    pub permits: Option<u32>,
    /// Who holds it, in the holder's own words ([`LockRequest::label`](crate::LockRequest::label));
    /// `None` for a hold without one. A reentrant lock's owner shows the label of one of its
    /// holds.
    pub label: Option<String>,
}

/// A request waiting for a lock, as far as it is safe to show (from [`LockInfo::waiters`]).
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// use fencelock::admin::Side;
///
/// let info = client.inspect("reports/nightly").await?;
/// for waiter in &info.waiters {
///     let place = waiter.place.map_or_else(|| "-".to_owned(), |p| p.to_string());
///     let side = match waiter.side {
///         Some(Side::Writer) => " (to write)",
///         Some(Side::Reader) => " (to read)",
///         _ => "",
///     };
///     let waited = waiter.waited.map(|d| d.as_millis());
///     println!("{place}. {}…{side}, waited {waited:?} ms", waiter.token_prefix);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiter {
    /// Its place in line, 1 for the first (`None`: the kind keeps no order). A plain lock's
    /// line is in the order a release passes the lock on: the place that lapses soonest first
    /// (each waiter refreshes its place every third of its duration, so the order follows the
    /// refreshes rather than arrival). A fair lock's queue is in arrival order, place 1 being
    /// the head, the only waiter that may take the lock. A read-write lock's waiters are in
    /// arrival order, and take turns a phase at a time: the readers in a row go in together.
    pub place: Option<u32>,
    /// How long it has waited, since it took its place (on the server's clock): known for a
    /// fair lock's waiter and a read-write lock's; `None` for a plain lock's, whose line keeps
    /// no arrival time (or a place written by an implementation that records none).
    pub waited: Option<Duration>,
    /// The first 8 hex digits of the waiting request's token (a read-write lock's waiter: its
    /// hold token, as for readers), never the whole token.
    pub token_prefix: String,
    /// What a read-write lock's waiter waits for (`None` for other kinds).
    pub side: Option<Side>,
}

/// What a read-write lock's waiter waits for ([`Waiter::side`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Side {
    /// A read lock.
    Reader,
    /// The write lock.
    Writer,
}

impl Side {
    /// The side's stable code: `reader` or `writer` (`fencelock status --json`, the Python
    /// package's `Waiter.side`).
    pub fn code(&self) -> &'static str {
        match self {
            Side::Reader => "reader",
            Side::Writer => "writer",
        }
    }
}

impl Client {
    /// Reads the state of lock `name` (of any kind) without changing it. Over Redlock, a
    /// holder is reported when it is found on a majority of the instances.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] (a bad name), [`Error::WrongType`] (a key of the lock holds
    /// something fencelock did not put there), [`Error::Unreachable`], [`Error::AuthFailed`],
    /// [`Error::PermissionDenied`], [`Error::Redis`], [`Error::NoQuorum`] (Redlock: fewer than
    /// a majority answered).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn inspect(&self, name: impl Into<String>) -> Result<LockInfo> {
        let name = name.into();
        let name = name.as_str();
        keys::validate_name(name)?;
        let instances = &self.shared.instances;
        let keys = Arc::new(self.shared.keys(name));
        let limit = instances.command_timeout();
        let answers = instances
            .on_all(
                None,
                |server| stored::inspect(server.clone(), keys.clone(), limit),
                |_| false,
            )
            .await;
        let mut states = Vec::new();
        for answer in &answers {
            match answer {
                Some(Ok(StoredState::Foreign { key, found })) => {
                    return Err(Error::WrongType {
                        lock: name.to_owned(),
                        key: key.clone(),
                        found: found.clone(),
                    });
                }
                Some(Ok(StoredState::Lock(stored))) => states.push(stored.clone()),
                _ => {}
            }
        }
        if !instances.quorum().reached(states.len()) {
            let answered = states.len();
            return Err(instances.failure(name, "inspect", answers, answered, 0));
        }
        Ok(merge_inspected(name, &states, instances.quorum()))
    }

    /// Deletes lock `name` whoever holds it, on every instance, and wakes its waiters: an
    /// operator's tool for a holder known to be gone. The holder, if alive, learns it lost the
    /// lock at its next renewal. Returns whether it was held anywhere.
    ///
    /// # Errors
    ///
    /// As [`inspect`](Self::inspect); a key that is not a lock is left untouched
    /// ([`Error::WrongType`]).
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe in the sense that a dropped call may still have deleted the lock on
    /// some instances; calling it again finishes the job.
    pub async fn force_release(&self, name: impl Into<String>) -> Result<bool> {
        let name = name.into();
        let name = name.as_str();
        keys::validate_name(name)?;
        let instances = &self.shared.instances;
        let keys = Arc::new(self.shared.keys(name));
        let limit = instances.command_timeout();
        let answers = instances
            .on_all(
                None,
                |server| stored::force_release(server.clone(), keys.clone(), limit),
                |_| false,
            )
            .await;
        let mut released = false;
        let mut answered = 0;
        for answer in &answers {
            match answer {
                Some(Ok(ForceReleaseReply::Foreign { key, found })) => {
                    return Err(Error::WrongType {
                        lock: name.to_owned(),
                        key: key.clone(),
                        found: found.clone(),
                    });
                }
                Some(Ok(reply)) => {
                    answered += 1;
                    released |= *reply == ForceReleaseReply::Released;
                }
                _ => {}
            }
        }
        if answered < instances.servers().len()
            && (!instances.quorum().reached(answered) || instances.is_single())
        {
            return Err(instances.failure(name, "force-release", answers, answered, 0));
        }
        Ok(released)
    }
}

/// One view of a lock from the instances' states: each holder that a majority (`quorum`) of
/// them agrees on, with the shortest lease and the largest fence seen.
fn merge_inspected(name: &str, states: &[StoredLock], quorum: crate::quorum::Quorum) -> LockInfo {
    // (role, token prefix) -> (holder, on how many instances)
    let mut seen: Vec<(String, Holder, usize)> = Vec::new();
    for state in states {
        // A semaphore's hold of k permits is k entries of one token: one holder.
        let mut held: Vec<(&str, &str, Holder)> = Vec::new();
        for entry in &state.entries {
            if let Some((_, _, h)) = held
                .iter_mut()
                .find(|(role, token, _)| *role == entry.role && *token == entry.token)
            {
                h.permits = h.permits.map(|n| n.saturating_add(1));
                continue;
            }
            let this = Holder {
                token_prefix: entry.token.chars().take(8).collect(),
                fence: entry.fence,
                remaining: u64::try_from(entry.remaining_ms)
                    .ok()
                    .map(Duration::from_millis),
                holds: (state.kind == "reentrant").then(|| state.detail.unwrap_or(0)),
                permits: (entry.role == "permit").then_some(1),
                label: entry.label.clone(),
            };
            held.push((&entry.role, &entry.token, this));
        }
        for (role, _, this) in held {
            match seen
                .iter_mut()
                .find(|(r, h, _)| r == role && h.token_prefix == this.token_prefix)
            {
                Some((_, held, count)) => {
                    *count += 1;
                    held.fence = held.fence.max(this.fence);
                    if held.label.is_none() {
                        held.label = this.label;
                    }
                    held.remaining = match (held.remaining, this.remaining) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                None => seen.push((role.to_owned(), this, 1)),
            }
        }
    }
    let mut holder = None;
    let mut shared = Vec::new();
    for (role, h, count) in seen {
        if !quorum.reached(count) {
            continue;
        }
        if role == "reader" || role == "permit" {
            shared.push(h);
        } else {
            holder = Some(h);
        }
    }
    // The kind that the instances with holders report (they agree unless the name was used by
    // two kinds on different instances).
    let held_as = if holder.is_none() && shared.is_empty() {
        None
    } else {
        states.iter().find(|s| !s.entries.is_empty())
    };
    let kind = held_as.map(|s| LockKind::from_script(&s.kind));
    let permits = held_as
        .filter(|s| s.kind == "semaphore")
        .map(|s| s.detail.unwrap_or(0));
    let waiters = merge_waiters(states, quorum);
    LockInfo {
        name: name.to_owned(),
        kind,
        permits,
        holder,
        shared,
        waiting: u64::try_from(waiters.len()).unwrap_or(u64::MAX),
        waiters,
        last_fence: states.iter().filter_map(|s| s.last_fence).max(),
    }
}

/// The waiters that a majority (`quorum`) of the instances have, in line order: by their
/// best place on any instance (ties in the order first seen), numbered again from 1; each with
/// the longest wait seen.
fn merge_waiters(states: &[StoredLock], quorum: crate::quorum::Quorum) -> Vec<Waiter> {
    // (whole token, waiter, on how many instances)
    let mut seen: Vec<(&str, Waiter, usize)> = Vec::new();
    for state in states {
        for stored in &state.waiters {
            let this = Waiter {
                place: stored.place,
                waited: u64::try_from(stored.waited_ms)
                    .ok()
                    .map(Duration::from_millis),
                token_prefix: stored.token.chars().take(8).collect(),
                side: stored.side,
            };
            match seen
                .iter_mut()
                .find(|(token, w, _)| *token == stored.token && w.side == this.side)
            {
                Some((_, waiter, count)) => {
                    *count += 1;
                    waiter.place = match (waiter.place, this.place) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    waiter.waited = waiter.waited.max(this.waited);
                }
                None => seen.push((&stored.token, this, 1)),
            }
        }
    }
    let mut waiters: Vec<Waiter> = seen
        .into_iter()
        .filter(|(_, _, count)| quorum.reached(*count))
        .map(|(_, waiter, _)| waiter)
        .collect();
    waiters.sort_by_key(|w| w.place.unwrap_or(u32::MAX));
    let mut next = 0;
    for waiter in &mut waiters {
        if waiter.place.is_some() {
            next += 1;
            waiter.place = Some(next);
        }
    }
    waiters
}
