//! The shared bookkeeping of a contended W6 round: what must never happen (two exclusive
//! holders, more than N permits, a writer with readers, a reader with a writer), fences that
//! do not grow as promised, out-of-order grants, handoffs and holds.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use crate::stats::Samples;

/// Which side of the bookkeeping a worker is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// One holder at a time (plain, reentrant, write-only, fair).
    Exclusive,
    /// At most this many holders at once.
    Permit(u32),
    /// The writer of the read-write run.
    Writer,
    /// A reader of the read-write run.
    Reader,
}

impl Role {
    /// The row this role's numbers go to: 0 (everyone but readers), 1 (readers).
    pub(super) fn side(self) -> usize {
        usize::from(self == Role::Reader)
    }
}

/// The shared bookkeeping of one contended round. One mutex: the checks of a grant and of a
/// release are atomic with respect to each other (the lock under test serialises the holders;
/// this only keeps the books straight).
#[derive(Default)]
pub(super) struct Book {
    /// Holders of an exclusive kind, or the writer.
    exclusive: usize,
    readers: usize,
    permits: usize,
    /// Workers inside an acquire call, by side.
    waiting: [usize; 2],
    /// Per worker: when its current request began, and the largest fence granted before then.
    pub(super) asked: Vec<Option<(Instant, u64)>>,
    /// The largest fence granted so far (kinds that give each grant its own fence).
    max_fence: u64,
    /// The fence of the last write granted (readers must see it).
    last_write: u64,
    /// Releases made while someone waited, oldest first, with who made them (exclusive kinds
    /// and permits; an exclusive lock has at most one).
    pending: VecDeque<(Instant, usize)>,
    /// Read-write: the last reader left while the writer waited.
    last_reader_out: Option<Instant>,
    /// Read-write: the writer left while readers waited.
    writer_out: Option<Instant>,
    pub(super) violations: [u64; 2],
    pub(super) fence_errors: [u64; 2],
    pub(super) out_of_order: u64,
    pub(super) near_ties: u64,
    pub(super) handoffs: [Samples; 2],
    pub(super) holds: [Samples; 2],
}

impl Book {
    /// The books of a round with this many workers.
    pub(super) fn new(workers: usize) -> Self {
        Book {
            asked: vec![None; workers],
            handoffs: [
                Samples::with_capacity(8 * 1024),
                Samples::with_capacity(8 * 1024),
            ],
            holds: [
                Samples::with_capacity(8 * 1024),
                Samples::with_capacity(8 * 1024),
            ],
            ..Book::default()
        }
    }

    pub(super) fn ask(&mut self, id: usize, role: Role) {
        if let Some(slot) = self.asked.get_mut(id) {
            *slot = Some((Instant::now(), self.max_fence));
        }
        self.waiting[role.side()] += 1;
    }

    pub(super) fn gave_up(&mut self, id: usize, role: Role) {
        if let Some(slot) = self.asked.get_mut(id) {
            *slot = None;
        }
        self.waiting[role.side()] = self.waiting[role.side()].saturating_sub(1);
    }

