//! The protocol a kind of lock plugs into the engine with.
//!
//! The engine (request loop, guard, watchdog, release path, wake-ups) works on a [`Hold`] and
//! asks its [`Protocol`] everything that differs between kinds: which scripts acquire, release,
//! extend and re-assert a hold, whether a waiter takes a place in a queue, what is refused over
//! Redlock, whether a release writes the fence back, and how a re-entry settles its fence. The
//! engine never names a kind; each kind (`crate::kinds`) implements this trait in its own module.
//!
//! A [`Hold`] (one acquisition: name, keys, token) and its protocol are defined together: the
//! hold carries its kind's protocol, and every method of the protocol acts on a hold.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::memory::FenceMemory;
use crate::error::{Conflict, LostReason};
use crate::keys::LockKeys;
use crate::kind::LockKind;
use crate::lease::{self, Ending, Lease};
use crate::script::{Arg, Call};
use crate::token::OwnerToken;

/// What the engine tells an acquire script about one attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attempt {
    /// The lease to set.
    pub(crate) ttl: Duration,
    /// How long a place in a queue lasts without a refresh; zero for a request that does not
    /// wait (it takes no place) and for kinds without a queue.
    pub(crate) queue_timeout: Duration,
    /// Other requests of this client wait for this lock. A plain lock's release wakes a
    /// waiter only when its value says someone waited (`plain/value.lua`); a request woken
    /// while others of its client still wait marks its grant so, since they sleep on and will
    /// not mark it themselves.
    pub(crate) others_wait: bool,
    /// This request waits for the lock (it subscribed to the release channel): a kind that
    /// passes its lock to waiters (the plain lock on one server) takes a place in line for it.
    pub(crate) waiting: bool,
}

/// What a release knows of the fence of the hold it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseFence {
    /// Nothing: a grant given back that its caller never saw.
    Unknown,
    /// On one server: the fence the grant wrote into the lock's value, so that a script can
    /// compare the whole value (one comparison) rather than look for the token in it.
    Held(u64),
    /// Over Redlock: the hold's fence (the largest of its majority's), written back as a floor
    /// on the fence key first. Each instance's value has a fence of its own.
    WriteBack(u64),
}

impl ReleaseFence {
    /// The fence to write back as a floor, over Redlock.
    pub(crate) fn write_back(self) -> Option<u64> {
        match self {
            ReleaseFence::WriteBack(fence) => Some(fence),
            ReleaseFence::Unknown | ReleaseFence::Held(_) => None,
        }
    }
}

