//! Small traces written by hand: each rule of the model explains what it should and rejects
//! what it should, naming the line; `ends.rs`: how a hold may end without its release;
//! `history.rs`: chaos histories read as traces.

mod ends;
mod history;

use super::{Event, Loss, Seen, Trace, What, WriteOutcome, check};

/// A trace on one lock, a microsecond between lines.
struct T {
    trace: Trace,
}

fn trace(permits: u32) -> T {
    T {
        trace: Trace {
            permits,
            events: Vec::new(),
            cut: false,
        },
    }
}

impl T {
    fn pipe(self, f: impl FnOnce(T) -> T) -> T {
        f(self)
    }

    fn push(mut self, what: What) -> Self {
        let line = self.trace.events.len() + 1;
        let at_ns = 1_000 * line as u64;
        self.trace.events.push(Event { line, at_ns, what });
        self
    }

    fn w(self, worker: u32, seen: Seen) -> Self {
        self.push(What::Worker {
            worker,
            lock: "L".into(),
            seen,
        })
    }

    fn ask(self, worker: u32) -> Self {
        self.w(worker, Seen::Request)
    }

    fn granted(self, worker: u32, fence: u64) -> Self {
        self.w(worker, Seen::Granted { fence, permits: 1 })
    }

    /// A write begun just after the line before this one.
    fn write(self, worker: u32, fence: u64, outcome: WriteOutcome) -> Self {
        let started_ns = 1_000 * self.trace.events.len() as u64 + 500;
        self.w(
            worker,
            Seen::Write {
                fence,
                started_ns,
                outcome,
            },
        )
    }

    fn release(self, worker: u32, fence: u64, held: bool) -> Self {
        self.w(worker, Seen::Release { fence })
            .released(worker, fence, held)
    }

    /// The end of a release begun earlier.
    fn released(self, worker: u32, fence: u64, held: bool) -> Self {
        let held = Some(held);
        self.w(worker, Seen::Released { fence, held })
    }

    fn take(self, worker: u32, fence: u64) -> Self {
        self.ask(worker).granted(worker, fence)
    }

    fn log(self, log: &[(u64, u32)]) -> Self {
        self.push(What::StoreLog {
            lock: "L".into(),
            log: log.to_vec(),
        })
    }

    fn explained(&self) {
        if let Err(e) = check(&self.trace) {
            panic!("not explained: {e}\n{:#?}", self.trace.events);
        }
    }

    /// Rejected at `line`, with `words` in the reason.
    fn rejected_at(&self, line: usize, words: &str) {
        match check(&self.trace) {
            Ok(_) => panic!("explained, but should not be:\n{:#?}", self.trace.events),
            Err(e) => {
                assert_eq!(e.line, line, "{e}");
                assert!(e.why.contains(words), "{e}");
                assert_eq!(e.lock, "L");
            }
        }
    }
}

#[test]
fn one_holder_after_another_is_explained() {
    trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Accepted)
        .release(1, 10, true)
        .take(2, 11)
        .write(2, 11, WriteOutcome::Accepted)
        .release(2, 11, true)
        .log(&[(10, 1), (11, 2)])
        .explained();
}

#[test]
fn a_grant_while_another_holds_untold_is_rejected_there() {
    let t = trace(1).take(1, 10).take(2, 11).release(1, 10, false);
    t.rejected_at(4, "while worker 1 (fence 10) held it");
    // Told within its section, or done with it, the first holder's lease may have run out.
    trace(1)
        .take(1, 10)
        .take(2, 11)
        .w(
            1,
            Seen::Told {
                fence: 10,
                deadline_ns: None,
            },
        )
        .release(1, 10, false)
        .explained();
    trace(1)
        .take(1, 10)
        .w(1, Seen::Release { fence: 10 })
        .take(2, 11)
        .released(1, 10, false)
        .explained();
}

