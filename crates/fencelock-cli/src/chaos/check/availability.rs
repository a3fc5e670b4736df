//! Availability: per lock, the share of the time someone waited for it during which it was held
//! (1 means never free while wanted). A measure for the report, not a check.

use std::collections::{BTreeMap, HashMap};

use super::Verdict;
use super::model::Section;
use crate::chaos::history::{Entry, What};

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
pub(super) fn availability(entries: &[Entry], sections: &[Section], verdict: &mut Verdict) {
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
