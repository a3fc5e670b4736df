//! The holder's local view of its lease: a conservative deadline, and the signal that fires
//! when the lock is lost.
//!
//! A lease is confirmed by an operation sent at instant `sent_at` (read on the monotonic clock
//! *before* the request left) that set a TTL of `ttl` on the server. The server cannot have
//! expired the key before `sent_at + ttl`, as long as both clocks advance at roughly the same
//! rate; the local deadline subtracts a drift margin on top: `sent_at + ttl - drift(ttl)`.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::LostReason;

/// How much to subtract from a lease for clock drift: `ttl * factor + min`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockDrift {
    /// The proportional part (default 0.01, as the Redlock description suggests).
    pub factor: f64,
    /// The constant part (default 2 ms).
    pub min: Duration,
}

impl Default for ClockDrift {
    fn default() -> Self {
        ClockDrift {
            factor: 0.01,
            min: Duration::from_millis(2),
        }
    }
}

impl ClockDrift {
    /// The margin for a lease of `ttl`.
    pub fn margin(&self, ttl: Duration) -> Duration {
        ttl.mul_f64(self.factor) + self.min
    }

    /// The local deadline of a lease of `ttl` confirmed by a request sent at `sent_at`
    /// (`sent_at` itself if the margin eats the whole lease).
    pub(crate) fn deadline(&self, sent_at: Instant, ttl: Duration) -> Instant {
        sent_at + ttl.saturating_sub(self.margin(ttl))
    }
}

/// What a guard knows about its lease. Shared between the guard, its lost signals and the
/// watchdog through a `watch` channel.
#[derive(Debug, Clone)]
pub(crate) struct LeaseState {
    /// The lease length the last confirmation set (and the watchdog renews with).
    pub(crate) ttl: Duration,
    /// When the request that confirmed the current deadline was sent.
    pub(crate) confirmed_at: Instant,
    /// The conservative local deadline.
    pub(crate) deadline: Instant,
    /// Set once the lock is known lost (or released); never cleared.
    pub(crate) lost: Option<LostReason>,
    /// The reason to report if the deadline passes with nothing else known.
    pub(crate) expiry_reason: LostReason,
    /// Ends the hold's count in the metrics and its span at the lease's end.
    pub(crate) held: Option<crate::observe::HeldEnd>,
}

impl LeaseState {
    pub(crate) fn new(sent_at: Instant, ttl: Duration, drift: &ClockDrift) -> Self {
        LeaseState {
            ttl,
            confirmed_at: sent_at,
            deadline: drift.deadline(sent_at, ttl),
            lost: None,
            expiry_reason: LostReason::Expired { last_error: None },
            held: None,
        }
    }

    /// Why the lock is lost at `now`, or `None` while it is held.
    pub(crate) fn lost_at(&self, now: Instant) -> Option<LostReason> {
        match &self.lost {
            Some(r) => Some(r.clone()),
            None if now >= self.deadline => Some(self.expiry_reason.clone()),
            None => None,
        }
    }
}

/// The shared, updatable lease of one guard: the guard and the watchdog each hold a clone of
/// the sender (one channel, no allocation of its own).
pub(crate) type Lease = watch::Sender<LeaseState>;

/// Records a confirmation (acquire, extend or renewal) sent at `sent_at` that set the lease to
/// `ttl`. A confirmation older than the current one is ignored; a lost lease stays lost.
///
/// Waiters on the lost signal are woken only when the deadline moves earlier (a shorter lease):
/// one that sleeps until the old deadline looks again then and sleeps on, so a renewal, which
/// moves it later, wakes nobody.
pub(crate) fn confirm(lease: &Lease, sent_at: Instant, ttl: Duration, drift: &ClockDrift) {
    lease.send_if_modified(|s| {
        if s.lost.is_some() || sent_at < s.confirmed_at {
            return false;
        }
        let deadline = drift.deadline(sent_at, ttl);
        let earlier = deadline < s.deadline;
        s.ttl = ttl;
        s.confirmed_at = sent_at;
        s.deadline = deadline;
        earlier
    });
}

/// How a lease ends, as [`end`] is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Redis answered that the key no longer carries this hold's token.
    NotOwner,
    /// The local deadline passed without a confirmed renewal: lost for the lease's
    /// `expiry_reason` (the last renewal error, or the `max_hold` cap).
    DeadlinePassed,
    /// The holder let go of the lock by a release sent at this instant. If the deadline had
    /// passed by then, the lease was lost first, and that loss is what is reported.
    Released(Instant),
}

/// The lock a lease belongs to, as a loss is reported: its name and its kind's label.
#[derive(Clone, Copy)]
pub(crate) struct Lock<'a> {
    pub(crate) name: &'a str,
    pub(crate) kind: &'static str,
    /// An election's term (see [`crate::engine::Protocol::is_term`]).
    pub(crate) term: bool,
}