#[test]
fn a_release_in_flight_may_take_effect_before_a_grant_it_overlaps() {
    // Worker 1's release (held) returns after worker 2's grant: it took effect first.
    trace(1)
        .take(1, 10)
        .w(1, Seen::Release { fence: 10 })
        .take(2, 11)
        .released(1, 10, true)
        .explained();
}

#[test]
fn a_release_that_found_its_hold_after_another_was_granted_is_rejected() {
    trace(1)
        .take(1, 10)
        .w(
            1,
            Seen::Told {
                fence: 10,
                deadline_ns: None,
            },
        )
        .take(2, 11)
        .release(1, 10, true)
        .rejected_at(
            7,
            "said the lock was still held, but worker 2 (fence 11) held it",
        );
}

#[test]
fn fences_that_go_back_are_rejected_and_overlapping_calls_may_come_in_either_order() {
    trace(1)
        .take(1, 10)
        .release(1, 10, true)
        .take(2, 9)
        .rejected_at(6, "fence 9, not above fence 10");
    // Two permits, two requests in flight together: the later return has the smaller fence.
    trace(2)
        .ask(1)
        .ask(2)
        .granted(2, 11)
        .granted(1, 10)
        .explained();
    // A third permit's worth is refused.
    trace(2)
        .take(1, 10)
        .take(2, 11)
        .take(3, 12)
        .rejected_at(6, "while worker 1 (fence 10), worker 2 (fence 11) held it");
}

#[test]
fn the_store_accepts_only_fences_not_below_its_own_in_its_logs_order() {
    trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Accepted)
        .w(
            1,
            Seen::Told {
                fence: 10,
                deadline_ns: None,
            },
        )
        .take(2, 11)
        .write(2, 11, WriteOutcome::Accepted)
        .write(1, 10, WriteOutcome::Refused { store: 11 })
        .explained();
    trace(1)
        .take(1, 10)
        .w(
            1,
            Seen::Told {
                fence: 10,
                deadline_ns: None,
            },
        )
        .take(2, 11)
        .write(2, 11, WriteOutcome::Accepted)
        .write(1, 10, WriteOutcome::Accepted)
        .rejected_at(7, "accepted worker 1's fence 10 while it held fence 11");
    trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Refused { store: 3 })
        .rejected_at(3, "saying it held fence 3, while it held fence 0");
    // The log fixes the order of accepted writes, and holds nothing unexplained.
    trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Accepted)
        .log(&[(9, 1)])
        .rejected_at(3, "the store's log has fence 9 of worker 1 next");
    trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Accepted)
        .log(&[(10, 1), (10, 1)])
        .rejected_at(4, "entry 2 of 2");
}

#[test]
fn a_write_with_no_answer_is_placed_if_the_store_shows_it() {
    let unknown = trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Unknown)
        .w(
            1,
            Seen::Told {
                fence: 10,
                deadline_ns: None,
            },
        )
        .take(2, 11);
    unknown.clone_with(|t| t.log(&[(10, 1)])).explained();
    unknown.clone_with(|t| t.log(&[])).explained();
    // A refusal naming fence 10 as the store's: only if the write with no answer took effect.
    let refused = trace(1)
        .take(0, 9)
        .w(
            0,
            Seen::Told {
                fence: 9,
                deadline_ns: None,
            },
        )
        .take(1, 10)
        .write(1, 10, WriteOutcome::Unknown)
        .write(0, 9, WriteOutcome::Refused { store: 10 });
    refused.explained();
    refused.clone_with(|t| t.log(&[(10, 1)])).explained();
    refused
        .clone_with(|t| t.log(&[]))
        .rejected_at(7, "saying it held fence 10, while it held fence 0");
}

#[test]
fn a_line_about_a_fence_never_granted_is_not_explained() {
    trace(1)
        .take(1, 10)
        .write(1, 11, WriteOutcome::Accepted)
        .rejected_at(3, "worker 1 was never granted fence 11");
    trace(1)
        .take(1, 10)
        .w(2, Seen::Release { fence: 10 })
        .rejected_at(3, "worker 2 was never granted fence 10");
}

