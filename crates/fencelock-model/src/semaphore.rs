//! The counting semaphore with weighted takes (`kinds/semaphore/`) on one server: the hash of
//! holds (a hold of k permits is k fields with one lease and one fence) and of waiting requests
//! (`w:<token>`: how many they want, when they arrived, when the place lapses), and the fence
//! counter, as `acquire.lua`, `release.lua` and `extend.lua` keep them.
//!
//! Clients ask for their number of permits ([`SemModel::takes`]) and wait (a waiter tries again
//! every step, which refreshes its place), renew, release, pause (a lease that runs out) and
//! crash (a dead holder's permits come back when its lease ends; a dead waiter's place lapses).
//! The breaks that [`SemMutants`] names are flags; `tests/check.rs` asserts that the checker
//! finds each one.

use std::hash::Hash;

use stateright::{Model, Property};

use crate::entries::{self, EntryAction, EntryPhase, Leased};
use crate::{CLOCK_BASE, STEP_US};

/// A lease, in time steps.
pub const SEM_LEASE: u8 = 2;
/// How long a waiting request's place lasts unless refreshed, in time steps.
pub const SEM_PLACE: u8 = 2;

/// Breaks of the semaphore, each a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SemMutants {
    /// The permits held are counted as holds, not as their k fields.
    pub count_holds: bool,
    /// A request is granted when its permits are free, whoever waits longer.
    pub no_ahead: bool,
}

/// The semaphore model's bounds.
#[derive(Clone, Debug)]
pub struct SemModel {
    /// N.
    pub permits: u8,
    /// How many permits each client takes (one client each).
    pub takes: Vec<u8>,
    /// The last time step.
    pub max_time: u8,
    /// How many grants a run may make.
    pub max_grants: u8,
    /// How many clients may crash.
    pub crashes: u8,
    /// The breaks to check for.
    pub mutants: SemMutants,
}

impl SemModel {
    /// The bound `cargo test` checks: N = 3, clients that take 2, 2 and 1, 4 time steps, 4
    /// grants, a crash.
    pub fn small() -> Self {
        Self {
            permits: 3,
            takes: vec![2, 2, 1],
            max_time: 4,
            max_grants: 4,
            crashes: 1,
            mutants: SemMutants::default(),
        }
    }

    /// The same model with one break.
    pub fn with(mut self, mutants: SemMutants) -> Self {
        self.mutants = mutants;
        self
    }
}

/// A hold: `p:<token>` (and `p:<token>/2` … `/k`) = `<expiry>:<fence>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SemHold {
    /// The token.
    pub token: u8,
    /// Its client.
    pub client: u8,
    /// How many permits (fields).
    pub k: u8,
    /// The step at which the lease ends.
    pub expires: u8,
    /// The grant's fence.
    pub fence: u32,
}

impl Leased for SemHold {
    fn token(&self) -> u8 {
        self.token
    }

    fn expires(&mut self) -> &mut u8 {
        &mut self.expires
    }
}

/// A waiting request: `w:<token>` = `<lapses>:<k>:<arrival>` (the model keeps the places in
/// arrival order instead of the arrival's millisecond).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SemPlace {
    /// The token.
    pub token: u8,
    /// Its client.
    pub client: u8,
    /// How many permits it wants.
    pub k: u8,
    /// The step at which the place lapses unless refreshed.
    pub lapses: u8,
}

/// What a client believes and does.
pub type SemPhase = EntryPhase;

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SemState {
    /// Real time, in steps.
    pub now: u8,
    /// The holds (sorted; a hold whose lease ended stays until an acquire drops it).
    pub holds: Vec<SemHold>,
    /// The waiting requests, in arrival order.
    pub places: Vec<SemPlace>,
    /// The fence key.
    pub fence: u32,
    /// The clients' phases.
    pub clients: Vec<SemPhase>,
    /// Requests made per client (a token is the client's number and this count).
    pub requests: Vec<u8>,
    /// Grants made.
    pub grants: u8,
    /// Budgets used.
    pub crashes: u8,
    /// Ghost: the largest fence granted.
    pub max_fence: u32,
    /// Ghost: a grant's fence was not above every earlier one.
    pub fence_regressed: bool,
    /// Ghost: a grant left too few permits for the requests that wait longer.
    pub overtaken: bool,
    /// Witness: a request waited while its permits were free, for one that waits longer.
    pub held_back: bool,
    /// Witness: an acquire dropped a dead holder's hold.
    pub dead_dropped: bool,
}

impl SemState {
    /// The permits held on the server at `now` (leases not ended).
    pub fn held(&self) -> u8 {
        self.holds
            .iter()
            .filter(|h| h.expires > self.now)
            .map(|h| h.k)
            .sum()
    }

    /// The permits of clients that believe they hold within their deadlines.
    pub fn believed(&self, takes: &[u8]) -> u8 {
        self.clients
            .iter()
            .zip(takes)
            .filter(
                |(p, _)| matches!(p, SemPhase::Holding { deadline, .. } if self.now < *deadline),
            )
            .map(|(_, k)| *k)
            .sum()
    }

    fn clock(&self) -> u32 {
        CLOCK_BASE + u32::from(self.now) * STEP_US
    }
}

/// One step (the kind's scripts: `acquire.lua`, `extend.lua`, `release.lua`).
pub type SemAction = EntryAction;

