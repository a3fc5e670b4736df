//! The history as the report draws it: per lock, each grant as a bar (from the grant to the
//! start of its release, the holder's death or the history's end), each request's wait, the
//! losses told and the writes the fenced store refused; the faults as spans; each violation as
//! the span of the history lines that show it; and every request's latency.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::chaos::check::Violation;
use crate::chaos::history::{Entry, Phase, What};

/// How a grant's bar ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// Its holder started the release.
    Released,
    /// Its holder was killed (`kill-worker`).
    Killed,
    /// Its holder was granted again without a release line (it cannot happen in a whole
    /// history; a cut one may show it).
    Regranted,
    /// The history ends before the release.
    Open,
}

impl End {
    pub(super) fn name(self) -> &'static str {
        match self {
            End::Released => "released",
            End::Killed => "killed",
            End::Regranted => "granted again",
            End::Open => "still held at the end",
        }
    }
}

/// One grant, drawn as a bar.
#[derive(Debug, Clone)]
pub(super) struct Bar {
    pub(super) worker: u32,
    pub(super) fence: u64,
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    pub(super) end: End,
    /// When its holder was told by `lost()`.
    pub(super) lost_ns: Option<u64>,
    /// History lines (1-based) of the grant and of the bar's end.
    pub(super) line: usize,
    pub(super) end_line: usize,
}

/// One request, from its invocation to its answer.
#[derive(Debug, Clone)]
pub(super) struct Wait {
    pub(super) worker: u32,
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    /// `granted`, `busy`, `timed_out` or `error`.
    pub(super) outcome: String,
    pub(super) line: usize,
}

/// An instant in a worker's lane: a loss told, a refused write.
#[derive(Debug, Clone)]
pub(super) struct Mark {
    pub(super) worker: u32,
    pub(super) at_ns: u64,
    pub(super) text: String,
    pub(super) line: usize,
}

/// Everything drawn for one lock.
#[derive(Debug, Clone, Default)]
pub(super) struct LockView {
    pub(super) name: String,
    /// The lanes, one per worker that asked for the lock.
    pub(super) workers: Vec<u32>,
    pub(super) bars: Vec<Bar>,
    pub(super) waits: Vec<Wait>,
    pub(super) losses: Vec<Mark>,
    pub(super) refused: Vec<Mark>,
}

/// A fault, from its start to its end (the history's end if it has none).
#[derive(Debug, Clone)]
pub(super) struct FaultSpan {
    pub(super) kind: String,
    pub(super) target: String,
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    pub(super) line: usize,
}

/// A violation's place on the timeline: the span of its history lines, on its lock (or on
/// every lock, when its lines name none).
#[derive(Debug, Clone)]
pub(super) struct ViolationSpan {
    pub(super) index: usize,
    pub(super) lock: Option<String>,
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
}

/// A request's latency, for the plot.
#[derive(Debug, Clone)]
pub(super) struct Point {
    pub(super) at_ns: u64,
    pub(super) latency_ns: u64,
    pub(super) lock: String,
    pub(super) outcome: String,
    pub(super) line: usize,
}

/// The whole report's data.
#[derive(Debug, Clone, Default)]
pub(super) struct Model {
    /// The history's first and last instants.
    pub(super) t0: u64,
    pub(super) t1: u64,
    pub(super) locks: Vec<LockView>,
    pub(super) faults: Vec<FaultSpan>,
    pub(super) violations: Vec<ViolationSpan>,
    pub(super) points: Vec<Point>,
}

impl Model {
    /// The lock named `name`, added (in order of appearance) if new.
    fn lock(&mut self, name: &str) -> &mut LockView {
        let at = match self.locks.iter().position(|l| l.name == name) {
            Some(at) => at,
            None => {
                self.locks.push(LockView {
                    name: name.to_owned(),
                    ..LockView::default()
                });
                self.locks.len() - 1
            }
        };
        &mut self.locks[at]
    }
}

/// A request in progress: when, its line.
type Pending = (u64, usize);

