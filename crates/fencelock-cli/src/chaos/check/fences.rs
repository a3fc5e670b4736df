//! Fence order: per lock, a grant that completed before another was requested has the smaller
//! fence (grants whose calls overlap may come in either order).

use super::model::{Section, by_lock};
use super::{Verdict, Violation};

/// A grant that completed before another was requested has the smaller fence.
pub(super) fn check_fences(sections: &[Section], verdict: &mut Verdict) {
    for grants in by_lock(sections).values() {
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
