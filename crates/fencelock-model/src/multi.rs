//! `multi_lock` (`multi.rs` of the library) over plain locks on one server: a request tries each
//! of its names without waiting, in name order (each try one step: the tries of a round are
//! separate scripts, which other requests' steps may come between); if one is held it gives
//! back everything it took, waits in the line of the first held name (a plain waiter: a
//! release passes that name to the first in line), and tries the others again holding just
//! that one; after a round that followed a wait it first pauses (the backoff).
//!
//! The scheduler is free except for the pause. The library's: a request that waited for a name
//! sorted *after* the one its round then failed on pauses past the other requests' next round
//! (two of its own rounds and the jitter), so it resumes only while no other request is in a
//! round, giving names back or in a short pause; the other pause (a request that waited for the
//! name sorted before) is the jitter alone, over which the scheduler is free
//! ([`Pause::Ordered`]). Under it, [`MultiModel::max_failed`] bounds the rounds that fail before
//! some request is granted (a bounded-step liveness property), no state is stuck, and every
//! request is granted; as under a pause that outlasts the other's round for every request
//! ([`Pause::OutlastsRound`]), which equal pauses do not give: two requests that pause alike
//! come back together. Without the pause, or with one that only outlasts the other's give-back
//! ([`Pause::OutlastsGiveBack`]), the checker finds two requests in name order handing names
//! back and forth: a release passes one name to a waiter while the releaser's next round takes
//! the other for a moment, so the two wait for different names. Waiting while holding what a
//! round took is a deadlock. Trying in the caller's order is bounded by the pause as well: the
//! checker cannot tell it from name order here.

use std::hash::Hash;

use stateright::{Model, Property};

/// Breaks of `multi_lock`, each a flag (`caller_order` is not caught: see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MultiMutants {
    /// Tries the names, and waits for the first held one, in the order the caller gave them.
    pub caller_order: bool,
    /// Waits for the held name keeping the names the round took.
    pub hold_while_waiting: bool,
    /// No pause after a round that followed a wait.
    pub no_pause: bool,
}

/// The model's bounds.
#[derive(Clone, Debug)]
pub struct MultiModel {
    /// Each request's names, in the caller's order (names are numbers; name order is theirs).
    pub requests: Vec<Vec<u8>>,
    /// How many times each client takes its names (and releases them).
    pub rounds: u8,
    /// The bound on rounds that fail before some request is granted.
    pub max_failed: u8,
    /// A round's tries run as one step (one batch script on one server) instead of one step
    /// each.
    pub atomic_rounds: bool,
    /// When a paused request may resume.
    pub pause: Pause,
    /// The breaks to check for.
    pub mutants: MultiMutants,
}

impl MultiModel {
    /// Two requests for the names 0 and 1 given in opposite orders, each taken twice.
    pub fn small() -> Self {
        Self {
            requests: vec![vec![0, 1], vec![1, 0]],
            rounds: 2,
            max_failed: 5,
            atomic_rounds: false,
            pause: Pause::Ordered,
            mutants: MultiMutants::default(),
        }
    }

    /// The same model with one break.
    pub fn with(mut self, mutants: MultiMutants) -> Self {
        self.mutants = mutants;
        self
    }

    /// Client `i` asks, or tries its next name (one script).
    fn try_next(&self, s: &MultiState, i: u8) -> Option<MultiState> {
        let mut n = s.clone();
        let c = usize::from(i);
        let order = self.order(c);
        let (at, kept, mut busy, waited) = match s.clients[c] {
            Multi::Idle => (0, None, None, false),
            Multi::Round {
                at,
                kept,
                busy,
                waited,
            } => (at, kept, busy, waited),
            _ => return None,
        };
        let name = order[usize::from(at)];
        if kept != Some(name) {
            match s.holders[usize::from(name)] {
                None => n.holders[usize::from(name)] = Some(i),
                Some(_) => {
                    busy = busy.or(Some(name));
                }
            }
        }
        let at = at + 1;
        n.clients[c] = if usize::from(at) < order.len() {
            Multi::Round {
                at,
                kept,
                busy,
                waited,
            }
        } else if let Some(busy) = busy {
            n.failed = n.failed.saturating_add(1);
            Multi::GiveBack {
                busy,
                kept: kept.filter(|_| waited),
            }
        } else {
            n.granted[c] += 1;
            n.failed = 0;
            Multi::Holding
        };

        Some(n)
    }

