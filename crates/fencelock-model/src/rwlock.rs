//! The read-write lock (`kinds/rwlock/`) on one server: the lock's hash of holders (readers,
//! the writer with its fence) and of waiting requests (writers `i:`, readers `q:`, each with its
//! arrival), every entry with a lease of its own, and the fence counter, as `scan.lua`,
//! `read.lua`, `write.lua`, `entry_extend.lua` and `release.lua` keep them.
//!
//! Each client is one owner with one request at a time, a reader or a writer, that waits (its
//! place in line refreshed by a try every step) or only tries. Readers share the lock; a writer
//! holds it alone. Waiters take turns by arrival, a phase at a time: a writer waiting keeps out
//! the readers that came after it, a reader waiting the writers that came after it. An entry
//! whose lease ran out stays in the hash until a read or a write drops it; a release takes the
//! client's entries and wakes every waiter. Clients renew, release, pause (a lease that runs
//! out) and crash. The breaks that [`RwMutants`] names are flags; `tests/check.rs` asserts that
//! the checker finds each one.

use stateright::{Model, Property};

use crate::entries::{self, EntryAction, EntryPhase, Leased};
use crate::{CLOCK_BASE, STEP_US};

/// A lease, in time steps.
pub const RW_LEASE: u8 = 2;
/// How long a waiting request's place lasts unless refreshed, in time steps.
pub const RW_PLACE: u8 = 2;

/// Breaks of the read-write lock, each a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RwMutants {
    /// A read is granted while another owner writes.
    pub read_past_writer: bool,
    /// A write is granted while others read.
    pub write_past_readers: bool,
    /// A reader does not wait for the writers that came before it.
    pub readers_first: bool,
    /// A writer does not wait for the readers that came before it.
    pub writers_first: bool,
}

/// The read-write lock model's bounds.
#[derive(Clone, Debug)]
pub struct RwModel {
    /// Per client: whether it writes (else it reads).
    pub writes: Vec<bool>,
    /// Per client: whether it waits (else it only tries, and takes no place).
    pub waits: Vec<bool>,
    /// The last time step.
    pub max_time: u8,
    /// How many grants a run may make.
    pub max_grants: u8,
    /// How many clients may crash.
    pub crashes: u8,
    /// The breaks to check for.
    pub mutants: RwMutants,
}

impl RwModel {
    /// The bound `cargo test` checks: a writer and two readers that wait, 4 time steps, 4
    /// grants, a crash.
    pub fn small() -> Self {
        Self {
            writes: vec![true, false, false],
            waits: vec![true, true, true],
            max_time: 4,
            max_grants: 4,
            crashes: 1,
            mutants: RwMutants::default(),
        }
    }

    /// The same model with one break.
    pub fn with(mut self, mutants: RwMutants) -> Self {
        self.mutants = mutants;
        self
    }
}

/// What an entry of the hash is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// `r:<token>`: a reader.
    Reader,
    /// `w:<token>`: the writer.
    Writer,
    /// `q:<token>`: a reader waiting.
    ReaderWaits,
    /// `i:<token>`: a writer waiting.
    WriterWaits,
}

/// An entry of the hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RwEntry {
    /// Its token.
    pub token: u8,
    /// Its client (the owner).
    pub client: u8,
    /// What it is.
    pub role: Role,
    /// The step at which its lease (or place) ends.
    pub expires: u8,
    /// A waiter's arrival (an order: the model keeps a count, the script milliseconds).
    pub arrival: u8,
    /// A writer's fence.
    pub fence: u32,
}

impl Leased for RwEntry {
    fn token(&self) -> u8 {
        self.token
    }

    fn expires(&mut self) -> &mut u8 {
        &mut self.expires
    }
}