    /// Books a grant; returns its instant.
    pub(super) fn granted(
        &mut self,
        id: usize,
        role: Role,
        fence: u64,
        tolerance: Duration,
    ) -> Instant {
        let now = Instant::now();
        let side = role.side();
        let asked = self.asked.get_mut(id).and_then(Option::take);
        self.waiting[side] = self.waiting[side].saturating_sub(1);
        match role {
            Role::Exclusive | Role::Writer => {
                if self.exclusive > 0 || self.readers > 0 {
                    self.violations[side] += 1;
                }
                self.exclusive += 1;
                // Holders follow each other: every fence is larger than all before it.
                if fence <= self.max_fence {
                    self.fence_errors[side] += 1;
                }
            }
            Role::Permit(n) => {
                self.permits += 1;
                if self.permits > n as usize {
                    self.violations[side] += 1;
                }
                // Permits overlap: a fence must be larger than those granted before the
                // request began (grants seen later may come from concurrent requests).
                if asked.is_some_and(|(_, floor)| fence <= floor) {
                    self.fence_errors[side] += 1;
                }
            }
            Role::Reader => {
                if self.exclusive > 0 {
                    self.violations[side] += 1;
                }
                self.readers += 1;
                // A reader's fence is that of the last write granted before it.
                if fence != self.last_write {
                    self.fence_errors[side] += 1;
                }
            }
        }
        if role != Role::Reader {
            self.max_fence = self.max_fence.max(fence);
        }
        if role == Role::Writer {
            self.last_write = fence;
        }
        // Order: did this grant overtake a worker still waiting that asked earlier?
        if let (Role::Exclusive | Role::Permit(_), Some((asked_at, _))) = (role, asked) {
            let earlier = |margin: Duration| {
                self.asked
                    .iter()
                    .flatten()
                    .any(|(t, _)| *t + margin < asked_at)
            };
            if earlier(tolerance) {
                self.out_of_order += 1;
            } else if earlier(Duration::ZERO) {
                self.near_ties += 1;
            }
        }
        // Handoff: from the release that let this holder in.
        match role {
            Role::Exclusive | Role::Permit(_) => {
                if let Some((released_at, releaser)) = self.pending.pop_front()
                    && releaser != id
                {
                    self.handoffs[side].push(now.saturating_duration_since(released_at));
                }
            }
            Role::Writer => {
                if let Some(released_at) = self.last_reader_out.take() {
                    self.handoffs[side].push(now.saturating_duration_since(released_at));
                }
            }
            Role::Reader => {
                // Another reader came in: the lock did not pass to the writer.
                self.last_reader_out = None;
                if let Some(released_at) = self.writer_out.take() {
                    self.handoffs[side].push(now.saturating_duration_since(released_at));
                }
            }
        }
        now
    }

    /// Books the instant just before a release call.
    pub(super) fn releasing(&mut self, id: usize, role: Role, granted_at: Instant) {
        let now = Instant::now();
        let side = role.side();
        self.holds[side].push(now.saturating_duration_since(granted_at));
        match role {
            Role::Exclusive | Role::Permit(_) => {
                if role == Role::Exclusive {
                    self.exclusive = self.exclusive.saturating_sub(1);
                } else {
                    self.permits = self.permits.saturating_sub(1);
                }
                if self.waiting[0] > 0 {
                    self.pending.push_back((now, id));
                }
            }
            Role::Writer => {
                self.exclusive = self.exclusive.saturating_sub(1);
                if self.waiting[1] > 0 {
                    self.writer_out = Some(now);
                }
            }
            Role::Reader => {
                self.readers = self.readers.saturating_sub(1);
                if self.readers == 0 && self.waiting[0] > 0 {
                    self.last_reader_out = Some(now);
                }
            }
        }
    }

    pub(super) fn violation(&mut self, role: Role) {
        self.violations[role.side()] += 1;
    }

