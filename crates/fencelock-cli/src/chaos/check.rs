//! The checker: reads a chaos history and says which guarantee broke, if any.
//!
//! - Fences: per lock, a grant that completed before another was requested has the smaller
//!   fence (grants whose calls overlap may come in either order); the fenced store accepted
//!   fences in non-decreasing order, refused only fences older than its own, and kept every
//!   write it acknowledged.
//! - Exclusion and honesty: two critical sections of one lock (from the grant's completion to
//!   the start of the release: inside the real hold) overlap only if a holder was told by its
//!   lock (`lost()` fired before the end of its section) — else an `exclusion` violation; one
//!   that not even the fenced store caught (no refused write) is a **silent overlap**, the
//!   worst failure. Overlaps just after the server lost its data (SIGKILL and a restart
//!   without persistence) or during a Sentinel failover (asynchronous replication), which no
//!   lock survives, are counted apart.
//! - Liveness: after a fault ends (and before the next starts), some worker is granted a lock
//!   within a bound.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::history::{Entry, Phase, What};

/// Faults after which the server has forgotten its data.
const DATA_LOSS_FAULTS: &[&str] = &["kill-server"];

/// One violation, with the history lines (1-based) that show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub kind: &'static str,
    pub message: String,
    pub lines: Vec<usize>,
}

/// What the checker found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub grants: usize,
    pub not_granted: BTreeMap<String, usize>,
    pub writes_accepted: usize,
    pub writes_refused: usize,
    pub writes_unknown: usize,
    pub lost_told: usize,
    pub faults: BTreeMap<String, usize>,
    /// Overlaps a holder was told of (lease ran out during a pause, and so on).
    pub honest_overlaps: usize,
    /// Overlaps right after the server lost its data.
    pub data_loss_overlaps: usize,
    /// Overlaps during a Sentinel failover (asynchronous replication lost a grant).
    pub failover_overlaps: usize,
    /// Unfenced counter: increments made, and the increments the final value shows.
    pub counter_increments: u64,
    pub counter_final: u64,
    /// The longest time from a fault's end to the next grant (ms), and after which fault.
    pub worst_resume_ms: Option<(u64, String)>,
    /// Per lock, the share of the time someone waited for it during which it was held
    /// (availability: 1 means never free while wanted).
    pub held_while_wanted: BTreeMap<String, f64>,
    pub duration_ms: u64,
    pub violations: Vec<Violation>,
}

/// A grant and its critical section.
#[derive(Debug, Clone)]
struct Section {
    worker: u32,
    lock: String,
    fence: u64,
    invoke_ns: u64,
    granted_ns: u64,
    end_ns: u64,
    /// The holder's `lost()` fired before the end of the section.
    told: bool,
    /// The fenced store refused one of its writes.
    refused: bool,
    line: usize,
    end_line: usize,
}

/// The longest a grant may take to come back after a fault ends.
pub struct Bounds {
    pub resume_ms: u64,
}

/// Checks `entries` (in the order of the history file).
pub fn check(entries: &[Entry], bounds: &Bounds) -> Verdict {
    let mut verdict = Verdict::default();
    let first = entries.iter().map(|e| e.mono_ns).min().unwrap_or(0);
    let last = entries.iter().map(|e| e.mono_ns).max().unwrap_or(0);
    verdict.duration_ms = (last - first) / 1_000_000;

    let (kind, permits) = entries
        .iter()
        .find_map(|e| match &e.what {
            What::Run { kind, permits, .. } => Some((kind.as_str(), *permits)),
            _ => None,
        })
        .unwrap_or(("lock", 1));
    let sections = sections(entries, bounds, &mut verdict);
    check_fences(&sections, &mut verdict);
    check_store(entries, &mut verdict);
    check_exclusion(entries, &sections, permits.max(1), &mut verdict);
    check_liveness(entries, bounds, &mut verdict);
    if kind == "fair" {
        check_fair_order(entries, &sections, &mut verdict);
    }
    availability(entries, &sections, &mut verdict);
    verdict
}

/// Merges intervals into disjoint ones, sorted.
fn union(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The length of the intersection of two sets of disjoint sorted intervals.
fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let start = a[i].0.max(b[j].0);
        let end = a[i].1.min(b[j].1);
        total += end.saturating_sub(start);
        if a[i].1 < b[j].1 { i += 1 } else { j += 1 }
    }
    total
}

