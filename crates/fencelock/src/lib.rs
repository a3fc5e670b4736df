//! # fencelock — fenced distributed locks on Redis
//!
//! A lock on Redis is a **lease, not a mutex**: if the holder stalls for longer than the lease
//! (a long pause, a stopped VM, a slow network), the lease runs out and another process can take
//! the lock while the first still believes it holds it. No client library can prevent that.
//! fencelock does the three things that can be done:
//!
//! 1. **Make it rare.** A watchdog renews every held lock at a third of its lease, and the
//!    holder's deadline is conservative (measured on the monotonic clock from *before* the
//!    request was sent, minus a clock-drift margin).
//! 2. **Tell the holder.** A [`LockGuard`] knows its [`deadline`](LockGuard::deadline) and
//!    offers a [`lost`](LockGuard::lost) signal that fires as soon as Redis says the lock is gone
//!    or the deadline passes without a confirmed renewal, so the work can be cancelled.
//! 3. **Let the resource refuse a stale holder.** Every acquisition returns a
//!    [`fence`](LockGuard::fence), strictly larger than every earlier one for that lock name. A
//!    resource that remembers the largest fence it has seen can refuse writes carrying a smaller
//!    one — in SQL: `UPDATE t SET ..., fence = $fence WHERE id = $id AND fence <= $fence`.
//!
//! Assumptions: clocks on the client and the server advance at roughly the same rate (the
//! drift margin covers 1 % + 2 ms by default), and the server's wall clock does not step back
//! by more than an outage. Fences are `max(last fence + 1, server time in µs)`, so they keep
//! growing even when Redis loses the counter (a restart without persistence, a failover to a
//! replica that lagged, a flush).
//!
//! ```no_run
//! use std::time::Duration;
//!
//! # async fn example() -> fencelock::Result<()> {
//! let client = fencelock::Client::open("redis://127.0.0.1:6379")?;
//! let guard = client
//!     .lock("reports/nightly")
//!     .ttl(Duration::from_secs(10)) // renewed automatically while the guard lives
//!     .wait_up_to(Duration::from_secs(30))
//!     .acquire()
//!     .await?;
//!
//! let fence = guard.fence(); // pass it to the resource with every write
//! tokio::select! {
//!     reason = guard.lost() => eprintln!("lock lost: {reason}; stopping"),
//!     () = write_report(fence) => {}
//! }
//! guard.release().await?;
//! # Ok(()) }
//! # async fn write_report(_fence: u64) {}
//! ```
//!
//! ## Deployments, kinds and the rest of the crate
//!
//! One constructor per deployment, each a [`ClientBuilder`]: [`Client::builder`] (one server;
//! [`Client::open`] is its shorthand), [`Client::redlock`], `Client::cluster` and
//! `Client::sentinel` (features `cluster` and `sentinel`, on by default), [`Client::from_redis`].
//! Every kind of lock starts at the client and gives the same [`LockGuard`]: [`Client::lock`],
//! [`Client::fair_lock`], [`Client::semaphore`], [`Client::reentrant_lock`],
//! [`Client::read_write_lock`]. The resource side of fencing is [`fenced`] (and `postgres`,
//! feature `postgres`); an operator's view of the locks is [`admin`]; programs that are not
//! async use [`blocking`].
//!
//! ## Redlock
//!
//! [`Client::redlock`] holds every lock on a majority of N
//! independent instances, with the same guard API. The fence is then the largest of the
//! granting majority's per-instance fences, written back on release; it keeps growing as long
//! as instances keep their data (or a restarted instance stays out for at least the longest
//! lease) and instance clocks agree to within a lease. See docs/deployments.md for the details.
//!
//! ## Protocol
//!
//! Each operation is one round trip: a Lua script run by SHA (reloaded when Redis answers
//! `NOSCRIPT`). Acquire sets `PREFIX:{NAME}` to `token:fence` with `PX ttl` if it is free, or
//! returns the holder's remaining lease; it is idempotent for one owner token, so a retry after a
//! lost reply neither strands the lock nor hands out a second fence. Release deletes only the
//! caller's own hold and publishes on `PREFIX:{NAME}:released`; extend re-arms only the caller's
//! own lease. Owner tokens are 128 bits from the operating system's CSPRNG. Waiters subscribe to
//! the release channel (one pub/sub connection per client) and also wake when the holder's lease
//! would run out, so a lost message costs a bounded delay, never a hang.

#![warn(missing_docs)]
// Helpers shared by the Cluster and Sentinel connections (seed lists, certificates, master
// credentials, slot routing) go unused in a build without one of them.
#![cfg_attr(
    not(all(feature = "cluster", feature = "sentinel")),
    allow(dead_code, unused_imports)
)]

pub mod admin;
mod background;
mod backoff;
mod client;
mod connection;
pub mod election;
mod engine;
mod error;
pub mod fenced;
mod keys;
mod kind;
mod kinds;
mod lease;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod multi;
mod notify;
mod observe;
pub mod once;
#[cfg(feature = "postgres")]
pub mod postgres;
mod quorum;
mod redact;
mod revoke;
mod script;
mod token;
mod wire;

pub mod blocking;

pub use background::Cleanup;
/// The counting primitives of the client's background work, which the language packages'
/// keeper (`fencelock-bind`) uses for its own: not part of the API.
#[doc(hidden)]
pub use background::{Count, Flag};
pub use client::{Client, ClientBuilder, DEFAULT_COMMAND_TIMEOUT, DEFAULT_PREFIX};
pub use engine::{
    DEFAULT_QUEUE_TIMEOUT, DEFAULT_TTL, LockGuard, LockRequest, MAX_LABEL_LEN, MAX_TTL,
    MIN_QUEUE_TIMEOUT, MIN_TTL, Shortfall, WaitPolicy,
};
/// How the library's messages print a measured duration, for the `fencelock` command's own
/// messages to print alike; not part of the API.
#[doc(hidden)]
pub use error::rounded as rounded_duration;
pub use error::{Conflict, Error, LostReason, ReleaseOutcome, Result};
pub use keys::MAX_NAME_LEN;
pub use kind::LockKind;
pub use kinds::reentrant::{DEFAULT_MAX_REENTRY, ReentrantLock};
pub use kinds::rwlock::ReadWriteLock;
pub use lease::{ClockDrift, LostSignal};
/// Every script by its file, as the library sends it, for the tests of the wire format; not
/// part of the API.
#[doc(hidden)]
pub use wire::script_source;

/// The README's examples, compiled as doctests so that they keep working.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The guide's Rust examples: the lock family (docs/lock-family.md).
#[doc = include_str!("../../../docs/lock-family.md")]
#[cfg(doctest)]
pub struct GuideLockFamilyDoctests;

/// The guide's Rust examples: scheduled jobs (docs/schedulers.md).
#[doc = include_str!("../../../docs/schedulers.md")]
#[cfg(doctest)]
pub struct GuideSchedulersDoctests;

/// The guide's Rust examples: deployments (docs/deployments.md).
#[doc = include_str!("../../../docs/deployments.md")]
#[cfg(doctest)]
pub struct GuideDeploymentsDoctests;