    pub(super) fn fence_error(&mut self, role: Role) {
        self.fence_errors[role.side()] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{MANY_WORKERS, ORDER_TOLERANCE};

    fn book(workers: usize) -> Book {
        Book {
            asked: vec![None; workers],
            ..Book::default()
        }
    }

    #[test]
    fn two_exclusive_holders_are_a_violation() {
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        b.ask(1, Role::Exclusive);
        let t0 = b.granted(0, Role::Exclusive, 10, ORDER_TOLERANCE);
        b.granted(1, Role::Exclusive, 11, ORDER_TOLERANCE);
        assert_eq!(b.violations[0], 1);
        b.releasing(0, Role::Exclusive, t0);
        assert_eq!(b.fence_errors[0], 0);
    }

    #[test]
    fn a_fence_that_does_not_grow_is_counted() {
        let mut b = book(1);
        b.ask(0, Role::Exclusive);
        let t = b.granted(0, Role::Exclusive, 10, ORDER_TOLERANCE);
        b.releasing(0, Role::Exclusive, t);
        b.ask(0, Role::Exclusive);
        b.granted(0, Role::Exclusive, 10, ORDER_TOLERANCE);
        assert_eq!(b.fence_errors[0], 1);
        assert_eq!(b.violations[0], 0);
    }

    #[test]
    fn more_permits_than_n_is_a_violation() {
        let mut b = book(3);
        for id in 0..3 {
            b.ask(id, Role::Permit(2));
        }
        for (id, fence) in [(0, 1), (1, 2)] {
            b.granted(id, Role::Permit(2), fence, ORDER_TOLERANCE);
        }
        assert_eq!(b.violations[0], 0);
        b.granted(2, Role::Permit(2), 3, ORDER_TOLERANCE);
        assert_eq!(b.violations[0], 1);
    }

    #[test]
    fn a_writer_with_readers_and_a_reader_with_a_writer_are_violations() {
        let mut b = book(3);
        b.ask(1, Role::Reader);
        let r = b.granted(1, Role::Reader, 0, ORDER_TOLERANCE);
        b.ask(0, Role::Writer);
        b.granted(0, Role::Writer, 5, ORDER_TOLERANCE);
        assert_eq!(b.violations, [1, 0]);
        b.ask(2, Role::Reader);
        b.granted(2, Role::Reader, 5, ORDER_TOLERANCE);
        assert_eq!(b.violations, [1, 1]);
        // A reader must see the last write's fence.
        b.releasing(1, Role::Reader, r);
        b.ask(1, Role::Reader);
        b.granted(1, Role::Reader, 0, ORDER_TOLERANCE);
        assert_eq!(b.fence_errors, [0, 1]);
    }

    #[test]
    fn overtaking_an_earlier_waiter_is_out_of_order() {
        let mut b = book(3);
        b.ask(0, Role::Exclusive);
        b.asked[0] = Some((Instant::now() - Duration::from_millis(10), 0));
        b.ask(1, Role::Exclusive);
        b.granted(1, Role::Exclusive, 1, ORDER_TOLERANCE);
        assert_eq!((b.out_of_order, b.near_ties), (1, 0));
        // A request that began just before the grantee's is a near tie, not counted.
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        b.ask(1, Role::Exclusive);
        b.asked[0] = b.asked[1].map(|(t, f)| (t - Duration::from_micros(10), f));
        b.granted(1, Role::Exclusive, 1, ORDER_TOLERANCE);
        assert_eq!((b.out_of_order, b.near_ties), (0, 1));
        // In request order: nothing.
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        b.asked[0] = Some((Instant::now() - Duration::from_millis(10), 0));
        b.ask(1, Role::Exclusive);
        b.granted(0, Role::Exclusive, 1, ORDER_TOLERANCE);
        assert_eq!((b.out_of_order, b.near_ties), (0, 0));
    }

    #[test]
    fn many_waiters_served_in_request_order_are_in_order() {
        // 16 workers ask one after the other (1.5 ms apart: more than the tolerance); the lock
        // goes to them in that order, each handing off to the next.
        let mut b = book(MANY_WORKERS);
        let t0 = Instant::now() - Duration::from_millis(100);
        for id in 0..MANY_WORKERS {
            b.ask(id, Role::Exclusive);
            b.asked[id] = Some((t0 + Duration::from_micros(1500) * id as u32, 0));
        }
        let mut fence = 0;
        for id in 0..MANY_WORKERS {
            fence += 1;
            let t = b.granted(id, Role::Exclusive, fence, ORDER_TOLERANCE);
            b.releasing(id, Role::Exclusive, t);
        }
        assert_eq!((b.out_of_order, b.near_ties), (0, 0));
        assert_eq!(b.violations, [0, 0]);
        assert_eq!(b.fence_errors, [0, 0]);
        // Every release but the last had someone waiting, and each went to another worker.
        assert_eq!(b.handoffs[0].len(), MANY_WORKERS - 1);
        // The last asker served first overtakes 15 waiters: one out-of-order grant.
        let mut b = book(MANY_WORKERS);
        for id in 0..MANY_WORKERS {
            b.ask(id, Role::Exclusive);
            b.asked[id] = Some((t0 + Duration::from_micros(1500) * id as u32, 0));
        }
        b.granted(MANY_WORKERS - 1, Role::Exclusive, 1, ORDER_TOLERANCE);
        assert_eq!((b.out_of_order, b.near_ties), (1, 0));
    }

    #[test]
    fn handoffs_count_releases_to_another_worker_while_someone_waited() {
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        let t = b.granted(0, Role::Exclusive, 1, ORDER_TOLERANCE);
        b.ask(1, Role::Exclusive);
        b.releasing(0, Role::Exclusive, t);
        b.granted(1, Role::Exclusive, 2, ORDER_TOLERANCE);
        assert_eq!(b.handoffs[0].len(), 1);
        // A release with nobody waiting, then the same worker again: no handoff.
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        let t = b.granted(0, Role::Exclusive, 1, ORDER_TOLERANCE);
        b.releasing(0, Role::Exclusive, t);
        b.ask(0, Role::Exclusive);
        b.granted(0, Role::Exclusive, 2, ORDER_TOLERANCE);
        assert_eq!(b.handoffs[0].len(), 0);
    }
}
