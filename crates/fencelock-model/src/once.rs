//! Run-once (`once/`): a run takes the lock, begins (raises the resource's fence floor to its
//! fence and reads the record: `once/begin.lua` under `fenced/check.lua`), does the work if the
//! record is missing, and records (`once/record.lua` under the fence check). Any client may act
//! at any time after its grant, however long ago (a pause); the lock is granted again once its
//! lease ran out.
//!
//! The property: the work is counted done by at most one run (a run that found no record and
//! whose record was accepted). [`OnceModel::two_step_begin`] is the old begin, a read and then
//! the floor in two scripts: a paused run can record between a newer run's read and its floor,
//! and both count the work as theirs.

use stateright::{Model, Property};

/// A lease, in time steps.
const LEASE: u8 = 2;

/// The model's bounds and the mutant.
#[derive(Clone, Debug)]
pub struct OnceModel {
    /// How many clients (runs).
    pub clients: usize,
    /// The last time step.
    pub max_time: u8,
    /// Begin in two steps (read the record, then raise the floor) instead of one.
    pub two_step_begin: bool,
}

impl OnceModel {
    /// The bound `cargo test` checks: 2 runs, 4 time steps.
    pub fn small() -> Self {
        Self {
            clients: 2,
            max_time: 4,
            two_step_begin: false,
        }
    }
}

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Run {
    /// Not started.
    Idle,
    /// Holds the lock with this fence (it may have run out since).
    Granted(u32),
    /// Two-step begin only: read the record (missing), the floor not raised yet.
    Read(u32),
    /// Found no record: does the work and records.
    Working(u32),
    /// Finished: found the work done, was refused, or recorded (`true` when it recorded after
    /// doing the work).
    Finished(bool),
}

/// The state: the lock, the resource, the runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OnceState {
    /// Real time, in steps.
    pub now: u8,
    /// The lock's expiry (no holder once `now` reaches it).
    pub expires: u8,
    /// The last fence handed out.
    pub fence: u32,
    /// The resource's fence floor (the largest accepted).
    pub floor: u32,
    /// The record: the fence of the run that recorded.
    pub record: Option<u32>,
    /// The runs.
    pub runs: Vec<Run>,
    /// A run's record was refused (a newer run had raised the floor).
    pub refused_record: bool,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnceAction {
    /// Run `i` takes the lock.
    Acquire(usize),
    /// Run `i` begins (one step), or reads the record (the two-step begin's first step).
    Begin(usize),
    /// The two-step begin's second step: run `i` raises the floor.
    Floor(usize),
    /// Run `i` records the work done.
    Record(usize),
    /// Time passes.
    Tick,
}

impl Model for OnceModel {
    type State = OnceState;
    type Action = OnceAction;

    fn init_states(&self) -> Vec<OnceState> {
        vec![OnceState {
            now: 0,
            expires: 0,
            fence: 0,
            floor: 0,
            record: None,
            runs: vec![Run::Idle; self.clients],
            refused_record: false,
        }]
    }

    fn actions(&self, s: &OnceState, actions: &mut Vec<OnceAction>) {
        for (i, run) in s.runs.iter().enumerate() {
            actions.push(match run {
                Run::Idle => OnceAction::Acquire(i),
                Run::Granted(_) => OnceAction::Begin(i),
                Run::Read(_) => OnceAction::Floor(i),
                Run::Working(_) => OnceAction::Record(i),
                Run::Finished(_) => continue,
            });
        }
        if s.now < self.max_time {
            actions.push(OnceAction::Tick);
        }
    }

    fn next_state(&self, s: &OnceState, action: OnceAction) -> Option<OnceState> {
        let mut n = s.clone();
        match action {
            OnceAction::Acquire(i) => {
                if s.now < s.expires {
                    return None;
                }
                // One server, no failover: the counter alone keeps fences growing.
                n.fence += 1;
                n.expires = s.now + LEASE;
                n.runs[i] = Run::Granted(n.fence);
            }
            OnceAction::Begin(i) => {
                let Run::Granted(fence) = s.runs[i] else {
                    return None;
                };
                n.runs[i] = if fence < s.floor {
                    Run::Finished(false)
                } else if s.record.is_some() {
                    if !self.two_step_begin {
                        n.floor = fence;
                    }
                    Run::Finished(false)
                } else if self.two_step_begin {
                    Run::Read(fence)
                } else {
                    n.floor = fence;
                    Run::Working(fence)
                };
            }
            OnceAction::Floor(i) => {
                let Run::Read(fence) = s.runs[i] else {
                    return None;
                };
                n.runs[i] = if fence < s.floor {
                    Run::Finished(false)
                } else {
                    n.floor = fence;
                    Run::Working(fence)
                };
            }
            OnceAction::Record(i) => {
                let Run::Working(fence) = s.runs[i] else {
                    return None;
                };
                n.runs[i] = if fence < s.floor {
                    n.refused_record = true;
                    Run::Finished(false)
                } else {
                    n.floor = fence;
                    n.record = Some(fence);
                    Run::Finished(true)
                };
            }
            OnceAction::Tick => n.now += 1,
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "the work is counted done by at most one run",
                |_, s: &OnceState| {
                    s.runs.iter().filter(|r| **r == Run::Finished(true)).count() <= 1
                },
            ),
            Property::sometimes("a paused run's record is refused", |_, s: &OnceState| {
                s.refused_record
            }),
            Property::sometimes("the work is done once", |_, s: &OnceState| {
                s.runs.contains(&Run::Finished(true))
            }),
        ]
    }
}
