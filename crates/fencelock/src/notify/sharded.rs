//! Redis Cluster: the sharded subscriptions of a listener, in tasks of their own beside it.
//!
//! A channel counts as subscribed only when a confirmation that names it comes back
//! ([`confirmed`](super::registry::confirmed), by the connection's router): the `redis` crate answers an
//! `SSUBSCRIBE` with whatever confirmation comes first on that node's connection, and a node
//! that stops serving a slot sends an `sunsubscribe` nobody asked for, which it may take as the
//! reply. The [`Subscriber`] sends the subscriptions (a waiter's channel, or one lost), many at
//! once, and sends again with backoff each one that is not confirmed; the [`Writer`](super::writer::Writer) sends the
//! rest (waiters' own channels, lingering channels' unsubscriptions) in the order asked (`writer.rs`).
//! Neither holds up the listener's requests.
//!
//! A confirmation does not say which node sent it, and the connection's route to a slot may be
//! stale (it is read again only after a `MOVED`, from whichever node answers first) or fall back
//! to a replica while the master's connection is repaired: a replica accepts an `SSUBSCRIBE`,
//! confirms it, and does not pass the master's messages on. So each subscription goes only to a
//! node that says, just before, that it serves the channel's slot as its master (`placement.rs`),
//! and counts as done only once confirmed and that node still is where the route goes, over the
//! same connection (the crate may replace one silently, and the subscriptions on it go with it):
//! a subscription that may sit elsewhere, or be gone, is counted lost and sent again.
//!
//! A subscription confirmed and checked can still go without a word: the crate replaces its
//! connection to a node (one whose `PING` timed out while it read the slots again, or one of
//! two made at once for the same node) and subscribes the new one again only to the channels
//! it tracks for that node, which need not be ours (seen on Redis 7.0 after a failover: two
//! channels checked on a connection to the new master that another connection to it replaced
//! 16 ms later). So the subscriber keeps where each channel was placed, and checks (an audit)
//! that the route still goes to that node over that connection, one channel per placement:
//! 250 ms after a sign of trouble (a lost channel, a failed or misrouted attempt), doubling, and
//! every 10 s after that. A placement found gone counts every channel on it lost: they are
//! sent again, and their readers and waiters are told as for any other loss.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::cluster_async::ClusterConnection;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::placement::{Placement, refresh_route, serving};
use super::sleep_until;
use crate::backoff::{AUDIT, Backoff, RECONNECT};
use crate::connection::sharded_subscription;

use super::registry::{Registry, lock, unsubscribed};

/// The most subscriptions on their way at once: hundreds of channels lost in a failover go in
/// a few round trips, without piling every one on a node that may be failing.
const AT_ONCE: usize = 64;

/// How long after a channel is lost its first attempt waits: a node that stops serving a slot
/// sends its unasked `sunsubscribe`s in one burst, and a command on its way to that node
/// meanwhile may take one of them as its reply (the route's refresh among them, which then
/// does not refresh it: the subscription would go to the former master again).
const QUIET: Duration = Duration::from_millis(100);

/// A channel to subscribe, and who waits for the confirmation (a waiter's first subscription).
pub(super) struct Wanted {
    channel: String,
    confirmed: Option<oneshot::Sender<bool>>,
}

impl Wanted {
    /// A waiter's channel, whose confirmation `confirmed` waits for (true), or for the end of
    /// a first attempt that was not confirmed (false: it is tried again meanwhile).
    pub(super) fn first(channel: String, confirmed: oneshot::Sender<bool>) -> Self {
        Wanted {
            channel,
            confirmed: Some(confirmed),
        }
    }

    /// A channel lost (a node unsubscribed it, or its connection dropped), to subscribe again.
    pub(super) fn again(channel: String) -> Self {
        Wanted {
            channel,
            confirmed: None,
        }
    }
}

/// A channel not confirmed yet.
struct Pending {
    /// The delay before the next attempt, growing after each one that was not confirmed.
    backoff: Backoff,
    /// When to send again (`None`: an attempt is on its way).
    due: Option<Instant>,
    /// Who waits for the confirmation.
    confirmed: Vec<oneshot::Sender<bool>>,
    /// The channel was lost (see [`Wanted::again`]): its route is read again before each
    /// attempt ([`refresh_route`]).
    lost: bool,
    /// Where the last `SSUBSCRIBE` went (the node, which served the slot as its master just
    /// before, and the connection to it): what a confirmation is checked against.
    sent_to: Option<Placement>,
}

