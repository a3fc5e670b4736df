//! A model of fencelock's plain lock on one Redis server, its fences and a fenced resource,
//! checked exhaustively with [Stateright](https://docs.rs/stateright).
//!
//! The model is a plain state machine ([`LockModel`] implements [`Model`]): one lock on a server
//! (the lock key with its owner token, fence and expiry, the fence counter, the line of waiters,
//! the server clock), an asynchronous replica that a failover promotes, 2–3 clients, and a
//! resource that accepts a write iff its fence is at least the largest it accepted. Each step of
//! a run is one action: a client's script call (acquire, renew, release), its decision to write
//! and the write itself (time can pass in between: a pause), a crash, the delivery or loss of a
//! pass message, time passing by one step, a replication, a failover, a clock step back.
//!
//! Time moves in whole steps. A lease lasts [`LEASE`] steps, a pass's claim [`CLAIM`]; the
//! server clock advances [`STEP_US`] µs per step (so a step stands for far more than the
//! handful of grants a run can make within it). Each break of the protocol that
//! [`Mutants`] names is a flag; `tests/` asserts that the checker finds each one.

pub mod election;
pub mod entries;
pub mod fair;
pub mod lease;
pub mod multi;
mod mutants;
pub mod once;
pub mod redlock;
pub mod reentrant;
pub mod rwlock;
mod scripts;
pub mod semaphore;
mod state;
pub mod trace;

pub use mutants::Mutants;
pub use state::*;

use stateright::{Model, Property};

/// A lease, in time steps.
pub const LEASE: u8 = 3;
/// A pass's claim (`PASS_CLAIM_MS`), in time steps: the lease a passed waiter gets until it
/// confirms the full lease.
pub const CLAIM: u8 = 1;
/// How long a waiter's place in line lasts unless refreshed, in time steps.
pub const PLACE: u8 = 3;
/// A waiter tries again (refreshing its place) at least this often, in time steps.
pub const REFRESH: u8 = 1;
/// The server clock's advance per time step, in µs.
pub const STEP_US: u32 = 100;
/// The server clock at time 0, in µs.
pub const CLOCK_BASE: u32 = 1000;
/// How far one step back of the server clock goes, in µs.
pub const MAX_BACK: u32 = 10;
/// How far a promoted replica's clock lags the old master's, in µs (the stated assumption:
/// less than the time the failover takes, here one step, less the fences' lead over the clock).
pub const MAX_LAG: u32 = 10;
/// The lag of a promoted replica's clock when the assumption is dropped
/// ([`Mutants::unbounded_clock_lag`]): three steps.
pub const UNBOUNDED_LAG: u32 = 3 * STEP_US;

/// The model's bounds and switches.
#[derive(Clone, Debug)]
pub struct LockModel {
    /// How many clients (2 or 3 keep a check within seconds).
    pub clients: usize,
    /// The last time step a run reaches.
    pub max_time: u8,
    /// How many grants a run may make (each has a fence and a token of its own).
    pub max_grants: u8,
    /// How many failovers a run may make.
    pub failovers: u8,
    /// How many times the server clock may step back ([`MAX_BACK`] each).
    pub steps_back: u8,
    /// How many times the server clock may jump forward by a step (keys expire a step early).
    pub jumps: u8,
    /// How many clients may crash in a run.
    pub crashes: u8,
    /// Waiters take a place in line and a release passes the lock to the first (the plain lock
    /// on one server); without it an acquire that finds the lock held gives up (`no_wait`).
    pub passing: bool,
    /// Pass messages can be lost.
    pub lossy: bool,
    /// Holders write to the resource (off where only the line is checked).
    pub writes: bool,
    /// Record the witnesses of `Property::sometimes` (each doubles states at most; off where
    /// only the `always` properties are checked).
    pub witnesses: bool,
    /// The breaks to check for.
    pub mutants: Mutants,
}

impl LockModel {
    /// Fences, failover and the clock: 2 clients that take the lock without waiting, renew,
    /// release and write to the resource, 3 time steps, 3 grants, a failover, a clock step back.
    pub fn fences() -> Self {
        Self {
            clients: 2,
            max_time: 3,
            max_grants: 3,
            failovers: 1,
            steps_back: 1,
            jumps: 0,
            crashes: 0,
            passing: false,
            lossy: false,
            writes: true,
            witnesses: true,
            mutants: Mutants::default(),
        }
    }

    /// The line and the pass: 2 clients that wait in line, pass messages that can be lost, a
    /// crash, 3 time steps, 3 grants; no writes, no failover.
    pub fn passing() -> Self {
        Self {
            clients: 2,
            max_time: 3,
            max_grants: 3,
            failovers: 0,
            steps_back: 0,
            jumps: 0,
            crashes: 1,
            passing: true,
            lossy: true,
            writes: false,
            witnesses: true,
            mutants: Mutants::default(),
        }
    }

