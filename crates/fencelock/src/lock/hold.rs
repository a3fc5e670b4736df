//! What one acquisition holds in Redis — which kind of lock, under which keys, with which token —
//! and which of that kind's scripts acquires, extends and releases it. The request loop, the
//! guard and the watchdog work on a [`Hold`] and never need to know the kind.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use smallvec::{SmallVec, smallvec};

use crate::keys::LockKeys;
use crate::lock::protocol::{Lua, lease_millis};
use crate::token::OwnerToken;
use crate::{fair, lock, reentrant, rwlock, semaphore};

/// The kinds of lock, with what each needs to know beyond the name.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// The plain fenced lock.
    Plain,
    /// A reentrant lock: `owner` is the handle's token, shared by all its holds. `held_fence`
    /// is the handle's memory of the fence its current hold was given (see
    /// [`crate::reentrant`]); acquisitions through one handle take turns on it over Redlock.
    Reentrant {
        owner: OwnerToken,
        max_depth: u32,
        held_fence: Arc<tokio::sync::Mutex<Option<HeldFence>>>,
    },
    /// The shared side of a read-write lock. While it waits it keeps a waiting entry, which
    /// lapses after `queue_timeout` if the reader dies.
    Read {
        owner: OwnerToken,
        queue_timeout: Duration,
    },
    /// The exclusive side of a read-write lock. While it waits it keeps a waiting entry, which
    /// lapses after `queue_timeout` if the writer dies.
    Write {
        owner: OwnerToken,
        queue_timeout: Duration,
    },
    /// One permit of a counting semaphore of `permits`.
    Permit { permits: u32 },
    /// A fair (FIFO) lock; a waiter's place lapses after `queue_timeout` without a refresh.
    Fair { queue_timeout: Duration },
}

impl Kind {
    /// What to call it in messages.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Kind::Plain => "lock",
            Kind::Reentrant { .. } => "reentrant lock",
            Kind::Read { .. } => "read lock",
            Kind::Write { .. } => "write lock",
            Kind::Permit { .. } => "semaphore",
            Kind::Fair { .. } => "fair lock",
        }
    }

    /// Why this kind cannot be held over a Redlock quorum, if it cannot.
    pub(crate) fn redlock_refusal(&self) -> Option<&'static str> {
        match self {
            Kind::Permit { .. } => Some(
                "a semaphore cannot be held over Redlock: majority voting does not bound the \
                 holders to N (with 3 instances and 2 permits, three holders can each win a \
                 different majority); use a single Redis server (with a replica and failover) \
                 for semaphores",
            ),
            Kind::Fair { .. } => Some(
                "a fair lock cannot be held over Redlock: each instance orders its own queue, so \
                 no request order holds across a majority; use a single Redis server for fair \
                 locks, or a plain lock over Redlock",
            ),
            Kind::Plain | Kind::Reentrant { .. } | Kind::Read { .. } | Kind::Write { .. } => None,
        }
    }

    /// How often a waiter must try again to keep its place in a queue (fair lock, waiting
    /// reader or writer), if it has one.
    pub(crate) fn refresh_every(&self) -> Option<Duration> {
        match self {
            Kind::Read { queue_timeout, .. }
            | Kind::Write { queue_timeout, .. }
            | Kind::Fair { queue_timeout } => {
                (!queue_timeout.is_zero()).then(|| *queue_timeout / 3)
            }
            _ => None,
        }
    }

    /// The same kind for a request that does not wait: a queue timeout of zero tells the
    /// acquire script not to take a place in the queue.
    pub(crate) fn without_queue(self) -> Self {
        match self {
            Kind::Read { owner, .. } => Kind::Read {
                owner,
                queue_timeout: Duration::ZERO,
            },
            Kind::Write { owner, .. } => Kind::Write {
                owner,
                queue_timeout: Duration::ZERO,
            },
            Kind::Fair { .. } => Kind::Fair {
                queue_timeout: Duration::ZERO,
            },
            other => other,
        }
    }

    /// Whether a waiter leaves an entry behind (a place in a queue) that must be taken back when
    /// it gives up.
    pub(crate) fn queues(&self) -> bool {
        self.refresh_every().is_some()
    }
}

