//! The watchdog's schedule: the locks it renews (or watches until their deadline), and when
//! each is next due.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Renewal;
use crate::engine::Hold;
use crate::error::LostReason;
use crate::lease::Ending;

pub(super) struct Entry {
    pub(super) renewal: Renewal,
    /// Set after a failed renewal: retry at this instant rather than on the normal schedule.
    pub(super) retry_at: Option<Instant>,
    /// False for a hold that is not renewed (`auto_renew(false)`, or its `max_hold` reached):
    /// it comes up at its deadline, when its loss is reported if it is still held.
    pub(super) renewing: bool,
}

impl Entry {
    /// When this lock should next be renewed: a third of the lease after its last confirmation
    /// (not renewed: its deadline).
    pub(super) fn due_at(&self) -> Instant {
        let state = self.renewal.lease.borrow();
        if !self.renewing {
            return state.deadline;
        }
        let scheduled = state.confirmed_at + state.ttl / 3;
        self.retry_at.unwrap_or(scheduled)
    }
}

/// The locks being renewed, and when each is next due. The queue is ordered by due time and may
/// hold stale items (a lock stopped, or renewed by hand since it was queued); they are checked
/// when they come up, so no step walks every lock.
#[derive(Default)]
pub(super) struct Schedule {
    /// Hashed with foldhash: the keys are the client's own counters, nothing an attacker picks,
    /// and each renewal looks its hold up a few times.
    pub(super) entries: foldhash::HashMap<u64, Entry>,
    pub(super) queue: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The instant the task sleeps until (`None` until it first sleeps).
    pub(super) armed: Option<Instant>,
}

impl Schedule {
    pub(super) fn insert(&mut self, id: u64, entry: Entry) {
        self.queue.push(Reverse((entry.due_at(), id)));
        self.entries.insert(id, entry);
    }

    /// Takes a hold out. Its place in the queue stays until it comes up, unless the queue has
    /// grown to more than twice the holds (many short holds), when it is rebuilt: O(1) amortised.
    pub(super) fn remove(&mut self, id: u64) {
        self.entries.remove(&id);
        if self.queue.len() > 2 * self.entries.len() + 1024 {
            let entries = &self.entries;
            self.queue
                .retain(|Reverse((_, id))| entries.contains_key(id));
        }
    }

    /// Makes every renewed lock due now: after a master switch, each is checked on the new
    /// master.
    pub(super) fn check_all_now(&mut self, now: Instant) {
        for (id, entry) in &mut self.entries {
            if !entry.renewing {
                continue;
            }
            entry.retry_at = Some(now);
            self.queue.push(Reverse((now, *id)));
        }
    }

    pub(super) fn requeue(&mut self, id: u64) {
        if let Some(entry) = self.entries.get(&id) {
            self.queue.push(Reverse((entry.due_at(), id)));
        }
    }

    /// When the first live queued item comes up.
    pub(super) fn next_wake(&mut self) -> Option<Instant> {
        while let Some(Reverse((_, id))) = self.queue.peek() {
            if self.entries.contains_key(id) {
                break;
            }
            self.queue.pop();
        }
        self.queue.peek().map(|Reverse((at, _))| *at)
    }

    /// Takes every lock that is due at `now` (or within its slack, so that locks falling due
    /// together share a batch), dropping the lost and expired ones on the way (an expired one is
    /// reported lost), and keeping the capped ones only until their deadline.
    ///
    /// Each lock's entry and lease are read once here, and what the renewal needs is carried in
    /// the batch: with thousands of locks, every further look-up is a cache miss.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<Due> {
        // Nothing is renewed early unless something is due: the task also wakes on its tick
        // (a quarter of the command timeout), which would otherwise renew every lock due within
        // its slack that early.
        if self.next_wake().is_none_or(|first| first > now) {
            return Vec::new();
        }
        let mut due = Vec::new();
        let mut later = Vec::new();
        while let Some(Reverse((at, id))) = self.queue.peek().copied() {
            let Some(entry) = self.entries.get_mut(&id) else {
                self.queue.pop();
                continue;
            };
            let (ttl, deadline, lost, scheduled) = {
                let state = entry.renewal.lease.borrow();
                let scheduled = state.confirmed_at + state.ttl / 3;
                (state.ttl, state.deadline, state.lost.is_some(), scheduled)
            };
            let slack = slack(ttl);
            if at > now + slack {
                break;
            }
            self.queue.pop();
            if lost {
                self.entries.remove(&id);
            } else if now >= deadline {
                // The deadline passed without a confirmed renewal (the reason carries the last
                // renewal error, if there was one, or the `max_hold` cap).
                let renewal = &entry.renewal;
                renewal
                    .hold
                    .end(&renewal.lease, renewal.fence, Ending::DeadlinePassed);
                self.entries.remove(&id);
            } else if !entry.renewing {
                // Not renewed: it comes up again at its deadline (a hand-made extension may
                // have moved it since it was queued).
                later.push(id);
            } else if entry.renewal.hold_until.is_some_and(|until| now >= until) {
                entry
                    .renewal
                    .lease
                    .send_modify(|s| s.expiry_reason = LostReason::MaxHoldReached);
                tracing::debug!(lock = %entry.renewal.hold.name, "max hold time reached; renewal stops");
                // Watched until its deadline, when its loss is reported.
                entry.renewing = false;
                later.push(id);
            } else if entry.retry_at.unwrap_or(scheduled) > now + slack {
                // Renewed by hand since it was queued: it comes up again at its new time.
                later.push(id);
            } else {
                due.push(Due {
                    id,
                    ttl,
                    deadline,
                    hold: entry.renewal.hold.clone(),
                    fence: entry.renewal.fence,
                });
            }
        }
        for id in later {
            self.requeue(id);
        }
        // A lock renewed by hand is queued again at its new time while its old place stays in
        // the queue: the same lock can come up twice in one batch.
        due.sort_unstable_by_key(|d| d.id);
        due.dedup_by_key(|d| d.id);
        due
    }
}

/// A lock taken for renewal, with what the renewal needs of it.
pub(super) struct Due {
    pub(super) id: u64,
    pub(super) ttl: Duration,
    pub(super) deadline: Instant,
    pub(super) hold: Arc<Hold>,
    pub(super) fence: u64,
}

/// How early a lock may be renewed so that it can share a batch with others.
pub(super) fn slack(ttl: Duration) -> Duration {
    ttl / 12
}
