//! The fair lock (`kinds/fair/`) on one server: the lock key (the plain lock's, with the lease
//! as TTL), the fence counter, the queue (token -> ticket, in arrival order) and each place's
//! lapse (`:alive`), as `acquire.lua`, `queue.lua` and `release.lua` keep them.
//!
//! Clients ask and wait in the queue (a waiter tries again every step, which refreshes its
//! place), are passed the lock by a release (a new fence and the claim: [`CLAIM`] steps, or
//! until the head's place would have lapsed), confirm it with a renewal or take it with their
//! own retry when the message is lost, renew, release, pause (a lease that runs out), and crash
//! (a dead waiter keeps its place until it lapses, [`PLACE`] steps after its last refresh).
//! Each break that [`FairMutants`] names is a flag; `tests/check.rs` asserts that the checker
//! finds each one.

mod scripts;

use std::hash::Hash;

use stateright::{Model, Property};

use crate::{CLAIM, CLOCK_BASE, MAX_BACK, STEP_US};

/// A lease, in time steps.
pub const FAIR_LEASE: u8 = 2;
/// How long a place in the queue lasts unless refreshed (the queue timeout), in time steps.
pub const PLACE: u8 = 2;

/// Breaks of the fair lock, each a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FairMutants {
    /// A pass gives the head a full lease instead of the claim.
    pub unbounded_claim: bool,
    /// An acquire takes a free lock whoever is queued ahead of it.
    pub skip_queue: bool,
    /// A dead waiter's place never lapses (no `drop_lapsed`, and the head is taken whatever
    /// its lapse).
    pub no_lapse: bool,
    /// A pass's fence is the server clock alone (`release.lua` works it out itself, not with
    /// `next_fence`).
    pub pass_fence_clock_only: bool,
}

/// The fair lock model's bounds and switches.
#[derive(Clone, Debug)]
pub struct FairModel {
    /// How many clients.
    pub clients: usize,
    /// The last time step a run reaches.
    pub max_time: u8,
    /// How many grants a run may make.
    pub max_grants: u8,
    /// How many clients may crash.
    pub crashes: u8,
    /// Pass messages can be lost.
    pub lossy: bool,
    /// How many times the server clock may step back ([`MAX_BACK`] each).
    pub steps_back: u8,
    /// The breaks to check for.
    pub mutants: FairMutants,
}

impl FairModel {
    /// The queue and a dead waiter: 3 clients, 3 time steps, 3 grants, a crash; no lost
    /// messages, no clock step back.
    pub fn small() -> Self {
        Self {
            clients: 3,
            max_time: 4,
            max_grants: 3,
            crashes: 1,
            lossy: false,
            steps_back: 0,
            mutants: FairMutants::default(),
        }
    }

    /// Lost messages and the clock: 2 clients, 3 time steps, 3 grants, a crash, a clock step
    /// back.
    pub fn lossy() -> Self {
        Self {
            clients: 2,
            lossy: true,
            steps_back: 1,
            ..Self::small()
        }
    }

    /// The same model with one break.
    pub fn with(mut self, mutants: FairMutants) -> Self {
        self.mutants = mutants;
        self
    }
}

/// The lock key: `<token>:<fence>` with a TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FairHold {
    /// The owner client.
    pub owner: u8,
    /// The owner token.
    pub token: u8,
    /// The grant's fence.
    pub fence: u32,
    /// The step at which the key expires.
    pub expires: u8,
    /// Model only: passed by a release and not confirmed since.
    pub passed: bool,
    /// Model only: when it was granted or last confirmed.
    pub since: u8,
}

/// A place in the queue: the token, its client, and the step at which it lapses (`:alive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    /// The waiter's token.
    pub token: u8,
    /// Its client.
    pub client: u8,
    /// The step at which the place lapses unless refreshed.
    pub lapses: u8,
}

/// What a client believes and does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FairPhase {
    /// Holds nothing, waits for nothing.
    Idle,
    /// Queued with `token`; tries again at step `wake` (the next step) at the latest.
    Waiting { token: u8, wake: u8 },
    /// Believes it holds the lock with `fence` until `deadline`.
    Holding { token: u8, fence: u32, deadline: u8 },
    /// Crashed.
    Dead,
}

/// A client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FairClient {
    /// What it believes and does.
    pub phase: FairPhase,
    /// A pass message on its way: (token, fence, the claim's end).
    pub inbox: Option<(u8, u32, u8)>,
    /// Requests made (a token is the client's number and this count).
    pub requests: u8,
}

