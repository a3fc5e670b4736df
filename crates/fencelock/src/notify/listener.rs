//! The listener task: subscribes and unsubscribes channels as waiters come and go, and
//! reconnects with backoff (the messages go from the connection's task to the waiters, by the
//! connection's [`Router`]). On Redis Cluster it only hands the work to the tasks of
//! `sharded.rs`.

use std::time::Duration;

use tokio::sync::mpsc;

use crate::connection::within;

use super::Request;
use super::feed::{Source, lost};
use super::registry::{Heard, LINGER, Registry, lock, wake_everyone};
use super::router::{Losses, Router};
use super::sleep_until;

/// The task that owns the pub/sub connection.
pub(super) struct Listener {
    pub(super) source: Source,
    pub(super) command_timeout: Duration,
    pub(super) registry: Registry,
    /// The delay before the next reconnection attempt, doubled after each failure.
    pub(super) backoff: crate::backoff::Backoff,
    /// When to try to reconnect (`None`: at once, if anyone is waiting).
    pub(super) retry_at: Option<tokio::time::Instant>,
    /// Channels whose last waiter went away, and when to unsubscribe them unless a new one
    /// came (in that order).
    pub(super) lingering: std::collections::VecDeque<(String, tokio::time::Instant)>,
    /// Lost connections, reported by their routers.
    pub(super) losses: mpsc::UnboundedReceiver<u64>,
    pub(super) report_losses: mpsc::UnboundedSender<u64>,
    /// The number of the connection in use (of the last one opened).
    pub(super) connection: u64,
    /// Waiters' own channels to subscribe and to unsubscribe, sent together once the requests
    /// that came meanwhile are read (see [`Request::Own`]).
    pub(super) own: OwnChannels,
}

/// Waiters' own channels, asked for and not sent yet. Unsubscriptions wait (at most
/// [`OWN_LINGER`]) for a subscription to go with: the two go in one write, and the server reads
/// them at once, where a contended client would otherwise send one after each grant and one
/// before each wait.
#[derive(Default)]
pub(super) struct OwnChannels {
    subscribe: Vec<String>,
    unsubscribe: Vec<String>,
    /// When the unsubscriptions asked for go alone, if no subscription came to carry them.
    due: Option<tokio::time::Instant>,
}

/// How long an unsubscription of a waiter's own channel waits for a subscription to go with.
/// Nothing is published on the channel of a request that ended.
const OWN_LINGER: std::time::Duration = std::time::Duration::from_millis(100);

impl OwnChannels {
    /// What to send: the channels to subscribe and to unsubscribe, leaving out those that
    /// came and went before they were sent.
    fn take(&mut self) -> (Vec<String>, Vec<String>) {
        let mut subscribe = std::mem::take(&mut self.subscribe);
        let mut unsubscribe = Vec::new();
        for channel in std::mem::take(&mut self.unsubscribe) {
            match subscribe.iter().position(|c| *c == channel) {
                Some(i) => drop(subscribe.swap_remove(i)),
                None => unsubscribe.push(channel),
            }
        }
        (subscribe, unsubscribe)
    }
}

impl Listener {
    pub(super) async fn run(mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        loop {
            let reconnect = self.needs_connection() && !lock(&self.registry).is_empty();
            tokio::select! {
                request = requests.recv() => {
                    let Some(request) = request else { return };
                    self.handle(request).await;
                    while let Ok(request) = requests.try_recv() {
                        self.handle(request).await;
                    }
                    self.send_own().await;
                }
                () = lost(&mut self.source, &mut self.losses, self.connection) => {
                    tracing::debug!("release listener: pub/sub connection lost");
                    // Reports already queued are about this loss (a node that stops serving a
                    // slot reports each of its channels): one round of subscriptions for all.
                    while self.losses.try_recv().is_ok() {}
                    self.disconnected();
                    wake_everyone(&self.registry);
                }
                () = sleep_until(self.retry_at), if reconnect => {
                    if self.connect_and_resubscribe().await {
                        // Waiters may have missed a release while the connection was down.
                        wake_everyone(&self.registry);
                    }
                }
                () = sleep_until(self.own.due), if self.own.due.is_some() => {
                    self.own.due = None;
                    self.send_own_now().await;
                }
                () = sleep_until(self.lingering.front().map(|(_, at)| *at)), if !self.lingering.is_empty() => {
                    if let Some((channel, _)) = self.lingering.pop_front() {
                        self.unsubscribe_if_idle(channel).await;
                    }
                }
            }
        }
    }