/// Per lock: of the time some worker waited for it, the share during which it was held.
fn availability(entries: &[Entry], sections: &[Section], verdict: &mut Verdict) {
    let mut waiting: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    let mut asked: HashMap<u32, u64> = HashMap::new();
    for entry in entries {
        let Some(worker) = entry.worker else { continue };
        match &entry.what {
            What::Acquire => {
                asked.insert(worker, entry.mono_ns);
            }
            What::Granted { .. } | What::NotGranted { .. } => {
                if let (Some(start), Some(lock)) = (asked.remove(&worker), &entry.lock) {
                    waiting
                        .entry(lock.clone())
                        .or_default()
                        .push((start, entry.mono_ns));
                }
            }
            _ => {}
        }
    }
    for (lock, wanted) in waiting {
        let wanted = union(wanted);
        let held = union(
            sections
                .iter()
                .filter(|s| s.lock == lock)
                .map(|s| (s.granted_ns, s.end_ns))
                .collect(),
        );
        let total: u64 = wanted.iter().map(|(a, b)| b - a).sum();
        if total > 0 {
            verdict
                .held_while_wanted
                .insert(lock, overlap(&wanted, &held) as f64 / total as f64);
        }
    }
}

/// Builds each worker's sections, and counts operations and faults.
fn sections(entries: &[Entry], bounds: &Bounds, verdict: &mut Verdict) -> Vec<Section> {
    let mut open: HashMap<u32, Section> = HashMap::new();
    let mut invoked: HashMap<u32, u64> = HashMap::new();
    let mut done = Vec::new();
    let last = entries.iter().map(|e| e.mono_ns).max().unwrap_or(0);
    for (i, entry) in entries.iter().enumerate() {
        let line = i + 1;
        let lock = entry.lock.clone().unwrap_or_default();
        match (&entry.what, entry.worker) {
            (What::Acquire, Some(w)) => {
                invoked.insert(w, entry.mono_ns);
            }
            (What::Granted { fence }, Some(w)) => {
                verdict.grants += 1;
                let invoke_ns = invoked.remove(&w).unwrap_or(entry.mono_ns);
                if let Some(mut previous) = open.remove(&w) {
                    previous.end_ns = entry.mono_ns;
                    done.push(previous);
                }
                open.insert(
                    w,
                    Section {
                        worker: w,
                        lock,
                        fence: *fence,
                        invoke_ns,
                        granted_ns: entry.mono_ns,
                        end_ns: last,
                        told: false,
                        refused: false,
                        line,
                        end_line: line,
                    },
                );
            }
            (What::NotGranted { outcome, .. }, Some(w)) => {
                invoked.remove(&w);
                *verdict.not_granted.entry(outcome.clone()).or_default() += 1;
            }
            (What::Write { accepted, .. }, Some(w)) => match accepted {
                Some(true) => verdict.writes_accepted += 1,
                Some(false) => {
                    verdict.writes_refused += 1;
                    if let Some(section) = open.get_mut(&w) {
                        section.refused = true;
                    }
                }
                None => verdict.writes_unknown += 1,
            },
            (What::Counter { .. }, Some(_)) => verdict.counter_increments += 1,
            (What::Lost { .. }, Some(w)) => {
                verdict.lost_told += 1;
                if let Some(section) = open.get_mut(&w) {
                    section.told = true;
                }
            }
            (What::Release { .. }, Some(w)) => {
                if let Some(mut section) = open.remove(&w) {
                    section.end_ns = entry.mono_ns;
                    section.end_line = line;
                    done.push(section);
                }
            }
            (
                What::Fault {
                    kind,
                    target,
                    phase,
                },
                _,
            ) => {
                if *phase == Phase::Start {
                    *verdict.faults.entry(kind.clone()).or_default() += 1;
                }
                // A killed worker's section ends when it is killed.
                if kind == "kill-worker" && *phase == Phase::Start {
                    let killed = target
                        .strip_prefix("worker ")
                        .and_then(|n| n.parse::<u32>().ok());
                    if let Some(w) = killed {
                        invoked.remove(&w);
                        if let Some(mut section) = open.remove(&w) {
                            section.end_ns = entry.mono_ns;
                            section.end_line = line;
                            done.push(section);
                        }
                    }
                }
            }
            (What::CounterFinal { value }, _) => verdict.counter_final += value,
            _ => {}
        }
    }
    // A request still unanswered long before the workers' last word: that worker waits
    // forever.
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
    done.extend(open.into_values());
    done.sort_by_key(|s| s.granted_ns);
    done
}

