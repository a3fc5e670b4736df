//! The history as the checks see it: each grant and its critical section, from the grant's
//! completion to the start of its release (or the worker's death), with what its holder was
//! told and what the fenced store refused it; and the counts of operations and faults.

use std::collections::{BTreeMap, HashMap};

use super::{Bounds, Verdict, Violation};
use crate::chaos::history::{Entry, Phase, What};

/// A grant and its critical section.
#[derive(Debug, Clone)]
pub(super) struct Section {
    pub(super) worker: u32,
    pub(super) lock: String,
    pub(super) fence: u64,
    pub(super) invoke_ns: u64,
    pub(super) granted_ns: u64,
    pub(super) end_ns: u64,
    /// The holder's `lost()` fired before the end of the section.
    pub(super) told: bool,
    /// The fenced store refused one of its writes.
    pub(super) refused: bool,
    pub(super) line: usize,
    pub(super) end_line: usize,
}

/// `sections` per lock, each list in the order of `sections`.
pub(super) fn by_lock(sections: &[Section]) -> BTreeMap<&str, Vec<&Section>> {
    let mut by_lock: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for s in sections {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    by_lock
}

/// Builds each worker's sections (sorted by grant), and counts operations and faults.
pub(super) fn sections(entries: &[Entry], bounds: &Bounds, verdict: &mut Verdict) -> Vec<Section> {
    let last = entries.iter().map(|e| e.mono_ns).max().unwrap_or(0);
    let mut walk = Walk {
        verdict,
        open: HashMap::new(),
        invoked: HashMap::new(),
        done: Vec::new(),
        last,
    };
    // In the order things happened: the file has them in the order they reached the run, and a
    // worker's lines can reach it after the nemesis's (a killed worker's release, read from its
    // pipe after the kill was recorded, must still end its section before the kill).
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| entries.get(i).map_or(0, |e| e.mono_ns));
    for i in order {
        if let Some(entry) = entries.get(i) {
            walk.entry(i + 1, entry);
        }
    }
    let Walk {
        verdict,
        open,
        invoked,
        mut done,
        ..
    } = walk;
    unanswered(entries, invoked, bounds, verdict);
    done.extend(open.into_values());
    done.sort_by_key(|s| s.granted_ns);
    done
}

/// The state of the walk through the history.
struct Walk<'a> {
    verdict: &'a mut Verdict,
    /// Each worker's section in progress.
    open: HashMap<u32, Section>,
    /// Each worker's request in progress: when it was made.
    invoked: HashMap<u32, u64>,
    done: Vec<Section>,
    /// The history's last instant (the end of a section that never ended).
    last: u64,
}

impl Walk<'_> {
    /// Takes history line `line`.
    fn entry(&mut self, line: usize, entry: &Entry) {
        match (&entry.what, entry.worker) {
            (What::Acquire, Some(w)) => {
                self.invoked.insert(w, entry.mono_ns);
            }
            (What::Granted { fence }, Some(w)) => self.granted(w, *fence, line, entry),
            (What::NotGranted { outcome, .. }, Some(w)) => {
                self.invoked.remove(&w);
                *self.verdict.not_granted.entry(outcome.clone()).or_default() += 1;
            }
            (What::Write { accepted, .. }, Some(w)) => match accepted {
                Some(true) => self.verdict.writes_accepted += 1,
                Some(false) => {
                    self.verdict.writes_refused += 1;
                    if let Some(section) = self.open.get_mut(&w) {
                        section.refused = true;
                    }
                }
                None => self.verdict.writes_unknown += 1,
            },
            (What::Counter { .. }, Some(_)) => self.verdict.counter_increments += 1,
            (What::Lost { .. }, Some(w)) => {
                self.verdict.lost_told += 1;
                if let Some(section) = self.open.get_mut(&w) {
                    section.told = true;
                }
            }
            (What::Release { .. }, Some(w)) => self.end(w, line, entry.mono_ns),
            (
                What::Fault {
                    kind,
                    target,
                    phase,
                },
                _,
            ) => self.fault(kind, target, *phase, line, entry.mono_ns),
            (What::CounterFinal { value }, _) => self.verdict.counter_final += value,
            _ => {}
        }
    }

    /// Worker `w` was granted `fence`: its section opens (and a section it left open ends).
    fn granted(&mut self, w: u32, fence: u64, line: usize, entry: &Entry) {
        self.verdict.grants += 1;
        let invoke_ns = self.invoked.remove(&w).unwrap_or(entry.mono_ns);
        if let Some(mut previous) = self.open.remove(&w) {
            previous.end_ns = entry.mono_ns;
            self.done.push(previous);
        }
        self.open.insert(
            w,
            Section {
                worker: w,
                lock: entry.lock.clone().unwrap_or_default(),
                fence,
                invoke_ns,
                granted_ns: entry.mono_ns,
                end_ns: self.last,
                told: false,
                refused: false,
                line,
                end_line: line,
            },
        );
    }

    /// Worker `w`'s section ends at `at_ns` (history line `line`).
    fn end(&mut self, w: u32, line: usize, at_ns: u64) {
        if let Some(mut section) = self.open.remove(&w) {
            section.end_ns = at_ns;
            section.end_line = line;
            self.done.push(section);
        }
    }

    /// A fault starts or ends: counted; a killed worker's section ends when it is killed.
    fn fault(&mut self, kind: &str, target: &str, phase: Phase, line: usize, at_ns: u64) {
        if phase == Phase::Start {
            *self.verdict.faults.entry(kind.to_owned()).or_default() += 1;
        }
        if kind == "kill-worker" && phase == Phase::Start {
            let killed = target
                .strip_prefix("worker ")
                .and_then(|n| n.parse::<u32>().ok());
            if let Some(w) = killed {
                self.invoked.remove(&w);
                self.end(w, line, at_ns);
            }
        }
    }
}

/// A request still unanswered long before the workers' last word: that worker waits forever.
fn unanswered(
    entries: &[Entry],
    invoked: HashMap<u32, u64>,
    bounds: &Bounds,
    verdict: &mut Verdict,
) {
    let last_word = entries
        .iter()
        .filter(|e| e.worker.is_some())
        .map(|e| e.mono_ns)
        .max()
        .unwrap_or(0);
    let bound_ns = bounds.resume_ms.saturating_mul(1_000_000);
    for (worker, invoked_ns) in invoked {
        if last_word.saturating_sub(invoked_ns) > bound_ns {
            let line = entries
                .iter()
                .position(|e| e.worker == Some(worker) && e.mono_ns == invoked_ns)
                .map_or(0, |i| i + 1);
            verdict.violations.push(Violation {
                kind: "waits forever",
                message: format!(
                    "worker {worker}'s request was never answered ({} ms before the run's end)",
                    (last_word - invoked_ns) / 1_000_000
                ),
                lines: vec![line],
            });
        }
    }
}
