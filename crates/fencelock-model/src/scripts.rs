//! The scripts as the model runs them: acquire, renew and release (kinds/plain/*.lua), the pass
//! and its claim, and the fenced resource's check (fenced/check.lua).

use super::*;

impl LockModel {
    /// Whether the resource, having accepted `resource`, accepts a write with `fence`
    /// (`fenced/check.lua`).
    pub fn resource_accepts(&self, resource: u32, fence: u32) -> bool {
        self.mutants.no_resource_check || fence >= resource
    }

    pub(crate) fn next_fence(&self, last: u32, clock: u32) -> u32 {
        if self.mutants.fence_counter_only {
            last + 1
        } else if self.mutants.fence_clock_only {
            clock
        } else {
            (last + 1).max(clock)
        }
    }

    /// The acquire script (kinds/plain/acquire.lua) run by client `i`.
    pub(crate) fn acquire(&self, n: &mut State, i: u8) {
        let c = usize::from(i);
        let now = n.now;
        // A new request's token is taken only if the script writes it (a grant, a place).
        let (token, new) = match n.clients[c].phase {
            Phase::Waiting { token, .. } => (token, false),
            _ => ((i << 4) | (n.clients[c].requests & 15), true),
        };
        let held = n.server.holder(now);
        if new && (held.is_none() || self.passing) {
            n.clients[c].requests += 1;
        }
        // A grant is marked (someone waited: its release passes the lock) when the line is not
        // empty, except on a new request's first try, which reads no line (`kinds/plain/mod.rs`):
        // the waiters then get the lock by their own next try.
        let mut mark = false;
        if self.passing {
            n.server.waiters.retain(|&(_, _, t)| t != token);
            mark = !new && !n.server.waiters.is_empty();
        }
        match held {
            None => {
                let clock = n.clock();
                let fence = self.next_fence(n.server.fence, clock);
                n.server.fence = fence;
                let grant = n.record_grant(fence);
                let expires = now + LEASE;
                n.server.lock = Some(Hold {
                    owner: i,
                    token,
                    fence,
                    expires,
                    marked: mark,
                    grant,
                    passed: false,
                    since: now,
                });
                n.clients[c].phase = Phase::Holding {
                    token,
                    fence,
                    grant,
                    deadline: expires,
                    decided: false,
                };
            }
            Some(h) if h.token == token => {
                // Passed to this waiter, whose message was lost: confirmed with the full lease.
                let expires = now + LEASE;
                n.server.lock = Some(Hold {
                    expires,
                    marked: h.marked || mark,
                    passed: false,
                    since: now,
                    ..h
                });
                n.clients[c].phase = Phase::Holding {
                    token,
                    fence: h.fence,
                    grant: h.grant,
                    deadline: expires,
                    decided: false,
                };
                n.seen.took_own = true;
            }
            Some(h) => {
                if self.passing {
                    n.server.lock = Some(Hold { marked: true, ..h });
                    let lapses = now + PLACE;
                    n.server.waiters.push((lapses, i, token));
                    n.server.waiters.sort_unstable();
                    let wake = h.expires.min(now + REFRESH);
                    n.clients[c].phase = Phase::Waiting { token, wake };
                } else {
                    n.clients[c].phase = Phase::Idle;
                }
            }
        }
    }

    /// The release script (kinds/plain/release.lua) run by client `i`.
    pub(crate) fn release(&self, n: &mut State, i: u8) {
        let c = usize::from(i);
        let now = n.now;
        let Phase::Holding { token, .. } = n.clients[c].phase else {
            return;
        };
        n.clients[c].phase = Phase::Idle;
        let Some(h) = n.server.holder(now).filter(|h| h.token == token) else {
            n.server.waiters.retain(|&(_, _, t)| t != token);
            return;
        };
        n.server.lock = None;
        if !h.marked || !self.passing {
            return;
        }
        n.server.waiters.retain(|&(lapses, _, _)| lapses > now);
        if n.server.waiters.is_empty() {
            return;
        }
        let (lapses, w, wtoken) = n.server.waiters.remove(0);
        let clock = n.clock();
        let fence = self.next_fence(n.server.fence, clock);
        n.server.fence = fence;
        let grant = n.record_grant(fence);
        let ends = if self.mutants.unbounded_claim {
            now + LEASE
        } else {
            lapses.min(now + CLAIM)
        };
        n.server.lock = Some(Hold {
            owner: w,
            token: wtoken,
            fence,
            expires: ends,
            marked: !n.server.waiters.is_empty(),
            grant,
            passed: true,
            since: now,
        });
        n.seen.passed = true;
        let waiter = &mut n.clients[usize::from(w)];
        if waiter.phase != Phase::Dead {
            waiter.inbox = Some(Pass {
                token: wtoken,
                fence,
                ends,
                grant,
            });
        }
    }
}
