//! How long to wait before trying again: one policy type, and the named policies the library
//! retries by.

use std::time::Duration;

/// Delays that grow by `factor` from `first` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    next: Duration,
    first: Duration,
    factor: u32,
    max: Duration,
}

impl Backoff {
    /// A policy starting at `first`, multiplied by `factor` after each delay, capped at `max`.
    pub(crate) const fn new(first: Duration, factor: u32, max: Duration) -> Self {
        Backoff {
            next: first,
            first,
            factor,
            max,
        }
    }

    /// The next delay; the one after it grows.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(self.factor).min(self.max);
        delay
    }

    /// The next delay with jitter: between half of it and all of it, at random (the next one
    /// grows as with [`next_delay`](Self::next_delay)), so that clients that back off together
    /// do not come back together.
    pub(crate) fn next_jittered(&mut self) -> Duration {
        let delay = self.next_delay();
        let half = delay / 2;
        let mut bytes = [0u8; 2];
        if getrandom::fill(&mut bytes).is_err() {
            return delay;
        }
        half + half.mul_f64(f64::from(u16::from_le_bytes(bytes)) / f64::from(u16::MAX))
    }

    /// Back to the first delay (after a success).
    pub(crate) fn reset(&mut self) {
        self.next = self.first;
    }
}

/// An operation on servers that were briefly unreachable (an acquisition's retry with the same
/// token, a background release): 50 ms, 200 ms, 800 ms.
pub(crate) const RETRY: Backoff =
    Backoff::new(Duration::from_millis(50), 4, Duration::from_millis(800));

/// A lost pub/sub connection: 50 ms, doubling, at most 2 s between attempts.
pub(crate) const RECONNECT: Backoff =
    Backoff::new(Duration::from_millis(50), 2, Duration::from_secs(2));

/// Checking that the sharded subscriptions of a cluster's listener are still on the connections
/// they were confirmed on: 250 ms after a sign of trouble (a lost channel, a failed or misrouted
/// subscription), doubling, then every 10 s.
pub(crate) const AUDIT: Backoff =
    Backoff::new(Duration::from_millis(250), 2, Duration::from_secs(10));

/// Asking another sentinel after one failed: 500 ms each time.
pub(crate) const SENTINEL: Backoff =
    Backoff::new(Duration::from_millis(500), 1, Duration::from_millis(500));

/// A multi-lock request that waited for one name and found another held: 5 ms, doubling, at
/// most 40 ms (jittered: 2.5–5, 5–10, 10–20, then 20–40 ms) before it waits again in that
/// name's line. The cap is tens of milliseconds, not seconds: the pause only has to let the
/// request that holds the other name finish (which breaks the round-by-round hand-back of two
/// requests in opposite orders); a long one (500 ms before) let the others and a hot taker take
/// the names meanwhile, round after round, and starved the request that slept
/// (docs/BENCHMARKS.md, `fencelock-multi`).
pub(crate) const MULTI: Backoff =
    Backoff::new(Duration::from_millis(5), 2, Duration::from_millis(40));

/// A failed renewal, tried again until the lease's deadline: a tenth of the lease, within 5 ms
/// and 1 s (a constant delay per lease, so the policy is made per lock).
pub(crate) fn renewal(ttl: Duration) -> Backoff {
    let delay = (ttl / 10).clamp(Duration::from_millis(5), Duration::from_secs(1));
    Backoff::new(delay, 1, delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jittered_delays_are_between_half_and_all_of_the_delay() {
        let mut multi = MULTI;
        let mut plain = MULTI;
        for _ in 0..12 {
            let delay = plain.next_delay();
            let jittered = multi.next_jittered();
            assert!(
                jittered >= delay / 2 && jittered <= delay,
                "{jittered:?} of {delay:?}"
            );
        }
    }

    #[test]
    fn delays_grow_to_the_cap_and_reset() {
        let mut retry = RETRY;
        let ms = |d: Duration| d.as_millis();
        assert_eq!(
            [
                retry.next_delay(),
                retry.next_delay(),
                retry.next_delay(),
                retry.next_delay()
            ]
            .map(ms),
            [50, 200, 800, 800]
        );
        retry.reset();
        assert_eq!(ms(retry.next_delay()), 50);
        let mut reconnect = RECONNECT;
        let delays: Vec<u128> = (0..8).map(|_| ms(reconnect.next_delay())).collect();
        assert_eq!(delays, [50, 100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(ms(SENTINEL.clone().next_delay()), 500);
        let mut multi = MULTI;
        let delays: Vec<u128> = (0..6).map(|_| ms(multi.next_delay())).collect();
        assert_eq!(delays, [5, 10, 20, 40, 40, 40]);
        assert_eq!(ms(renewal(Duration::from_secs(30)).next_delay()), 1000);
        assert_eq!(ms(renewal(Duration::from_millis(20)).next_delay()), 5);
        assert_eq!(ms(renewal(Duration::from_millis(300)).next_delay()), 30);
    }
}