    fn names(&self) -> usize {
        self.requests
            .iter()
            .flatten()
            .map(|n| usize::from(*n) + 1)
            .max()
            .unwrap_or(0)
    }

    /// The order client `c` tries its names in.
    fn order(&self, c: usize) -> Vec<u8> {
        let mut names = self.requests[c].clone();
        if !self.mutants.caller_order {
            names.sort_unstable();
        }
        names
    }
}

/// When a paused request may resume (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pause {
    /// The library's: a request that waited for a name sorted after the one it failed on
    /// resumes only while no other is in a round, giving back or in a short pause; the other
    /// pause is free.
    Ordered,
    /// Every paused request resumes only while no other is in a round or giving back.
    OutlastsRound,
    /// Every paused request resumes only while no other is giving back.
    OutlastsGiveBack,
}

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Multi {
    /// About to ask (`left` acquisitions to go).
    Idle,
    /// Trying its names: the next one at `at` of its order; `kept` the name it waited for;
    /// `busy` the first held one; `waited` whether the round follows a wait.
    Round {
        at: u8,
        kept: Option<u8>,
        busy: Option<u8>,
        waited: bool,
    },
    /// The round failed: gives back what it took, then waits for `busy`; `kept` the name it
    /// waited for before the round.
    GiveBack { busy: u8, kept: Option<u8> },
    /// Pausing before it waits for `busy`; `long` when it waited for a name sorted after it.
    Paused { busy: u8, long: bool },
    /// In the line of `name` (holding nothing, or, for the mutant, what it took).
    Waiting { name: u8 },
    /// Holds every name.
    Holding,
    /// Took its names as often as it was to.
    Done,
}

/// The state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MultiState {
    /// Each name's holder.
    pub holders: Vec<Option<u8>>,
    /// Each name's line of waiters.
    pub lines: Vec<Vec<u8>>,
    /// Each request.
    pub clients: Vec<Multi>,
    /// Acquisitions made by each client.
    pub granted: Vec<u8>,
    /// Rounds that failed since the last grant of a whole request.
    pub failed: u8,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MultiAction {
    /// Client `i` asks, or tries its next name.
    Try(u8),
    /// Client `i` gives back what its failed round took.
    GiveBack(u8),
    /// Client `i`'s pause ends.
    Resume(u8),
    /// Client `i` releases every name.
    Release(u8),
}

impl MultiState {
    /// Releases `name`: passed to the first in its line, if any (who then starts a round).
    fn release(&mut self, name: u8) {
        let n = usize::from(name);
        self.holders[n] = None;
        if !self.lines[n].is_empty() {
            let w = self.lines[n].remove(0);
            self.holders[n] = Some(w);
            self.clients[usize::from(w)] = Multi::Round {
                at: 0,
                kept: Some(name),
                busy: None,
                waited: true,
            };
        }
    }

    /// Client `c` waits for `name` as a plain waiter: takes it if free, or gets in line.
    fn wait_for(&mut self, c: u8, name: u8) {
        let n = usize::from(name);
        if self.holders[n].is_none() {
            self.holders[n] = Some(c);
            self.clients[usize::from(c)] = Multi::Round {
                at: 0,
                kept: Some(name),
                busy: None,
                waited: true,
            };
        } else {
            self.lines[n].push(c);
            self.clients[usize::from(c)] = Multi::Waiting { name };
        }
    }
}

impl Model for MultiModel {
    type State = MultiState;
    type Action = MultiAction;

    fn init_states(&self) -> Vec<MultiState> {
        vec![MultiState {
            holders: vec![None; self.names()],
            lines: vec![Vec::new(); self.names()],
            clients: vec![Multi::Idle; self.requests.len()],
            granted: vec![0; self.requests.len()],
            failed: 0,
        }]
    }