    /// A waiter that dies in line with another behind it: [`LockModel::passing`] with 3
    /// clients, 2 time steps, no lost messages, and no witnesses (only the `always`
    /// properties are checked).
    pub fn dead_waiter() -> Self {
        Self {
            clients: 3,
            max_time: 2,
            lossy: false,
            witnesses: false,
            ..Self::passing()
        }
    }

    /// The same model with one break.
    pub fn with(mut self, mutants: Mutants) -> Self {
        self.mutants = mutants;
        self
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let server = Server {
            lock: None,
            fence: 0,
            waiters: Vec::new(),
        };
        vec![State {
            now: 0,
            replica: server.clone(),
            server,
            skew: 0,
            resource: 0,
            clients: vec![
                Client {
                    phase: Phase::Idle,
                    inbox: None,
                    requests: 0
                };
                self.clients
            ],
            grants: 0,
            failovers: 0,
            steps_back: 0,
            crashes: 0,
            jumps: 0,
            max_fence: 0,
            fence_regressed: false,
            accepted_grant: None,
            stale_accepted: false,
            fencing_broken: false,
            grant_lost: false,
            stalled_since: None,
            seen: Seen::default(),
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let mut due = false;
        for (i, c) in s.clients.iter().enumerate() {
            let i = u8::try_from(i).unwrap_or(u8::MAX);
            match c.phase {
                Phase::Idle | Phase::Waiting { .. } => actions.push(Action::Acquire(i)),
                Phase::Holding {
                    decided, deadline, ..
                } => {
                    actions.push(Action::Renew(i));
                    actions.push(Action::Release(i));
                    if !self.writes {
                    } else if decided {
                        actions.push(Action::Write(i));
                    } else if s.now < deadline {
                        actions.push(Action::Decide(i));
                    }
                }
                Phase::Dead => {}
            }
            if let Phase::Waiting { wake, .. } = c.phase {
                due |= wake <= s.now;
            }
            if c.phase != Phase::Dead && s.crashes < self.crashes {
                actions.push(Action::Crash(i));
            }
            if c.inbox.is_some() {
                actions.push(Action::Deliver(i));
                if self.lossy {
                    actions.push(Action::Lose(i));
                }
            }
        }
        // A waiter's timer fires on time: time does not pass a waiter that is due.
        if s.now < self.max_time && !due {
            actions.push(Action::Tick);
            if s.failovers < self.failovers {
                actions.push(Action::Failover);
            }
        }
        if s.replica != s.server {
            actions.push(Action::Replicate);
        }
        if s.steps_back < self.steps_back {
            actions.push(Action::ClockBack);
        }
        if s.jumps < self.jumps {
            actions.push(Action::ClockJump);
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut n = s.clone();
        let now = s.now;
        let mut released = false;
        match action {
            Action::Acquire(i) => self.acquire(&mut n, i),
            Action::Renew(i) => {
                let c = usize::from(i);
                let Phase::Holding {
                    token,
                    fence,
                    grant,
                    decided,
                    ..
                } = n.clients[c].phase
                else {
                    return None;
                };
                match n.server.holder(now) {
                    Some(h) if h.token == token || self.mutants.renew_any_owner => {
                        let expires = now + LEASE;
                        n.server.lock = Some(Hold {
                            expires,
                            passed: false,
                            since: now,
                            ..h
                        });
                        n.clients[c].phase = Phase::Holding {
                            token,
                            fence,
                            grant,
                            deadline: expires,
                            decided,
                        };
                        n.seen.renewed = true;
                    }
                    _ => n.clients[c].phase = Phase::Idle,
                }
            }
            Action::Release(i) => {
                released = true;
                self.release(&mut n, i);
            }
            Action::Decide(i) => {
                let c = usize::from(i);
                if let Phase::Holding {
                    token,
                    fence,
                    grant,
                    deadline,
                    ..
                } = n.clients[c].phase
                {
                    n.clients[c].phase = Phase::Holding {
                        token,
                        fence,
                        grant,
                        deadline,
                        decided: true,
                    };
                }
            }
            Action::Write(i) => {
                let c = usize::from(i);
                let Phase::Holding {
                    token,
                    fence,
                    grant,
                    deadline,
                    ..
                } = n.clients[c].phase
                else {
                    return None;
                };
                if self.resource_accepts(n.resource, fence) {
                    if fence < n.resource {
                        n.stale_accepted = true;
                    }
                    if n.accepted_grant.is_some_and(|g| grant < g) {
                        n.fencing_broken = true;
                    }
                    n.accepted_grant = Some(n.accepted_grant.map_or(grant, |g| g.max(grant)));
                    n.resource = n.resource.max(fence);
                } else {
                    n.seen.stale_refused = true;
                }
                n.clients[c].phase = Phase::Holding {
                    token,
                    fence,
                    grant,
                    deadline,
                    decided: false,
                };
            }
            Action::Crash(i) => {
                n.clients[usize::from(i)].phase = Phase::Dead;
                n.clients[usize::from(i)].inbox = None;
                n.crashes += 1;
                n.seen.crashed = true;
            }
            Action::Deliver(i) => {
                let c = usize::from(i);
                let pass = n.clients[c].inbox.take()?;
                if let Phase::Waiting { token, .. } = n.clients[c].phase
                    && token == pass.token
                {
                    n.clients[c].phase = Phase::Holding {
                        token,
                        fence: pass.fence,
                        grant: pass.grant,
                        deadline: pass.ends,
                        decided: false,
                    };
                }
            }
            Action::Lose(i) => {
                n.clients[usize::from(i)].inbox = None;
                n.seen.message_lost = true;
            }
            Action::Tick => n.now += 1,
            Action::Replicate => n.replica = n.server.clone(),
            Action::Failover => {
                // Only a lost write to the lock key itself (a grant, a renewal, a release)
                // excuses two holders: not a waiter's place or the fence counter.
                if n.replica.lock != n.server.lock {
                    n.grant_lost = true;
                }
                n.server = n.replica.clone();
                let lag = if self.mutants.unbounded_clock_lag {
                    UNBOUNDED_LAG
                } else {
                    MAX_LAG
                };
                n.skew -= i32::try_from(lag).unwrap_or(i32::MAX);
                n.failovers += 1;
                n.now += 1;
                n.stalled_since = None;
            }
            Action::ClockBack => {
                n.skew -= i32::try_from(MAX_BACK).unwrap_or(i32::MAX);
                n.steps_back += 1;
                n.seen.clock_back = true;
            }
            Action::ClockJump => {
                n.skew += i32::try_from(STEP_US).unwrap_or(i32::MAX);
                n.jumps += 1;
                if let Some(h) = &mut n.server.lock {
                    h.expires = h.expires.saturating_sub(1);
                }
                for place in &mut n.server.waiters {
                    place.0 = place.0.saturating_sub(1);
                }
            }
        }
        if !self.witnesses {
            n.seen = Seen::default();
        }
        if n.waiter_unserved() {
            if released && n.stalled_since.is_none() {
                n.stalled_since = Some(n.now);
            }
        } else {
            n.stalled_since = None;
        }
        Some(n)
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.grants <= self.max_grants && s.clients.iter().all(|c| c.requests <= self.max_grants + 1)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always("fences of grants strictly increase", |_, s: &State| {
                !s.fence_regressed
            }),
            Property::always(
                "the resource accepts no fence below one it accepted",
                |_, s: &State| !s.stale_accepted,
            ),
            Property::always(
                "the resource refuses an older grant's write after a newer one's",
                |_, s: &State| !s.fencing_broken,
            ),
            Property::always(
                "one holder within its deadline unless a failover lost a grant or the clock jumped",
                |_, s: &State| s.grant_lost || s.jumps > 0 || s.within_deadline() <= 1,
            ),
            Property::always(
                "a passed lease lasts the claim until confirmed",
                |_, s: &State| {
                    s.server
                        .holder(s.now)
                        .is_none_or(|h| !h.passed || h.expires <= h.since + CLAIM)
                },
            ),
            Property::always(
                "a release with a live waiter in line grants it within the claim",
                |_, s: &State| s.stalled_since.is_none_or(|t| s.now <= t + CLAIM),
            ),
        ];
        let mut add = |name, condition| properties.push(Property::sometimes(name, condition));
        add("a renewal", |_, s: &State| s.seen.renewed);
        if self.writes {
            add(
                "a pause outlives a lease (a write decided in time is pending after it)",
                |_, s: &State| {
                    s.clients.iter().any(
                    |c| matches!(c.phase, Phase::Holding { decided: true, deadline, .. } if s.now >= deadline),
                )
                },
            );
            add("a stale write is refused", |_, s: &State| {
                s.seen.stale_refused
            });
        }
        if self.crashes > 0 {
            add("a crash", |_, s: &State| s.seen.crashed);
        }
        if self.passing {
            add("a pass", |_, s: &State| s.seen.passed);
        }
        if self.passing && self.lossy {
            add("a lost pass message", |_, s: &State| s.seen.message_lost);
            add(
                "a waiter takes the lock passed to it after a lost message",
                |_, s: &State| s.seen.took_own,
            );
        }
        if self.failovers > 0 {
            add("a failover loses a grant", |_, s: &State| s.grant_lost);
        }
        if self.steps_back > 0 {
            add("the clock steps back", |_, s: &State| s.seen.clock_back);
        }
        if self.jumps > 0 {
            add(
                "after a forward jump two clients hold within their deadlines",
                |_, s: &State| s.jumps > 0 && s.within_deadline() >= 2,
            );
        }
        properties
    }
}
