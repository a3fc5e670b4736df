//! The checker: reads a chaos history and says which guarantee broke, if any.
//!
//! - Fences ([`fences`], [`store`]): per lock, a grant that completed before another was
//!   requested has the smaller fence (grants whose calls overlap may come in either order); the
//!   fenced store accepted fences in non-decreasing order, refused only fences older than its
//!   own, and kept every write it acknowledged.
//! - Exclusion and honesty ([`exclusion`]): two critical sections of one lock (from the grant's
//!   completion to the start of the release: inside the real hold) overlap only if a holder was
//!   told by its lock (`lost()` fired before the end of its section) — else an `exclusion`
//!   violation; one that not even the fenced store caught (no refused write) is a **silent
//!   overlap**, the worst failure. Overlaps just after the server lost its data (SIGKILL and a
//!   restart without persistence) or during a Sentinel failover (asynchronous replication),
//!   which no lock survives, are counted apart.
//! - Fair order ([`fair`]): with the fair lock, requests made clearly apart are granted in order.
//! - Liveness ([`liveness`]): after a fault ends (and before the next starts), some worker is
//!   granted a lock within a bound; no request goes unanswered for good ([`model`]).
//! - Availability ([`availability`]): per lock, the share of the time someone waited for it
//!   during which it was held (a measure, not a check).
//!
//! [`model`] turns the history into critical sections, which the checks share; [`render`] prints
//! the verdict.

mod availability;
mod exclusion;
mod fair;
mod fences;
mod liveness;
mod model;
mod render;
mod store;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::chaos::history::{Entry, What};
pub use render::render;

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
    let sections = model::sections(entries, bounds, &mut verdict);
    fences::check_fences(&sections, &mut verdict);
    store::check_store(entries, &mut verdict);
    exclusion::check_exclusion(entries, &sections, permits.max(1), &mut verdict);
    liveness::check_liveness(entries, bounds, &mut verdict);
    if kind == "fair" {
        fair::check_fair_order(entries, &sections, &mut verdict);
    }
    availability::availability(entries, &sections, &mut verdict);
    verdict
}