/// Over Redlock, a reentrant handle's memory of its current hold: the fence it was given, and
/// the leases of the guards taken into it. The hold lasts while one of them is still held.
#[derive(Debug)]
pub(crate) struct HeldFence {
    pub(crate) fence: u64,
    pub(crate) leases: Vec<std::sync::Weak<tokio::sync::watch::Sender<crate::lease::LeaseState>>>,
}

impl HeldFence {
    /// The fence for a grant of `granted` through the handle whose memory this is: the current
    /// hold's, while one of its guards is still held (no other owner can have had the lock in
    /// the meantime, so this grant is a re-entry into it); otherwise `granted`, which starts a
    /// new hold.
    pub(crate) fn settle(memory: &mut Option<HeldFence>, granted: u64) -> u64 {
        if let Some(held) = memory.as_mut().and_then(HeldFence::current) {
            return held;
        }
        *memory = Some(HeldFence {
            fence: granted,
            leases: Vec::new(),
        });
        granted
    }

    /// The fence, if a guard of this hold is still held now.
    pub(crate) fn current(&mut self) -> Option<u64> {
        let now = tokio::time::Instant::now();
        self.leases.retain(|lease| {
            lease
                .upgrade()
                .is_some_and(|lease| lease.borrow().lost_at(now).is_none())
        });
        (!self.leases.is_empty()).then_some(self.fence)
    }
}

/// One acquisition's hold: what the guard, the watchdog and a give-back act on.
#[derive(Debug)]
pub(crate) struct Hold {
    pub(crate) name: Arc<str>,
    pub(crate) kind: Kind,
    pub(crate) keys: Arc<LockKeys>,
    /// The token of this acquisition (each hold has its own, also under a shared owner).
    pub(crate) token: OwnerToken,
}

/// One script call: the script, its keys and its arguments. Keys and arguments borrow from the
/// hold where they can, and sit inline (no script takes more than four of either), so that a
/// renewal batch of thousands of holds allocates nothing per hold but what goes into the
/// pipeline.
pub(crate) struct Call<'a> {
    pub(crate) lua: &'static Lua,
    pub(crate) keys: Keys<'a>,
    pub(crate) args: Args<'a>,
}

/// A script call's keys.
pub(crate) type Keys<'a> = SmallVec<[Cow<'a, str>; 4]>;
/// A script call's arguments.
pub(crate) type Args<'a> = SmallVec<[Arg<'a>; 4]>;

/// One argument of a script call.
pub(crate) enum Arg<'a> {
    Str(&'a str),
    Text(String),
    Int(u64),
}

impl<'a> Call<'a> {
    fn new(lua: &'static Lua, keys: &[&'a str], args: Args<'a>) -> Self {
        Call {
            lua,
            keys: keys.iter().map(|k| Cow::Borrowed(*k)).collect(),
            args,
        }
    }

    /// The same, for a fair lock: its queue keys are derived from the lock key.
    fn fair(lua: &'static Lua, keys: &'a LockKeys, args: Args<'a>) -> Self {
        Call {
            lua,
            keys: smallvec![
                Cow::Borrowed(keys.lock.as_str()),
                Cow::Borrowed(keys.fence.as_str()),
                Cow::Owned(keys.queue()),
                Cow::Owned(keys.alive()),
            ],
            args,
        }
    }
}

/// A queue timeout for a script, in milliseconds; 0 (a request that does not wait) stays 0.
fn queue_millis(queue_timeout: Duration) -> Arg<'static> {
    Arg::Int(u64::try_from(queue_timeout.as_millis()).unwrap_or(u64::MAX))
}

