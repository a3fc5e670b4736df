//! The fenced store: its log never went back, it refused only fences older than its own, and it
//! kept every write it acknowledged.

use std::collections::HashMap;

use super::{Verdict, Violation};
use crate::chaos::history::{Entry, What};

/// The store's log never went back, its refusals were of older fences, and it kept every write
/// it acknowledged.
pub(super) fn check_store(entries: &[Entry], verdict: &mut Verdict) {
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