/// A grant that completed before another was requested has the smaller fence.
fn check_fences(sections: &[Section], verdict: &mut Verdict) {
    let mut by_lock: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for s in sections {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    for grants in by_lock.values() {
        // `grants` is sorted by completion; walk the requests in order, with the largest fence
        // of the grants completed before each.
        let mut by_request: Vec<&Section> = grants.clone();
        by_request.sort_by_key(|s| s.invoke_ns);
        let mut done = 0;
        let mut largest: Option<&Section> = None;
        for request in by_request {
            while done < grants.len() && grants[done].granted_ns < request.invoke_ns {
                if largest.is_none_or(|l| grants[done].fence > l.fence) {
                    largest = Some(grants[done]);
                }
                done += 1;
            }
            if let Some(earlier) = largest.filter(|l| l.fence >= request.fence) {
                verdict.violations.push(Violation {
                    kind: "fence order",
                    message: format!(
                        "{}: worker {} was granted fence {} after worker {}'s grant of fence {} had completed",
                        request.lock, request.worker, request.fence, earlier.worker, earlier.fence
                    ),
                    lines: vec![earlier.line, request.line],
                });
            }
        }
    }
}

/// The store's log never went back, its refusals were of older fences, and it kept every write
/// it acknowledged.
fn check_store(entries: &[Entry], verdict: &mut Verdict) {
    let mut acknowledged: HashMap<(String, u64, u32), (usize, usize)> = HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        let lock = entry.lock.clone().unwrap_or_default();
        match (&entry.what, entry.worker) {
            (
                What::Write {
                    fence,
                    accepted: Some(true),
                    ..
                },
                Some(w),
            ) => {
                let seen = acknowledged.entry((lock, *fence, w)).or_insert((0, i + 1));
                seen.0 += 1;
            }
            (
                What::Write {
                    fence,
                    accepted: Some(false),
                    store_fence: Some(store),
                    ..
                },
                _,
            ) if store <= fence => verdict.violations.push(Violation {
                kind: "store refusal",
                message: format!(
                    "{lock}: the store refused fence {fence} while it held fence {store}"
                ),
                lines: vec![i + 1],
            }),
            _ => {}
        }
    }
    for (i, entry) in entries.iter().enumerate() {
        let What::StoreLog { log } = &entry.what else {
            continue;
        };
        let lock = entry.lock.clone().unwrap_or_default();
        if let Some(pair) = log.windows(2).find(|w| w[1].0 < w[0].0) {
            verdict.violations.push(Violation {
                kind: "store order",
                message: format!(
                    "{lock}: the store accepted fence {} (worker {}) after fence {} (worker {})",
                    pair[1].0, pair[1].1, pair[0].0, pair[0].1
                ),
                lines: vec![i + 1],
            });
        }
        let mut kept: HashMap<(u64, u32), usize> = HashMap::new();
        for (fence, worker) in log {
            *kept.entry((*fence, *worker)).or_default() += 1;
        }
        for ((l, fence, worker), (count, line)) in &acknowledged {
            if *l != lock {
                continue;
            }
            let found = kept.get(&(*fence, *worker)).copied().unwrap_or(0);
            if found < *count {
                verdict.violations.push(Violation {
                    kind: "acknowledged write lost",
                    message: format!(
                        "{lock}: worker {worker}'s {count} acknowledged write(s) with fence {fence}, {found} in the store"
                    ),
                    lines: vec![*line, i + 1],
                });
            }
        }
    }
}

/// A span of the run, (start, end) in monotonic nanoseconds.
type Window = (u64, u64);

