//! The reentrant lock (`kinds/reentrant/`) on one server: the lock's hash (its owner, the fence
//! handed out when it went from free to held, and one hold per acquisition), its lease (the
//! key's expiry, only ever lengthened while anyone holds it) and the fence counter, as
//! `acquire.lua`, `extend.lua` and `release.lua` keep them.
//!
//! Each client is one owner (a `ReentrantLock` handle) that acquires without waiting, again and
//! again while it holds (each acquisition a hold of its own, up to the re-entry limit), renews
//! and releases its holds one at a time, and may crash (its holds stay until the lease ends).
//! A client believes each of its holds until its own deadline: a lease from the call that
//! granted or last renewed it; a hold past its deadline can still be renewed (refused, it is
//! given up) or released (a release that finds it gone changes nothing). The breaks that [`ReMutants`] names are flags; `tests/check.rs`
//! asserts that the checker finds each one.

use stateright::{Model, Property};

use crate::{CLOCK_BASE, STEP_US};

/// A lease, in time steps.
pub const RE_LEASE: u8 = 2;

/// Breaks of the reentrant lock, each a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReMutants {
    /// An acquire enters the lock whoever owns it (`acquire.lua` without its owner check).
    pub no_owner_check: bool,
    /// A release counts the holds whether or not its own is there: a hold that outlived its
    /// lease, released after another owner took the lock, frees the other's lock.
    pub release_without_hold: bool,
    /// A renewal re-arms the lease whether or not its hold is there (`extend.lua` without its
    /// hold check): a hold that outlived its lease, renewed after another owner took the lock,
    /// is believed again.
    pub renew_without_hold: bool,
    /// No re-entry limit.
    pub no_depth_limit: bool,
}

/// The reentrant lock model's bounds.
#[derive(Clone, Debug)]
pub struct ReModel {
    /// How many clients (owners).
    pub clients: usize,
    /// The re-entry limit (holds per owner).
    pub limit: u8,
    /// The last time step.
    pub max_time: u8,
    /// How many acquisitions a run may make.
    pub max_requests: u8,
    /// How many clients may crash.
    pub crashes: u8,
    /// The breaks to check for.
    pub mutants: ReMutants,
}

impl ReModel {
    /// The bound `cargo test` checks: 2 owners, a limit of 2, 4 time steps, 5 acquisitions, a
    /// crash.
    pub fn small() -> Self {
        Self {
            clients: 2,
            limit: 2,
            max_time: 4,
            max_requests: 5,
            crashes: 1,
            mutants: ReMutants::default(),
        }
    }

    /// The same model with one break.
    pub fn with(mut self, mutants: ReMutants) -> Self {
        self.mutants = mutants;
        self
    }
}

/// The lock's hash while it is held: `owner`, `fence`, and one `h:<token>` per hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReKey {
    /// The owner (a client).
    pub owner: u8,
    /// The fence of the grant that took the lock while it was free.
    pub fence: u32,
    /// The holds' tokens, sorted.
    pub holds: Vec<u8>,
    /// The step at which the lease ends (the key is gone from then on).
    pub expires: u8,
}

/// A hold as its client believes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReHold {
    /// The hold's token.
    pub token: u8,
    /// The fence it was answered.
    pub fence: u32,
    /// The step until which the client believes it.
    pub deadline: u8,
}

/// A client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReClient {
    /// Its holds, in the order it took them.
    pub holds: Vec<ReHold>,
    /// Acquisitions made (a hold token is the client's number and this count).
    pub requests: u8,
    /// Crashed.
    pub dead: bool,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReState {
    /// Real time, in steps.
    pub now: u8,
    /// The lock's hash (none once its lease ended).
    pub key: Option<ReKey>,
    /// The fence counter.
    pub counter: u32,
    /// The clients.
    pub clients: Vec<ReClient>,
    /// Crashes so far.
    pub crashes: u8,
    /// Ghost: the largest fence granted to a lock that was free.
    pub max_fence: u32,
    /// Ghost: a grant's fence was not above every earlier one.
    pub fence_regressed: bool,
    /// Witness: an owner entered the lock again.
    pub reentered: bool,
    /// Witness: an entry beyond the limit was refused.
    pub depth_refused: bool,
    /// Witness: a release found its hold gone (the lease had ended).
    pub stale_release: bool,
    /// Witness: the lease of a lock whose owner crashed holding it ended.
    pub dead_lease_ended: bool,
}

impl ReState {
    fn clock(&self) -> u32 {
        CLOCK_BASE + u32::from(self.now) * STEP_US
    }

    /// The clients that believe they hold the lock now.
    pub fn believers(&self) -> usize {
        self.clients
            .iter()
            .filter(|c| c.holds.iter().any(|h| h.deadline > self.now))
            .count()
    }
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReAction {
    /// Client `i` runs `acquire.lua` with a new hold (no wait).
    Acquire(u8),
    /// Client `i` renews its hold at index `h` (`extend.lua`).
    Renew(u8, u8),
    /// Client `i` releases its hold at index `h` (`release.lua`).
    Release(u8, u8),
    /// Client `i` crashes.
    Crash(u8),
    /// One time step passes.
    Tick,
}

impl ReModel {
    /// `acquire.lua` for a new hold of client `i`.
    fn acquire(&self, n: &mut ReState, i: u8) {
        let c = usize::from(i);
        let now = n.now;
        n.clients[c].requests += 1;
        let token = (i << 4) | (n.clients[c].requests & 15);
        let lease = now + RE_LEASE;
        if let Some(key) = &mut n.key {
            if key.owner != i && !self.mutants.no_owner_check {
                return;
            }
            if key.holds.len() >= usize::from(self.limit) && !self.mutants.no_depth_limit {
                n.depth_refused = true;
                return;
            }
            key.holds.push(token);
            key.holds.sort_unstable();
            key.expires = key.expires.max(lease);
            let fence = key.fence;
            n.reentered |= key.owner == i;
            n.clients[c].holds.push(ReHold {
                token,
                fence,
                deadline: lease,
            });
            return;
        }
        let fence = (n.counter + 1).max(n.clock());
        n.counter = fence;
        if fence <= n.max_fence {
            n.fence_regressed = true;
        }
        n.max_fence = n.max_fence.max(fence);
        n.key = Some(ReKey {
            owner: i,
            fence,
            holds: vec![token],
            expires: lease,
        });
        n.clients[c].holds.push(ReHold {
            token,
            fence,
            deadline: lease,
        });
    }