    /// Whether the listener has to open a connection before it can hear anything.
    pub(super) fn needs_connection(&self) -> bool {
        matches!(
            self.source,
            Source::Dedicated {
                connection: None,
                ..
            }
        )
    }

    /// Forgets the connection and schedules the next attempt, backing off.
    #[cfg_attr(not(feature = "cluster"), allow(irrefutable_let_patterns))]
    pub(super) fn disconnected(&mut self) {
        if let Source::Dedicated { connection, .. } = &mut self.source {
            *connection = None;
        }
        for entry in lock(&self.registry).values_mut() {
            entry.subscribed = false;
            entry.tell(Heard::Lost);
        }
        self.retry_at = Some(tokio::time::Instant::now() + self.backoff.next_delay());
    }

    pub(super) async fn handle(&mut self, request: Request) {
        match request {
            #[cfg(feature = "cluster")]
            Request::Subscribe { channel, confirmed }
                if matches!(self.source, Source::Sharded { .. }) =>
            {
                if let Source::Sharded { wanted, .. } = &self.source {
                    let _ = wanted.send(super::sharded::Wanted::first(channel, confirmed));
                }
            }
            Request::Subscribe { channel, confirmed } => {
                let ok = self.subscribe(&channel).await;
                if ok && let Some(entry) = lock(&self.registry).get_mut(&channel) {
                    entry.subscribed = true;
                }
                let _ = confirmed.send(ok);
            }
            Request::Unsubscribe { channel } => {
                self.lingering
                    .push_back((channel, tokio::time::Instant::now() + LINGER));
            }
            Request::Own {
                subscribe,
                unsubscribe,
            } => {
                self.own.subscribe.extend(subscribe);
                self.own.unsubscribe.extend(unsubscribe);
            }
        }
    }

    /// Sends the subscriptions of waiters' own channels asked for, with the unsubscriptions
    /// that waited for them; unsubscriptions alone wait (see [`OwnChannels`]).
    async fn send_own(&mut self) {
        if self.own.subscribe.is_empty() {
            if !self.own.unsubscribe.is_empty() && self.own.due.is_none() {
                self.own.due = Some(tokio::time::Instant::now() + OWN_LINGER);
            }
            return;
        }
        self.own.due = None;
        self.send_own_now().await;
    }

    /// Subscribes and unsubscribes the waiters' own channels asked for, one command each, in
    /// one write. A failure is only logged: a release that reaches nobody on a waiter's own
    /// channel goes on the lock's channel as well, and a lost connection is reported by its
    /// router.
    async fn send_own_now(&mut self) {
        let (subscribe, unsubscribe) = self.own.take();
        if subscribe.is_empty() && unsubscribe.is_empty() {
            return;
        }
        let limit = self.command_timeout;
        match &mut self.source {
            Source::Dedicated {
                connection: Some(conn),
                ..
            } => {
                let (mut on, mut off) = (conn.clone(), conn.clone());
                let (subscribed, unsubscribed) = tokio::join!(
                    async {
                        if subscribe.is_empty() {
                            return Ok(());
                        }
                        within(limit, on.subscribe(&subscribe)).await
                    },
                    async {
                        if unsubscribe.is_empty() {
                            return Ok(());
                        }
                        within(limit, off.unsubscribe(&unsubscribe)).await
                    },
                );
                if let Err(err) = subscribed.and(unsubscribed) {
                    tracing::debug!(%err, "release listener: waiters' own channels not (un)subscribed");
                }
            }
            // Not connected: the next connection has none of them.
            Source::Dedicated { .. } => {}
            #[cfg(feature = "cluster")]
            Source::Sharded { batches, .. } => {
                let _ = batches.send(super::writer::Batch {
                    subscribe,
                    unsubscribe,
                });
            }
        }
    }

