//! The summary of a demo run, and the invariants it checks.

use std::collections::{BTreeMap, HashSet};

use super::resource::ResourceRecord;
use super::story::Record;
use crate::error::CliError;
use crate::output::{Output, Tone};

/// What the summary found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Grants per worker.
    pub grants_per_worker: BTreeMap<u32, usize>,
    /// Smallest and largest fence.
    pub fence_range: Option<(u64, u64)>,
    /// Each worker's fences grew, all fences differ, and the resource's log never went back.
    pub fences_increasing: bool,
    /// Writes accepted / refused, as the workers reported them.
    pub accepted: u64,
    /// See `accepted`.
    pub refused: u64,
    /// Refused writes of the frozen holder after its pause.
    pub stale_refused: u64,
    /// Writes refused while the writer's guard still said "held": two live holders at once.
    pub overlaps: u64,
    /// Problems found; empty when every invariant held.
    pub problems: Vec<String>,
}

/// Checks the record of the run against the resource's own record.
pub fn judge(record: &Record, resource: &ResourceRecord) -> Verdict {
    let mut verdict = Verdict::default();
    let grants = &record.grants;
    for grant in grants {
        *verdict.grants_per_worker.entry(grant.worker).or_default() += 1;
        verdict.accepted += u64::from(grant.accepted);
        verdict.refused += u64::from(grant.refused);
        verdict.overlaps += u64::from(grant.refused_while_held);
    }
    let fences: Vec<u64> = grants.iter().map(|g| g.fence).collect();
    verdict.fence_range = fences
        .iter()
        .min()
        .copied()
        .zip(fences.iter().max().copied());

    // Fences: each worker's grants (in the order that worker made them) strictly increase, no
    // two grants share a fence, and the resource accepted them in increasing order.
    let mut last_by_worker: BTreeMap<u32, u64> = BTreeMap::new();
    let mut per_worker_ok = true;
    for grant in grants {
        let previous = last_by_worker.insert(grant.worker, grant.fence);
        if let Some(previous) = previous.filter(|&previous| grant.fence <= previous) {
            per_worker_ok = false;
            verdict.problems.push(format!(
                "worker {} got fence {} after fence {previous}",
                grant.worker, grant.fence
            ));
        }
    }
    let distinct: HashSet<u64> = fences.iter().copied().collect();
    let all_distinct = distinct.len() == fences.len();
    if !all_distinct {
        verdict
            .problems
            .push("two grants carried the same fence".into());
    }
    let log_ok = resource.log.windows(2).all(|w| w[0].0 <= w[1].0);
    if !log_ok {
        verdict
            .problems
            .push("the resource accepted a write with a smaller fence than an earlier one".into());
    }
    verdict.fences_increasing = per_worker_ok && all_distinct && log_ok && verdict.overlaps == 0;

    if verdict.overlaps > 0 {
        verdict.problems.push(format!(
            "{} write(s) were refused while the writer's guard said it held the lock: two holders overlapped",
            verdict.overlaps
        ));
    }

    // The story: the frozen holder's stale write was refused, and its guard knew.
    match record.fenced_off.and_then(|i| grants.get(i)) {
        Some(grant) => {
            verdict.stale_refused = u64::from(grant.refused);
            if grant.lost.is_none() {
                verdict.problems.push(format!(
                    "worker {}'s guard never reported the lock lost",
                    grant.worker
                ));
            }
            if grant.released == Some(true) {
                verdict.problems.push(format!(
                    "worker {}'s release said it still held the lock after its lease had run out",
                    grant.worker
                ));
            }
        }
        None => verdict
            .problems
            .push("no frozen holder was fenced off".into()),
    }

    // The resource's own record must match what the workers reported.
    if resource.log.len() as u64 != verdict.accepted {
        verdict.problems.push(format!(
            "the resource logged {} accepted writes, the workers reported {}",
            resource.log.len(),
            verdict.accepted
        ));
    }
    let logged = resource
        .log
        .iter()
        .map(|(fence, _)| *fence)
        .max()
        .unwrap_or(0);
    if resource.fence != logged {
        verdict.problems.push(format!(
            "the resource's accepted fence is {}, its log's largest is {logged}",
            resource.fence
        ));
    }
    verdict
}

