//! The model's state: the server (the lock key, the fence counter, the line, the clock), the
//! replica, the clients, the pass messages, the resource, and the actions between states.

use std::hash::{Hash, Hasher};

use super::*;

/// What the lock key holds: `<token>:<fence>[+]` with a TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The owner client (which the token belongs to).
    pub owner: u8,
    /// The owner token (one per acquire request).
    pub token: u8,
    /// The grant's fence.
    pub fence: u32,
    /// The time step at which the key expires.
    pub expires: u8,
    /// Someone waited (`+`): a release passes the lock on or publishes.
    pub marked: bool,
    /// Model only: which grant this is (grants are numbered in the order they are made).
    pub grant: u8,
    /// Model only: handed over by a pass and not confirmed since.
    pub passed: bool,
    /// Model only: when it was granted or last confirmed.
    pub since: u8,
}

/// One Redis server's keys for the lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Server {
    /// The lock key (an expired key counts as absent).
    pub lock: Option<Hold>,
    /// The fence key: the last fence handed out (0: none).
    pub fence: u32,
    /// The line (`:waiters`): (the step at which the place lapses, client, token), in order.
    pub waiters: Vec<(u8, u8, u8)>,
}

impl Server {
    /// What holds the lock at step `now` (an expired key holds nothing).
    pub fn holder(&self, now: u8) -> Option<Hold> {
        self.lock.filter(|h| h.expires > now)
    }
}

/// What a client believes and does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Holds nothing and waits for nothing.
    Idle,
    /// In line with `token`; tries again at step `wake` at the latest.
    Waiting { token: u8, wake: u8 },
    /// Believes it holds the lock until `deadline` (the grant of `grant`); `decided` once it
    /// checked its deadline and decided to write (the write may come after a pause).
    Holding {
        token: u8,
        fence: u32,
        grant: u8,
        deadline: u8,
        decided: bool,
    },
    /// Crashed (a dead waiter keeps its place until it lapses; a dead holder its lease).
    Dead,
}

/// A pass message in flight to a waiter: `to:<token>:<fence>:<lapses>:<ends>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pass {
    /// The waiter's token.
    pub token: u8,
    /// The passed fence.
    pub fence: u32,
    /// When the claim ends.
    pub ends: u8,
    /// Model only: the grant.
    pub grant: u8,
}

/// A client: its phase and the pass message on its way to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// What it believes and does.
    pub phase: Phase,
    /// A pass message on its way.
    pub inbox: Option<Pass>,
    /// Requests made that wrote a token (a client's token is its number and this count).
    pub requests: u8,
}

/// Non-triviality witnesses (`Property::sometimes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Seen {
    /// The resource refused a stale write.
    pub stale_refused: bool,
    /// A renewal succeeded.
    pub renewed: bool,
    /// A client crashed.
    pub crashed: bool,
    /// A release passed the lock to a waiter.
    pub passed: bool,
    /// A pass message was lost.
    pub message_lost: bool,
    /// A client took the lock with its own token after a lost pass message.
    pub took_own: bool,
    /// The server clock stepped back.
    pub clock_back: bool,
}

