//! The fair lock's scripts as the model runs them: `kinds/fair/acquire.lua` (with a queue
//! timeout), `release.lua` and the queue's helpers (`queue.lua`), and the fence rule.

use super::*;

impl FairModel {
    pub(crate) fn next_fence(s: &mut FairState) -> u32 {
        let fence = (s.fence + 1).max(s.clock());
        s.fence = fence;
        s.record_grant(fence);
        fence
    }

    /// `drop_lapsed`: takes out every place that lapsed by now.
    pub(crate) fn drop_lapsed(&self, s: &mut FairState) {
        if !self.mutants.no_lapse {
            let now = s.now;
            s.queue.retain(|p| p.lapses > now);
        }
    }

    pub(crate) fn grant(&self, n: &mut FairState, i: u8, token: u8) {
        let fence = Self::next_fence(n);
        let expires = n.now + FAIR_LEASE;
        n.lock = Some(FairHold {
            owner: i,
            token,
            fence,
            expires,
            passed: false,
            since: n.now,
        });
        n.clients[usize::from(i)].phase = FairPhase::Holding {
            token,
            fence,
            deadline: expires,
        };
    }

    /// `acquire.lua` with a queue timeout, run by client `i`.
    pub(crate) fn acquire(&self, n: &mut FairState, i: u8) {
        let c = usize::from(i);
        let now = n.now;
        let (token, new) = match n.clients[c].phase {
            FairPhase::Waiting { token, .. } => (token, false),
            _ => ((i << 4) | (n.clients[c].requests & 15), true),
        };
        if new {
            n.clients[c].requests += 1;
        }
        let held = n.holder();
        if let Some(h) = held
            && h.token == token
        {
            // Passed to this waiter, whose message was lost: confirmed with the full lease.
            let expires = now + FAIR_LEASE;
            n.lock = Some(FairHold {
                expires,
                passed: false,
                since: now,
                ..h
            });
            n.clients[c].phase = FairPhase::Holding {
                token,
                fence: h.fence,
                deadline: expires,
            };
            n.seen.took_own = true;
            return;
        }
        if held.is_none() && n.queue.is_empty() {
            self.grant(n, i, token);
            return;
        }
        self.drop_lapsed(n);
        if !n.queue.iter().any(|p| p.token == token) {
            n.queue.push(Place {
                token,
                client: i,
                lapses: now + PLACE,
            });
        }
        let head = n.queue[0].token;
        if held.is_none() && (head == token || self.mutants.skip_queue) {
            if n.queue
                .iter()
                .take_while(|p| p.token != token)
                .any(|p| p.lapses > now)
            {
                n.order_broken = true;
            }
            n.queue.retain(|p| p.token != token);
            self.grant(n, i, token);
            return;
        }
        for p in &mut n.queue {
            if p.token == token {
                p.lapses = now + PLACE;
            }
        }
        n.clients[c].phase = FairPhase::Waiting {
            token,
            wake: now + 1,
        };
        n.seen.two_queued |= n.queue.len() >= 2;
    }

    /// `release.lua` run by client `i` (a holder; a waiter does not give up here).
    pub(crate) fn release(&self, n: &mut FairState, i: u8) {
        let c = usize::from(i);
        let now = n.now;
        let FairPhase::Holding { token, .. } = n.clients[c].phase else {
            return;
        };
        n.clients[c].phase = FairPhase::Idle;
        let held = n.holder().is_some_and(|h| h.token == token);
        // The caller's own place, if it has one, goes (`queued`).
        n.queue.retain(|p| p.token != token);
        if !held {
            return;
        }
        // `next_head`: the first place other than the caller's that has not lapsed.
        let head = n
            .queue
            .iter()
            .copied()
            .find(|p| p.token != token && (self.mutants.no_lapse || p.lapses > now));
        n.lock = None;
        if let Some(head) = head {
            // `release.lua` works the pass's fence out itself: max(last + 1, clock).
            let fence = if self.mutants.pass_fence_clock_only {
                let fence = n.clock();
                n.fence = fence;
                n.record_grant(fence);
                fence
            } else {
                Self::next_fence(n)
            };
            let ends = if self.mutants.unbounded_claim {
                now + FAIR_LEASE
            } else {
                head.lapses.min(now + CLAIM)
            };
            n.lock = Some(FairHold {
                owner: head.client,
                token: head.token,
                fence,
                expires: ends,
                passed: true,
                since: now,
            });
            n.queue.retain(|p| p.token != head.token);
            n.seen.passed = true;
            let waiter = &mut n.clients[usize::from(head.client)];
            if waiter.phase != FairPhase::Dead {
                waiter.inbox = Some((head.token, fence, ends));
            }
        }
        self.drop_lapsed(n);
    }
}