/// The windows in which a server may have lost acknowledged data: a SIGKILL and a
/// restart without persistence (an instant), and over Sentinel a failover from its start to the
/// new master (Sentinel promotes a replica without waiting for it to catch up, and the old
/// master takes writes until it is demoted: replication is asynchronous, and the grants it had
/// not passed on are gone). A Cluster failover is `CLUSTER FAILOVER`, which waits for the
/// replica to catch up: a loss there stays a violation.
fn data_loss_windows(entries: &[Entry]) -> (Vec<Window>, Vec<Window>) {
    let sentinel = entries
        .iter()
        .any(|e| matches!(&e.what, What::Run { topology, .. } if topology == "sentinel"));
    let mut killed = Vec::new();
    let mut failovers = Vec::new();
    let mut failover_started = None;
    for e in entries {
        let What::Fault { kind, phase, .. } = &e.what else {
            continue;
        };
        match (kind.as_str(), phase) {
            (kind, Phase::Start) if DATA_LOSS_FAULTS.contains(&kind) => {
                killed.push((e.mono_ns, e.mono_ns));
            }
            ("failover", Phase::Start) if sentinel => failover_started = Some(e.mono_ns),
            ("failover", Phase::End) if sentinel => {
                if let Some(start) = failover_started.take() {
                    failovers.push((start, e.mono_ns));
                }
            }
            _ => {}
        }
    }
    if let Some(start) = failover_started {
        let last = entries.iter().map(|e| e.mono_ns).max().unwrap_or(start);
        failovers.push((start, last));
    }
    (killed, failovers)
}