/// Ends the lease of `hold` (fence `fence`): the one place where a lock is found lost or let
/// go. The lease is marked (its lost signals fire with the reason) and, if it is a loss, the
/// loss is reported (`fencelock_losses_total` and the "lock lost" event, see
/// [`crate::observe::ended`]).
///
/// Only the first call for a lease does anything: when two paths notice a loss (the deadline
/// passing while a renewal hears that the key is gone), it is reported once. Returns the reason
/// if this call ended the lease.
pub(crate) fn end(lease: &Lease, lock: Lock<'_>, fence: u64, ending: Ending) -> Option<LostReason> {
    let mut ended = None;
    let mut held = None;
    lease.send_if_modified(|s| {
        if s.lost.is_some() {
            return false;
        }
        held = s.held.take();
        let reason = match ending {
            Ending::NotOwner => LostReason::NotOwner,
            Ending::Released(at) if at < s.deadline => LostReason::Released,
            Ending::DeadlinePassed | Ending::Released(_) => s.expiry_reason.clone(),
        };
        ended = Some(reason.clone());
        s.lost = Some(reason);
        // Nobody to wake when nobody subscribed (an uncontended release, with no `lost()`):
        // the state changes without the notification. One who subscribes later reads it.
        lease.receiver_count() > 0
    });
    // Reported outside the channel's lock: a subscriber may take its time.
    if let Some(reason) = &ended {
        crate::observe::ended(held, (lock.name, lock.kind), lock.term, fence, reason);
    }
    ended
}

/// Resolves when a lock is no longer held by its guard: Redis said so, the local deadline passed
/// without a confirmed renewal, or the guard released it.
///
/// It is cheap to clone and `'static`, so it can be moved into the task doing the protected work
/// and raced against it:
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// let guard = client.lock("reports/nightly").acquire().await?;
/// let lost = guard.lost();
/// tokio::select! {
///     reason = lost => eprintln!("stopping: lock lost ({reason})"),
///     () = do_the_work(guard.fence()) => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// # async fn do_the_work(_fence: u64) {}
/// ```
#[derive(Debug, Clone)]
pub struct LostSignal {
    rx: watch::Receiver<LeaseState>,
}

impl LostSignal {
    pub(crate) fn new(lease: &Lease) -> Self {
        LostSignal {
            rx: lease.subscribe(),
        }
    }

    /// Whether the lock is already lost (or released), judged now.
    pub fn is_lost(&self) -> bool {
        self.rx.borrow().lost_at(Instant::now()).is_some()
    }

    /// Why the lock is lost (or released), if it is, judged now; `None` while it is held.
    pub fn reason(&self) -> Option<LostReason> {
        let lost = self.rx.borrow().lost_at(Instant::now());
        // The guard and the watchdog gone: the lock was released.
        lost.or_else(|| {
            self.rx
                .has_changed()
                .is_err()
                .then_some(LostReason::Released)
        })
    }

    /// Waits until the lock is lost and says why.
    pub async fn wait(&self) -> LostReason {
        let mut rx = self.rx.clone();
        loop {
            let deadline = {
                let state = rx.borrow_and_update();
                if let Some(reason) = state.lost_at(Instant::now()) {
                    return reason;
                }
                state.deadline
            };
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        // The guard and the watchdog are gone: the lock was released.
                        return rx.borrow().lost.clone().unwrap_or(LostReason::Released);
                    }
                }
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

impl IntoFuture for LostSignal {
    type Output = LostReason;
    type IntoFuture = Pin<Box<dyn Future<Output = LostReason> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.wait().await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_margin_matches_redlock_convention() {
        let d = ClockDrift::default();
        assert_eq!(
            d.margin(Duration::from_secs(10)),
            Duration::from_millis(102)
        );
        let now = Instant::now();
        assert_eq!(d.deadline(now, Duration::from_millis(1)), now);
    }