impl Hold {
    fn field(&self, role: &str) -> Arg<'_> {
        Arg::Text(format!("{role}{}", self.token.as_str()))
    }

    fn token(&self) -> Arg<'_> {
        Arg::Str(self.token.as_str())
    }

    /// The acquire script: reply `{1, fence}`, `{0, ms}`, `{-1, key, type}` or `{-2, what, detail}`.
    pub(crate) fn acquire_call(&self, ttl: Duration) -> Call<'_> {
        let k = &*self.keys;
        let (token, ttl) = (self.token(), Arg::Int(lease_millis(ttl)));
        let lock_and_fence = [k.lock.as_str(), k.fence.as_str()];
        match &self.kind {
            Kind::Plain => Call::new(
                &lock::protocol::ACQUIRE,
                &lock_and_fence,
                smallvec![token, ttl],
            ),
            Kind::Reentrant {
                owner, max_depth, ..
            } => Call::new(
                &reentrant::ACQUIRE,
                &lock_and_fence,
                smallvec![
                    token,
                    ttl,
                    Arg::Str(owner.as_str()),
                    Arg::Int(u64::from(*max_depth)),
                ],
            ),
            Kind::Read {
                owner,
                queue_timeout,
            }
            | Kind::Write {
                owner,
                queue_timeout,
            } => Call::new(
                if matches!(self.kind, Kind::Read { .. }) {
                    &rwlock::READ
                } else {
                    &rwlock::WRITE
                },
                &lock_and_fence,
                smallvec![
                    token,
                    ttl,
                    Arg::Str(owner.as_str()),
                    queue_millis(*queue_timeout),
                ],
            ),
            Kind::Permit { permits } => Call::new(
                &semaphore::ACQUIRE,
                &lock_and_fence,
                smallvec![token, ttl, Arg::Int(u64::from(*permits))],
            ),
            Kind::Fair { queue_timeout } => Call::fair(
                &fair::ACQUIRE,
                k,
                smallvec![token, ttl, queue_millis(*queue_timeout)],
            ),
        }
    }

    /// The release script (reply 1 released, 0 not held). `fence` is written back as a floor
    /// on the fence key (over Redlock; `None` on a single instance).
    pub(crate) fn release_call(&self, fence: Option<u64>) -> Call<'_> {
        let k = &*self.keys;
        let floor = fence.map_or(Arg::Str(""), Arg::Int);
        let args = smallvec![self.token(), Arg::Str(k.channel.as_str()), floor];
        let lock_and_fence = [k.lock.as_str(), k.fence.as_str()];
        match &self.kind {
            Kind::Plain => Call::new(&lock::protocol::RELEASE, &lock_and_fence, args),
            Kind::Reentrant { .. } => Call::new(&reentrant::RELEASE, &lock_and_fence, args),
            Kind::Read { .. } | Kind::Write { .. } => {
                Call::new(&rwlock::RELEASE, &lock_and_fence, args)
            }
            Kind::Permit { .. } => Call::new(&semaphore::RELEASE, &[k.lock.as_str()], args),
            Kind::Fair { .. } => Call::fair(&fair::RELEASE, k, args),
        }
    }

    /// The extend script: reply 1 extended, 0 gone, -1 taken by someone (or something) else.
    pub(crate) fn extend_call(&self, ttl: Duration) -> Call<'_> {
        let lock = [self.keys.lock.as_str()];
        let ttl = Arg::Int(lease_millis(ttl));
        let (lua, holder) = match &self.kind {
            Kind::Plain | Kind::Fair { .. } => (&*lock::protocol::EXTEND, self.token()),
            Kind::Reentrant { .. } => (&*reentrant::EXTEND, self.token()),
            Kind::Read { .. } => (&*lock::protocol::ENTRY_EXTEND, self.field("r:")),
            Kind::Write { .. } => (&*lock::protocol::ENTRY_EXTEND, self.field("w:")),
            Kind::Permit { .. } => (&*lock::protocol::ENTRY_EXTEND, self.field("p:")),
        };
        Call::new(lua, &lock, smallvec![holder, ttl])
    }

    /// Over Redlock, the script that puts a hold back on an instance that lost it while a
    /// majority still has it. Only the plain lock has one; for the others a renewal that finds
    /// the key gone on a minority simply goes on with the majority.
    pub(crate) fn reassert_call(&self, fence: u64, ttl: Duration) -> Option<Call<'_>> {
        let k = &*self.keys;
        self.reasserts().then(|| {
            Call::new(
                &lock::protocol::REASSERT,
                &[k.lock.as_str(), k.fence.as_str()],
                smallvec![self.token(), Arg::Int(lease_millis(ttl)), Arg::Int(fence)],
            )
        })
    }

    /// Whether this kind puts a hold back on an instance that lost it (see
    /// [`reassert_call`](Self::reassert_call)).
    pub(crate) fn reasserts(&self) -> bool {
        matches!(self.kind, Kind::Plain)
    }

    /// Whether a release should write the holder's fence back (over Redlock): for every kind
    /// whose holder was given a fence of its own (a reader's is the last writer's).
    pub(crate) fn writes_fence_back(&self) -> bool {
        !matches!(self.kind, Kind::Read { .. } | Kind::Permit { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kind() -> Vec<Kind> {
        let owner = || OwnerToken::generate().unwrap();
        let queue_timeout = Duration::from_secs(5);
        vec![
            Kind::Plain,
            Kind::Reentrant {
                owner: owner(),
                max_depth: 64,
                held_fence: Arc::default(),
            },
            Kind::Read {
                owner: owner(),
                queue_timeout,
            },
            Kind::Write {
                owner: owner(),
                queue_timeout,
            },
            Kind::Permit { permits: 3 },
            Kind::Fair { queue_timeout },
        ]
    }

    #[test]
    fn no_script_call_puts_its_keys_or_arguments_on_the_heap() {
        let keys = Arc::new(LockKeys::new("fencelock", "inline"));
        for kind in every_kind() {
            let label = kind.label();
            let hold = Hold {
                name: Arc::from("inline"),
                kind,
                keys: keys.clone(),
                token: OwnerToken::generate().unwrap(),
            };
            let ttl = Duration::from_secs(1);
            let mut calls = vec![
                hold.acquire_call(ttl),
                hold.release_call(Some(7)),
                hold.extend_call(ttl),
            ];
            calls.extend(hold.reassert_call(7, ttl));
            for call in calls {
                assert!(!call.keys.spilled(), "{label}: {} keys", call.keys.len());
                assert!(!call.args.spilled(), "{label}: {} args", call.args.len());
            }
        }
    }

    #[test]
    fn each_kind_runs_its_own_scripts_with_the_prelude() {
        let cases: [(&Lua, &str); 12] = [
            (&semaphore::RELEASE, "Give back one permit"),
            (&rwlock::RELEASE, "Release a read or write hold"),
            (&lock::protocol::ENTRY_EXTEND, "Re-arm one holder entry"),
            (&lock::protocol::ACQUIRE, "Take the lock if it is free"),
            (&reentrant::ACQUIRE, "Take the reentrant lock"),
            (&reentrant::EXTEND, "Re-arm the reentrant lock"),
            (
                &reentrant::RELEASE,
                "Release one hold of the reentrant lock",
            ),
            (&rwlock::READ, "Take a read lock"),
            (&rwlock::WRITE, "Take the write lock"),
            (&semaphore::ACQUIRE, "Take one permit"),
            (&fair::ACQUIRE, "Take the fair lock"),
            (&fair::RELEASE, "Release the fair lock"),
        ];
        for (lua, opening) in cases {
            assert!(lua.source.contains("local function now_ms()"));
            assert!(lua.source.contains(opening), "{opening}");
        }
    }
}