/// What a client believes and does (a reader holding is answered the last write's fence).
pub type RwPhase = EntryPhase;

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RwState {
    /// Real time, in steps.
    pub now: u8,
    /// The hash's entries (sorted; one whose lease ended stays until a read or write drops
    /// it).
    pub entries: Vec<RwEntry>,
    /// The fence counter.
    pub fence: u32,
    /// Arrivals so far.
    pub arrivals: u8,
    /// The clients' phases.
    pub clients: Vec<RwPhase>,
    /// Requests made per client (a token is the client's number and this count).
    pub requests: Vec<u8>,
    /// Grants made.
    pub grants: u8,
    /// Crashes so far.
    pub crashes: u8,
    /// Ghost: the largest write fence granted.
    pub max_fence: u32,
    /// Ghost: a write's fence was not above every earlier one.
    pub fence_regressed: bool,
    /// Ghost: a request was granted while one of the other kind that came before it waited.
    pub overtaken: bool,
    /// Witness: a writer waited for readers, or readers for a writer.
    pub waited: bool,
    /// Witness: a reader waited for a writer that came before it, the lock not written.
    pub held_back: bool,
    /// Witness: a read or a write dropped a dead holder's entry.
    pub dead_dropped: bool,
}

impl RwState {
    fn clock(&self) -> u32 {
        CLOCK_BASE + u32::from(self.now) * STEP_US
    }

    fn live(&self) -> impl Iterator<Item = &RwEntry> {
        self.entries.iter().filter(|e| e.expires > self.now)
    }

    /// The live holders on the server: (readers, writers).
    pub fn holders(&self) -> (usize, usize) {
        let readers = self.live().filter(|e| e.role == Role::Reader).count();
        let writers = self.live().filter(|e| e.role == Role::Writer).count();
        (readers, writers)
    }

    /// The clients that believe they hold, within their deadlines: (readers, writers).
    pub fn believed(&self, writes: &[bool]) -> (usize, usize) {
        let holding: Vec<bool> = self
            .clients
            .iter()
            .zip(writes)
            .filter(|(p, _)| matches!(p, RwPhase::Holding { deadline, .. } if self.now < *deadline))
            .map(|(_, w)| *w)
            .collect();
        let writers = holding.iter().filter(|w| **w).count();
        (holding.len() - writers, writers)
    }
}

/// One step (`Acquire` runs `read.lua` or `write.lua`, `Renew` `entry_extend.lua`).
pub type RwAction = EntryAction;

impl RwModel {
    /// `read.lua` or `write.lua` for client `i`'s request (new, or waiting).
    fn acquire(&self, n: &mut RwState, i: u8) {
        let c = usize::from(i);
        let now = n.now;
        let writes = self.writes[c];
        let token = match n.clients[c] {
            RwPhase::Waiting { token, .. } => token,
            _ => {
                n.requests[c] += 1;
                (i << 4) | (n.requests[c] & 15)
            }
        };
        // scan.lua: entries whose lease ran out go.
        let dead = |n: &RwState, e: &RwEntry| n.clients[usize::from(e.client)] == RwPhase::Dead;
        if n.entries.iter().any(|e| e.expires <= now && dead(n, e)) {
            n.dead_dropped = true;
        }
        n.entries.retain(|e| e.expires > now);
        let writer = n
            .entries
            .iter()
            .find(|e| e.role == Role::Writer)
            .map(|e| e.client);
        let readers = n.entries.iter().filter(|e| e.role == Role::Reader).count();
        let arrival = n
            .entries
            .iter()
            .find(|e| e.token == token && matches!(e.role, Role::ReaderWaits | Role::WriterWaits))
            .map_or(n.arrivals + 1, |e| e.arrival);
        let before = |role: Role| {
            n.entries
                .iter()
                .filter(|e| e.role == role && e.token != token && e.arrival < arrival)
                .count()
        };
        let (writers_before, readers_before) =
            (before(Role::WriterWaits), before(Role::ReaderWaits));
        let wait = if writes {
            (writer.is_some() || (readers > 0 && !self.mutants.write_past_readers))
                || (readers_before > 0 && !self.mutants.writers_first)
        } else {
            (writer.is_some_and(|w| w != i) && !self.mutants.read_past_writer)
                || (writer.is_none() && writers_before > 0 && !self.mutants.readers_first)
        };
        if wait {
            n.waited |= writer.is_some_and(|w| w != i) || (writes && readers > 0);
            n.held_back |= !writes && writer.is_none();
            if self.waits[c] {
                let role = if writes {
                    Role::WriterWaits
                } else {
                    Role::ReaderWaits
                };
                match n.entries.iter_mut().find(|e| e.token == token) {
                    Some(e) => e.expires = now + RW_PLACE,
                    None => {
                        n.arrivals = arrival;
                        n.entries.push(RwEntry {
                            token,
                            client: i,
                            role,
                            expires: now + RW_PLACE,
                            arrival,
                            fence: 0,
                        });
                    }
                }
                n.entries.sort_unstable();
                n.clients[c] = RwPhase::Waiting {
                    token,
                    wake: now + 1,
                };
            } else {
                n.clients[c] = RwPhase::Idle;
            }
            return;
        }
        // Granted: ahead of a waiter of the other kind that came before it?
        let other = if writes {
            readers_before
        } else {
            writers_before
        };
        n.overtaken |= other > 0 && (writes || writer.is_none());
        n.entries.retain(|e| e.token != token);
        n.grants += 1;
        let (role, fence) = if writes {
            let fence = (n.fence + 1).max(n.clock());
            n.fence = fence;
            if fence <= n.max_fence {
                n.fence_regressed = true;
            }
            n.max_fence = n.max_fence.max(fence);
            (Role::Writer, fence)
        } else {
            (Role::Reader, 0)
        };
        n.entries.push(RwEntry {
            token,
            client: i,
            role,
            expires: now + RW_LEASE,
            arrival: 0,
            fence,
        });
        n.entries.sort_unstable();
        let answered = if writes { fence } else { n.fence };
        n.clients[c] = RwPhase::Holding {
            token,
            fence: answered,
            deadline: now + RW_LEASE,
        };
    }
}

