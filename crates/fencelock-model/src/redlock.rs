//! The plain lock over Redlock: three instances, each with the lock key and the fence key of
//! `kinds/plain/acquire.lua`, `extend.lua` and `release.lua` (its fence floor), and
//! `reassert.lua`. A request tries each instance (one step each, in any order); with a majority
//! granted it holds with the largest of their fences, a lease counted from its first try;
//! otherwise it gives back what it took. A renewal extends where the key is its own and, with a
//! majority extended, puts the hold back where an instance lost it (raising that instance's
//! fence key). A release deletes its keys and raises each one's fence key to its fence.
//! Instances restart without persistence (the lock and the fence key gone) and, as
//! docs/deployments.md assumes, stay out for the longest lease; the instances' clocks agree. A
//! request sends its tries in instance order (another request's steps may come between them).
//!
//! Under that assumption one client holds within its deadline at a time, and no two grants
//! share a fence, so the resource accepts one holder's writes at a time. An instance back
//! within the lease breaks both: two clients hold at once, and two grants on majorities that met
//! only on it take their fences from one clock reading.

use std::hash::Hash;

use stateright::{Model, Property};

use crate::{CLOCK_BASE, STEP_US};

/// A lease, in time steps.
pub const REDLOCK_LEASE: u8 = 2;
/// How many instances.
pub const INSTANCES: usize = 3;

/// Breaks of the Redlock protocol, each a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RedlockMutants {
    /// The grant's fence is the first granting instance's, not the largest of the majority's.
    pub first_fence: bool,
    /// A release deletes its keys without raising the fence keys to its fence.
    pub no_release_floor: bool,
    /// A restarted instance is back after a step, within the lease (drops the assumption).
    pub restart_within_lease: bool,
}

/// The model's bounds.
#[derive(Clone, Debug)]
pub struct RedlockModel {
    /// How many clients.
    pub clients: usize,
    /// The last time step.
    pub max_time: u8,
    /// How many requests each client may make.
    pub max_requests: u8,
    /// How many restarts.
    pub restarts: u8,
    /// The breaks to check for.
    pub mutants: RedlockMutants,
}

impl RedlockModel {
    /// The bound `cargo test` checks: 2 clients, 3 time steps, 2 requests each, a restart.
    pub fn small() -> Self {
        Self {
            clients: 2,
            max_time: 3,
            max_requests: 2,
            restarts: 1,
            mutants: RedlockMutants::default(),
        }
    }

    /// The same model with one break.
    pub fn with(mut self, mutants: RedlockMutants) -> Self {
        self.mutants = mutants;
        self
    }
}

/// One instance's keys: the lock (owner token, expiry) and the fence key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Instance {
    /// The lock key: (token, the step it expires at).
    pub lock: Option<(u8, u8)>,
    /// The fence key.
    pub fence: u32,
    /// Restarted: answers nothing before this step.
    pub down_until: u8,
}