    /// Unsubscribes a channel that lingered, unless a waiter came back meanwhile.
    pub(super) async fn unsubscribe_if_idle(&mut self, channel: String) {
        {
            let mut registry = lock(&self.registry);
            match registry.get(&channel) {
                Some(entry) if entry.subscriptions == 0 => {
                    registry.remove(&channel);
                }
                // A new waiter came in meanwhile, or an earlier linger already unsubscribed it.
                _ => return,
            }
        }
        let limit = self.command_timeout;
        let failed = match &mut self.source {
            Source::Dedicated {
                connection: Some(conn),
                ..
            } => within(limit, conn.unsubscribe(&channel)).await.is_err(),
            Source::Dedicated { .. } => false,
            #[cfg(feature = "cluster")]
            Source::Sharded { batches, .. } => {
                // A failure leaves a subscription without waiters: harmless.
                let _ = batches.send(super::writer::Batch {
                    subscribe: Vec::new(),
                    unsubscribe: vec![channel],
                });
                false
            }
        };
        if failed {
            self.disconnected();
        }
    }

    /// Subscribes one channel, connecting first if needed. False if it could not.
    pub(super) async fn subscribe(&mut self, channel: &str) -> bool {
        let limit = self.command_timeout;
        let result = match &mut self.source {
            // Handed to the subscriber (see `handle`).
            #[cfg(feature = "cluster")]
            Source::Sharded { .. } => return false,
            Source::Dedicated {
                connection: None, ..
            } => {
                // Connecting subscribes every channel with waiters, this one included. While a
                // reconnection is being backed off, do not hammer the server.
                if self
                    .retry_at
                    .is_some_and(|at| at > tokio::time::Instant::now())
                {
                    return false;
                }
                return self.connect_and_resubscribe().await;
            }
            Source::Dedicated {
                connection: Some(conn),
                ..
            } => within(limit, conn.subscribe(channel)).await,
        };
        match result {
            Ok(()) => true,
            Err(err) => {
                tracing::debug!(channel, %err, "release listener: subscribe failed");
                self.disconnected();
                false
            }
        }
    }

    /// Opens the pub/sub connection and subscribes every channel that has waiters.
    #[cfg_attr(not(feature = "cluster"), allow(irrefutable_let_patterns))]
    pub(super) async fn connect_and_resubscribe(&mut self) -> bool {
        let Source::Dedicated {
            opener, connection, ..
        } = &mut self.source
        else {
            return true;
        };
        self.connection = self.connection.wrapping_add(1);
        let router = Router {
            registry: self.registry.clone(),
            losses: Losses::Connection {
                losses: self.report_losses.clone(),
                connection: self.connection,
            },
        };
        let limit = self.command_timeout;
        let connected = within(limit, opener.open(router, limit)).await;
        let mut conn = match connected {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(%err, "release listener: cannot connect");
                self.disconnected();
                return false;
            }
        };
        let channels: Vec<String> = lock(&self.registry).keys().cloned().collect();
        if !channels.is_empty()
            && let Err(err) = within(limit, conn.subscribe(&channels)).await
        {
            tracing::debug!(%err, "release listener: resubscribe failed");
            self.disconnected();
            return false;
        }
        *connection = Some(conn);
        let mut registry = lock(&self.registry);
        for channel in &channels {
            if let Some(entry) = registry.get_mut(channel) {
                entry.subscribed = true;
                entry.tell(Heard::Subscribed);
            }
        }
        drop(registry);
        self.backoff.reset();
        self.retry_at = None;
        true
    }
}
