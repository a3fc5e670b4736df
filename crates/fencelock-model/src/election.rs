//! The election (`election/*.lua`) on one server: the election's lock (a plain lock whose fence
//! is the leader's term), the fence counter, and the leader's record (`:leader`: the term, when
//! it began, the leader's value), whose expiry is the lease plus a margin
//! ([`RECORD_MARGIN`]).
//!
//! Clients campaign (`campaign.lua`: the lock taken and the record written in one step), renew
//! (`extend.lua`: the lease and the record's expiry), proclaim (`announce.lua`: the record
//! written again, only by the lock's holder), resign (`step_down.lua`: the lock released and the
//! record of its term deleted), pause (a lease that lapses, a proclaim sent after it) and crash.
//! `leader()` (`leader.lua`) is read in every state: the properties are about its answer.

use std::hash::Hash;

use stateright::{Model, Property};

use crate::{CLOCK_BASE, STEP_US};

/// A lease, in time steps.
pub const TERM_LEASE: u8 = 2;
/// How long the record outlives the lease it was last kept with, in time steps (a second).
pub const RECORD_MARGIN: u8 = 1;

/// Breaks of the election, each a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ElectionMutants {
    /// `leader()` answers the record alone, without the lock's term.
    pub record_alone: bool,
    /// A renewal re-arms the lease and not the record's expiry.
    pub record_not_kept: bool,
    /// A proclaim writes the record whoever holds the lock.
    pub proclaim_unchecked: bool,
    /// A campaign's term is the server clock alone (`campaign.lua` works it out itself).
    pub term_clock_only: bool,
}

/// The election model's bounds.
#[derive(Clone, Debug)]
pub struct ElectionModel {
    /// How many candidates.
    pub clients: usize,
    /// The last time step.
    pub max_time: u8,
    /// How many terms a run may grant.
    pub max_terms: u8,
    /// How many clients may crash.
    pub crashes: u8,
    /// The breaks to check for.
    pub mutants: ElectionMutants,
}

impl ElectionModel {
    /// The bound `cargo test` checks: 3 candidates, 5 time steps, 4 terms, a crash.
    pub fn small() -> Self {
        Self {
            clients: 3,
            max_time: 5,
            max_terms: 4,
            crashes: 1,
            mutants: ElectionMutants::default(),
        }
    }

    /// The same model with one break.
    pub fn with(mut self, mutants: ElectionMutants) -> Self {
        self.mutants = mutants;
        self
    }
}

/// The election's lock: `<token>:<term>` with the lease as TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Term {
    /// The leader.
    pub client: u8,
    /// The term (the lock's fence).
    pub term: u32,
    /// The step at which the lease ends.
    pub expires: u8,
}

/// The leader's record: `term`, `since`, `value` (the leader), with its expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    /// The term it names.
    pub term: u32,
    /// The leader it names.
    pub client: u8,
    /// The step at which the key expires.
    pub expires: u8,
}

/// What a candidate believes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Candidate {
    /// Not leading.
    Idle,
    /// Leads `term` until `deadline` (a paused leader may act after it).
    Leading { term: u32, deadline: u8 },
    /// Crashed.
    Dead,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionState {
    /// Real time, in steps.
    pub now: u8,
    /// The election's lock.
    pub lock: Option<Term>,
    /// The fence counter.
    pub fence: u32,
    /// The leader's record.
    pub record: Option<Record>,
    /// The candidates.
    pub clients: Vec<Candidate>,
    /// Terms granted.
    pub terms: u8,
    /// Budgets used.
    pub crashes: u8,
    /// Ghost: the terms whose leaders resigned.
    pub resigned: Vec<u32>,
    /// Ghost: a term was not above every earlier one.
    pub term_regressed: bool,
}

/// `leader()`'s answer: the term and the leader, or nobody.
pub type Answer = Option<(u32, u8)>;

impl ElectionState {
    /// The lock's holder at `now`.
    pub fn holder(&self) -> Option<Term> {
        self.lock.filter(|t| t.expires > self.now)
    }

    fn record_now(&self) -> Option<Record> {
        self.record.filter(|r| r.expires > self.now)
    }
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElectionAction {
    /// Candidate `i` campaigns once (`campaign.lua`).
    Campaign(u8),
    /// Candidate `i` renews (`extend.lua`).
    Renew(u8),
    /// Candidate `i` proclaims its value again (`announce.lua`).
    Proclaim(u8),
    /// Candidate `i` resigns (`step_down.lua`).
    Resign(u8),
    /// Candidate `i` crashes.
    Crash(u8),
    /// One time step passes.
    Tick,
}

impl ElectionModel {
    /// `leader.lua`: the record, if the lock holds the record's term.
    pub fn leader(&self, s: &ElectionState) -> Answer {
        let record = s.record_now()?;
        if !self.mutants.record_alone && s.holder().is_none_or(|t| t.term != record.term) {
            return None;
        }
        Some((record.term, record.client))
    }

    fn keep_record(&self, n: &mut ElectionState, lease_ends: u8) {
        let now = n.now;
        if let Some(r) = n.record.as_mut().filter(|r| r.expires > now) {
            r.expires = lease_ends + RECORD_MARGIN;
        }
    }
}

impl Model for ElectionModel {
    type State = ElectionState;
    type Action = ElectionAction;

    fn init_states(&self) -> Vec<ElectionState> {
        vec![ElectionState {
            now: 0,
            lock: None,
            fence: 0,
            record: None,
            clients: vec![Candidate::Idle; self.clients],
            terms: 0,
            crashes: 0,
            resigned: Vec::new(),
            term_regressed: false,
        }]
    }