#[test]
fn a_holder_writes_twice_with_its_fence_and_a_refusal_is_of_an_older_fence_only() {
    trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Accepted)
        .write(1, 10, WriteOutcome::Accepted)
        .log(&[(10, 1), (10, 1)])
        .explained();
    trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Accepted)
        .write(1, 10, WriteOutcome::Refused { store: 10 })
        .rejected_at(4, "refused worker 1's fence 10, saying it held fence 10");
}

#[test]
fn a_release_ends_its_own_hold_only() {
    trace(2)
        .take(1, 10)
        .take(2, 11)
        .release(1, 10, true)
        .release(2, 11, true)
        .explained();
}

#[test]
fn writes_placed_early_together_are_each_placed_once() {
    // Two accepted writes in flight; a refusal naming the later one's fence returns first, so
    // both took effect before it; then each returns.
    let mut t = trace(3).take(0, 9).take(1, 10).take(2, 11);
    let begun = 1_000 * t.trace.events.len() as u64 + 100;
    for (worker, fence, started, outcome) in [
        (0, 9, begun + 2, WriteOutcome::Refused { store: 11 }),
        (1, 10, begun, WriteOutcome::Accepted),
        (2, 11, begun + 1, WriteOutcome::Accepted),
    ] {
        let started_ns = started;
        t = t.w(
            worker,
            Seen::Write {
                fence,
                started_ns,
                outcome,
            },
        );
    }
    t.clone_with(|t| t.log(&[(10, 1), (11, 2)])).explained();
    t.log(&[(10, 1), (11, 2), (11, 2)])
        .rejected_at(10, "entry 3 of 3");
}

#[test]
fn a_search_that_needs_more_states_than_allowed_is_not_explained() {
    // Two writes with no answer: several states at once.
    let t = trace(2)
        .take(1, 10)
        .take(2, 11)
        .write(1, 10, WriteOutcome::Unknown)
        .write(2, 11, WriteOutcome::Unknown);
    let widest = check(&t.trace).map(|e| e.widest).unwrap_or(0);
    assert!(widest > 2, "{widest}");
    assert!(super::check_within(&t.trace, widest).is_ok());
    let e = super::check_within(&t.trace, widest - 1).err();
    let most = format!("more than {} model states", widest - 1);
    assert!(
        e.is_some_and(|e| e.why.contains(&most)),
        "the bound on states"
    );
}

#[test]
fn the_first_event_over_every_lock_is_named() {
    let mut t = trace(1).take(1, 10).take(2, 11);
    for event in &mut t.trace.events {
        if let What::Worker { lock, .. } = &mut event.what {
            "M".clone_into(lock);
        }
    }
    let t = t.take(3, 20).take(4, 21);
    let e = check(&t.trace).err().map(|e| (e.line, e.lock));
    assert_eq!(e, Some((4, "M".to_owned())));
}

#[test]
fn a_call_and_a_return_at_one_instant_may_take_effect_in_either_order() {
    // Worker 1's write begins the very nanosecond worker 2's returns.
    let mut v = trace(2).take(1, 10).take(2, 11);
    let returned = 1_000 * (v.trace.events.len() as u64 + 1);
    v = v.write(2, 11, WriteOutcome::Accepted);
    v = v.w(
        1,
        Seen::Write {
            fence: 10,
            started_ns: returned,
            outcome: WriteOutcome::Accepted,
        },
    );
    // 10 accepted after 11 returned: placed before it, since the calls met at one instant.
    v.clone_with(|t| t.log(&[(10, 1), (11, 2)])).explained();
    v.log(&[(11, 2), (10, 1)])
        .rejected_at(6, "accepted worker 1's fence 10");
}

impl T {
    fn clone_with(&self, f: impl FnOnce(T) -> T) -> T {
        f(T {
            trace: self.trace.clone(),
        })
    }
}