/// How an attempt (or a check) on a channel came back.
enum Outcome {
    /// The `SSUBSCRIBE` went to this node, which said just before that it serves the slot as
    /// its master, over this connection.
    Sent(Placement),
    /// The route goes to a node that does not serve the slot as its master (a replica, or a
    /// node that lost the slot): nothing was sent, and the route is being read again.
    Misrouted,
    /// Whether the route still goes to the node the `SSUBSCRIBE` went to, over the same
    /// connection, and the node still serves the slot as its master.
    Checked(bool),
    Failed(redis::RedisError),
}

type Attempt = Pin<Box<dyn Future<Output = (String, Outcome)> + Send>>;

/// What an audit found: the placements that are not where the route goes any more, and
/// whether every node asked answered.
struct Audited {
    gone: Vec<Placement>,
    answered: bool,
}

type Audit = Pin<Box<dyn Future<Output = Audited> + Send>>;

/// The task that subscribes the channels wanted until each is confirmed.
pub(super) struct Subscriber {
    conn: ClusterConnection,
    registry: Registry,
    limit: Duration,
    pending: HashMap<String, Pending>,
    /// The channels confirmed and checked, and where: what an audit checks.
    placed: HashMap<String, Placement>,
    /// The gaps between audits, and when the next one is due (`None`: nothing placed, or an
    /// audit on its way).
    audits: Backoff,
    audit_at: Option<Instant>,
}

/// Where a channel wanted stands now.
enum Standing {
    /// Confirmed: nothing more to do.
    Subscribed,
    /// Nobody here listens on it any more (it lingers, or is forgotten).
    Unwanted,
    /// To send.
    Unconfirmed,
}

impl Subscriber {
    pub(super) fn new(conn: ClusterConnection, registry: Registry, limit: Duration) -> Self {
        Subscriber {
            conn,
            registry,
            limit,
            pending: HashMap::new(),
            placed: HashMap::new(),
            audits: AUDIT,
            audit_at: None,
        }
    }

    /// Runs until the listener is gone (`stop` dropped).
    pub(super) async fn run(
        mut self,
        mut wanted: mpsc::UnboundedReceiver<Wanted>,
        mut stop: oneshot::Receiver<()>,
    ) {
        let mut attempts: FuturesUnordered<Attempt> = FuturesUnordered::new();
        let mut audit: FuturesUnordered<Audit> = FuturesUnordered::new();
        loop {
            self.send_due(&mut attempts);
            let next = self.next_due();
            let room = attempts.len() < AT_ONCE;
            let audit_at = self.audit_at.filter(|_| audit.is_empty());
            tokio::select! {
                _ = &mut stop => return,
                asked = wanted.recv() => match asked {
                    Some(asked) => self.want(asked),
                    None => return,
                },
                Some((channel, outcome)) = attempts.next(), if !attempts.is_empty() => {
                    self.settle(channel, outcome);
                }
                Some(audited) = audit.next(), if !audit.is_empty() => self.audited(audited),
                () = sleep_until(audit_at), if audit_at.is_some() => audit.push(self.audit()),
                () = sleep_until(next), if next.is_some() && room => {}
            }
        }
    }

    fn want(&mut self, wanted: Wanted) {
        let lost = wanted.confirmed.is_none();
        let channel = wanted.channel;
        let pending = self
            .pending
            .entry(channel.clone())
            .or_insert_with(|| Pending {
                backoff: RECONNECT,
                due: Some(Instant::now() + if lost { QUIET } else { Duration::ZERO }),
                confirmed: Vec::new(),
                lost: false,
                sent_to: None,
            });
        if lost {
            // Lost after it was sent: wherever it went is not where it is now.
            pending.lost = true;
            pending.sent_to = None;
        }
        pending.confirmed.extend(wanted.confirmed);
        if lost {
            self.placed.remove(&channel);
            self.stir();
        }
    }

    fn standing(&self, channel: &str) -> Standing {
        match lock(&self.registry).get(channel) {
            Some(entry) if entry.subscribed => Standing::Subscribed,
            Some(entry) if entry.subscriptions > 0 || entry.heard.is_some() => {
                Standing::Unconfirmed
            }
            _ => Standing::Unwanted,
        }
    }

