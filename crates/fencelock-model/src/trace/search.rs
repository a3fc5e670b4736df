//! The search: the model states that explain a lock's trace so far, step by step. At each
//! return, every state places the operation returning (if it has not already), with any of the
//! operations still in flight placed before it, in any order; the states from which the
//! operation cannot be placed are dropped. The trace is explained while some state is left.

use std::collections::HashSet;

use super::ops::{Op, OpKind, Plan, Section, Step};
use super::{Loss, WriteOutcome};

/// A hold on the server: its critical section, and whether a server lost its data since it was
/// granted (it may be gone, then, with no release).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Hold {
    section: usize,
    lossable: bool,
}

/// A state of the model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct State {
    /// The holds on the server, sorted.
    holds: Vec<Hold>,
    /// The largest fence granted.
    counter: u64,
    /// The largest fence the store accepted.
    store: u64,
    /// How many entries of the store's log are placed.
    logged: usize,
    /// Operations placed before their return, sorted.
    early: Vec<usize>,
}

/// What the search knows at a point of the trace, the same for every state.
struct Now<'a> {
    plan: &'a Plan,
    permits: usize,
    /// Sections whose critical section has ended.
    ended: Vec<bool>,
    /// Operations called and not returned.
    pending: Vec<usize>,
    /// Within a Sentinel failover: grants may be lost, and the old master may still answer.
    failover: bool,
    /// The most states the search may keep.
    most: usize,
    /// The instant of the step being taken: an operation placed now took effect by then.
    at: u64,
}

/// Runs `plan`: the number of operations placed and the most states kept at once, or where
/// the trace stopped being explained (instant, line, why).
pub(super) fn run(
    plan: &Plan,
    permits: usize,
    most: usize,
) -> Result<(usize, usize), (u64, usize, String)> {
    let mut now = Now {
        plan,
        permits,
        most,
        ended: vec![false; plan.sections.len()],
        pending: Vec::new(),
        failover: false,
        at: 0,
    };
    let mut states: HashSet<State> = HashSet::from([State::default()]);
    let mut widest = 1;
    let mut placed = 0;
    for &(at, line, step) in &plan.steps {
        now.at = at;
        match step {
            Step::Call(op) => now.pending.push(op),
            Step::End(section) => now.ended[section] = true,
            Step::Loss(loss) => {
                // Operations in flight may have taken effect before the loss.
                states = now
                    .widen(&states, None, &mut widest)
                    .map_err(|why| (at, line, why))?
                    .into_iter()
                    .map(|mut state| {
                        for hold in &mut state.holds {
                            hold.lossable = true;
                        }
                        state
                    })
                    .collect();
                match loss {
                    Loss::Restart => {}
                    Loss::FailoverStart => now.failover = true,
                    Loss::FailoverEnd => now.failover = false,
                }
            }
            Step::Return(op) => {
                now.pending.retain(|p| *p != op);
                let before = states;
                states = now
                    .widen(&before, Some(op), &mut widest)
                    .map_err(|why| (at, line, why))?;
                if states.is_empty() {
                    let why = before
                        .iter()
                        .find_map(|s| now.place(s, op).err())
                        .unwrap_or_else(|| "no order of the calls in flight explains it".into());
                    return Err((at, line, why));
                }
                placed += 1;
            }
            Step::Stray(worker, fence) => {
                return Err((
                    at,
                    line,
                    format!("worker {worker} was never granted fence {fence}"),
                ));
            }
            Step::Finish => {
                let Some(log) = &plan.log else { continue };
                states = now
                    .widen(&states, None, &mut widest)
                    .map_err(|why| (at, line, why))?;
                if !states.iter().any(|s| s.logged == log.len()) {
                    let left = states.iter().map(|s| s.logged).max().unwrap_or(0);
                    let (fence, worker) = log.get(left).copied().unwrap_or_default();
                    return Err((
                        at,
                        line,
                        format!(
                            "the store's log holds fence {fence} of worker {worker} (entry {} of {}), which no write the workers saw placed there",
                            left + 1,
                            log.len()
                        ),
                    ));
                }
            }
        }
    }
    Ok((placed, widest))
}

