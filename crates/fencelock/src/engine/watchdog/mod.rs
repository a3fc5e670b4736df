//! The watchdog: one task per client that keeps every auto-renewed lock alive, and releases the
//! locks of guards that were dropped without being released.
//!
//! Each lock is renewed a third of its lease after its last confirmation. Locks that fall due
//! together are renewed in one pipeline per instance, so renewing many locks costs one round
//! trip per batch, not one per lock. A renewal counts when a majority of instances (the one
//! instance, without Redlock) extended it. When enough instances say the key is gone or taken
//! that no majority is left, the guard is marked lost at once; a renewal that fails (timeout,
//! connection error) is retried quickly until the local deadline, at which point the guard counts
//! as lost. A failed or partial renewal never deletes anything.
//!
//! When the client moves to another master (Sentinel), every lock is renewed at once: the new
//! master may not have a grant the old one had not yet replicated, and its holder is told now
//! rather than a third of a lease later. A grant asked for before the move and answered after
//! it is checked the same way as soon as it arrives.

use std::cmp::Reverse;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use smallvec::SmallVec;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

mod schedule;

use schedule::{Due, Entry, Schedule};

use crate::engine::{Abandoned, ExtendItem, Extended, Hold, Verdict, extend_many, judge_extension};
use crate::error::LostReason;
use crate::lease::{ClockDrift, Ending, Lease, confirm};
use crate::quorum::{Answer, Instances};

/// A hold (of any kind of lock) the watchdog keeps alive, or only watches until its deadline.
pub(crate) struct Renewal {
    pub(crate) hold: Arc<Hold>,
    pub(crate) fence: u64,
    pub(crate) lease: Lease,
    /// Stop renewing after this instant (the `max_hold` cap).
    pub(crate) hold_until: Option<Instant>,
}

/// The handle guards and lock requests use to talk to the watchdog task.
///
/// Taking and releasing a lock never wakes the task: a new hold goes straight into the shared
/// schedule, and the task is woken only when the hold falls due before the instant it sleeps
/// until; a stopped hold is only taken out of the schedule (its place in the queue is dropped
/// when it comes up). So an uncontended acquire and release cost no task switch.
#[derive(Clone)]
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
    /// Locks whose guard was dropped (or whose acquisition was cancelled or lost), released by
    /// the task in the background.
    releases: mpsc::UnboundedSender<Abandoned>,
}

struct Shared {
    schedule: Mutex<Schedule>,
    /// Wakes the task when a hold falls due before the instant it sleeps until.
    wake: Notify,
}

