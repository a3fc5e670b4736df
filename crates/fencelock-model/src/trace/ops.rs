//! A trace turned into what the search places, lock by lock: the operations (a grant, a fenced
//! write, a release), each with its call and its return; the critical sections (a grant to the
//! start of its release, or to its worker's death) with whether their holder was told; and the
//! points in time at which the search takes them.

use std::collections::{BTreeMap, HashMap};

use super::{Event, Loss, Seen, Trace, What, WriteOutcome};

/// An operation of the model, as a worker saw it.
#[derive(Clone, Debug)]
pub(super) struct Op {
    pub(super) worker: u32,
    pub(super) kind: OpKind,
    /// The critical section it belongs to (a grant's own, a release's, a write's).
    pub(super) section: usize,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum OpKind {
    Grant { fence: u64 },
    Write { fence: u64, outcome: WriteOutcome },
    Release { held: Option<bool> },
}

/// A critical section: from a grant's return to the start of its release, or its worker's death.
#[derive(Clone, Debug)]
pub(super) struct Section {
    pub(super) worker: u32,
    pub(super) fence: u64,
    /// How many of the lock's permits its grant took.
    pub(super) permits: u32,
    /// From when its hold may have run out on its holder's word: `lost()` told its holder
    /// within it (from the lease's deadline, if the holder said it, or else from any instant),
    /// or a trace cut short ends inside it (its holder may yet be told). `None`: never.
    pub(super) told: Option<u64>,
}

/// What the search takes at a point in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Call(usize),
    /// A critical section ends: its hold may go without a release from now on.
    End(usize),
    Loss(Loss),
    Return(usize),
    /// A line about a fence its worker was never granted: (worker, fence).
    Stray(u32, u64),
    /// The end of the trace: every write the store's log holds must have been placed.
    Finish,
}

impl Step {
    /// At one instant: calls first, then ends, losses, returns (the most orders allowed).
    fn rank(self) -> u8 {
        match self {
            Step::Call(_) => 0,
            Step::End(_) => 1,
            Step::Loss(_) => 2,
            Step::Return(_) | Step::Stray(..) => 3,
            Step::Finish => 4,
        }
    }
}

/// One lock's part of a trace.
#[derive(Clone, Debug, Default)]
pub(super) struct Plan {
    pub(super) ops: Vec<Op>,
    pub(super) sections: Vec<Section>,
    /// (instant, history line, step), in the order the search takes them.
    pub(super) steps: Vec<(u64, usize, Step)>,
    /// The store's log, read at the end, if the trace has it.
    pub(super) log: Option<Vec<(u64, u32)>>,
    /// The line of the log (where a log nothing explains is reported).
    log_line: usize,
}

impl Plan {
    fn op(&mut self, op: Op, call: (u64, usize), ret: Option<(u64, usize)>) {
        let id = self.ops.len();
        self.ops.push(op);
        self.steps.push((call.0, call.1, Step::Call(id)));
        if let Some((at, line)) = ret {
            self.steps.push((at, line, Step::Return(id)));
        }
    }
}

/// Where a worker is.
#[derive(Default)]
struct Worker {
    /// Its request in flight: lock, instant, line.
    request: Option<(u64, usize)>,
    /// Its critical section: lock and section.
    section: Option<(String, usize)>,
    /// Its release in flight: instant, line.
    release: Option<(u64, usize)>,
    /// Its last event (the call of a write its death hid).
    last: (u64, usize),
}