    #[tokio::test(start_paused = true)]
    async fn signal_fires_at_deadline_and_older_confirmations_are_ignored() {
        let drift = ClockDrift::default();
        let t0 = Instant::now();
        let lease: Lease =
            watch::channel(LeaseState::new(t0, Duration::from_millis(1000), &drift)).0;
        let sig = LostSignal::new(&lease);
        assert!(!sig.is_lost());
        tokio::time::advance(Duration::from_millis(500)).await;
        confirm(&lease, Instant::now(), Duration::from_millis(1000), &drift);
        // A confirmation sent before the current one must not move the deadline back.
        confirm(&lease, t0, Duration::from_millis(10), &drift);
        let expected = Instant::now() + Duration::from_millis(1000 - 12);
        assert_eq!(lease.borrow().deadline, expected);
        let reason = sig.wait().await;
        assert_eq!(Instant::now(), expected);
        assert_eq!(reason, LostReason::Expired { last_error: None });
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_signal_follows_the_deadline_later_and_earlier() {
        let drift = ClockDrift::default();
        let t0 = Instant::now();
        let lease: Lease =
            watch::channel(LeaseState::new(t0, Duration::from_millis(1000), &drift)).0;
        let waiting = tokio::spawn(LostSignal::new(&lease).into_future());
        tokio::task::yield_now().await;
        // Later: the waiter is not woken by the renewal, and still fires at the new deadline.
        tokio::time::advance(Duration::from_millis(500)).await;
        confirm(&lease, Instant::now(), Duration::from_millis(1000), &drift);
        let later = Instant::now() + Duration::from_millis(1000 - 12);
        // Earlier: a shorter lease must wake it, or it would sleep past the new deadline.
        tokio::time::advance(Duration::from_millis(100)).await;
        confirm(&lease, Instant::now(), Duration::from_millis(200), &drift);
        let earlier = Instant::now() + Duration::from_millis(200 - 4);
        assert!(earlier < later);
        let reason = waiting.await.unwrap();
        assert_eq!(Instant::now(), earlier);
        assert_eq!(reason, LostReason::Expired { last_error: None });
    }

    fn hold() -> Lock<'static> {
        Lock {
            name: "lease",
            kind: "lock",
            term: false,
        }
    }

    #[tokio::test]
    async fn lost_is_sticky() {
        let drift = ClockDrift::default();
        let lease: Lease = watch::channel(LeaseState::new(
            Instant::now(),
            Duration::from_secs(10),
            &drift,
        ))
        .0;
        let hold = hold();
        assert_eq!(
            end(&lease, hold, 1, Ending::NotOwner),
            Some(LostReason::NotOwner)
        );
        assert_eq!(end(&lease, hold, 1, Ending::Released(Instant::now())), None);
        assert_eq!(end(&lease, hold, 1, Ending::DeadlinePassed), None);
        confirm(&lease, Instant::now(), Duration::from_secs(10), &drift);
        assert_eq!(LostSignal::new(&lease).await, LostReason::NotOwner);
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_after_the_deadline_ends_the_lease_as_lost() {
        let drift = ClockDrift::default();
        let t0 = Instant::now();
        let ttl = Duration::from_millis(1000);
        let hold = hold();
        let released: Lease = watch::channel(LeaseState::new(t0, ttl, &drift)).0;
        assert_eq!(
            end(&released, hold, 1, Ending::Released(t0 + ttl / 2)),
            Some(LostReason::Released)
        );
        let capped: Lease = watch::channel(LeaseState::new(t0, ttl, &drift)).0;
        capped.send_modify(|s| s.expiry_reason = LostReason::MaxHoldReached);
        assert_eq!(
            end(&capped, hold, 1, Ending::Released(t0 + ttl)),
            Some(LostReason::MaxHoldReached)
        );
        assert_eq!(LostSignal::new(&capped).await, LostReason::MaxHoldReached);
    }

    /// Each loss is counted once with its reason, however many paths notice it; a release is
    /// not counted.
    #[cfg(feature = "metrics")]
    #[test]
    fn each_loss_is_counted_once_and_a_release_never() {
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};

        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        metrics::with_local_recorder(&recorder, || {
            let drift = ClockDrift::default();
            let hold = hold();
            let now = Instant::now();
            let lease = || -> Lease {
                watch::channel(LeaseState::new(now, Duration::from_secs(10), &drift)).0
            };
            // The deadline and a renewal's answer race: the first one reports.
            let raced = lease();
            end(&raced, hold, 1, Ending::DeadlinePassed);
            end(&raced, hold, 1, Ending::NotOwner);
            end(&raced, hold, 1, Ending::Released(now));
            let capped = lease();
            capped.send_modify(|s| s.expiry_reason = LostReason::MaxHoldReached);
            end(&capped, hold, 1, Ending::DeadlinePassed);
            end(&capped, hold, 1, Ending::DeadlinePassed);
            let taken = lease();
            end(&taken, hold, 1, Ending::NotOwner);
            end(&taken, hold, 1, Ending::NotOwner);
            let released = lease();
            end(&released, hold, 1, Ending::Released(now));
            end(&released, hold, 1, Ending::NotOwner);
        });
        let mut counted: Vec<(String, u64)> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == "fencelock_losses_total")
            .map(|(key, _, _, value)| {
                let reason = key
                    .key()
                    .labels()
                    .filter(|l| l.key() == "reason")
                    .map(|l| l.value().to_owned())
                    .collect();
                let DebugValue::Counter(n) = value else {
                    panic!("{value:?}")
                };
                (reason, n)
            })
            .collect();
        counted.sort();
        assert_eq!(
            counted,
            vec![
                ("expired".to_owned(), 1),
                ("max_hold_reached".to_owned(), 1),
                ("not_owner".to_owned(), 1)
            ]
        );
    }
}