    /// Sends the attempts that are due, as many as there is room for.
    fn send_due(&mut self, attempts: &mut FuturesUnordered<Attempt>) {
        let now = Instant::now();
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.due.is_some_and(|at| at <= now))
            .map(|(channel, _)| channel.clone())
            .collect();
        for channel in due {
            if attempts.len() >= AT_ONCE {
                return;
            }
            let standing = self.standing(&channel);
            if matches!(standing, Standing::Unwanted) {
                self.done(&channel, false);
                continue;
            }
            let Some(pending) = self.pending.get_mut(&channel) else {
                continue;
            };
            pending.due = None;
            let (conn, limit, lost) = (self.conn.clone(), self.limit, pending.lost);
            match (standing, pending.sent_to.clone()) {
                // Confirmed after our own `SSUBSCRIBE`: done if it went where the route goes,
                // over the connection still there.
                (Standing::Subscribed, Some(sent_to)) => attempts.push(Box::pin(async move {
                    let checked = match serving(&conn, &channel, limit).await {
                        Ok(now) => Outcome::Checked(now.as_ref() == Some(&sent_to)),
                        Err(err) => Outcome::Failed(err),
                    };
                    (channel, checked)
                })),
                // Not confirmed, or confirmed by a reply to something else (which may have come
                // from any node): sent (again).
                _ => attempts.push(Box::pin(async move {
                    let outcome = attempt(&conn, &channel, lost, limit).await;
                    (channel, outcome)
                })),
            }
        }
    }

    /// An attempt (or a check) came back. Done once the channel is confirmed and the node the
    /// `SSUBSCRIBE` went to is where the route goes, over the same connection, and serves the
    /// slot as its master;
    /// confirmed after an `SSUBSCRIBE` that went to a verified master, checked at once.
    /// Otherwise those waiting are told it is not (yet), and it is sent again after a delay. A
    /// reply is not a confirmation: it may have been an unasked `sunsubscribe` the crate took
    /// for it (the real reply then comes later, and the next turn finds the channel
    /// confirmed). A confirmation without a check that holds may have come from a replica: the
    /// channel counts as lost (its readers are told of the gap, its waiters are woken once it
    /// is back), and is sent again.
    fn settle(&mut self, channel: String, outcome: Outcome) {
        let standing = self.standing(&channel);
        if matches!(standing, Standing::Unwanted) {
            return self.done(&channel, false);
        }
        let subscribed = matches!(standing, Standing::Subscribed);
        if subscribed && matches!(outcome, Outcome::Checked(true)) {
            return self.done(&channel, true);
        }
        let registry = self.registry.clone();
        let Some(pending) = self.pending.get_mut(&channel) else {
            return;
        };
        match &outcome {
            Outcome::Sent(placement) => {
                pending.sent_to = Some(placement.clone());
                if subscribed {
                    // Checked at once (see `send_due`).
                    pending.due = Some(Instant::now());
                    return;
                }
            }
            Outcome::Misrouted | Outcome::Checked(false) => {
                pending.sent_to = None;
                if subscribed {
                    tracing::debug!(
                        channel,
                        "release listener: sharded channel confirmed, not by its slot's master"
                    );
                    unsubscribed(&registry, &channel);
                    pending.lost = true;
                }
            }
            Outcome::Checked(true) | Outcome::Failed(_) => {}
        }
        if !matches!(outcome, Outcome::Sent(_) | Outcome::Checked(true)) {
            self.stir();
        }
        let Some(pending) = self.pending.get_mut(&channel) else {
            return;
        };
        for confirmed in pending.confirmed.drain(..) {
            let _ = confirmed.send(false);
        }
        let delay = pending.backoff.next_jittered();
        pending.due = Some(Instant::now() + delay);
        match outcome {
            Outcome::Sent(_) => tracing::debug!(
                channel,
                ?delay,
                "release listener: ssubscribe answered, not confirmed yet"
            ),
            Outcome::Misrouted | Outcome::Checked(_) => tracing::debug!(
                channel,
                ?delay,
                "release listener: the route to the slot's master is being read again"
            ),
            Outcome::Failed(err) => {
                tracing::debug!(channel, %err, ?delay, "release listener: ssubscribe failed")
            }
        }
    }

    fn done(&mut self, channel: &str, subscribed: bool) {
        let Some(pending) = self.pending.remove(channel) else {
            return;
        };
        for confirmed in pending.confirmed {
            let _ = confirmed.send(subscribed);
        }
        if subscribed && let Some(placement) = pending.sent_to {
            self.placed.insert(channel.to_owned(), placement);
            if self.audit_at.is_none() {
                self.audit_at = Some(Instant::now() + self.audits.next_jittered());
            }
        }
    }

    /// A sign of trouble: the next audit comes soon, and the ones after it close together.
    fn stir(&mut self) {
        self.audits.reset();
        let at = Instant::now() + self.audits.next_jittered();
        self.audit_at = Some(self.audit_at.map_or(at, |due| due.min(at)));
    }

    /// Checks, for one channel of each placement, that the route to its slot goes to the node
    /// it was placed on, over the same connection, and that the node still serves the slot as
    /// its master (see the module's documentation). Channels no longer subscribed (lost since,
    /// or unsubscribed) are no longer placed.
    fn audit(&mut self) -> Audit {
        self.audit_at = None;
        let registry = lock(&self.registry);
        self.placed
            .retain(|channel, _| registry.get(channel).is_some_and(|entry| entry.subscribed));
        drop(registry);
        let mut groups: HashMap<Placement, String> = HashMap::new();
        for (channel, placement) in &self.placed {
            groups
                .entry(placement.clone())
                .or_insert_with(|| channel.clone());
        }
        let (conn, limit) = (self.conn.clone(), self.limit);
        Box::pin(async move {
            let checks = groups.into_iter().map(|(placement, channel)| {
                let conn = &conn;
                async move { (serving(conn, &channel, limit).await, placement) }
            });
            let mut audited = Audited {
                gone: Vec::new(),
                answered: true,
            };
            for (now, placement) in futures_util::future::join_all(checks).await {
                match now {
                    Ok(now) if now.as_ref() == Some(&placement) => {}
                    Ok(_) => audited.gone.push(placement),
                    Err(err) => {
                        tracing::debug!(%err, "release listener: sharded subscriptions not checked");
                        audited.answered = false;
                    }
                }
            }
            audited
        })
    }

    /// An audit came back: every channel on a placement found gone is lost, and sent again.
    fn audited(&mut self, audited: Audited) {
        if !audited.gone.is_empty() || !audited.answered {
            self.stir();
        }
        let lost: Vec<String> = self
            .placed
            .iter()
            .filter(|(_, placement)| audited.gone.contains(placement))
            .map(|(channel, _)| channel.clone())
            .collect();
        for channel in lost {
            self.placed.remove(&channel);
            tracing::debug!(
                channel,
                "release listener: sharded channel's connection replaced, or its slot moved"
            );
            if unsubscribed(&self.registry, &channel) {
                self.want(Wanted::again(channel));
            }
        }
        if self.audit_at.is_none() && !self.placed.is_empty() {
            self.audit_at = Some(Instant::now() + self.audits.next_jittered());
        }
    }

    /// When the next attempt not on its way is due.
    fn next_due(&self) -> Option<Instant> {
        self.pending.values().filter_map(|p| p.due).min()
    }
}

