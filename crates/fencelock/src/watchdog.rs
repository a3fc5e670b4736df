//! The watchdog: one task per client that keeps every auto-renewed lock alive, and releases the
//! locks of guards that were dropped without being released.
//!
//! Each lock is renewed a third of its lease after its last confirmation. Locks that fall due
//! together are renewed in one pipeline, so renewing many locks costs one round trip per batch,
//! not one per lock. A renewal that Redis answers "not the owner" marks the guard lost at once; a
//! renewal that fails (timeout, connection error) is retried quickly until the local deadline,
//! at which point the guard counts as lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::connection::Server;
use crate::error::LostReason;
use crate::keys::LockKeys;
use crate::lease::{ClockDrift, Lease, confirm, mark_lost};
use crate::lock::protocol::{self, ExtendItem};
use crate::token::OwnerToken;

/// A lock the watchdog keeps alive.
pub(crate) struct Renewal {
    pub(crate) name: Arc<str>,
    pub(crate) keys: Arc<LockKeys>,
    pub(crate) token: OwnerToken,
    pub(crate) lease: Lease,
    /// Stop renewing after this instant (the `max_hold` cap).
    pub(crate) hold_until: Option<Instant>,
}

/// A lock whose guard was dropped unreleased, to be released in the background.
pub(crate) struct Abandoned {
    pub(crate) name: Arc<str>,
    pub(crate) keys: Arc<LockKeys>,
    pub(crate) token: OwnerToken,
}

pub(crate) enum Command {
    Renew { id: u64, renewal: Renewal },
    Stop { id: u64 },
    Release { id: Option<u64>, lock: Abandoned },
}

/// The handle guards and lock requests use to talk to the watchdog task.
#[derive(Clone)]
pub(crate) struct Watchdog {
    commands: mpsc::UnboundedSender<Command>,
}

impl Watchdog {
    /// Starts the task inside the current Tokio runtime. It ends when every handle is gone.
    pub(crate) fn start(server: Server, drift: ClockDrift) -> Self {
        let (commands, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(server, drift, rx));
        Watchdog { commands }
    }

    pub(crate) fn send(&self, command: Command) -> bool {
        self.commands.send(command).is_ok()
    }
}

struct Entry {
    renewal: Renewal,
    /// Set after a failed renewal: retry at this instant rather than on the normal schedule.
    retry_at: Option<Instant>,
}

impl Entry {
    /// When this lock should next be renewed: a third of the lease after its last confirmation.
    fn due_at(&self) -> Instant {
        let state = self.renewal.lease.borrow();
        let scheduled = state.confirmed_at + state.ttl / 3;
        self.retry_at.unwrap_or(scheduled)
    }

    /// How early this lock may be renewed so that it can share a batch with others.
    fn slack(&self) -> Duration {
        self.renewal.lease.borrow().ttl / 12
    }
}