/// Non-triviality witnesses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FairSeen {
    /// A release passed the lock to the head.
    pub passed: bool,
    /// A passed claim ran out unconfirmed.
    pub claim_lapsed: bool,
    /// A dead waiter's place lapsed while a live waiter was queued.
    pub dead_place_lapsed: bool,
    /// A waiter took the lock passed to it with its own retry (the message lost).
    pub took_own: bool,
    /// Two waiters were queued at once.
    pub two_queued: bool,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FairState {
    /// Real time, in steps.
    pub now: u8,
    /// The server clock's offset from real time, in µs.
    pub skew: i32,
    /// The lock key (an expired key counts as absent).
    pub lock: Option<FairHold>,
    /// The fence key.
    pub fence: u32,
    /// The queue, in ticket order.
    pub queue: Vec<Place>,
    /// The clients.
    pub clients: Vec<FairClient>,
    /// Grants made.
    pub grants: u8,
    /// Budgets used.
    pub crashes: u8,
    /// Budgets used.
    pub steps_back: u8,
    /// Ghost: the largest fence granted.
    pub max_fence: u32,
    /// Ghost: a grant's fence was not above every earlier one.
    pub fence_regressed: bool,
    /// Ghost: a grant went to a client while a place ahead of it had not lapsed.
    pub order_broken: bool,
    /// Ghost: since when a release left a live waiter queued and the lock to nobody alive.
    pub stalled_since: Option<u8>,
    /// Ghost: since when the lock is free (no key, or a dead waiter's claim) with a live waiter
    /// queued.
    pub free_since: Option<u8>,
    /// Witnesses.
    pub seen: FairSeen,
}

impl FairState {
    /// What holds the lock at `now`.
    pub fn holder(&self) -> Option<FairHold> {
        self.lock.filter(|h| h.expires > self.now)
    }

    pub(crate) fn clock(&self) -> u32 {
        let c =
            i64::from(CLOCK_BASE) + i64::from(self.now) * i64::from(STEP_US) + i64::from(self.skew);
        u32::try_from(c.max(0)).unwrap_or(0)
    }

    fn live(&self, c: u8) -> bool {
        self.clients[usize::from(c)].phase != FairPhase::Dead
    }

    /// How many clients believe they hold the lock within their deadlines.
    pub fn within_deadline(&self) -> usize {
        self.clients
            .iter()
            .filter(
                |c| matches!(c.phase, FairPhase::Holding { deadline, .. } if self.now < deadline),
            )
            .count()
    }

    /// A live client waits in the queue (its place not lapsed) while no key holds the lock or a
    /// dead waiter's claim does (a dead holder's full lease is the lease, not the queue).
    fn waiter_unserved(&self) -> bool {
        let free = self
            .holder()
            .is_none_or(|h| h.passed && !self.live(h.owner));
        free && self.queue.iter().any(|p| {
            p.lapses > self.now
                && matches!(self.clients[usize::from(p.client)].phase, FairPhase::Waiting { token, .. } if token == p.token)
        })
    }

    pub(crate) fn record_grant(&mut self, fence: u32) {
        if fence <= self.max_fence {
            self.fence_regressed = true;
        }
        self.max_fence = self.max_fence.max(fence);
        self.grants += 1;
    }
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FairAction {
    /// Client `i` runs `acquire.lua` (a new request, or a waiter's try).
    Acquire(u8),
    /// Client `i` renews (a passed waiter's confirmation, a holder's watchdog).
    Renew(u8),
    /// Client `i` runs `release.lua`.
    Release(u8),
    /// Client `i` crashes.
    Crash(u8),
    /// The pass message to client `i` arrives.
    Deliver(u8),
    /// The pass message to client `i` is lost.
    Lose(u8),
    /// One time step passes.
    Tick,
    /// The server clock steps back by [`MAX_BACK`].
    ClockBack,
}

impl Model for FairModel {
    type State = FairState;
    type Action = FairAction;

    fn init_states(&self) -> Vec<FairState> {
        vec![FairState {
            now: 0,
            skew: 0,
            lock: None,
            fence: 0,
            queue: Vec::new(),
            clients: vec![
                FairClient {
                    phase: FairPhase::Idle,
                    inbox: None,
                    requests: 0,
                };
                self.clients
            ],
            grants: 0,
            crashes: 0,
            steps_back: 0,
            max_fence: 0,
            fence_regressed: false,
            order_broken: false,
            stalled_since: None,
            free_since: None,
            seen: FairSeen::default(),
        }]
    }

    fn actions(&self, s: &FairState, actions: &mut Vec<FairAction>) {
        let mut due = false;
        for (i, c) in s.clients.iter().enumerate() {
            let i = u8::try_from(i).unwrap_or(u8::MAX);
            match c.phase {
                FairPhase::Idle => actions.push(FairAction::Acquire(i)),
                FairPhase::Waiting { wake, .. } => {
                    actions.push(FairAction::Acquire(i));
                    due |= wake <= s.now;
                }
                FairPhase::Holding { .. } => {
                    actions.push(FairAction::Renew(i));
                    actions.push(FairAction::Release(i));
                }
                FairPhase::Dead => {}
            }
            if c.phase != FairPhase::Dead && s.crashes < self.crashes {
                actions.push(FairAction::Crash(i));
            }
            if c.inbox.is_some() {
                actions.push(FairAction::Deliver(i));
                if self.lossy {
                    actions.push(FairAction::Lose(i));
                }
            }
        }
        // A waiter's timer fires on time: time does not pass a waiter that is due.
        if s.now < self.max_time && !due {
            actions.push(FairAction::Tick);
        }
        if s.steps_back < self.steps_back {
            actions.push(FairAction::ClockBack);
        }
    }