impl Now<'_> {
    /// Every state reached from `states` by placing operations in flight, in any order, and
    /// then `op` (if given: only the states that placed it, with `op` settled). `widest` keeps
    /// the most states kept at once; a search that needs more than allowed is not explained.
    fn widen(
        &self,
        states: &HashSet<State>,
        op: Option<usize>,
        widest: &mut usize,
    ) -> Result<HashSet<State>, String> {
        let mut out = HashSet::new();
        let mut seen: HashSet<State> = states.clone();
        let mut stack: Vec<State> = states.iter().cloned().collect();
        while let Some(state) = stack.pop() {
            match op {
                Some(op) if state.early.binary_search(&op).is_ok() => {
                    let mut settled = state;
                    settled.early.retain(|e| *e != op);
                    out.insert(settled);
                    continue;
                }
                Some(op) => {
                    if let Ok(next) = self.place(&state, op) {
                        out.extend(next);
                    }
                }
                None => {
                    out.insert(state.clone());
                }
            }
            for &p in &self.pending {
                if state.early.binary_search(&p).is_ok() {
                    continue;
                }
                for mut next in self.place(&state, p).unwrap_or_default() {
                    if let Err(at) = next.early.binary_search(&p) {
                        next.early.insert(at, p);
                    }
                    if seen.insert(next.clone()) {
                        stack.push(next);
                    }
                }
            }
            if seen.len().max(out.len()) > self.most {
                let most = self.most;
                return Err(format!(
                    "the search needs more than {most} model states here: not explained"
                ));
            }
        }
        *widest = (*widest).max(seen.len()).max(out.len());
        Ok(out)
    }

    /// The states that placing `op` in `state` leads to, or why it cannot be placed.
    fn place(&self, state: &State, op: usize) -> Result<Vec<State>, String> {
        let Op {
            worker,
            kind,
            section,
            ..
        } = self.plan.ops[op];
        match kind {
            OpKind::Grant { fence } => self.grant(state, worker, fence, section),
            OpKind::Write { fence, outcome } => self.write(state, worker, fence, outcome),
            OpKind::Release { held } => self.release(state, worker, section, held),
        }
    }

    fn grant(
        &self,
        state: &State,
        worker: u32,
        fence: u64,
        section: usize,
    ) -> Result<Vec<State>, String> {
        if fence <= state.counter {
            return Err(format!(
                "worker {worker} was granted fence {fence}, not above fence {} granted before it",
                state.counter
            ));
        }
        let mut next = state.clone();
        next.holds.push(Hold {
            section,
            lossable: self.failover,
        });
        next.holds.sort_unstable();
        next.counter = fence;
        let taken = u64::from(self.plan.sections[section].permits);
        let held: u64 = state.holds.iter().map(|h| self.permits_of(h)).sum();
        let permits = u64::try_from(self.permits).unwrap_or(u64::MAX);
        if taken > permits {
            return Err(format!(
                "worker {worker} was granted fence {fence} for {taken} permits, more than the lock's {permits}"
            ));
        }
        let short = (held + taken).saturating_sub(permits);
        if short == 0 {
            return Ok(vec![next]);
        }
        // Full: holds with at least `short` permits must have ended first, any of those that
        // may have.
        let (free, kept): (Vec<&Hold>, Vec<&Hold>) =
            state.holds.iter().partition(|h| self.may_end(h));
        let mut gone = Vec::new();
        self.ends_freeing(&free, short, &mut Vec::new(), &mut gone);
        if gone.is_empty() {
            let holders: Vec<String> = kept.iter().map(|h| self.who(h.section)).collect();
            let told: Vec<String> = kept
                .iter()
                .filter_map(|h| {
                    let from = self.plan.sections[h.section].told?;
                    Some(format!("{}'s deadline at {from} ns", self.who(h.section)))
                })
                .collect();
            let told = if told.is_empty() {
                "not told it was lost".to_owned()
            } else {
                format!("told it was lost but not yet past {}", told.join(", "))
            };
            return Err(format!(
                "worker {worker} was granted fence {fence} while {} held it, {told}, not releasing, not killed, and no server lost its data since",
                holders.join(", ")
            ));
        }
        Ok(gone
            .into_iter()
            .map(|ended| {
                let mut one = next.clone();
                one.holds.retain(|h| !ended.contains(h));
                one
            })
            .collect())
    }

    fn permits_of(&self, hold: &Hold) -> u64 {
        u64::from(self.plan.sections[hold.section].permits)
    }

    /// Into `out`, each set of holds among `free` (taken in their order, after those in `set`)
    /// whose permits reach `short`, its last hold the one that reaches it.
    fn ends_freeing(
        &self,
        free: &[&Hold],
        short: u64,
        set: &mut Vec<Hold>,
        out: &mut Vec<Vec<Hold>>,
    ) {
        for (k, hold) in free.iter().enumerate() {
            set.push(**hold);
            let permits = self.permits_of(hold);
            if permits >= short {
                out.push(set.clone());
            } else {
                self.ends_freeing(&free[k + 1..], short - permits, set, out);
            }
            set.pop();
        }
    }

    fn write(
        &self,
        state: &State,
        worker: u32,
        fence: u64,
        outcome: WriteOutcome,
    ) -> Result<Vec<State>, String> {
        let accept = || -> Result<State, String> {
            if fence < state.store {
                return Err(format!(
                    "the store accepted worker {worker}'s fence {fence} while it held fence {}",
                    state.store
                ));
            }
            if let Some(log) = &self.plan.log {
                match log.get(state.logged) {
                    Some(entry) if *entry == (fence, worker) => {}
                    Some((f, w)) => {
                        return Err(format!(
                            "worker {worker}'s write with fence {fence} was accepted, but the store's log has fence {f} of worker {w} next"
                        ));
                    }
                    None => {
                        return Err(format!(
                            "worker {worker}'s write with fence {fence} was accepted, but the store's log has no entry left for it"
                        ));
                    }
                }
            }
            let mut next = state.clone();
            next.store = fence;
            next.logged += 1;
            Ok(next)
        };
        match outcome {
            WriteOutcome::Accepted => accept().map(|s| vec![s]),
            WriteOutcome::Refused { store } if fence < state.store && store == state.store => {
                Ok(vec![state.clone()])
            }
            WriteOutcome::Refused { store } => Err(format!(
                "the store refused worker {worker}'s fence {fence}, saying it held fence {store}, while it held fence {}",
                state.store
            )),
            WriteOutcome::Unknown => Ok(accept()
                .into_iter()
                .chain(std::iter::once(state.clone()))
                .collect()),
        }
    }

    fn release(
        &self,
        state: &State,
        worker: u32,
        section: usize,
        held: Option<bool>,
    ) -> Result<Vec<State>, String> {
        let mut next = state.clone();
        let present = next.holds.iter().any(|h| h.section == section);
        next.holds.retain(|h| h.section != section);
        if held == Some(true) && !present && !self.failover {
            let holders: Vec<String> = state.holds.iter().map(|h| self.who(h.section)).collect();
            let now = if holders.is_empty() {
                "nobody held it".to_owned()
            } else {
                format!("{} held it", holders.join(", "))
            };
            return Err(format!(
                "worker {worker}'s release of fence {} said the lock was still held, but {now}",
                self.plan.sections[section].fence
            ));
        }
        Ok(vec![next])
    }

    /// Whether `hold` may have ended with no release by now: its holder was told (and its
    /// lease's deadline, if it said it, has passed), or is done with it, or a server lost its
    /// data since the grant.
    fn may_end(&self, hold: &Hold) -> bool {
        let Section { told, .. } = self.plan.sections[hold.section];
        told.is_some_and(|from| from <= self.at) || self.ended[hold.section] || hold.lossable
    }

    fn who(&self, section: usize) -> String {
        let s = &self.plan.sections[section];
        format!("worker {} (fence {})", s.worker, s.fence)
    }
}