    fn actions(&self, s: &MultiState, actions: &mut Vec<MultiAction>) {
        // Whether client `i`'s pause may end: the others it must outlast are done with.
        let may_resume = |i: usize, long: bool| {
            s.clients.iter().enumerate().all(|(j, c)| {
                j == i
                    || match c {
                        Multi::GiveBack { .. } => self.pause == Pause::Ordered && !long,
                        Multi::Round { .. } => match self.pause {
                            Pause::Ordered => !long,
                            Pause::OutlastsRound => false,
                            Pause::OutlastsGiveBack => true,
                        },
                        Multi::Paused { long: false, .. } => !long,
                        _ => true,
                    }
            })
        };
        for (i, c) in s.clients.iter().enumerate() {
            let a = u8::try_from(i).unwrap_or(u8::MAX);
            match c {
                Multi::Idle | Multi::Round { .. } => actions.push(MultiAction::Try(a)),
                Multi::GiveBack { .. } => actions.push(MultiAction::GiveBack(a)),
                Multi::Paused { long, .. } if may_resume(i, *long) => {
                    actions.push(MultiAction::Resume(a));
                }
                Multi::Holding => actions.push(MultiAction::Release(a)),
                Multi::Paused { .. } | Multi::Waiting { .. } | Multi::Done => {}
            }
        }
    }

    fn next_state(&self, s: &MultiState, action: MultiAction) -> Option<MultiState> {
        let mut n = s.clone();
        match action {
            MultiAction::Try(i) => {
                n = self.try_next(s, i)?;
                // One batch: the round's other tries in the same step.
                while self.atomic_rounds && matches!(n.clients[usize::from(i)], Multi::Round { .. })
                {
                    n = self.try_next(&n, i)?;
                }
            }
            MultiAction::GiveBack(i) => {
                let c = usize::from(i);
                let Multi::GiveBack { busy, kept } = s.clients[c] else {
                    return None;
                };
                if self.mutants.hold_while_waiting {
                    n.lines[usize::from(busy)].push(i);
                    n.clients[c] = Multi::Waiting { name: busy };
                    return Some(n);
                }
                for name in self.order(c) {
                    if s.holders[usize::from(name)] == Some(i) {
                        n.release(name);
                    }
                }
                if let Some(kept) = kept.filter(|_| !self.mutants.no_pause) {
                    n.clients[c] = Multi::Paused {
                        busy,
                        long: kept > busy,
                    };
                } else {
                    n.wait_for(i, busy);
                }
            }
            MultiAction::Resume(i) => {
                let Multi::Paused { busy, .. } = s.clients[usize::from(i)] else {
                    return None;
                };
                n.wait_for(i, busy);
            }
            MultiAction::Release(i) => {
                let c = usize::from(i);
                for name in self.order(c) {
                    n.release(name);
                }
                n.clients[c] = if n.granted[c] >= self.rounds {
                    Multi::Done
                } else {
                    Multi::Idle
                };
            }
        }
        Some(n)
    }

    fn within_boundary(&self, s: &MultiState) -> bool {
        s.failed <= self.max_failed.saturating_add(1)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "multi: some request can always move until all are done",
                |m: &MultiModel, s: &MultiState| {
                    let mut actions = Vec::new();
                    m.actions(s, &mut actions);
                    !actions.is_empty() || s.clients.iter().all(|c| *c == Multi::Done)
                },
            ),
            Property::always(
                "multi: a request is granted within the bound on failed rounds",
                |m: &MultiModel, s: &MultiState| s.failed <= m.max_failed,
            ),
            Property::eventually("multi: every request is granted", |_, s: &MultiState| {
                s.clients.iter().all(|c| *c == Multi::Done)
            }),
            Property::sometimes(
                "multi: a round fails and is given back",
                |_, s: &MultiState| s.failed > 0,
            ),
            Property::sometimes(
                "multi: a request waits in a name's line",
                |_, s: &MultiState| s.clients.iter().any(|c| matches!(c, Multi::Waiting { .. })),
            ),
            Property::sometimes("multi: a request pauses", |_, s: &MultiState| {
                s.clients.iter().any(|c| matches!(c, Multi::Paused { .. }))
            }),
        ]
    }
}