    fn next_state(&self, s: &FairState, action: FairAction) -> Option<FairState> {
        let mut n = s.clone();
        let mut released = false;
        match action {
            FairAction::Acquire(i) => self.acquire(&mut n, i),
            FairAction::Renew(i) => {
                let c = usize::from(i);
                let FairPhase::Holding { token, fence, .. } = n.clients[c].phase else {
                    return None;
                };
                // The plain lock's `extend.lua`.
                match n.holder() {
                    Some(h) if h.token == token => {
                        let expires = n.now + FAIR_LEASE;
                        n.lock = Some(FairHold {
                            expires,
                            passed: false,
                            since: n.now,
                            ..h
                        });
                        n.clients[c].phase = FairPhase::Holding {
                            token,
                            fence,
                            deadline: expires,
                        };
                    }
                    _ => n.clients[c].phase = FairPhase::Idle,
                }
            }
            FairAction::Release(i) => {
                released = true;
                self.release(&mut n, i);
            }
            FairAction::Crash(i) => {
                n.clients[usize::from(i)].phase = FairPhase::Dead;
                n.clients[usize::from(i)].inbox = None;
                n.crashes += 1;
            }
            FairAction::Deliver(i) => {
                let c = usize::from(i);
                let (token, fence, ends) = n.clients[c].inbox.take()?;
                // A claim that ended already is left to the waiter's next try.
                if let FairPhase::Waiting { token: t, .. } = n.clients[c].phase
                    && t == token
                    && ends > n.now
                {
                    n.clients[c].phase = FairPhase::Holding {
                        token,
                        fence,
                        deadline: ends,
                    };
                }
            }
            FairAction::Lose(i) => n.clients[usize::from(i)].inbox = None,
            FairAction::Tick => {
                n.now += 1;
                if s.holder().is_some_and(|h| h.passed) && n.holder().is_none() {
                    n.seen.claim_lapsed = true;
                }
                let waiting = n.queue.iter().any(|p| n.live(p.client) && p.lapses > n.now);
                if waiting
                    && n.queue
                        .iter()
                        .any(|p| !n.live(p.client) && p.lapses == n.now)
                {
                    n.seen.dead_place_lapsed = true;
                }
            }
            FairAction::ClockBack => {
                n.skew -= i32::try_from(MAX_BACK).unwrap_or(i32::MAX);
                n.steps_back += 1;
            }
        }
        if n.waiter_unserved() {
            if released && n.stalled_since.is_none() {
                n.stalled_since = Some(n.now);
            }
            if n.free_since.is_none() {
                n.free_since = Some(n.now);
            }
        } else {
            n.stalled_since = None;
            n.free_since = None;
        }
        Some(n)
    }

    fn within_boundary(&self, s: &FairState) -> bool {
        s.grants <= self.max_grants && s.clients.iter().all(|c| c.requests <= self.max_grants)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "fair: one holder within its deadline",
                |_, s: &FairState| s.within_deadline() <= 1,
            ),
            Property::always(
                "fair: fences of grants strictly increase",
                |_, s: &FairState| !s.fence_regressed,
            ),
            Property::always(
                "fair: no grant passes over a place ahead that has not lapsed",
                |_, s: &FairState| !s.order_broken,
            ),
            Property::always(
                "fair: a passed lease lasts the claim until confirmed",
                |_, s: &FairState| {
                    s.holder()
                        .is_none_or(|h| !h.passed || h.expires <= h.since + CLAIM)
                },
            ),
            Property::always(
                "fair: a release with a live waiter queued grants a live client within the claim",
                |_, s: &FairState| s.stalled_since.is_none_or(|t| s.now <= t + CLAIM),
            ),
            Property::always(
                "fair: a free lock with a live waiter queued is granted within the queue timeout",
                |_, s: &FairState| s.free_since.is_none_or(|t| s.now <= t + PLACE),
            ),
            Property::sometimes("fair: two waiters queued", |_, s: &FairState| {
                s.seen.two_queued
            }),
            Property::sometimes("fair: a pass", |_, s: &FairState| s.seen.passed),
            Property::sometimes("fair: a claim that lapses", |_, s: &FairState| {
                s.seen.claim_lapsed
            }),
            Property::sometimes(
                "fair: a dead waiter's place lapses with a live waiter queued",
                |_, s: &FairState| s.seen.dead_place_lapsed,
            ),
            Property::sometimes(
                "fair: a waiter takes the lock passed to it after a lost message",
                |_, s: &FairState| s.seen.took_own,
            ),
        ]
    }
}
