//! Run-once (`once/`): a run reads the record (and the count of failed runs) and does nothing
//! if the work was done or as many runs failed as allowed; otherwise it takes the lock (waiting
//! for it while another run holds it), begins
//! (raises the resource's fence floor to its fence and reads the record and the count again:
//! `once/begin.lua` under `fenced/check.lua`), does the work if the record is missing and the
//! count below the limit, and records it (`once/record.lua` under the fence check: the count
//! goes) or counts its failure (`once/fail.lua`, under the fence check too). A run releases the
//! lock when it finishes. Any client may act at any time after its grant, however long ago (a
//! pause); the lock is granted again once it was released or its lease ran out.
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
    /// How many runs may fail before no run begins any more (0: any number).
    pub attempts: u8,
}

impl OnceModel {
    /// The bound `cargo test` checks: 3 runs, 4 time steps, two failed runs allowed.
    pub fn small() -> Self {
        Self {
            clients: 3,
            max_time: 4,
            two_step_begin: false,
            attempts: 2,
        }
    }
}

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Run {
    /// Not started.
    Idle,
    /// Read no record and fewer failures than allowed; waits for the lock.
    Waiting,
    /// Holds the lock with this fence (it may have run out since).
    Granted(u32),
    /// Two-step begin only: read the record (missing), the floor not raised yet.
    Read(u32),
    /// Found no record: does the work and records.
    Working(u32),
    /// Finished: found the work done, was refused, gave up, failed, or recorded (`true` when it
    /// recorded after doing the work).
    Finished(bool),
}

/// The state: the lock, the resource, the runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OnceState {
    /// Real time, in steps.
    pub now: u8,
    /// The lock's holder (a run) and expiry (no holder once `now` reaches it).
    pub holder: Option<usize>,
    pub expires: u8,
    /// The last fence handed out.
    pub fence: u32,
    /// The resource's fence floor (the largest accepted).
    pub floor: u32,
    /// The record: the fence of the run that recorded.
    pub record: Option<u32>,
    /// The count of failed runs (gone with a record).
    pub failures: u8,
    /// The runs.
    pub runs: Vec<Run>,
    /// A run's record was refused (a newer run had raised the floor).
    pub refused_record: bool,
    /// Witness: a run gave up, as many runs having failed as allowed.
    pub gave_up: bool,
    /// Witness: a run recorded the work after a failed run was counted.
    pub retried: bool,
    /// Witness: a run that waited for the lock found, in its begin, the work done or as many
    /// failed runs as allowed.
    pub found_in_begin: bool,
}

impl OnceState {
    /// Whether `attempts` runs have failed (0: any number may).
    fn spent(&self, attempts: u8) -> bool {
        attempts > 0 && self.failures >= attempts
    }

    /// Run `i` takes the lock. (One server, no failover: the counter alone keeps fences
    /// growing.)
    fn grant(&mut self, i: usize) {
        self.fence += 1;
        self.holder = Some(i);
        self.expires = self.now + LEASE;
        self.runs[i] = Run::Granted(self.fence);
    }

    /// Run `i` releases the lock if it still holds it.
    fn release(&mut self, i: usize) {
        if self.holder == Some(i) && self.now < self.expires {
            self.holder = None;
            self.expires = self.now;
        }
    }
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnceAction {
    /// Run `i` reads the record and the count, and takes the lock if it is free (or waits).
    Acquire(usize),
    /// Run `i`, waiting, takes the lock now free.
    Take(usize),
    /// Run `i` begins (one step), or reads the record (the two-step begin's first step).
    Begin(usize),
    /// The two-step begin's second step: run `i` raises the floor.
    Floor(usize),
    /// Run `i` records the work done.
    Record(usize),
    /// Run `i`'s work failed: it counts the failure.
    Fail(usize),
    /// Time passes.
    Tick,
}

impl Model for OnceModel {
    type State = OnceState;
    type Action = OnceAction;

    fn init_states(&self) -> Vec<OnceState> {
        vec![OnceState {
            now: 0,
            holder: None,
            expires: 0,
            fence: 0,
            floor: 0,
            record: None,
            failures: 0,
            runs: vec![Run::Idle; self.clients],
            refused_record: false,
            gave_up: false,
            retried: false,
            found_in_begin: false,
        }]
    }

    fn actions(&self, s: &OnceState, actions: &mut Vec<OnceAction>) {
        for (i, run) in s.runs.iter().enumerate() {
            match run {
                Run::Idle => actions.push(OnceAction::Acquire(i)),
                Run::Waiting => actions.push(OnceAction::Take(i)),
                Run::Granted(_) => actions.push(OnceAction::Begin(i)),
                Run::Read(_) => actions.push(OnceAction::Floor(i)),
                Run::Working(_) => {
                    actions.push(OnceAction::Record(i));
                    actions.push(OnceAction::Fail(i));
                }
                Run::Finished(_) => {}
            }
        }
        if s.now < self.max_time {
            actions.push(OnceAction::Tick);
        }
    }

    fn next_state(&self, s: &OnceState, action: OnceAction) -> Option<OnceState> {
        let mut n = s.clone();
        match action {
            OnceAction::Acquire(i) => {
                if s.record.is_some() || s.spent(self.attempts) {
                    // Read before the lock: done, or given up; nothing taken.
                    n.gave_up |= s.record.is_none();
                    n.runs[i] = Run::Finished(false);
                    return Some(n);
                }
                if s.now < s.expires {
                    n.runs[i] = Run::Waiting;
                    return Some(n);
                }
                n.grant(i);
            }
            OnceAction::Take(i) => {
                if s.runs[i] != Run::Waiting || s.now < s.expires {
                    return None;
                }
                n.grant(i);
            }
            OnceAction::Begin(i) => {
                let Run::Granted(fence) = s.runs[i] else {
                    return None;
                };
                n.runs[i] = if fence < s.floor {
                    Run::Finished(false)
                } else if s.record.is_some() || s.spent(self.attempts) {
                    if !self.two_step_begin {
                        n.floor = fence;
                    }
                    n.gave_up |= s.record.is_none();
                    n.found_in_begin = true;
                    Run::Finished(false)
                } else if self.two_step_begin {
                    Run::Read(fence)
                } else {
                    n.floor = fence;
                    Run::Working(fence)
                };
                if n.runs[i] == Run::Finished(false) {
                    n.release(i);
                }
            }
            OnceAction::Floor(i) => {
                let Run::Read(fence) = s.runs[i] else {
                    return None;
                };
                n.runs[i] = if fence < s.floor {
                    n.release(i);
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
                    n.retried |= s.failures > 0;
                    n.failures = 0;
                    Run::Finished(true)
                };
                n.release(i);
            }
            OnceAction::Fail(i) => {
                let Run::Working(fence) = s.runs[i] else {
                    return None;
                };
                // Counted only under the fence check: a paused run's failure is not.
                if fence >= s.floor {
                    n.floor = fence;
                    n.failures = s.failures.saturating_add(1);
                }
                n.runs[i] = Run::Finished(false);
                n.release(i);
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
            Property::sometimes(
                "the work is done by a run after a failed one",
                |_, s: &OnceState| s.retried,
            ),
            Property::sometimes(
                "a run gives up after the failures allowed",
                |_, s: &OnceState| s.gave_up,
            ),
            Property::sometimes(
                "a run that waited finds the work done, or given up, in its begin",
                |_, s: &OnceState| s.found_in_begin,
            ),
        ]
    }
}