async fn run(server: Server, drift: ClockDrift, mut commands: mpsc::UnboundedReceiver<Command>) {
    let mut entries: HashMap<u64, Entry> = HashMap::new();
    loop {
        let next_due = entries.values().map(Entry::due_at).min();
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(Command::Renew { id, renewal }) => {
                    entries.insert(id, Entry { renewal, retry_at: None });
                }
                Some(Command::Stop { id }) => {
                    entries.remove(&id);
                }
                Some(Command::Release { id, lock }) => {
                    if let Some(id) = id {
                        entries.remove(&id);
                    }
                    tokio::spawn(release_abandoned(server.clone(), lock));
                }
            },
            () = sleep_until(next_due) => {
                renew_due(&server, &drift, &mut entries).await;
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Renews, in one pipeline, every lock that is due (or nearly due).
async fn renew_due(server: &Server, drift: &ClockDrift, entries: &mut HashMap<u64, Entry>) {
    let now = Instant::now();
    let mut finished = Vec::new();
    let mut due = Vec::new();
    for (id, entry) in entries.iter_mut() {
        let (lost, deadline, expiry_reason) = {
            let state = entry.renewal.lease.borrow();
            (
                state.lost.is_some(),
                state.deadline,
                state.expiry_reason.clone(),
            )
        };
        if lost || now >= deadline {
            // Lost, or the deadline passed without a confirmed renewal (the reason then carries
            // the last renewal error, if there was one).
            mark_lost(&entry.renewal.lease, expiry_reason);
            finished.push(*id);
        } else if entry.renewal.hold_until.is_some_and(|until| now >= until) {
            entry
                .renewal
                .lease
                .send_modify(|s| s.expiry_reason = LostReason::MaxHoldReached);
            tracing::debug!(lock = %entry.renewal.name, "max hold time reached; renewal stops");
            finished.push(*id);
        } else if entry.due_at() <= now + entry.slack() {
            due.push(*id);
        }
    }
    for id in finished {
        entries.remove(&id);
    }
    if due.is_empty() {
        return;
    }

    let earliest_deadline = due
        .iter()
        .filter_map(|id| entries.get(id))
        .map(|e| e.renewal.lease.borrow().deadline)
        .min()
        .unwrap_or(now);
    let limit = server
        .command_timeout
        .min(earliest_deadline.saturating_duration_since(now))
        .max(Duration::from_millis(1));
    let batch: Vec<(u64, Duration)> = due
        .iter()
        .filter_map(|id| entries.get(id).map(|e| (*id, e.renewal.lease.borrow().ttl)))
        .collect();
    let items: Vec<ExtendItem<'_>> = batch
        .iter()
        .filter_map(|(id, ttl)| {
            entries.get(id).map(|e| ExtendItem {
                key: &e.renewal.keys.lock,
                token: &e.renewal.token,
                ttl: *ttl,
            })
        })
        .collect();
    let sent_at = Instant::now();
    let replies = protocol::extend_many(server, &items, limit).await;
    drop(items);
    let replies: Vec<Result<bool, String>> = match replies {
        Ok(replies) => replies
            .into_iter()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect(),
        Err(err) => vec![Err(err.to_string()); batch.len()],
    };

    let after = Instant::now();
    for ((id, ttl), reply) in batch.into_iter().zip(replies) {
        let Some(entry) = entries.get_mut(&id) else {
            continue;
        };
        match reply {
            Ok(true) => {
                confirm(&entry.renewal.lease, sent_at, ttl, drift);
                entry.retry_at = None;
            }
            Ok(false) => {
                tracing::warn!(lock = %entry.renewal.name, "lock lost: Redis says this owner no longer holds it");
                mark_lost(&entry.renewal.lease, LostReason::NotOwner);
                entries.remove(&id);
            }
            Err(err) => {
                let deadline = entry.renewal.lease.borrow().deadline;
                tracing::warn!(lock = %entry.renewal.name, error = %err, server = %server.addr, "lock renewal failed; retrying until the lease deadline");
                entry.renewal.lease.send_modify(|s| {
                    s.expiry_reason = LostReason::Expired {
                        last_error: Some(err),
                    }
                });
                if after >= deadline {
                    let reason = entry.renewal.lease.borrow().expiry_reason.clone();
                    mark_lost(&entry.renewal.lease, reason);
                    entries.remove(&id);
                } else {
                    let retry = (ttl / 10).clamp(Duration::from_millis(5), Duration::from_secs(1));
                    entry.retry_at = Some(after + retry);
                }
            }
        }
    }
}

/// Releases a dropped guard's lock, retrying a few times if Redis is briefly unreachable. If it
/// cannot, the lease runs out on its own.
async fn release_abandoned(server: Server, lock: Abandoned) {
    let mut delay = Duration::from_millis(50);
    for _ in 0..3 {
        match protocol::release(&server, &lock.keys, &lock.token).await {
            Ok(_) => return,
            Err(err) => {
                tracing::debug!(lock = %lock.name, %err, "background release failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 4;
            }
        }
    }
    tracing::warn!(lock = %lock.name, server = %server.addr, "could not release a dropped lock; its lease will run out");
}