impl Watchdog {
    /// Starts the task inside the current Tokio runtime. It ends when every handle is gone.
    pub(crate) fn start(instances: Arc<Instances>, drift: ClockDrift) -> Self {
        let (releases, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            schedule: Mutex::new(Schedule::default()),
            wake: Notify::new(),
        });
        tokio::spawn(run(instances, drift, shared.clone(), rx));
        Watchdog { shared, releases }
    }

    /// Keeps a hold alive from now on. `first_due`: renew it first at this instant rather than
    /// a third of a lease after its grant was asked for (now: the client moved to another
    /// master since, and the hold is checked there; a lock passed by a release: a third of the
    /// shorter lease it was passed with).
    pub(crate) fn renew(&self, id: u64, renewal: Renewal, first_due: Option<Instant>) {
        self.schedule(
            id,
            Entry {
                renewal,
                retry_at: first_due,
                renewing: true,
            },
        );
    }

    /// Watches a hold that is not renewed (`auto_renew(false)`): if it is still held when its
    /// deadline passes, its loss is reported then, whether anyone waits for it or not.
    pub(crate) fn watch(&self, id: u64, renewal: Renewal) {
        self.schedule(
            id,
            Entry {
                renewal,
                retry_at: None,
                renewing: false,
            },
        );
    }

    fn schedule(&self, id: u64, entry: Entry) {
        let due = entry.due_at();
        let mut schedule = self.shared.lock();
        schedule.insert(id, entry);
        if schedule.armed.is_none_or(|armed| due < armed) {
            // Woken once: until the task sleeps again, it wakes at `due` or earlier.
            schedule.armed = Some(due);
            drop(schedule);
            self.shared.wake.notify_one();
        }
    }

    /// Stops keeping a hold alive (or watching it).
    pub(crate) fn stop(&self, id: u64) {
        self.shared.lock().remove(id);
    }

    /// Stops keeping hold `id` (if any) alive and releases `lock` in the background. False if
    /// the client is gone (the lease then runs out on its own).
    pub(crate) fn release(&self, id: Option<u64>, lock: Abandoned) -> bool {
        if let Some(id) = id {
            self.stop(id);
        }
        self.releases.send(lock).is_ok()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Schedule> {
        self.schedule.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The longest the task sleeps (when nothing is due sooner): a quarter of the command timeout,
/// within these bounds. Tokio's timer driver, when it parks with no timer to wait for, must be
/// woken (an `eventfd` write and an `epoll_wait` return) by the next timer anyone sets, and
/// every command sets one (its time limit). With this task's timer always set, and due before
/// those limits, the driver is already waking for an earlier instant and setting a limit costs
/// no wake-up (fewer wake-ups per cycle under `strace -c`). Idle, the
/// task wakes four times per command timeout, and finds nothing to do.
const MAX_TICK: Duration = Duration::from_secs(1);
const MIN_TICK: Duration = Duration::from_millis(10);

async fn run(
    instances: Arc<Instances>,
    drift: ClockDrift,
    shared: Arc<Shared>,
    mut releases: mpsc::UnboundedReceiver<Abandoned>,
) {
    let mut switches = instances.switches();
    let tick = (instances.command_timeout() / 4).clamp(MIN_TICK, MAX_TICK);
    loop {
        let next_wake = {
            // Never asleep for longer than a tick, so that the runtime's timer driver always has
            // a timer due before any command's time limit (see `MAX_TICK`).
            let tick_ends = Instant::now() + tick;
            let mut schedule = shared.lock();
            let wake = schedule
                .next_wake()
                .map_or(tick_ends, |due| due.min(tick_ends));
            schedule.armed = Some(wake);
            wake
        };
        tokio::select! {
            release = releases.recv() => match release {
                // Every handle is gone (the schedule goes with the task).
                None => return,
                Some(lock) => {
                    tokio::spawn(lock.release(instances.clone()));
                }
            },
            // A hold fell due before `next_wake` (a permit stored while the task was busy counts).
            () = shared.wake.notified() => {}
            () = switches.changed() => {
                // Replication is asynchronous: the new master may not have every grant. Each
                // hold is checked there at once, and its holder told if it is gone.
                let mut schedule = shared.lock();
                tracing::info!(locks = schedule.entries.len(), "the client moved to another master; checking every hold there");
                schedule.check_all_now(Instant::now());
            }
            () = tokio::time::sleep_until(next_wake) => {
                let due = shared.lock().take_due(Instant::now());
                renew(&instances, &drift, &shared, due).await;
            }
        }
    }
}

/// Renews the locks in `due`: one pipeline per instance, all instances at once. Every lock
/// that is still held afterwards is queued again at its next due time.
async fn renew(instances: &Arc<Instances>, drift: &ClockDrift, shared: &Shared, due: Vec<Due>) {
    if due.is_empty() {
        return;
    }
    if instances.is_closed() {
        stop_renewing(shared, due);
        return;
    }
    let now = Instant::now();
    let earliest_deadline = due.iter().map(|d| d.deadline).min().unwrap_or(now);
    let shortest_ttl = due.iter().map(|d| d.ttl).min().unwrap_or_default();
    let limit = instances
        .limit(shortest_ttl)
        .min(earliest_deadline.saturating_duration_since(now))
        .max(Duration::from_millis(1));
    let single = instances.is_single();
    // (id, ttl, deadline) of each lock, and what to send, in pipeline order.
    let (locks, items): (Vec<_>, Vec<_>) = due
        .into_iter()
        .map(|d| {
            (
                (d.id, d.ttl, d.deadline),
                ExtendItem {
                    hold: d.hold,
                    ttl: d.ttl,
                    // On one server, the value holds the grant's fence (see `native.rs`).
                    fence: single.then_some(d.fence),
                },
            )
        })
        .unzip();
    let items: Arc<[ExtendItem]> = items.into();
    let sent_at = Instant::now();
    let span = tracing::debug_span!("fencelock.renew", locks = items.len());
    let per_instance = tracing::Instrument::instrument(
        instances.on_all(
            None,
            |server| extend_many(server.clone(), items.clone(), limit),
            |_| false,
        ),
        span.clone(),
    )
    .await;
    let _entered = span.enter();

    let after = Instant::now();
    // Holds taken or stopped meanwhile are in the schedule as they are now.
    let mut guard = shared.lock();
    let schedule = &mut *guard;
    for (position, (id, ttl, deadline)) in locks.into_iter().enumerate() {
        let Some(entry) = schedule.entries.get_mut(&id) else {
            continue;
        };
        let usable: SmallVec<[Option<Extended>; 8]> = per_instance
            .iter()
            .map(|replies| match replies {
                Some(Ok(replies)) => replies.get(position).and_then(|a| a.as_ref().ok().copied()),
                _ => None,
            })
            .collect();
        let renewal = &entry.renewal;
        let tally = judge_extension(instances, &usable, &renewal.hold, renewal.fence, ttl);
        crate::observe::renewal(tally.verdict == Verdict::Extended);
        if tally.verdict == Verdict::Extended {
            confirm(&entry.renewal.lease, sent_at, ttl, drift);
            entry.retry_at = None;
            // Due a third of the lease after this confirmation (if a renewal by hand confirmed
            // a later one meanwhile, the lock comes up early and is queued again at its time).
            schedule.queue.push(Reverse((sent_at + ttl / 3, id)));
        } else if tally.verdict == Verdict::Lost {
            renewal
                .hold
                .end(&renewal.lease, renewal.fence, Ending::NotOwner);
            schedule.entries.remove(&id);
        } else {
            let error = renewal_errors(instances, &per_instance, position);
            tracing::warn!(lock = %entry.renewal.hold.name, %error, "lock renewal failed; retrying until the lease deadline");
            entry.renewal.lease.send_modify(|s| {
                s.expiry_reason = LostReason::Expired {
                    last_error: Some(error),
                }
            });
            if after >= deadline {
                let renewal = &entry.renewal;
                renewal
                    .hold
                    .end(&renewal.lease, renewal.fence, Ending::DeadlinePassed);
                schedule.entries.remove(&id);
            } else {
                let retry = crate::backoff::renewal(ttl).next_delay();
                entry.retry_at = Some(after + retry);
                schedule.queue.push(Reverse((after + retry, id)));
            }
        }
    }
}

/// The client was closed: the holds in `due` are no longer renewed (nothing can be sent), and
/// each one's loss is reported at its deadline, as for a hold not renewed.
fn stop_renewing(shared: &Shared, due: Vec<Due>) {
    let mut schedule = shared.lock();
    for d in due {
        let Some(entry) = schedule.entries.get_mut(&d.id) else {
            continue;
        };
        entry.renewing = false;
        entry.renewal.lease.send_modify(|s| {
            s.expiry_reason = LostReason::Expired {
                last_error: Some("the client was closed".to_owned()),
            }
        });
        schedule.queue.push(Reverse((d.deadline, d.id)));
    }
}

/// Why the lock at `position` of a renewal batch was not renewed, instance by instance.
fn renewal_errors(
    instances: &Instances,
    per_instance: &[Answer<Vec<redis::RedisResult<Extended>>>],
    position: usize,
) -> String {
    let answer = |replies: &Answer<Vec<redis::RedisResult<Extended>>>| match replies {
        Some(Ok(replies)) => match replies.get(position) {
            Some(Ok(_)) => None,
            Some(Err(err)) => Some(err.to_string()),
            None => Some("no reply for this lock".to_owned()),
        },
        Some(Err(err)) => Some(err.to_string()),
        None => Some("no answer".to_owned()),
    };
    let errors: Vec<String> = per_instance
        .iter()
        .map(answer)
        .zip(instances.servers())
        .filter_map(|(error, server)| error.map(|e| format!("{}: {e}", server.addr)))
        .collect();
    errors.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::LockKeys;
    use crate::kinds::plain::Plain;
    use crate::lease::LeaseState;
    use crate::token::OwnerToken;

    fn entry(confirmed_at: Instant, ttl: Duration) -> Entry {
        let state = LeaseState::new(confirmed_at, ttl, &ClockDrift::default());
        Entry {
            renewal: Renewal {
                hold: Arc::new(Hold {
                    name: Arc::from("due"),
                    protocol: Arc::new(Plain),
                    keys: LockKeys::new("fencelock", "due"),
                    token: OwnerToken::generate().unwrap(),
                    linger: Duration::ZERO,
                    marked: Default::default(),
                    releasing: Default::default(),
                    released_fence: Default::default(),
                    holder_label: None,
                }),
                fence: 1,
                lease: tokio::sync::watch::channel(state).0,
                hold_until: None,
            },
            retry_at: None,
            renewing: true,
        }
    }

    /// The locks of a batch, in order (taken in the order of their ids).
    fn ids(due: Vec<Due>) -> Vec<u64> {
        due.iter().map(|d| d.id).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_takes_each_due_lock_once_and_leaves_the_others() {
        let ttl = Duration::from_secs(3);
        let now = Instant::now();
        let mut schedule = Schedule::default();
        for id in 0..1_000 {
            schedule.insert(id, entry(now, ttl));
        }
        // Confirmed later: not due when the others are.
        schedule.insert(1_000, entry(now + ttl / 2, ttl));
        // Queued twice (as after a renewal by hand).
        for id in 0..500 {
            schedule.requeue(id);
        }
        let due = ids(schedule.take_due(now + ttl / 3));
        assert_eq!(due, (0..1_000).collect::<Vec<u64>>());
        assert_eq!(schedule.next_wake(), Some(now + ttl / 2 + ttl / 3));
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_taken_early_unless_something_is_due() {
        let ttl = Duration::from_secs(3);
        let now = Instant::now();
        let mut schedule = Schedule::default();
        schedule.insert(1, entry(now, ttl));
        schedule.insert(2, entry(now + Duration::from_millis(100), ttl));
        // A tick 50 ms before the first is due: both are within their slack (250 ms), neither
        // is due.
        assert!(ids(schedule.take_due(now + ttl / 3 - Duration::from_millis(50))).is_empty());
        // Once the first is due, the second (due 100 ms later) goes with it.
        assert_eq!(ids(schedule.take_due(now + ttl / 3)), vec![1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unrenewed_hold_is_never_renewed_and_reported_lost_at_its_deadline() {
        let ttl = Duration::from_secs(3);
        let now = Instant::now();
        let mut schedule = Schedule::default();
        let mut unrenewed = entry(now, ttl);
        unrenewed.renewing = false;
        let lease = unrenewed.renewal.lease.clone();
        let deadline = lease.borrow().deadline;
        schedule.insert(1, unrenewed);
        schedule.insert(2, entry(now, ttl));
        // After a master switch too, only the renewed hold is taken.
        schedule.check_all_now(now);
        assert_eq!(ids(schedule.take_due(now)), vec![2]);
        schedule.remove(2);
        assert_eq!(schedule.next_wake(), Some(deadline));
        assert!(ids(schedule.take_due(deadline)).is_empty());
        assert_eq!(
            lease.borrow().lost,
            Some(LostReason::Expired { last_error: None })
        );
        assert!(!schedule.entries.contains_key(&1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_capped_hold_stops_renewing_and_is_reported_lost_at_its_deadline() {
        let ttl = Duration::from_secs(3);
        let now = Instant::now();
        let mut schedule = Schedule::default();
        let mut capped = entry(now, ttl);
        capped.renewal.hold_until = Some(now + ttl / 4);
        let lease = capped.renewal.lease.clone();
        let deadline = lease.borrow().deadline;
        schedule.insert(1, capped);
        assert!(ids(schedule.take_due(now + ttl / 3)).is_empty());
        assert_eq!(lease.borrow().lost, None);
        assert_eq!(schedule.next_wake(), Some(deadline));
        assert!(ids(schedule.take_due(deadline)).is_empty());
        assert_eq!(lease.borrow().lost, Some(LostReason::MaxHoldReached));
        assert_eq!(schedule.next_wake(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn stopped_holds_do_not_pile_up_in_the_queue() {
        let ttl = Duration::from_secs(3);
        let now = Instant::now();
        let mut schedule = Schedule::default();
        for id in 0..10_000 {
            schedule.insert(id, entry(now + Duration::from_millis(id), ttl));
            if id >= 10 {
                schedule.remove(id);
            }
        }
        assert_eq!(schedule.entries.len(), 10);
        assert!(
            schedule.queue.len() <= 2 * 10 + 1024,
            "{}",
            schedule.queue.len()
        );
        // Below that bound a removal leaves the queue alone (O(1)): the stale places go when
        // they come up, or with the next rebuild.
        let queued = schedule.queue.len();
        schedule.remove(9);
        assert_eq!(schedule.queue.len(), queued);
        schedule.insert(9, entry(now + Duration::from_millis(9), ttl));
        assert_eq!(schedule.next_wake(), Some(now + ttl / 3));
        let due = ids(schedule.take_due(now + ttl / 3 + Duration::from_millis(9)));
        assert_eq!(due, (0..10).collect::<Vec<u64>>());
    }
}
