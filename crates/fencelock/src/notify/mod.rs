//! Release notifications: one pub/sub connection per client serves every waiter of every lock.
//!
//! A waiter registers interest in a lock's release channel and gets a [`Subscription`]. The
//! listener task subscribes the channel on the server (once, however many local waiters it has)
//! and unsubscribes a second ([`LINGER`]) after the last waiter of a channel went away, unless a
//! new one came meanwhile: a lock contended again and again costs no `SUBSCRIBE` and
//! `UNSUBSCRIBE` per wait, and its next waiter needs no round trip before it tries. A message
//! says whom to wake:
//! `one` (a release that lets exactly one waiter in: a plain lock, a semaphore permit) wakes one
//! local waiter; `to:<token>` (a fair lock, whose next holder only Redis knows) wakes the waiter
//! whose request has that owner token, if it is on this client, and `to:<token>:<fence>:<lapses>`
//! (a plain lock passed to a waiter in line) also tells it that it holds the lock now, with
//! that fence ([`Pass`]); anything else (a read-write
//! lock, where many readers may go at once) wakes every local waiter of that channel. Waking
//! everyone is a generation counter, so a waiter between two waits cannot miss it. Messages
//! come as RESP3 pushes, and the connection's own task wakes the waiter they name: a handoff
//! crosses no other task. When the connection drops, the listener wakes every waiter (a release
//! may have been missed), reconnects with backoff and resubscribes. A waiter never depends on a
//! message alone:
//! it also wakes when the holder's lease would have run out, so a lost message costs a bounded
//! delay, never a hang.
//!
//! A waiter whose lock may be passed to it by its token (a plain lock on one server, a fair
//! lock) also has a channel of its own, the lock's channel and `:<token>`, subscribed while it
//! waits and never lingering: releases send it the message addressed to it there first, and on
//! the lock's channel only if nobody heard it there (docs/PROTOCOL.md), so a pass is written to
//! one client, not to every client that waits. Its subscription is best effort: a release that
//! reaches nobody on it goes on the lock's channel too.
//!
//! - `mod.rs`: [`ReleaseNotifier`] and a waiter's [`Subscription`];
//! - `registry.rs`: the waiters of each channel, what a message says ([`Pass`]), and waking
//!   them;
//! - `router.rs`: a connection's pushes, handed to the waiters in the connection's task;
//! - `listener.rs`: the listener task;
//! - `sharded.rs`: on Redis Cluster, the tasks beside it that subscribe (confirmed by a reply
//!   that names the channel, tried again with backoff, many at once) and send the rest;
//! - `placement.rs` (Cluster): whether the node a subscription goes to serves its channel's
//!   slot as master, and the route read again;
//! - `feed.rs`: where messages come from ([`Feed`]), and how a loss is heard.

mod feed;
mod listener;
#[cfg(feature = "cluster")]
mod placement;
mod registry;
mod router;
#[cfg(feature = "cluster")]
mod sharded;
#[cfg(feature = "cluster")]
mod writer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Semaphore, broadcast, mpsc, oneshot, watch};

pub(crate) use feed::Feed;
use feed::{Opener, Source};
use listener::Listener;
pub(crate) use registry::{Addressed, Heard, Pass};
use registry::{Channel, HEARD_BACKLOG, Personal, Registry, lock, wake_everyone};
use router::Router;

enum Request {
    Subscribe {
        channel: String,
        confirmed: oneshot::Sender<bool>,
    },
    Unsubscribe {
        channel: String,
    },
    /// A waiter's own channel (see [`registry::own_channel`]) to subscribe, and the one it
    /// listened on before, to unsubscribe (no linger: a token is never used again). Neither is
    /// confirmed nor subscribed again after a loss: a release that reaches nobody there goes on
    /// the lock's channel as well.
    Own {
        subscribe: Option<String>,
        unsubscribe: Option<String>,
    },
}

/// The client's release listener (cheap to clone).
#[derive(Clone)]
pub(crate) struct ReleaseNotifier {
    registry: Registry,
    requests: mpsc::UnboundedSender<Request>,
    closer: Arc<Closer>,
}