/// What a client does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// Not asking.
    Idle,
    /// Trying the instances: those `tried`, those that `granted` (bit masks), the largest
    /// fence granted (the first, for the mutant), and when the first try was sent.
    Trying {
        token: u8,
        tried: u8,
        granted: u8,
        fence: u32,
        started: u8,
    },
    /// Holds with `fence` until `deadline`.
    Holding { token: u8, fence: u32, deadline: u8 },
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RedlockState {
    /// Real time, in steps.
    pub now: u8,
    /// The instances.
    pub instances: [Instance; INSTANCES],
    /// The clients.
    pub clients: Vec<Request>,
    /// Requests made per client.
    pub requests: Vec<u8>,
    /// Restarts made.
    pub restarts: u8,
    /// The resource: the largest fence accepted, and the token that wrote with it.
    pub resource: Option<(u32, u8)>,
    /// Ghost: the fences of grants, sorted.
    pub fences: Vec<u32>,
    /// Ghost: two grants had one fence.
    pub fence_shared: bool,
    /// Ghost: the resource accepted writes of two grants with one fence.
    pub fencing_broken: bool,
    /// Witness: a renewal put the hold back on an instance that lost it.
    pub reasserted: bool,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedlockAction {
    /// Client `i` sends its try to instance `j` (a new request's first try starts it).
    Try(u8, u8),
    /// Client `i` renews on every instance.
    Renew(u8),
    /// Client `i` releases on every instance.
    Release(u8),
    /// Client `i` writes to the resource with its fence.
    Write(u8),
    /// Instance `j` restarts without its data.
    Restart(u8),
    /// One time step passes.
    Tick,
}

impl RedlockState {
    fn clock(&self) -> u32 {
        CLOCK_BASE + u32::from(self.now) * STEP_US
    }

    fn held_by(&self, j: usize, token: u8) -> bool {
        self.instances[j].down_until <= self.now
            && self.instances[j]
                .lock
                .is_some_and(|(t, e)| t == token && e > self.now)
    }

    /// How many clients hold within their deadlines.
    pub fn within_deadline(&self) -> usize {
        self.clients
            .iter()
            .filter(|c| matches!(c, Request::Holding { deadline, .. } if *deadline > self.now))
            .count()
    }
}

impl RedlockModel {
    fn try_instance(&self, n: &mut RedlockState, i: u8, j: u8) {
        let c = usize::from(i);
        let now = n.now;
        let (token, tried, mut granted, mut fence, started) = match n.clients[c] {
            Request::Trying {
                token,
                tried,
                granted,
                fence,
                started,
            } => (token, tried, granted, fence, started),
            _ => {
                n.requests[c] += 1;
                ((i << 4) | n.requests[c], 0, 0, 0, now)
            }
        };
        let clock = n.clock();
        let inst = &mut n.instances[usize::from(j)];
        if inst.down_until <= now && inst.lock.is_none_or(|(_, e)| e <= now) {
            // `acquire.lua`: free, so taken with max(last + 1, clock).
            let f = (inst.fence + 1).max(clock);
            inst.fence = f;
            inst.lock = Some((token, now + REDLOCK_LEASE));
            fence = if self.mutants.first_fence && granted != 0 {
                fence
            } else {
                fence.max(f)
            };
            granted |= 1 << j;
        }
        let tried = tried | 1 << j;
        if tried.count_ones() < u32::try_from(INSTANCES).unwrap_or(u32::MAX) {
            n.clients[c] = Request::Trying {
                token,
                tried,
                granted,
                fence,
                started,
            };
            return;
        }
        let deadline = started + REDLOCK_LEASE;
        if granted.count_ones() * 2 > u32::try_from(INSTANCES).unwrap_or(0) && deadline > now {
            if n.fences.contains(&fence) {
                n.fence_shared = true;
            }
            n.fences.push(fence);
            n.fences.sort_unstable();
            n.clients[c] = Request::Holding {
                token,
                fence,
                deadline,
            };
        } else {
            // No majority: given back where granted (`release.lua` with the owner token alone).
            for inst in &mut n.instances {
                if inst.lock.is_some_and(|(t, _)| t == token) {
                    inst.lock = None;
                }
            }
            n.clients[c] = Request::Idle;
        }
    }
}

impl Model for RedlockModel {
    type State = RedlockState;
    type Action = RedlockAction;

    fn init_states(&self) -> Vec<RedlockState> {
        vec![RedlockState {
            now: 0,
            instances: [Instance::default(); INSTANCES],
            clients: vec![Request::Idle; self.clients],
            requests: vec![0; self.clients],
            restarts: 0,
            resource: None,
            fences: Vec::new(),
            fence_shared: false,
            fencing_broken: false,
            reasserted: false,
        }]
    }

    fn actions(&self, s: &RedlockState, actions: &mut Vec<RedlockAction>) {
        for (i, c) in s.clients.iter().enumerate() {
            let i = u8::try_from(i).unwrap_or(u8::MAX);
            match *c {
                Request::Idle if s.requests[usize::from(i)] < self.max_requests => {
                    actions.push(RedlockAction::Try(i, 0));
                }
                Request::Idle => {}
                Request::Trying { tried, .. } => {
                    let next = tried.count_ones();
                    actions.push(RedlockAction::Try(i, u8::try_from(next).unwrap_or(0)));
                }
                Request::Holding { .. } => {
                    actions.push(RedlockAction::Renew(i));
                    actions.push(RedlockAction::Release(i));
                    actions.push(RedlockAction::Write(i));
                }
            }
        }
        if s.now < self.max_time {
            actions.push(RedlockAction::Tick);
            if s.restarts < self.restarts {
                for j in 0..INSTANCES {
                    actions.push(RedlockAction::Restart(u8::try_from(j).unwrap_or(0)));
                }
            }
        }
    }

    fn next_state(&self, s: &RedlockState, action: RedlockAction) -> Option<RedlockState> {
        let mut n = s.clone();
        let now = s.now;
        match action {
            RedlockAction::Try(i, j) => self.try_instance(&mut n, i, j),
            RedlockAction::Renew(i) => {
                let c = usize::from(i);
                let Request::Holding { token, fence, .. } = s.clients[c] else {
                    return None;
                };
                let held: Vec<usize> = (0..INSTANCES).filter(|&j| s.held_by(j, token)).collect();
                if held.len() * 2 > INSTANCES {
                    for inst in n.instances.iter_mut().filter(|inst| inst.down_until <= now) {
                        match inst.lock {
                            Some((t, e)) if t == token && e > now => {
                                inst.lock = Some((t, now + REDLOCK_LEASE));
                            }
                            Some((_, e)) if e > now => {}
                            // `reassert.lua`: an empty key gets the hold back, and the fence key
                            // the holder's fence.
                            _ => {
                                inst.fence = inst.fence.max(fence);
                                inst.lock = Some((token, now + REDLOCK_LEASE));
                                n.reasserted = true;
                            }
                        }
                    }
                    n.clients[c] = Request::Holding {
                        token,
                        fence,
                        deadline: now + REDLOCK_LEASE,
                    };
                } else {
                    n.clients[c] = Request::Idle;
                }
            }
            RedlockAction::Release(i) => {
                let c = usize::from(i);
                let Request::Holding { token, fence, .. } = s.clients[c] else {
                    return None;
                };
                for j in 0..INSTANCES {
                    if s.held_by(j, token) {
                        if !self.mutants.no_release_floor {
                            n.instances[j].fence = n.instances[j].fence.max(fence);
                        }
                        n.instances[j].lock = None;
                    }
                }
                n.clients[c] = Request::Idle;
            }
            RedlockAction::Write(i) => {
                let Request::Holding { token, fence, .. } = s.clients[usize::from(i)] else {
                    return None;
                };
                // `fenced/check.lua`: an equal fence is accepted (the same holder again).
                match s.resource {
                    Some((f, _)) if fence < f => {}
                    Some((f, t)) if fence == f && t != token => {
                        n.fencing_broken = true;
                    }
                    _ => n.resource = Some((fence, token)),
                }
            }
            RedlockAction::Restart(j) => {
                let out = if self.mutants.restart_within_lease {
                    1
                } else {
                    REDLOCK_LEASE
                };
                n.instances[usize::from(j)] = Instance {
                    down_until: now + out,
                    ..Instance::default()
                };
                n.restarts += 1;
            }
            RedlockAction::Tick => n.now += 1,
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "redlock: no two grants share a fence",
                |_, s: &RedlockState| !s.fence_shared,
            ),
            Property::always(
                "redlock: the resource never accepts two grants' writes with one fence",
                |_, s: &RedlockState| !s.fencing_broken,
            ),
            Property::always(
                "redlock: one holder within its deadline",
                |_, s: &RedlockState| s.within_deadline() <= 1,
            ),
            Property::sometimes(
                "redlock: a renewal puts the hold back on an instance that restarted",
                |_, s: &RedlockState| s.reasserted,
            ),
            Property::sometimes(
                "redlock: a request without a majority gives back what it took",
                |_, s: &RedlockState| {
                    s.requests.iter().sum::<u8>() > u8::try_from(s.fences.len()).unwrap_or(0)
                        && s.clients.iter().all(|c| *c == Request::Idle)
                },
            ),
        ]
    }
}