/// The walk through the history.
struct Walk {
    model: Model,
    /// Each worker's request in progress.
    pending: HashMap<u32, Pending>,
    /// Each worker's open bar: its lock and its index in that lock's bars.
    open: HashMap<u32, (String, usize)>,
    /// Faults started and not yet ended, per kind.
    started: BTreeMap<String, VecDeque<FaultSpan>>,
}

/// Builds the report's data from a history and the checker's violations.
pub(super) fn build(entries: &[Entry], violations: &[Violation]) -> Model {
    let t0 = entries.iter().map(|e| e.mono_ns).min().unwrap_or(0);
    let t1 = entries.iter().map(|e| e.mono_ns).max().unwrap_or(t0);
    let mut walk = Walk {
        model: Model {
            t0,
            t1,
            ..Model::default()
        },
        pending: HashMap::new(),
        open: HashMap::new(),
        started: BTreeMap::new(),
    };
    for entry in entries {
        if let What::Run { locks, .. } = &entry.what {
            for lock in locks {
                walk.model.lock(lock);
            }
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        walk.entry(i + 1, entry);
    }
    let Walk {
        mut model,
        open,
        started,
        ..
    } = walk;
    for (lock, at) in open.into_values() {
        if let Some(bar) = model.lock(&lock).bars.get_mut(at) {
            bar.end_ns = t1;
            bar.end = End::Open;
        }
    }
    model.faults.extend(started.into_values().flatten());
    model.faults.sort_by_key(|f| f.start_ns);
    for lock in &mut model.locks {
        let workers: BTreeSet<u32> = lock.waits.iter().map(|w| w.worker).collect();
        lock.workers = workers.into_iter().collect();
    }
    model.violations = violation_spans(entries, violations);
    model
}

impl Walk {
    /// Takes history line `line`.
    fn entry(&mut self, line: usize, entry: &Entry) {
        let lock = entry.lock.as_deref().unwrap_or_default();
        let at = entry.mono_ns;
        match (&entry.what, entry.worker) {
            (What::Acquire, Some(w)) => {
                self.pending.insert(w, (at, line));
            }
            (What::Granted { fence }, Some(w)) => {
                self.answered(w, lock, "granted", at);
                self.close(w, End::Regranted, at, line);
                let bar = Bar {
                    worker: w,
                    fence: *fence,
                    start_ns: at,
                    end_ns: at,
                    end: End::Open,
                    lost_ns: None,
                    line,
                    end_line: line,
                };
                let view = self.model.lock(lock);
                view.bars.push(bar);
                let index = view.bars.len() - 1;
                self.open.insert(w, (lock.to_owned(), index));
            }
            (What::NotGranted { outcome, .. }, Some(w)) => self.answered(w, lock, outcome, at),
            (What::Write { accepted, .. }, Some(w)) if *accepted == Some(false) => {
                self.mark(w, lock, at, line, false, entry);
            }
            (What::Lost { .. }, Some(w)) => {
                if let Some((l, i)) = self.open.get(&w).cloned()
                    && let Some(bar) = self.model.lock(&l).bars.get_mut(i)
                {
                    bar.lost_ns.get_or_insert(at);
                }
                self.mark(w, lock, at, line, true, entry);
            }
            (What::Release { .. }, Some(w)) => self.close(w, End::Released, at, line),
            (
                What::Fault {
                    kind,
                    target,
                    phase,
                },
                _,
            ) => self.fault(kind, target, *phase, at, line),
            _ => {}
        }
    }

    /// Worker `w`'s request for `lock` was answered with `outcome` at `at`.
    fn answered(&mut self, w: u32, lock: &str, outcome: &str, at: u64) {
        let Some((start_ns, line)) = self.pending.remove(&w) else {
            return;
        };
        let view = self.model.lock(lock);
        view.waits.push(Wait {
            worker: w,
            start_ns,
            end_ns: at,
            outcome: outcome.to_owned(),
            line,
        });
        self.model.points.push(Point {
            at_ns: at,
            latency_ns: at.saturating_sub(start_ns),
            lock: lock.to_owned(),
            outcome: outcome.to_owned(),
            line,
        });
    }

    /// Worker `w`'s open bar ends at `at` (line `line`).
    fn close(&mut self, w: u32, end: End, at: u64, line: usize) {
        if let Some((lock, i)) = self.open.remove(&w)
            && let Some(bar) = self.model.lock(&lock).bars.get_mut(i)
        {
            bar.end_ns = at;
            bar.end = end;
            bar.end_line = line;
        }
    }

    /// A loss told (`lost`) or a refused write, in worker `w`'s lane of `lock`.
    fn mark(&mut self, w: u32, lock: &str, at: u64, line: usize, lost: bool, entry: &Entry) {
        let text = match &entry.what {
            What::Lost { fence, reason, .. } => format!("fence {fence} lost: {reason}"),
            What::Write {
                fence, store_fence, ..
            } => match store_fence {
                Some(store) => format!("write with fence {fence} refused (store at {store})"),
                None => format!("write with fence {fence} refused"),
            },
            _ => String::new(),
        };
        let mark = Mark {
            worker: w,
            at_ns: at,
            text,
            line,
        };
        let view = self.model.lock(lock);
        if lost {
            view.losses.push(mark);
        } else {
            view.refused.push(mark);
        }
    }

    /// A fault starts or ends; a killed worker's bar ends when it is killed.
    fn fault(&mut self, kind: &str, target: &str, phase: Phase, at: u64, line: usize) {
        match phase {
            Phase::Start => {
                if kind == "kill-worker"
                    && let Some(w) = target
                        .strip_prefix("worker ")
                        .and_then(|n| n.parse::<u32>().ok())
                {
                    self.pending.remove(&w);
                    self.close(w, End::Killed, at, line);
                }
                let span = FaultSpan {
                    kind: kind.to_owned(),
                    target: target.to_owned(),
                    start_ns: at,
                    end_ns: self.model.t1,
                    line,
                };
                self.started
                    .entry(kind.to_owned())
                    .or_default()
                    .push_back(span);
            }
            Phase::End => {
                let started = self.started.get_mut(kind).and_then(VecDeque::pop_front);
                if let Some(mut span) = started {
                    span.end_ns = at;
                    if span.target != target {
                        span.target = format!("{} → {target}", span.target);
                    }
                    self.model.faults.push(span);
                }
            }
        }
    }
}

/// Each violation's span on the lock its lines name. With two grants or more among its lines
/// (an overlap, a fence or fair order), from the latest of them to the first of its other lines
/// after it: where the sections overlap, or the later grant's instant; otherwise the span of
/// its lines.
fn violation_spans(entries: &[Entry], violations: &[Violation]) -> Vec<ViolationSpan> {
    violations
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let lines: Vec<&Entry> = v
                .lines
                .iter()
                .filter_map(|l| l.checked_sub(1).and_then(|i| entries.get(i)))
                .collect();
            let grants: Vec<u64> = lines
                .iter()
                .filter(|e| matches!(e.what, What::Granted { .. }))
                .map(|e| e.mono_ns)
                .collect();
            let (start_ns, end_ns) = match grants.iter().max() {
                Some(&latest) if grants.len() > 1 => {
                    let end = lines
                        .iter()
                        .filter(|e| !matches!(e.what, What::Granted { .. }))
                        .map(|e| e.mono_ns)
                        .filter(|t| *t >= latest)
                        .min()
                        .unwrap_or(latest);
                    (latest, end)
                }
                _ => {
                    let start = lines.iter().map(|e| e.mono_ns).min().unwrap_or(0);
                    (
                        start,
                        lines.iter().map(|e| e.mono_ns).max().unwrap_or(start),
                    )
                }
            };
            ViolationSpan {
                index,
                lock: lines.iter().find_map(|e| e.lock.clone()),
                start_ns,
                end_ns,
            }
        })
        .collect()
}