/// What ends a listener's tasks ([`ReleaseNotifier::close`]).
#[derive(Default)]
struct Closer {
    /// True once closed: every task of the listener ends where it waits.
    closing: watch::Sender<bool>,
    /// The tasks (the listener; on Redis Cluster, its subscriber and writer), to wait for.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Closer {
    /// Spawns `task`, which ends at its own end or at the close, whichever comes first.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut closing = self.closing.subscribe();
        let handle = tokio::spawn(async move {
            tokio::select! {
                // Closed, or the sender gone with the listener: either way, the end.
                _ = closing.wait_for(|closed| *closed) => {}
                () = task => {}
            }
        });
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle);
    }
}

/// A waiter's interest in one channel; dropping it withdraws the interest.
pub(crate) struct Subscription {
    registry: Registry,
    requests: mpsc::UnboundedSender<Request>,
    channel: String,
    wake_one: Arc<Semaphore>,
    generation: watch::Receiver<u64>,
    /// Wakes this waiter alone, by the owner token it answers to.
    personal: Arc<Personal>,
    address: Option<String>,
    /// The channel of this waiter alone that it asked the listener to subscribe, if any.
    own: Option<String>,
}

/// A release listener before its task starts: the waiters' registry exists, so that a
/// connection made first (a cluster's, which the client's commands share) can route its pushes
/// to it.
pub(crate) struct Prepared {
    registry: Registry,
    report_losses: mpsc::UnboundedSender<u64>,
    losses: mpsc::UnboundedReceiver<u64>,
    /// The channels a cluster's router found lost, for the subscriber (see `sharded.rs`).
    #[cfg(feature = "cluster")]
    wanted: (
        mpsc::UnboundedSender<sharded::Wanted>,
        mpsc::UnboundedReceiver<sharded::Wanted>,
    ),
}

impl Prepared {
    pub(crate) fn new() -> Self {
        let (report_losses, losses) = mpsc::unbounded_channel();
        Prepared {
            registry: Arc::default(),
            report_losses,
            losses,
            #[cfg(feature = "cluster")]
            wanted: mpsc::unbounded_channel(),
        }
    }

    /// The push sender for the cluster's subscriptions connection, made before the listener
    /// starts.
    #[cfg(feature = "cluster")]
    pub(crate) fn router(&self) -> impl redis::aio::AsyncPushSender {
        Router {
            registry: self.registry.clone(),
            losses: router::Losses::Sharded(self.wanted.0.clone()),
        }
    }

    /// Starts the listener task (inside the current Tokio runtime). Nothing is sent until the
    /// first subscription.
    pub(crate) fn start(self, feed: Feed, command_timeout: Duration) -> ReleaseNotifier {
        let Prepared {
            registry,
            report_losses,
            losses,
            #[cfg(feature = "cluster")]
            wanted,
        } = self;
        let (requests, rx) = mpsc::unbounded_channel();
        let closer = Arc::new(Closer::default());
        let source = match feed {
            Feed::Client(client) => Source::Dedicated {
                opener: Opener::Client(client),
                connection: None,
                switches: None,
            },
            #[cfg(feature = "sentinel")]
            Feed::Sentinel(followed) => Source::Dedicated {
                switches: Some(followed.switches()),
                opener: Opener::Sentinel(followed),
                connection: None,
            },
            #[cfg(feature = "cluster")]
            Feed::Sharded(conn) => {
                let (wanted, asked) = wanted;
                let subscriber =
                    sharded::Subscriber::new(conn.clone(), registry.clone(), command_timeout);
                let (stop, stopped) = oneshot::channel();
                closer.spawn(subscriber.run(asked, stopped));
                let (batches, to_send) = mpsc::unbounded_channel();
                let writer = writer::Writer {
                    conn,
                    limit: command_timeout,
                };
                closer.spawn(writer.run(to_send));
                Source::Sharded {
                    wanted,
                    batches,
                    _stop: stop,
                }
            }
        };
        let listener = Listener {
            source,
            command_timeout,
            registry: registry.clone(),
            backoff: crate::backoff::RECONNECT,
            retry_at: None,
            lingering: std::collections::VecDeque::new(),
            losses,
            report_losses,
            connection: 0,
            own: listener::OwnChannels::default(),
        };
        closer.spawn(listener.run(rx));
        ReleaseNotifier {
            registry,
            requests,
            closer,
        }
    }
}