impl Model for RwModel {
    type State = RwState;
    type Action = RwAction;

    fn init_states(&self) -> Vec<RwState> {
        let clients = self.writes.len();
        vec![RwState {
            now: 0,
            entries: Vec::new(),
            fence: 0,
            arrivals: 0,
            clients: vec![RwPhase::Idle; clients],
            requests: vec![0; clients],
            grants: 0,
            crashes: 0,
            max_fence: 0,
            fence_regressed: false,
            overtaken: false,
            waited: false,
            held_back: false,
            dead_dropped: false,
        }]
    }

    fn actions(&self, s: &RwState, actions: &mut Vec<RwAction>) {
        let crash = s.crashes < self.crashes;
        actions.extend(entries::actions(&s.clients, crash, s.now, self.max_time));
    }

    fn next_state(&self, s: &RwState, action: RwAction) -> Option<RwState> {
        let mut n = s.clone();
        let now = s.now;
        match action {
            RwAction::Acquire(i) => self.acquire(&mut n, i),
            RwAction::Renew(i) => {
                let c = usize::from(i);
                entries::renew(&mut n.entries, &mut n.clients[c], now, RW_LEASE)?;
            }
            RwAction::Release(i) => {
                let c = usize::from(i);
                entries::release(&mut n.entries, &mut n.clients[c])?;
            }
            RwAction::Crash(i) => {
                n.clients[usize::from(i)] = RwPhase::Dead;
                n.crashes += 1;
            }
            RwAction::Tick => n.now += 1,
        }
        Some(n)
    }

    fn within_boundary(&self, s: &RwState) -> bool {
        s.grants <= self.max_grants && s.requests.iter().all(|r| *r <= self.max_grants)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "rwlock: a writer holds alone on the server",
                |_, s: &RwState| {
                    let (readers, writers) = s.holders();
                    writers == 0 || (writers == 1 && readers == 0)
                },
            ),
            Property::always(
                "rwlock: a writer within its deadline is the only client that believes it holds",
                |m: &RwModel, s: &RwState| {
                    let (readers, writers) = s.believed(&m.writes);
                    writers == 0 || (writers == 1 && readers == 0)
                },
            ),
            Property::always(
                "rwlock: write fences strictly increase",
                |_, s: &RwState| !s.fence_regressed,
            ),
            Property::always(
                "rwlock: no request is granted ahead of one of the other kind that waits longer",
                |_, s: &RwState| !s.overtaken,
            ),
            Property::sometimes("rwlock: two readers hold at once", |_, s: &RwState| {
                s.holders().0 >= 2
            }),
            Property::sometimes(
                "rwlock: a request waits for holders of the other kind",
                |_, s: &RwState| s.waited,
            ),
            Property::sometimes(
                "rwlock: a reader waits for a writer that came before it, the lock not written",
                |_, s: &RwState| s.held_back,
            ),
            Property::sometimes(
                "rwlock: a dead holder's entry is dropped",
                |_, s: &RwState| s.dead_dropped,
            ),
        ]
    }
}