    /// `extend.lua` for client `i`'s hold `h`: the lease from now if the hold is there (never
    /// shortened); else the client gives the hold up.
    fn renew(&self, n: &mut ReState, i: u8, h: usize) {
        let c = usize::from(i);
        let lease = n.now + RE_LEASE;
        let token = n.clients[c].holds[h].token;
        let renew_any = self.mutants.renew_without_hold;
        match &mut n.key {
            Some(key) if renew_any || key.holds.contains(&token) => {
                key.expires = key.expires.max(lease);
                n.clients[c].holds[h].deadline = lease;
            }
            _ => {
                n.clients[c].holds.remove(h);
            }
        }
    }

    /// `release.lua` for client `i`'s hold `h`: the hold goes, and the lock with its last.
    fn release(&self, n: &mut ReState, i: u8, h: usize) {
        let c = usize::from(i);
        let hold = n.clients[c].holds.remove(h);
        let Some(key) = &mut n.key else {
            n.stale_release = true;
            return;
        };
        let there = key.holds.contains(&hold.token);
        if !there {
            n.stale_release = true;
            if !self.mutants.release_without_hold {
                return;
            }
        }
        if key.holds.len() == 1 {
            // `raise_fence`: the counter is at least this fence already on one server.
            n.counter = n.counter.max(hold.fence);
            n.key = None;
        } else {
            key.holds.retain(|t| *t != hold.token);
        }
    }
}

impl Model for ReModel {
    type State = ReState;
    type Action = ReAction;

    fn init_states(&self) -> Vec<ReState> {
        vec![ReState {
            now: 0,
            key: None,
            counter: 0,
            clients: vec![ReClient::default(); self.clients],
            crashes: 0,
            max_fence: 0,
            fence_regressed: false,
            reentered: false,
            depth_refused: false,
            stale_release: false,
            dead_lease_ended: false,
        }]
    }

    fn actions(&self, s: &ReState, actions: &mut Vec<ReAction>) {
        let requests: u8 = s.clients.iter().map(|c| c.requests).sum();
        for (i, client) in s.clients.iter().enumerate() {
            let i = u8::try_from(i).unwrap_or(u8::MAX);
            if client.dead {
                continue;
            }
            // One more than the limit: an entry beyond it is refused.
            if requests < self.max_requests && client.holds.len() <= usize::from(self.limit) {
                actions.push(ReAction::Acquire(i));
            }
            for h in 0..client.holds.len() {
                let h = u8::try_from(h).unwrap_or(u8::MAX);
                actions.push(ReAction::Renew(i, h));
                actions.push(ReAction::Release(i, h));
            }
            if s.crashes < self.crashes {
                actions.push(ReAction::Crash(i));
            }
        }
        if s.now < self.max_time {
            actions.push(ReAction::Tick);
        }
    }

    fn next_state(&self, s: &ReState, action: ReAction) -> Option<ReState> {
        let mut n = s.clone();
        match action {
            ReAction::Acquire(i) => self.acquire(&mut n, i),
            ReAction::Renew(i, h) => self.renew(&mut n, i, usize::from(h)),
            ReAction::Release(i, h) => self.release(&mut n, i, usize::from(h)),
            ReAction::Crash(i) => {
                let c = usize::from(i);
                n.clients[c].dead = true;
                n.clients[c].holds.clear();
                n.crashes += 1;
            }
            ReAction::Tick => {
                n.now += 1;
                if let Some(key) = &n.key
                    && key.expires <= n.now
                {
                    n.dead_lease_ended |= n.clients[usize::from(key.owner)].dead;
                    n.key = None;
                }
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "one owner believes it holds the lock at a time",
                |_, s: &ReState| s.believers() <= 1,
            ),
            Property::always("fences of grants strictly increase", |_, s: &ReState| {
                !s.fence_regressed
            }),
            Property::always(
                "every hold a client believes is in the lock's hash",
                |_, s: &ReState| {
                    s.clients.iter().flat_map(|c| &c.holds).all(|h| {
                        h.deadline <= s.now
                            || s.key.as_ref().is_some_and(|k| k.holds.contains(&h.token))
                    })
                },
            ),
            Property::always(
                "the holds stay within the re-entry limit",
                |m: &ReModel, s: &ReState| {
                    s.key
                        .as_ref()
                        .is_none_or(|k| k.holds.len() <= usize::from(m.limit))
                },
            ),
            Property::sometimes("an owner enters the lock again", |_, s: &ReState| {
                s.reentered
            }),
            Property::sometimes(
                "an entry beyond the re-entry limit is refused",
                |_, s: &ReState| s.depth_refused,
            ),
            Property::sometimes(
                "a release finds its hold gone with its lease",
                |_, s: &ReState| s.stale_release,
            ),
            Property::sometimes(
                "a crashed owner's lock goes once its lease ends",
                |_, s: &ReState| s.dead_lease_ended,
            ),
        ]
    }

    fn within_boundary(&self, s: &ReState) -> bool {
        s.now <= self.max_time
    }
}