/// One kind of lock, as the engine sees it. Every script call borrows its keys and arguments
/// from the hold (and from the protocol, which the hold owns).
pub(crate) trait Protocol: fmt::Debug + Send + Sync + 'static {
    /// What to call this kind in messages ("lock", "semaphore", ...).
    fn label(&self) -> &'static str;

    /// Whether a hold of this kind is an election's term (its loss a lost term, in the
    /// metrics).
    fn is_term(&self) -> bool {
        false
    }

    /// The kind, as [`Conflict::OtherKind`] reports what a refused request was for.
    fn kind(&self) -> LockKind;

    /// The acquire script. Its reply follows `script::reply`: `fence` (granted), `{0, ms}`,
    /// `{-1, key, type}` or `{-2, what, detail}`.
    fn acquire<'a>(&'a self, hold: &'a Hold, attempt: Attempt) -> Call<'a>;

    /// The release script: reply 1 released, 0 not held, 2 released (or passed on) but its
    /// release message refused (the plain lock's, see `kinds/plain/release.lua`). `fence` says
    /// what the release knows of the hold's fence (see [`ReleaseFence`]).
    fn release<'a>(&'a self, hold: &'a Hold, fence: ReleaseFence) -> Call<'a>;

    /// The extend script: reply 1 extended, 0 gone, -1 taken by someone (or something) else.
    fn extend<'a>(&'a self, hold: &'a Hold, ttl: Duration) -> Call<'a>;

    /// Whether a grant of this kind on one server is the lock key's value `<token>:<fence>`,
    /// with the lease as the key's TTL and nothing else to re-arm, so that the server's own
    /// `SET key value IFEQ value PX ttl` extends it where the server has that command
    /// (`engine/native.rs`). False by default.
    fn renews_by_value(&self) -> bool {
        false
    }

    /// Over Redlock, the script that puts a hold back on an instance that lost it while a
    /// majority still has it (reply 1 put back, 0 left as it was). `None`: this kind does not;
    /// a renewal that finds its key gone on a minority goes on with the majority.
    fn reassert<'a>(&'a self, _hold: &'a Hold, _fence: u64, _ttl: Duration) -> Option<Call<'a>> {
        None
    }

    /// The conflict an acquire reply `{-2, what, detail}` of this kind's own (not `kind`, which
    /// the engine reads for every kind) stands for; `None` for a code this kind never gives.
    fn conflict(&self, _what: &str, _detail: &str) -> Option<Conflict> {
        None
    }

    /// Whether a waiting request takes a place in a queue (refreshed while it waits, lapsing
    /// after the queue timeout, and taken back when the request gives up). `single`: the client
    /// has one server (one instance, a cluster, a Sentinel master), not a Redlock set.
    fn queues(&self, _single: bool) -> bool {
        false
    }

    /// Whether a release may pass the lock to a waiter in line, or wake it, by its owner token
    /// (`to:<token>...`): its waiters then listen on their own channel as well, where such
    /// messages go first. `single` as for [`queues`](Self::queues).
    fn passes_to_waiters(&self, _single: bool) -> bool {
        false
    }

    /// How long a waiter's place lasts without a refresh, given the request's queue timeout and
    /// lease: the queue timeout. A kind whose release passes the lock to a waiter that was not
    /// going to be granted it anyway (the plain lock) keeps it within the lease, so that a
    /// waiter that died costs no more than a holder that died.
    fn place_lasts(&self, queue_timeout: Duration, _ttl: Duration) -> Duration {
        queue_timeout
    }

    /// Why this kind cannot be held over a Redlock quorum, if it cannot.
    fn redlock_refusal(&self) -> Option<&'static str> {
        None
    }

    /// Whether a release writes the holder's fence back (over Redlock): for kinds whose holder
    /// was given a fence of its own.
    fn writes_fence_back(&self) -> bool {
        true
    }

    /// Checks the kind's own options before anything is sent; the reason is reported as
    /// `Error::InvalidArgument` naming the lock.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// This kind's protocol for a hold of `permits` units at once, if the kind has units (a
    /// semaphore's permits); `None`: it has not.
    fn with_take(&self, _permits: u32) -> Option<Arc<dyn Protocol>> {
        None
    }

    /// Over Redlock, the memory of the fence that acquisitions through one handle share: a grant
    /// while one of the handle's guards is still held is a re-entry and keeps that fence (see
    /// [`FenceMemory`]). `None`: every grant stands for itself.
    fn fence_memory(&self) -> Option<&Arc<tokio::sync::Mutex<Option<FenceMemory>>>> {
        None
    }
}