impl ReleaseNotifier {
    /// Registers a waiter for `channel` at once, and asks the listener to subscribe it on the
    /// server. The returned receiver says whether the server confirmed the subscription. If it
    /// could not, the interest still counts and is subscribed when the connection comes back;
    /// meanwhile the waiter relies on its timer.
    pub(crate) fn subscribe(&self, channel: &str) -> (Subscription, oneshot::Receiver<bool>) {
        let (wake_one, generation, subscribed) = {
            let mut registry = lock(&self.registry);
            let entry = registry
                .entry(channel.to_owned())
                .or_insert_with(|| Channel {
                    wake_one: Arc::new(Semaphore::new(0)),
                    generation: watch::channel(0).0,
                    addressed: HashMap::new(),
                    subscriptions: 0,
                    subscribed: false,
                    lost: false,
                    heard: None,
                });
            entry.subscriptions += 1;
            (
                entry.wake_one.clone(),
                entry.generation.subscribe(),
                entry.subscribed,
            )
        };
        let subscription = self.waiter(channel, wake_one, generation);
        let (confirmed, reply) = oneshot::channel();
        if subscribed {
            // Still subscribed from a waiter that left less than `LINGER` ago.
            let _ = confirmed.send(true);
        } else {
            let _ = self.requests.send(Request::Subscribe {
                channel: channel.to_owned(),
                confirmed,
            });
        }
        (subscription, reply)
    }

    /// Registers a waiter for `channel` if the server has the channel subscribed now (another
    /// waiter of this client listens there, or one left less than [`LINGER`] ago): a waiter
    /// that hears every message from here on, with no round trip. `None` otherwise.
    pub(crate) fn subscribe_if_live(&self, channel: &str) -> Option<Subscription> {
        let (wake_one, generation) = {
            let mut registry = lock(&self.registry);
            // Under the registry's lock: the listener unsubscribes a channel only when it has no
            // waiter, and forgets it under this same lock.
            let entry = registry.get_mut(channel).filter(|entry| entry.subscribed)?;
            entry.subscriptions += 1;
            (entry.wake_one.clone(), entry.generation.subscribe())
        };
        Some(self.waiter(channel, wake_one, generation))
    }

    /// A waiter of `channel`, counted in the registry already.
    fn waiter(
        &self,
        channel: &str,
        wake_one: Arc<Semaphore>,
        generation: watch::Receiver<u64>,
    ) -> Subscription {
        Subscription {
            registry: self.registry.clone(),
            requests: self.requests.clone(),
            channel: channel.to_owned(),
            wake_one,
            generation,
            personal: Arc::default(),
            address: None,
            own: None,
        }
    }

    /// Ends the listener (the client's close): its tasks end, and with them its connection for
    /// release messages, which unsubscribes everything; waited for. A task in the middle of a
    /// command drops it. Every waiter is then woken (its next try fails: the client is
    /// closed), and every reader of a channel's messages hears the loss (`Heard::Lost`).
    /// Later subscriptions are never confirmed.
    pub(crate) async fn close(&self) {
        self.closer.closing.send_replace(true);
        let tasks = std::mem::take(
            &mut *self
                .closer
                .tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for task in tasks {
            // A task that panicked has ended too.
            let _ = task.await;
        }
        for entry in lock(&self.registry).values_mut() {
            entry.subscribed = false;
            entry.tell(Heard::Lost);
        }
        wake_everyone(&self.registry);
    }

    /// How many waiters of this client are registered for `channel`.
    pub(crate) fn waiters(&self, channel: &str) -> usize {
        lock(&self.registry)
            .get(channel)
            .map_or(0, |c| c.subscriptions)
    }
}

impl Subscription {
    /// Every message of this channel, and every loss and return of its subscription, from now
    /// on (see [`Heard`]); a receiver that falls more than `HEARD_BACKLOG` behind is told it
    /// lagged.
    pub(crate) fn heard(&self) -> broadcast::Receiver<Heard> {
        let mut registry = lock(&self.registry);
        match registry.get_mut(&self.channel) {
            Some(entry) => entry
                .heard
                .get_or_insert_with(|| broadcast::channel(HEARD_BACKLOG).0)
                .subscribe(),
            // Cannot happen while this subscription lives; a closed receiver says "lost".
            None => broadcast::channel(1).1,
        }
    }