    fn actions(&self, s: &ElectionState, actions: &mut Vec<ElectionAction>) {
        for (i, c) in s.clients.iter().enumerate() {
            let i = u8::try_from(i).unwrap_or(u8::MAX);
            match c {
                Candidate::Idle => actions.push(ElectionAction::Campaign(i)),
                Candidate::Leading { .. } => {
                    actions.push(ElectionAction::Renew(i));
                    actions.push(ElectionAction::Proclaim(i));
                    actions.push(ElectionAction::Resign(i));
                }
                Candidate::Dead => continue,
            }
            if s.crashes < self.crashes {
                actions.push(ElectionAction::Crash(i));
            }
        }
        if s.now < self.max_time {
            actions.push(ElectionAction::Tick);
        }
    }

    fn next_state(&self, s: &ElectionState, action: ElectionAction) -> Option<ElectionState> {
        let mut n = s.clone();
        let now = s.now;
        match action {
            ElectionAction::Campaign(i) => {
                if s.holder().is_some() {
                    // Held by another: {0, pttl}, nothing written.
                    return None;
                }
                let clock = CLOCK_BASE + u32::from(now) * STEP_US;
                let term = if self.mutants.term_clock_only {
                    clock
                } else {
                    (n.fence + 1).max(clock)
                };
                if term <= n.fence {
                    n.term_regressed = true;
                }
                n.fence = term;
                n.terms += 1;
                let expires = now + TERM_LEASE;
                n.lock = Some(Term {
                    client: i,
                    term,
                    expires,
                });
                n.record = Some(Record {
                    term,
                    client: i,
                    expires: expires + RECORD_MARGIN,
                });
                n.clients[usize::from(i)] = Candidate::Leading {
                    term,
                    deadline: expires,
                };
            }
            ElectionAction::Renew(i) => {
                let Candidate::Leading { term, .. } = s.clients[usize::from(i)] else {
                    return None;
                };
                match s.holder() {
                    Some(t) if t.client == i && t.term == term => {
                        let expires = now + TERM_LEASE;
                        n.lock = Some(Term { expires, ..t });
                        if !self.mutants.record_not_kept {
                            self.keep_record(&mut n, expires);
                        }
                        n.clients[usize::from(i)] = Candidate::Leading {
                            term,
                            deadline: expires,
                        };
                    }
                    _ => n.clients[usize::from(i)] = Candidate::Idle,
                }
            }
            ElectionAction::Proclaim(i) => {
                let Candidate::Leading { term, .. } = s.clients[usize::from(i)] else {
                    return None;
                };
                let holder = s.holder();
                if !self.mutants.proclaim_unchecked && holder.is_none_or(|t| t.term != term) {
                    // Not the leader: nothing written.
                    n.clients[usize::from(i)] = Candidate::Idle;
                } else {
                    // The record written again; its expiry the lease's plus the margin.
                    let expires = holder.map_or(now, |t| t.expires) + RECORD_MARGIN;
                    n.record = Some(Record {
                        term,
                        client: i,
                        expires,
                    });
                }
            }
            ElectionAction::Resign(i) => {
                let Candidate::Leading { term, .. } = s.clients[usize::from(i)] else {
                    return None;
                };
                n.clients[usize::from(i)] = Candidate::Idle;
                if let Some(t) = s.holder()
                    && t.client == i
                    && t.term == term
                {
                    n.resigned.push(term);
                    if n.record_now().is_some_and(|r| r.term == term) {
                        n.record = None;
                    }
                    n.lock = None;
                }
            }
            ElectionAction::Crash(i) => {
                n.clients[usize::from(i)] = Candidate::Dead;
                n.crashes += 1;
            }
            ElectionAction::Tick => {
                n.now += 1;
                if n.lock.is_some_and(|t| t.expires <= n.now) {
                    n.lock = None;
                }
                if n.record.is_some_and(|r| r.expires <= n.now) {
                    n.record = None;
                }
            }
        }
        Some(n)
    }

    fn within_boundary(&self, s: &ElectionState) -> bool {
        s.terms <= self.max_terms
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "election: leader() never answers nobody while a term is held",
                |m: &ElectionModel, s: &ElectionState| {
                    s.holder().is_none() || m.leader(s).is_some()
                },
            ),
            Property::always(
                "election: leader() names only the term the lock holds, never one resigned",
                |m: &ElectionModel, s: &ElectionState| {
                    m.leader(s).is_none_or(|(term, client)| {
                        !s.resigned.contains(&term)
                            && s.holder()
                                .is_some_and(|t| t.term == term && t.client == client)
                    })
                },
            ),
            Property::always(
                "election: terms strictly increase",
                |_, s: &ElectionState| !s.term_regressed,
            ),
            Property::sometimes(
                "election: a second term after a lapse",
                |_, s: &ElectionState| s.terms >= 2 && s.resigned.is_empty(),
            ),
            Property::sometimes(
                "election: a term after a resignation",
                |_, s: &ElectionState| !s.resigned.is_empty() && s.holder().is_some(),
            ),
            Property::sometimes(
                "election: a deposed leader still believes it leads",
                |_, s: &ElectionState| {
                    s.clients.iter().enumerate().any(|(i, c)| {
                        matches!(c, Candidate::Leading { term, .. }
                            if s.holder().is_some_and(|t| t.term != *term || usize::from(t.client) != i))
                    })
                },
            ),
        ]
    }
}