/// One acquisition's hold: what the guard, the watchdog and a give-back act on.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) name: Arc<str>,
    pub(crate) protocol: Arc<dyn Protocol>,
    /// In the hold itself (no `Arc` of their own): a renewal reads them with one pointer less
    /// to follow, through memory that thousands of holds spread far apart.
    pub(crate) keys: LockKeys,
    /// The token of this acquisition (each hold has its own, also under a shared owner).
    pub(crate) token: OwnerToken,
    /// The lock-delay: how much longer than the lease the server keeps the hold. A holder that
    /// stops renewing leaves the name taken this long after its lease ran out; a release ends
    /// it at once. Zero by default.
    pub(crate) linger: Duration,
    /// The lock's value was found marked `+` (someone waited for it): a native re-arm
    /// (`native.rs`) compares with the marked value from then on. A mark is never taken back
    /// while the hold lasts.
    pub(crate) marked: std::sync::atomic::AtomicBool,
    /// A release of this hold has begun (its guard's, or the give-back of a round that lost):
    /// a try of it answered after that (a Redlock instance's call that ran on past the round's
    /// outcome, sent once the instance was reachable again) is given back where it was
    /// granted, or it would hold that instance for a lease with nobody to release it.
    pub(crate) releasing: std::sync::atomic::AtomicBool,
    /// The fence that release writes back (over Redlock; 0: none), for such a try's give-back.
    pub(crate) released_fence: std::sync::atomic::AtomicU64,
    /// Who holds it, in the holder's words (`LockRequest::label`; see `label.rs`): `None`, the
    /// default, sends nothing more than an unlabelled hold ever did.
    pub(crate) holder_label: Option<Arc<str>>,
}

impl Hold {
    /// Marks a release of this hold as begun (before its calls are sent), with the fence it
    /// writes back, if any.
    pub(crate) fn begin_release(&self, fence: Option<u64>) {
        if let Some(fence) = fence {
            self.released_fence
                .fetch_max(fence, std::sync::atomic::Ordering::AcqRel);
        }
        self.releasing
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The fence a release of this hold writes back (see [`Hold::begin_release`]).
    pub(crate) fn released_fence(&self) -> Option<u64> {
        let fence = self
            .released_fence
            .load(std::sync::atomic::Ordering::Acquire);
        (fence > 0).then_some(fence)
    }

    /// Whether a release of this hold has begun.
    pub(crate) fn is_releasing(&self) -> bool {
        self.releasing.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The token as a script argument.
    pub(crate) fn token_arg(&self) -> Arg<'_> {
        Arg::Str(self.token.as_str())
    }

    /// The hash field `<role><token>` of this hold, for kinds that keep their holders in a hash.
    pub(crate) fn field_arg(&self, role: &str) -> Arg<'_> {
        Arg::Text(format!("{role}{}", self.token.as_str()))
    }

    /// The lock and fence keys, the first two keys of most scripts.
    pub(crate) fn lock_and_fence(&self) -> [&str; 2] {
        [self.keys.lock(), self.keys.fence()]
    }

    /// What to call the kind in messages.
    pub(crate) fn label(&self) -> &'static str {
        self.protocol.label()
    }

    /// Ends `lease`, this hold's with `fence` (see [`lease::end`]): a loss is reported once.
    pub(crate) fn end(&self, lease: &Lease, fence: u64, ending: Ending) -> Option<LostReason> {
        let lock = lease::Lock {
            name: &self.name,
            kind: self.label(),
            term: self.protocol.is_term(),
        };
        lease::end(lease, lock, fence, ending)
    }

    /// The time the server keeps a hold of lease `ttl`: the lease and the lock-delay.
    pub(crate) fn on_server(&self, ttl: Duration) -> Duration {
        ttl.saturating_add(self.linger)
    }

    pub(crate) fn acquire_call(&self, attempt: Attempt) -> Call<'_> {
        let attempt = Attempt {
            ttl: self.on_server(attempt.ttl),
            ..attempt
        };
        self.protocol.acquire(self, attempt)
    }

    pub(crate) fn release_call(&self, fence: ReleaseFence) -> Call<'_> {
        self.protocol.release(self, fence)
    }

    pub(crate) fn extend_call(&self, ttl: Duration) -> Call<'_> {
        self.protocol.extend(self, self.on_server(ttl))
    }

    pub(crate) fn reassert_call(&self, fence: u64, ttl: Duration) -> Option<Call<'_>> {
        self.protocol.reassert(self, fence, self.on_server(ttl))
    }
}
