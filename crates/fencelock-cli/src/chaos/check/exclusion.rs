//! Exclusion and honesty: at most `permits` critical sections of one lock at once, unless a
//! holder was told by its lock (`lost()`). An untold overlap is an `exclusion` violation, or a
//! **silent overlap** when not even the fenced store refused a write. Overlaps just after a
//! server lost its data, or during a Sentinel failover, are counted apart: no lock survives those.

use super::model::{Section, by_lock};
use super::{Verdict, Violation};
use crate::chaos::history::{Entry, Phase, What};

/// Faults after which the server has forgotten its data.
const DATA_LOSS_FAULTS: &[&str] = &["kill-server"];

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
pub(super) fn check_exclusion(
    entries: &[Entry],
    sections: &[Section],
    permits: u32,
    verdict: &mut Verdict,
) {
    let (killed, failovers) = data_loss_windows(entries);
    // Whether a window falls between the first holder's grant and the second's.
    let within = |windows: &[Window], from: u64, to: u64| {
        windows
            .iter()
            .any(|(start, end)| *start <= to && *end >= from)
    };
    let permits = usize::try_from(permits).unwrap_or(usize::MAX);
    for list in by_lock(sections).values() {
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
