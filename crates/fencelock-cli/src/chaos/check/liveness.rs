//! Liveness: after each fault ends, some worker is granted a lock within the bound (unless
//! another fault starts first).

use super::{Bounds, Verdict, Violation};
use crate::chaos::history::{Entry, Phase, What};

/// After each fault ends, a grant comes within the bound (unless another fault starts first).
pub(super) fn check_liveness(entries: &[Entry], bounds: &Bounds, verdict: &mut Verdict) {
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