    /// Makes release messages addressed to `token` (the owner token of the waiter's current
    /// request) wake this waiter. Cheap when the token did not change; a new token forgets what
    /// was passed to the old one, and gives up the old one's own channel.
    pub(crate) fn answer_to(&mut self, token: &str) {
        if self.address.as_deref() == Some(token) {
            return;
        }
        *self.personal.addressed() = None;
        {
            let mut registry = lock(&self.registry);
            let Some(entry) = registry.get_mut(&self.channel) else {
                return;
            };
            if let Some(old) = self.address.take() {
                entry.addressed.remove(&old);
            }
            entry
                .addressed
                .insert(token.to_owned(), self.personal.clone());
        }
        self.address = Some(token.to_owned());
        self.leave_own_channel();
    }

    /// Unsubscribes the own channel this waiter listened on, if any.
    fn leave_own_channel(&mut self) {
        if let Some(old) = self.own.take() {
            let _ = self.requests.send(Request::Own {
                subscribe: None,
                unsubscribe: Some(old),
            });
        }
    }

    /// Subscribes the own channel of the waiter's current request (see [`Self::answer_to`]),
    /// where the messages addressed to it go first: one client to write to, where the lock's
    /// channel has every client that waits. For a request whose lock may be passed to it by
    /// its token, once it has a place in line: a request granted at its first try costs no
    /// subscription. A pass that comes before the subscription goes on the lock's channel.
    pub(crate) fn listen_on_own_channel(&mut self) {
        let Some(token) = &self.address else {
            return;
        };
        let channel = registry::own_channel(&self.channel, token);
        if self.own.as_ref() == Some(&channel) {
            return;
        }
        let unsubscribe = self.own.replace(channel.clone());
        let _ = self.requests.send(Request::Own {
            subscribe: Some(channel),
            unsubscribe,
        });
    }

    /// Resolves at the next release message for this channel that wakes this waiter (at once if
    /// one arrived since the last call), or when the pub/sub connection was lost; with what the
    /// message said to this waiter's token, if anything (the lock passed to it, or passed to the
    /// waiter ahead of it).
    pub(crate) async fn released(&mut self) -> Option<Addressed> {
        tokio::select! {
            permit = self.wake_one.acquire() => match permit {
                Ok(permit) => permit.forget(),
                Err(_) => std::future::pending::<()>().await,
            },
            permit = self.personal.wake.acquire() => match permit {
                Ok(permit) => {
                    permit.forget();
                    return self.personal.addressed().take();
                }
                Err(_) => std::future::pending::<()>().await,
            },
            changed = self.generation.changed() => {
                if changed.is_err() {
                    // The listener dropped the channel: only the timer is left.
                    std::future::pending::<()>().await;
                }
            }
        }
        None
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.leave_own_channel();
        let mut registry = lock(&self.registry);
        let Some(entry) = registry.get_mut(&self.channel) else {
            return;
        };
        if let Some(address) = &self.address {
            entry.addressed.remove(address);
        }
        entry.subscriptions = entry.subscriptions.saturating_sub(1);
        if entry.subscriptions == 0 {
            // The channel lingers (see `LINGER`); a wake-up nobody took is not kept for the
            // next waiter.
            entry.wake_one = Arc::new(Semaphore::new(0));
            drop(registry);
            let _ = self.requests.send(Request::Unsubscribe {
                channel: std::mem::take(&mut self.channel),
            });
        }
    }
}

/// Sleeps until `at`, or not at all (a turn of the runtime) without it.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => tokio::time::sleep(Duration::ZERO).await,
    }
}