/// The whole system's state. Its identity (`Hash`, `Eq`) leaves out the witnesses ([`Seen`]):
/// states that differ only in what happened on the way are one state, which keeps the count
/// down; a witness is found on the first path that reaches a state.
#[derive(Clone, Debug)]
pub struct State {
    /// Real time, in steps.
    pub now: u8,
    /// The master.
    pub server: Server,
    /// The replica, as far as replication got.
    pub replica: Server,
    /// The master's clock offset from real time, in µs (a step back lowers it; a failover
    /// sets the promoted replica's).
    pub skew: i32,
    /// The resource's largest accepted fence.
    pub resource: u32,
    /// The clients.
    pub clients: Vec<Client>,
    /// Grants made (the next grant's number).
    pub grants: u8,
    /// Budgets used.
    pub failovers: u8,
    /// Budgets used.
    pub steps_back: u8,
    /// Budgets used.
    pub crashes: u8,
    /// Budgets used.
    pub jumps: u8,
    /// Ghost: the largest fence granted so far.
    pub max_fence: u32,
    /// Ghost: a grant's fence was not above every earlier one.
    pub fence_regressed: bool,
    /// Ghost: the grant of the newest accepted write.
    pub accepted_grant: Option<u8>,
    /// Ghost: the resource accepted a fence below one it had accepted.
    pub stale_accepted: bool,
    /// Ghost: the resource accepted an older grant's write after a newer grant's.
    pub fencing_broken: bool,
    /// Ghost: a failover lost a write to the lock key (a grant, a renewal or a release: the
    /// promoted replica's hold was not the master's). A lost waiter's place or fence counter
    /// does not count.
    pub grant_lost: bool,
    /// Ghost: since when a live waiter in line waits for a lock that a release left to nobody
    /// alive.
    pub stalled_since: Option<u8>,
    /// Witnesses.
    pub seen: Seen,
}

impl State {
    pub(crate) fn key(&self) -> impl Hash + Eq + '_ {
        (
            (
                self.now,
                &self.server,
                &self.replica,
                self.skew,
                self.resource,
                &self.clients,
                self.grants,
            ),
            (
                self.failovers,
                self.steps_back,
                self.jumps,
                self.crashes,
                self.max_fence,
                self.fence_regressed,
            ),
            (
                self.accepted_grant,
                self.stale_accepted,
                self.fencing_broken,
                self.grant_lost,
                self.stalled_since,
            ),
            self.seen,
        )
    }
}

impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for State {}

impl Hash for State {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.key().hash(h);
    }
}

impl State {
    /// The master's clock in µs.
    pub fn clock(&self) -> u32 {
        let c =
            i64::from(CLOCK_BASE) + i64::from(self.now) * i64::from(STEP_US) + i64::from(self.skew);
        u32::try_from(c.max(0)).unwrap_or(0)
    }

    /// How many clients believe they hold the lock and are within their deadlines.
    pub(crate) fn within_deadline(&self) -> usize {
        self.clients
            .iter()
            .filter(|c| matches!(c.phase, Phase::Holding { deadline, .. } if self.now < deadline))
            .count()
    }

    pub(crate) fn live(&self, i: usize) -> bool {
        !matches!(self.clients[i].phase, Phase::Dead)
    }

    /// Whether a live client waits in line (its place not lapsed) while the lock is not held by
    /// a live client.
    pub(crate) fn waiter_unserved(&self) -> bool {
        let held_live = self
            .server
            .holder(self.now)
            .is_some_and(|h| self.live(usize::from(h.owner)));
        !held_live
            && self.server.waiters.iter().any(|&(lapses, c, token)| {
                lapses > self.now
                    && matches!(self.clients[usize::from(c)].phase, Phase::Waiting { token: t, .. } if t == token)
            })
    }

    pub(crate) fn record_grant(&mut self, fence: u32) -> u8 {
        if fence <= self.max_fence {
            self.fence_regressed = true;
        }
        self.max_fence = self.max_fence.max(fence);
        let grant = self.grants;
        self.grants += 1;
        grant
    }
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Client `i` runs the acquire script (a new request from idle, a waiter's try).
    Acquire(u8),
    /// Client `i` renews (its watchdog; a passed waiter's confirmation).
    Renew(u8),
    /// Client `i` releases.
    Release(u8),
    /// Client `i` checks its deadline and decides to write.
    Decide(u8),
    /// Client `i` writes to the resource with its fence.
    Write(u8),
    /// Client `i` crashes.
    Crash(u8),
    /// The pass message to client `i` arrives.
    Deliver(u8),
    /// The pass message to client `i` is lost.
    Lose(u8),
    /// One time step passes.
    Tick,
    /// The replica catches up with the master.
    Replicate,
    /// The master dies and the replica takes over (one time step passes).
    Failover,
    /// The master's clock steps back by [`MAX_BACK`].
    ClockBack,
    /// The master's clock jumps forward by a step: its keys expire a step early.
    ClockJump,
}