impl SemModel {
    /// `acquire.lua` for a request that waits, run by client `i`.
    fn acquire(&self, n: &mut SemState, i: u8) {
        let c = usize::from(i);
        let now = n.now;
        let k = self.takes[c];
        let token = match n.clients[c] {
            SemPhase::Waiting { token, .. } => token,
            _ => {
                n.requests[c] += 1;
                (i << 4) | (n.requests[c] & 15)
            }
        };
        let mine = n.holds.iter().position(|h| h.token == token);
        if let Some(m) = mine
            && n.holds[m].expires > now
        {
            // A retry after a lost reply: re-armed.
            n.holds[m].expires = now + SEM_LEASE;
            let fence = n.holds[m].fence;
            n.clients[c] = SemPhase::Holding {
                token,
                fence,
                deadline: now + SEM_LEASE,
            };
            return;
        }
        // Drop what lapsed; count the permits held and those of requests that wait longer.
        let dead = |n: &SemState, client: u8| n.clients[usize::from(client)] == SemPhase::Dead;
        if n.holds
            .iter()
            .any(|h| h.expires <= now && dead(n, h.client))
        {
            n.dead_dropped = true;
        }
        n.holds.retain(|h| h.expires > now);
        n.places.retain(|p| p.lapses > now);
        let held: u8 = if self.mutants.count_holds {
            u8::try_from(n.holds.len()).unwrap_or(u8::MAX)
        } else {
            n.holds.iter().map(|h| h.k).sum()
        };
        // The requests that wait longer: those before this one's place, or all without one.
        let ahead: u8 = n
            .places
            .iter()
            .take_while(|p| p.token != token)
            .map(|p| p.k)
            .sum();
        let counted = if self.mutants.no_ahead { 0 } else { ahead };
        if held + counted + k > self.permits {
            if held + k <= self.permits {
                n.held_back = true;
            }
            // Take or refresh the place (its arrival kept).
            match n.places.iter_mut().find(|p| p.token == token) {
                Some(p) => p.lapses = now + SEM_PLACE,
                None => n.places.push(SemPlace {
                    token,
                    client: i,
                    k,
                    lapses: now + SEM_PLACE,
                }),
            }
            n.clients[c] = SemPhase::Waiting {
                token,
                wake: now + 1,
            };
            return;
        }
        let real_held: u8 = n.holds.iter().map(|h| h.k).sum();
        if real_held + ahead + k > self.permits {
            n.overtaken = true;
        }
        let fence = (n.fence + 1).max(n.clock());
        n.fence = fence;
        if fence <= n.max_fence {
            n.fence_regressed = true;
        }
        n.max_fence = n.max_fence.max(fence);
        n.grants += 1;
        n.holds.push(SemHold {
            token,
            client: i,
            k,
            expires: now + SEM_LEASE,
            fence,
        });
        n.holds.sort_unstable();
        n.places.retain(|p| p.token != token);
        n.clients[c] = SemPhase::Holding {
            token,
            fence,
            deadline: now + SEM_LEASE,
        };
    }
}

impl Model for SemModel {
    type State = SemState;
    type Action = SemAction;

    fn init_states(&self) -> Vec<SemState> {
        vec![SemState {
            now: 0,
            holds: Vec::new(),
            places: Vec::new(),
            fence: 0,
            clients: vec![SemPhase::Idle; self.takes.len()],
            requests: vec![0; self.takes.len()],
            grants: 0,
            crashes: 0,
            max_fence: 0,
            fence_regressed: false,
            overtaken: false,
            held_back: false,
            dead_dropped: false,
        }]
    }

    fn actions(&self, s: &SemState, actions: &mut Vec<SemAction>) {
        let crash = s.crashes < self.crashes;
        actions.extend(entries::actions(&s.clients, crash, s.now, self.max_time));
    }

    fn next_state(&self, s: &SemState, action: SemAction) -> Option<SemState> {
        let mut n = s.clone();
        let now = s.now;
        match action {
            SemAction::Acquire(i) => self.acquire(&mut n, i),
            SemAction::Renew(i) => {
                let c = usize::from(i);
                entries::renew(&mut n.holds, &mut n.clients[c], now, SEM_LEASE)?;
            }
            SemAction::Release(i) => {
                let c = usize::from(i);
                let token = entries::release(&mut n.holds, &mut n.clients[c])?;
                n.places.retain(|p| p.token != token);
            }
            SemAction::Crash(i) => {
                n.clients[usize::from(i)] = SemPhase::Dead;
                n.crashes += 1;
            }
            SemAction::Tick => n.now += 1,
        }
        Some(n)
    }

    fn within_boundary(&self, s: &SemState) -> bool {
        s.grants <= self.max_grants && s.requests.iter().all(|r| *r <= self.max_grants)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "semaphore: at most N permits held on the server",
                |m: &SemModel, s: &SemState| s.held() <= m.permits,
            ),
            Property::always(
                "semaphore: clients within their deadlines hold at most N permits",
                |m: &SemModel, s: &SemState| s.believed(&m.takes) <= m.permits,
            ),
            Property::always(
                "semaphore: fences of grants strictly increase",
                |_, s: &SemState| !s.fence_regressed,
            ),
            Property::always(
                "semaphore: a grant leaves room for every request that waits longer",
                |_, s: &SemState| !s.overtaken,
            ),
            Property::sometimes(
                "semaphore: all N permits held",
                |m: &SemModel, s: &SemState| s.held() == m.permits,
            ),
            Property::sometimes(
                "semaphore: a request waits while its permits are free, for one that waits longer",
                |_, s: &SemState| s.held_back,
            ),
            Property::sometimes(
                "semaphore: a dead holder's permits come back",
                |_, s: &SemState| s.dead_dropped,
            ),
        ]
    }
}
