//! The verdict as a table for people.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Verdict;

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