/// Splits `trace` by lock.
pub(super) fn plans(trace: &Trace) -> BTreeMap<String, Plan> {
    let mut plans: BTreeMap<String, Plan> = BTreeMap::new();
    let mut workers: HashMap<u32, Worker> = HashMap::new();
    let mut losses = Vec::new();
    // A killed worker's write in flight shows only in the store's log: one pending write of
    // its section's fence, placed if the log needs it.
    let mut hidden: Vec<(String, usize, u64, usize)> = Vec::new();
    for event in &trace.events {
        let at = (event.at_ns, event.line);
        match &event.what {
            What::Fault(loss) => losses.push((event.at_ns, event.line, *loss)),
            What::StoreLog { lock, log } => {
                let plan = plans.entry(lock.clone()).or_default();
                plan.log = Some(log.clone());
                plan.log_line = event.line;
            }
            What::Worker { worker, lock, seen } => {
                let w = workers.entry(*worker).or_default();
                // A death is the worker's, whatever lock it held then.
                let lock = match (seen, &w.section) {
                    (Seen::Killed, Some((held, _))) => held.clone(),
                    _ => lock.clone(),
                };
                let plan = plans.entry(lock.clone()).or_default();
                seen_by(plan, *worker, w, &lock, seen, event, &mut hidden);
                w.last = at;
            }
        }
    }
    // In a trace cut short (a run killed), a section still open at its end may yet be told: its
    // worker says it was lost only when its hold ends, after the trace's last line.
    for w in workers.values().filter(|_| trace.cut) {
        if let Some((lock, section)) = &w.section
            && let Some(plan) = plans.get_mut(lock)
        {
            plan.sections[*section].told = Some(0);
        }
    }
    for (lock, section, at, line) in hidden {
        if let Some(plan) = plans.get_mut(&lock) {
            let worker = plan.sections[section].worker;
            let fence = plan.sections[section].fence;
            let needed = plan.log.as_ref().is_some_and(|log| {
                let logged = log.iter().filter(|e| **e == (fence, worker)).count();
                let seen = plan.ops.iter().filter(|op| {
                    op.worker == worker
                        && matches!(op.kind, OpKind::Write {
                            fence: f,
                            outcome: WriteOutcome::Accepted | WriteOutcome::Unknown,
                        } if f == fence)
                });
                logged > seen.count()
            });
            if needed {
                let kind = OpKind::Write {
                    fence,
                    outcome: WriteOutcome::Unknown,
                };
                plan.op(
                    Op {
                        worker,
                        kind,
                        section,
                    },
                    (at, line),
                    None,
                );
            }
        }
    }
    for plan in plans.values_mut() {
        for (at, line, loss) in &losses {
            plan.steps.push((*at, *line, Step::Loss(*loss)));
        }
        let last = plan.steps.iter().map(|s| s.0).max().unwrap_or(0);
        plan.steps.push((last, plan.log_line, Step::Finish));
        plan.steps.sort_by_key(|(at, _, step)| (*at, step.rank()));
    }
    plans
}

/// Takes what worker `worker` saw about `lock`.
fn seen_by(
    plan: &mut Plan,
    worker: u32,
    w: &mut Worker,
    lock: &str,
    seen: &Seen,
    event: &Event,
    hidden: &mut Vec<(String, usize, u64, usize)>,
) {
    let at = (event.at_ns, event.line);
    match seen {
        Seen::Request => w.request = Some(at),
        Seen::NotGranted => w.request = None,
        Seen::Granted { fence, permits } => {
            let call = w.request.take().unwrap_or(at);
            if let Some((_, open)) = w.section.take() {
                plan.steps.push((at.0, at.1, Step::End(open)));
            }
            let section = plan.sections.len();
            plan.sections.push(Section {
                worker,
                fence: *fence,
                permits: *permits,
                told: None,
            });
            let kind = OpKind::Grant { fence: *fence };
            plan.op(
                Op {
                    worker,
                    kind,
                    section,
                },
                call,
                Some(at),
            );
            w.section = Some((lock.to_owned(), section));
        }
        Seen::Write {
            fence,
            started_ns,
            outcome,
        } => {
            let Some(section) = section_of(plan, worker, *fence) else {
                return stray(plan, worker, *fence, at);
            };
            let kind = OpKind::Write {
                fence: *fence,
                outcome: *outcome,
            };
            let op = Op {
                worker,
                kind,
                section,
            };
            plan.op(op, ((*started_ns).min(at.0), at.1), Some(at));
        }
        Seen::Told { fence, deadline_ns } => match section_of(plan, worker, *fence) {
            Some(section) => plan.sections[section].told = Some(deadline_ns.unwrap_or(0)),
            None => stray(plan, worker, *fence, at),
        },
        Seen::Release { fence } => {
            let Some(section) = section_of(plan, worker, *fence) else {
                return stray(plan, worker, *fence, at);
            };
            plan.steps.push((at.0, at.1, Step::End(section)));
            w.section = None;
            w.release = Some(at);
        }
        Seen::Released { fence, held } => {
            let call = w.release.take().unwrap_or(at);
            let Some(section) = section_of(plan, worker, *fence) else {
                return stray(plan, worker, *fence, at);
            };
            let kind = OpKind::Release { held: *held };
            let op = Op {
                worker,
                kind,
                section,
            };
            plan.op(op, call, Some(at));
        }
        Seen::Killed => {
            w.request = None;
            w.release = None;
            if let Some((_, section)) = w.section.take() {
                plan.steps.push((at.0, at.1, Step::End(section)));
                hidden.push((lock.to_owned(), section, w.last.0, w.last.1));
            }
        }
    }
}

/// A line about a fence the worker was never granted: not explained.
fn stray(plan: &mut Plan, worker: u32, fence: u64, at: (u64, usize)) {
    plan.steps.push((at.0, at.1, Step::Stray(worker, fence)));
}

/// The worker's latest section of `fence`, if the trace showed its grant.
fn section_of(plan: &Plan, worker: u32, fence: u64) -> Option<usize> {
    plan.sections
        .iter()
        .rposition(|s| s.worker == worker && s.fence == fence)
}