/// At most `permits` critical sections of one lock at once, unless a holder was told (or a
/// server lost its data meanwhile).
fn check_exclusion(entries: &[Entry], sections: &[Section], permits: u32, verdict: &mut Verdict) {
    let (killed, failovers) = data_loss_windows(entries);
    // Whether a window falls between the first holder's grant and the second's.
    let within = |windows: &[Window], from: u64, to: u64| {
        windows
            .iter()
            .any(|(start, end)| *start <= to && *end >= from)
    };
    let permits = usize::try_from(permits).unwrap_or(usize::MAX);
    let mut by_lock: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for s in sections {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    for list in by_lock.values() {
        // `list` is sorted by grant; `active`: the sections still open at each grant.
        let mut active: Vec<&Section> = Vec::new();
        for b in list {
            active.retain(|a| a.end_ns > b.granted_ns && a.worker != b.worker);
            if active.len() >= permits {
                let untold: Vec<&&Section> = active.iter().filter(|a| !a.told).collect();
                if b.told || untold.len() < permits {
                    verdict.honest_overlaps += 1;
                } else if untold
                    .iter()
                    .any(|a| within(&killed, a.granted_ns, b.granted_ns))
                {
                    verdict.data_loss_overlaps += 1;
                } else if untold
                    .iter()
                    .any(|a| within(&failovers, a.granted_ns, b.granted_ns))
                {
                    verdict.failover_overlaps += 1;
                } else {
                    // Neither holder was told by its lock: exclusion broke. If the store did
                    // not refuse any of them either, nobody noticed at all.
                    let caught = b.refused || untold.iter().any(|a| a.refused);
                    let (kind, noticed) = if caught {
                        ("exclusion", "; the fenced store refused a stale write")
                    } else {
                        ("silent overlap", "; nothing noticed it")
                    };
                    let others: Vec<String> = untold
                        .iter()
                        .map(|a| format!("worker {} (fence {})", a.worker, a.fence))
                        .collect();
                    let mut lines: Vec<usize> =
                        untold.iter().flat_map(|a| [a.line, a.end_line]).collect();
                    lines.extend([b.line, b.end_line]);
                    verdict.violations.push(Violation {
                        kind,
                        message: format!(
                            "{}: worker {} (fence {}) was granted while {} held it ({} permit(s)), none told by lost(){noticed}",
                            b.lock,
                            b.worker,
                            b.fence,
                            others.join(", "),
                            permits
                        ),
                        lines,
                    });
                }
            }
            active.push(b);
        }
    }
}

/// The fair lock: a request made clearly before another (50 ms) is granted first, unless a
/// fault happened while it waited.
fn check_fair_order(entries: &[Entry], sections: &[Section], verdict: &mut Verdict) {
    const APART_NS: u64 = 50_000_000;
    let faults: Vec<u64> = entries
        .iter()
        .filter(|e| matches!(e.what, What::Fault { .. }))
        .map(|e| e.mono_ns)
        .collect();
    let mut by_lock: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for s in sections {
        by_lock.entry(&s.lock).or_default().push(s);
    }
    for list in by_lock.values_mut() {
        list.sort_by_key(|s| s.invoke_ns);
        for (i, a) in list.iter().enumerate() {
            if faults
                .iter()
                .any(|t| *t >= a.invoke_ns && *t <= a.granted_ns)
            {
                continue;
            }
            for b in &list[i + 1..] {
                if b.invoke_ns > a.granted_ns {
                    break;
                }
                if b.invoke_ns >= a.invoke_ns + APART_NS
                    && b.granted_ns < a.granted_ns
                    && b.worker != a.worker
                {
                    verdict.violations.push(Violation {
                        kind: "fair order",
                        message: format!(
                            "{}: worker {} asked {} ms after worker {} and was granted first",
                            a.lock,
                            b.worker,
                            (b.invoke_ns - a.invoke_ns) / 1_000_000,
                            a.worker
                        ),
                        lines: vec![a.line, b.line],
                    });
                }
            }
        }
    }
}

/// After each fault ends, a grant comes within the bound (unless another fault starts first).
fn check_liveness(entries: &[Entry], bounds: &Bounds, verdict: &mut Verdict) {
    let grants: Vec<u64> = entries
        .iter()
        .filter(|e| matches!(e.what, What::Granted { .. }))
        .map(|e| e.mono_ns)
        .collect();
    let mut sorted_grants = grants.clone();
    sorted_grants.sort_unstable();
    let starts: Vec<u64> = entries
        .iter()
        .filter(|e| {
            matches!(
                e.what,
                What::Fault {
                    phase: Phase::Start,
                    ..
                }
            )
        })
        .map(|e| e.mono_ns)
        .collect();
    let end_of_run = entries.iter().map(|e| e.mono_ns).max().unwrap_or(0);
    for (i, entry) in entries.iter().enumerate() {
        let What::Fault {
            kind,
            phase: Phase::End,
            ..
        } = &entry.what
        else {
            continue;
        };
        let healed = entry.mono_ns;
        let next_fault = starts.iter().copied().filter(|t| *t > healed).min();
        let next_grant = sorted_grants.iter().copied().find(|t| *t > healed);
        let resume = match (next_grant, next_fault) {
            (Some(g), Some(f)) if f < g => continue,
            (Some(g), _) => (g - healed) / 1_000_000,
            (None, Some(_)) => continue,
            (None, None) => {
                let waited = (end_of_run - healed) / 1_000_000;
                if waited <= bounds.resume_ms {
                    continue;
                }
                waited
            }
        };
        if verdict
            .worst_resume_ms
            .as_ref()
            .is_none_or(|(w, _)| resume > *w)
        {
            verdict.worst_resume_ms = Some((resume, kind.clone()));
        }
        if resume > bounds.resume_ms {
            verdict.violations.push(Violation {
                kind: "liveness",
                message: format!(
                    "no grant for {resume} ms after {kind} ended (bound {} ms)",
                    bounds.resume_ms
                ),
                lines: vec![i + 1],
            });
        }
    }
}

/// The verdict as a table for people.
pub fn render(verdict: &Verdict) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "operations");
    let _ = writeln!(out, "  grants                 {}", verdict.grants);
    for (outcome, n) in &verdict.not_granted {
        let _ = writeln!(out, "  not granted ({outcome:<9}) {n}");
    }
    let _ = writeln!(
        out,
        "  fenced writes          {} accepted, {} refused, {} unknown",
        verdict.writes_accepted, verdict.writes_refused, verdict.writes_unknown
    );
    let _ = writeln!(out, "  losses told (lost())   {}", verdict.lost_told);
    let _ = writeln!(
        out,
        "  unfenced counter       {} increments, final value {} ({} lost updates)",
        verdict.counter_increments,
        verdict.counter_final,
        verdict
            .counter_increments
            .saturating_sub(verdict.counter_final)
    );
    let faults: Vec<String> = verdict
        .faults
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        out,
        "faults                   {}",
        if faults.is_empty() {
            "none".to_owned()
        } else {
            faults.join(", ")
        }
    );
    let _ = writeln!(
        out,
        "overlaps                 {} told (lost()), {} after the server lost its data, {} in a Sentinel failover, {} untold but caught by the store, {} silent",
        verdict.honest_overlaps,
        verdict.data_loss_overlaps,
        verdict.failover_overlaps,
        verdict
            .violations
            .iter()
            .filter(|v| v.kind == "exclusion")
            .count(),
        verdict
            .violations
            .iter()
            .filter(|v| v.kind == "silent overlap")
            .count()
    );
    if let Some((ms, kind)) = &verdict.worst_resume_ms {
        let _ = writeln!(out, "worst time to resume     {ms} ms (after {kind})");
    }
    for (lock, share) in &verdict.held_while_wanted {
        let _ = writeln!(
            out,
            "availability             {lock}: held {:.1} % of the time someone waited for it",
            share * 100.0
        );
    }
    if verdict.violations.is_empty() {
        let _ = writeln!(out, "violations               0");
    } else {
        let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
        for v in &verdict.violations {
            *by_kind.entry(v.kind).or_default() += 1;
        }
        let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(out, "VIOLATIONS               {}", kinds.join(", "));
        for v in verdict.violations.iter().take(20) {
            let lines: Vec<String> = v.lines.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                out,
                "  {}: {} (history lines {})",
                v.kind,
                v.message,
                lines.join(", ")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, worker: Option<u32>, what: What) -> Entry {
        Entry {
            mono_ns: ms * 1_000_000,
            wall_ms: ms,
            worker,
            lock: Some("a".into()),
            what,
        }
    }

    fn cycle(w: u32, start: u64, fence: u64, end: u64) -> Vec<Entry> {
        vec![
            at(start, Some(w), What::Acquire),
            at(start + 1, Some(w), What::Granted { fence }),
            at(
                start + 2,
                Some(w),
                What::Write {
                    fence,
                    started_ns: (start + 1) * 1_000_000,
                    accepted: Some(true),
                    store_fence: Some(fence),
                    error: None,
                },
            ),
            at(end, Some(w), What::Release { fence }),
        ]
    }

    fn bounds() -> Bounds {
        Bounds { resume_ms: 10_000 }
    }

    fn kinds(v: &Verdict) -> Vec<&'static str> {
        v.violations.iter().map(|v| v.kind).collect()
    }

    #[test]
    fn a_clean_history_passes() {
        let mut h = cycle(1, 0, 1, 10);
        h.extend(cycle(2, 5, 2, 20)); // requested during 1's hold, granted after it
        h[4..].iter_mut().for_each(|e| e.mono_ns += 6_000_000);
        h.push(at(
            30,
            None,
            What::StoreLog {
                log: vec![(1, 1), (2, 2)],
            },
        ));
        let v = check(&h, &bounds());
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(v.grants, 2);
    }

    #[test]
    fn availability_is_the_held_share_of_the_wanted_time() {
        // Worker 1 waits 0..1 ms and holds 1..10 ms; worker 2 waits 5..20 ms: of the 16 ms
        // someone waited, the lock was held for 5.
        let mut h = cycle(1, 0, 1, 10);
        h.push(at(5, Some(2), What::Acquire));
        h.push(at(20, Some(2), What::Granted { fence: 2 }));
        h.push(at(25, Some(2), What::Release { fence: 2 }));
        h.sort_by_key(|e| e.mono_ns);
        let v = check(&h, &bounds());
        let share = v.held_while_wanted["a"];
        assert!((share - 5.0 / 16.0).abs() < 1e-9, "{share}");
    }

    #[test]
    fn a_fence_that_goes_back_is_found() {
        let mut h = cycle(1, 0, 5, 10);
        h.extend(cycle(2, 20, 4, 30));
        assert_eq!(kinds(&check(&h, &bounds())), ["fence order"]);
    }

    #[test]
    fn a_silent_overlap_is_found_and_a_told_one_is_not() {
        let mut h = cycle(1, 0, 1, 50);
        h.extend(cycle(2, 10, 2, 60));
        assert_eq!(kinds(&check(&h, &bounds())), ["silent overlap"]);
        // Worker 1 was told before its release.
        h.push(at(
            49,
            Some(1),
            What::Lost {
                fence: 1,
                reason: "expired".into(),
            },
        ));
        h.sort_by_key(|e| e.mono_ns);
        let v = check(&h, &bounds());
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(v.honest_overlaps, 1);
    }

    #[test]
    fn an_overlap_only_the_store_caught_is_still_an_exclusion_violation() {
        let mut h = cycle(1, 0, 1, 50);
        h.extend(cycle(2, 10, 2, 60));
        h.push(at(
            40,
            Some(1),
            What::Write {
                fence: 1,
                started_ns: 0,
                accepted: Some(false),
                store_fence: Some(2),
                error: None,
            },
        ));
        h.sort_by_key(|e| e.mono_ns);
        assert_eq!(kinds(&check(&h, &bounds())), ["exclusion"]);
    }

    #[test]
    fn a_semaphore_allows_its_permits_and_no_more() {
        let run = at(
            0,
            None,
            What::Run {
                topology: "single".into(),
                kind: "semaphore".into(),
                permits: 2,
                workers: 3,
                locks: vec!["a".into()],
                ttl_ms: 1000,
                seed: 1,
                faults: vec![],
                mutations: vec![],
            },
        );
        let mut h = vec![run.clone()];
        h.extend(cycle(1, 1, 1, 50));
        h.extend(cycle(2, 10, 2, 60));
        h.sort_by_key(|e| e.mono_ns);
        let v = check(&h, &bounds());
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        h.extend(cycle(3, 20, 3, 70));
        h.sort_by_key(|e| e.mono_ns);
        assert_eq!(kinds(&check(&h, &bounds())), ["silent overlap"]);
    }

    #[test]
    fn a_request_never_answered_is_found() {
        let mut h = cycle(1, 0, 1, 10);
        h.push(at(20, Some(2), What::Acquire));
        h.extend(cycle(1, 30_000, 2, 30_010));
        assert_eq!(kinds(&check(&h, &bounds())), ["waits forever"]);
    }

    #[test]
    fn an_overlap_after_the_server_lost_its_data_is_counted_apart() {
        let mut h = cycle(1, 0, 1, 50);
        h.push(at(
            5,
            None,
            What::Fault {
                kind: "kill-server".into(),
                target: "redis".into(),
                phase: Phase::Start,
            },
        ));
        h.extend(cycle(2, 10, 2, 60));
        h.sort_by_key(|e| e.mono_ns);
        let v = check(&h, &bounds());
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(v.data_loss_overlaps, 1);
    }

    /// Two untold holders, the second granted during a failover, in a run over `topology`.
    fn overlap_in_a_failover(topology: &str) -> Verdict {
        let mut h = vec![at(
            0,
            None,
            What::Run {
                topology: topology.into(),
                kind: "lock".into(),
                permits: 1,
                workers: 2,
                locks: vec!["a".into()],
                ttl_ms: 1_000,
                seed: 1,
                faults: vec!["failover".into()],
                mutations: Vec::new(),
            },
        )];
        h.extend(cycle(1, 0, 1, 50));
        for (ms, phase) in [(5, Phase::Start), (30, Phase::End)] {
            h.push(at(
                ms,
                None,
                What::Fault {
                    kind: "failover".into(),
                    target: "the master".into(),
                    phase,
                },
            ));
        }
        h.extend(cycle(2, 10, 2, 60));
        h.sort_by_key(|e| e.mono_ns);
        check(&h, &bounds())
    }

    #[test]
    fn an_overlap_in_a_sentinel_failover_is_counted_apart_but_not_in_a_cluster_one() {
        let v = overlap_in_a_failover("sentinel");
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(v.failover_overlaps, 1);
        // CLUSTER FAILOVER waits for the replica: a lost grant there is a bug.
        let v = overlap_in_a_failover("cluster");
        assert_eq!(kinds(&v), ["silent overlap"]);
        assert_eq!(v.failover_overlaps, 0);
    }

    #[test]
    fn store_violations_are_found() {
        let mut h = cycle(1, 0, 2, 10);
        h.extend(cycle(2, 20, 3, 30));
        // The store's log went back, lost worker 2's write, and refused a newer fence.
        h.push(at(
            40,
            None,
            What::StoreLog {
                log: vec![(2, 1), (1, 9)],
            },
        ));
        h.push(at(
            41,
            Some(3),
            What::Write {
                fence: 7,
                started_ns: 0,
                accepted: Some(false),
                store_fence: Some(3),
                error: None,
            },
        ));
        let mut found = kinds(&check(&h, &bounds()));
        found.sort_unstable();
        assert_eq!(
            found,
            ["acknowledged write lost", "store order", "store refusal"]
        );
    }

    #[test]
    fn no_grant_long_after_a_fault_is_a_liveness_violation() {
        let mut h = cycle(1, 0, 1, 10);
        h.push(at(
            20,
            None,
            What::Fault {
                kind: "pause-server".into(),
                target: "redis".into(),
                phase: Phase::Start,
            },
        ));
        h.push(at(
            30,
            None,
            What::Fault {
                kind: "pause-server".into(),
                target: "redis".into(),
                phase: Phase::End,
            },
        ));
        h.push(at(20_000, Some(2), What::Acquire));
        h.push(at(20_031, Some(2), What::Granted { fence: 2 }));
        let v = check(&h, &bounds());
        assert_eq!(kinds(&v), ["liveness"]);
        assert_eq!(v.worst_resume_ms, Some((20_001, "pause-server".into())));
    }
}