/// One subscription of `channel`: its route read again first if it was lost; then, if the node
/// the route goes to serves the slot as its master, the `SSUBSCRIBE` to it.
async fn attempt(conn: &ClusterConnection, channel: &str, lost: bool, limit: Duration) -> Outcome {
    if lost && let Err(err) = refresh_route(conn, channel, limit).await {
        tracing::debug!(channel, %err, "release listener: route not read again");
    }
    match serving(conn, channel, limit).await {
        Ok(Some(placement)) => match sharded_subscription(conn, channel, true, limit).await {
            Ok(()) => Outcome::Sent(placement),
            Err(err) => Outcome::Failed(err),
        },
        Ok(None) => {
            // A `MOVED` makes the connection read the slots again.
            if let Err(err) = refresh_route(conn, channel, limit).await {
                tracing::debug!(channel, %err, "release listener: route not read again");
            }
            Outcome::Misrouted
        }
        Err(err) => Outcome::Failed(err),
    }
}

#[cfg(test)]
mod tests {
    use super::super::registry::confirmed;
    use super::super::{Heard, ReleaseNotifier};
    use super::*;

    #[test]
    fn only_a_confirmation_that_names_a_channel_subscribes_it() {
        let registry = Registry::default();
        let (requests, _rx) = mpsc::unbounded_channel();
        let notifier = ReleaseNotifier {
            registry: registry.clone(),
            requests,
            closer: Default::default(),
        };
        let (waiter, _) = notifier.subscribe("a");
        let heard = waiter.heard();
        let (_other, _) = notifier.subscribe("b");
        confirmed(&registry, "b");
        assert!(notifier.subscribe_if_live("a").is_none());
        confirmed(&registry, "a");
        assert!(notifier.subscribe_if_live("a").is_some());
        // A node unsubscribed it: lost until confirmed again, and then its waiters are woken.
        assert!(unsubscribed(&registry, "a"));
        assert!(notifier.subscribe_if_live("a").is_none());
        let generation = *lock(&registry)["a"].generation.borrow();
        confirmed(&registry, "a");
        assert_eq!(*lock(&registry)["a"].generation.borrow(), generation + 1);
        let mut heard = heard;
        let told: Vec<_> = std::iter::from_fn(|| heard.try_recv().ok()).collect();
        assert_eq!(told, [Heard::Subscribed, Heard::Lost, Heard::Subscribed]);
        // Nobody registered it (a waiter's own channel, or one forgotten): nothing to do.
        assert!(!unsubscribed(&registry, "a:token"));
    }
}
