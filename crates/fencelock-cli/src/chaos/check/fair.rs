//! Fair order (the fair lock only): a request made clearly before another is granted first,
//! unless a fault happened while it waited.

use super::model::{Section, by_lock};
use super::{Verdict, Violation};
use crate::chaos::history::{Entry, What};

/// The fair lock: a request made clearly before another (50 ms) is granted first, unless a
/// fault happened while it waited.
pub(super) fn check_fair_order(entries: &[Entry], sections: &[Section], verdict: &mut Verdict) {
    const APART_NS: u64 = 50_000_000;
    let faults: Vec<u64> = entries
        .iter()
        .filter(|e| matches!(e.what, What::Fault { .. }))
        .map(|e| e.mono_ns)
        .collect();
    for list in by_lock(sections).values_mut() {
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