/// Prints the summary; `Err` if an invariant did not hold.
pub fn report(out: &mut Output, record: &Record, verdict: &Verdict) -> Result<(), CliError> {
    out.line(&out.paint(Tone::Strong, "4. Summary"))?;
    let total: usize = verdict.grants_per_worker.values().sum();
    let per_worker = verdict
        .grants_per_worker
        .iter()
        .map(|(worker, n)| format!("worker {worker}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    out.line(&format!(
        "   grants per worker     {per_worker} ({total} in all)"
    ))?;
    if let Some((min, max)) = verdict.fence_range {
        out.line(&format!("   fences                min {min}, max {max}"))?;
    }
    let increasing = if verdict.fences_increasing {
        out.paint(Tone::Good, "yes")
    } else {
        out.paint(Tone::Bad, "NO")
    };
    out.line(&format!(
        "   strictly increasing   {increasing} (per worker, all distinct, and in the resource's order)"
    ))?;
    out.line(&format!(
        "   writes accepted       {} (the resource's own count agrees)",
        verdict.accepted
    ))?;
    let stale = match record.fenced_off.and_then(|i| record.grants.get(i)) {
        Some(grant) => format!(
            "{} (worker {}, fence {}, after its pause)",
            verdict.stale_refused, grant.worker, grant.fence
        ),
        None => "0".into(),
    };
    out.line(&format!("   stale writes refused  {stale}"))?;
    let others = verdict.refused - verdict.stale_refused.min(verdict.refused);
    if others > 0 {
        out.line(&format!(
            "   other refused writes  {others} (holders that stalled on their own; their guards knew)"
        ))?;
    }
    let overlap = if verdict.overlaps == 0 {
        out.paint(
            Tone::Good,
            "none (no write was refused while its writer's guard said it held the lock)",
        )
    } else {
        out.paint(Tone::Bad, &format!("{} OVERLAPS", verdict.overlaps))
    };
    out.line(&format!("   overlapping holders   {overlap}"))?;

    if verdict.problems.is_empty() {
        let ok = out.paint(Tone::Good, "OK");
        out.line(&format!(
            "{ok}: the frozen holder was fenced off: the resource refused its stale write, and fences only grew."
        ))?;
        Ok(())
    } else {
        for problem in &verdict.problems {
            out.line(&format!(
                "   {} {problem}",
                out.paint(Tone::Bad, "problem:")
            ))?;
        }
        Err(CliError::DemoFailed(verdict.problems.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::story::Grant;

    fn grant(worker: u32, fence: u64, accepted: u32, refused: u32) -> Grant {
        Grant {
            worker,
            fence,
            accepted,
            refused,
            released: Some(refused == 0),
            lost: (refused > 0).then(|| "expired".to_owned()),
            ..Grant::default()
        }
    }

    fn resource(fence: u64, log: &[(u64, u32)]) -> ResourceRecord {
        ResourceRecord {
            fence,
            log: log.to_vec(),
        }
    }

    #[test]
    fn a_fenced_off_holder_and_increasing_fences_pass() {
        let record = Record {
            grants: vec![grant(1, 10, 2, 0), grant(2, 11, 1, 1), grant(1, 12, 2, 0)],
            fenced_off: Some(1),
        };
        let log = [(10, 1), (10, 1), (11, 2), (12, 1), (12, 1)];
        let verdict = judge(&record, &resource(12, &log));
        assert!(verdict.problems.is_empty(), "{:?}", verdict.problems);
        assert!(verdict.fences_increasing);
        assert_eq!(verdict.stale_refused, 1);
        assert_eq!(verdict.fence_range, Some((10, 12)));
    }

    #[test]
    fn violations_are_found() {
        let mut overlapping = grant(3, 13, 1, 1);
        overlapping.refused_while_held = 1;
        let record = Record {
            grants: vec![grant(1, 12, 2, 0), grant(1, 11, 2, 0), overlapping],
            fenced_off: None,
        };
        let verdict = judge(&record, &resource(13, &[(12, 1), (11, 1)]));
        assert!(!verdict.fences_increasing);
        let all = verdict.problems.join("\n");
        for expected in [
            "fence 11 after fence 12",
            "smaller fence",
            "two holders overlapped",
            "no frozen holder",
            "the resource logged 2 accepted writes, the workers reported 5",
            "accepted fence is 13, its log's largest is 12",
        ] {
            assert!(all.contains(expected), "{expected} missing from {all}");
        }
    }
}
