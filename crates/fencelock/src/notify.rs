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
//! everyone is a generation counter, so a waiter between two waits cannot miss it. When the
//! pub/sub connection drops, it wakes every waiter (a release may have been missed), reconnects
//! with backoff and resubscribes. A waiter never depends on a message alone:
//! it also wakes when the holder's lease would have run out, so a lost message costs a bounded
//! delay, never a hang.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

#[cfg(feature = "sentinel")]
use crate::connection::Followed;
use crate::connection::within;
#[cfg(feature = "cluster")]
use crate::connection::{Pushes, sharded_subscription};

/// The waiters of one channel on this client.
struct Channel {
    /// Wakes one waiter per `one` message: a count of pending wake-ups (never more than there
    /// are waiters), so that two releases in quick succession wake two waiters.
    wake_one: Arc<Semaphore>,
    /// Bumped to wake every waiter.
    generation: watch::Sender<u64>,
    /// The waiters that can be woken by their request's owner token.
    addressed: HashMap<String, Arc<Personal>>,
    subscriptions: usize,
    /// The server confirmed the subscription (and the connection has not dropped since).
    subscribed: bool,
}

/// How long a channel stays subscribed after its last local waiter went away.
const LINGER: Duration = Duration::from_secs(1);

use crate::script::{WAKE_ONE, WAKE_TO as WAKE_TOKEN};

/// A lock that a release passed to a waiter in line: its fence, and the server millisecond at
/// which the waiter's place would have lapsed (the passed lease ends then; the waiter matches it
/// against the replies of its tries to know when its lease began at the latest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass {
    pub(crate) fence: u64,
    pub(crate) lapses: u64,
}

/// Whom a release message wakes.
#[derive(Debug, PartialEq)]
enum Wake<'a> {
    One,
    /// The waiter with this owner token, and what was passed to it, if anything.
    Token(&'a [u8], Option<Pass>),
    All,
}

impl<'a> Wake<'a> {
    fn of(payload: &'a [u8]) -> Self {
        if payload == WAKE_ONE.as_bytes() {
            Wake::One
        } else if let Some(addressed) = payload.strip_prefix(WAKE_TOKEN.as_bytes()) {
            let mut parts = addressed.splitn(3, |b| *b == b':');
            let token = parts.next().unwrap_or_default();
            let number = |part: Option<&[u8]>| {
                std::str::from_utf8(part?)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
            };
            let pass = match (number(parts.next()), number(parts.next())) {
                (Some(fence), Some(lapses)) => Some(Pass { fence, lapses }),
                _ => None,
            };
            Wake::Token(token, pass)
        } else {
            Wake::All
        }
    }
}

/// What wakes one waiter alone: a permit per message addressed to its token, and the lock
/// passed to it, if the message said so.
struct Personal {
    wake: Semaphore,
    passed: Mutex<Option<Pass>>,
}

impl Default for Personal {
    fn default() -> Self {
        Personal {
            wake: Semaphore::new(0),
            passed: Mutex::new(None),
        }
    }
}

impl Personal {
    fn passed(&self) -> std::sync::MutexGuard<'_, Option<Pass>> {
        self.passed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

type Registry = Arc<Mutex<HashMap<String, Channel>>>;

fn lock(registry: &Registry) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
    registry.lock().unwrap_or_else(PoisonError::into_inner)
}

enum Request {
    Subscribe {
        channel: String,
        confirmed: oneshot::Sender<bool>,
    },
    Unsubscribe {
        channel: String,
    },
}

/// The client's release listener (cheap to clone).
#[derive(Clone)]
pub(crate) struct ReleaseNotifier {
    registry: Registry,
    requests: mpsc::UnboundedSender<Request>,
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
}

impl ReleaseNotifier {
    /// Starts the listener task (inside the current Tokio runtime). Nothing is sent until the
    /// first subscription.
    pub(crate) fn start(feed: Feed, command_timeout: Duration) -> Self {
        let registry: Registry = Arc::default();
        let (requests, rx) = mpsc::unbounded_channel();
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
            Feed::Sharded(conn, pushes) => Source::Sharded { conn, pushes },
        };
        let listener = Listener {
            source,
            command_timeout,
            registry: registry.clone(),
            backoff: crate::backoff::RECONNECT,
            retry_at: None,
            lingering: std::collections::VecDeque::new(),
        };
        tokio::spawn(listener.run(rx));
        ReleaseNotifier { registry, requests }
    }

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
                });
            entry.subscriptions += 1;
            (
                entry.wake_one.clone(),
                entry.generation.subscribe(),
                entry.subscribed,
            )
        };
        let subscription = Subscription {
            registry: self.registry.clone(),
            requests: self.requests.clone(),
            channel: channel.to_owned(),
            wake_one,
            generation,
            personal: Arc::default(),
            address: None,
        };
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

    /// How many waiters of this client are registered for `channel`.
    pub(crate) fn waiters(&self, channel: &str) -> usize {
        lock(&self.registry)
            .get(channel)
            .map_or(0, |c| c.subscriptions)
    }
}

impl Subscription {
    /// Makes release messages addressed to `token` (the owner token of the waiter's current
    /// request) wake this waiter. Cheap when the token did not change; a new token forgets what
    /// was passed to the old one.
    pub(crate) fn answer_to(&mut self, token: &str) {
        if self.address.as_deref() == Some(token) {
            return;
        }
        *self.personal.passed() = None;
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
        self.address = Some(token.to_owned());
    }

    /// Resolves at the next release message for this channel that wakes this waiter (at once if
    /// one arrived since the last call), or when the pub/sub connection was lost; with the lock
    /// when a release passed it to this waiter's token.
    pub(crate) async fn released(&mut self) -> Option<Pass> {
        tokio::select! {
            permit = self.wake_one.acquire() => match permit {
                Ok(permit) => permit.forget(),
                Err(_) => std::future::pending::<()>().await,
            },
            permit = self.personal.wake.acquire() => match permit {
                Ok(permit) => {
                    permit.forget();
                    return self.personal.passed().take();
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

/// Where release messages come from.
pub(crate) enum Feed {
    /// `PUBLISH` on one server: a pub/sub connection of the listener's own.
    Client(Box<redis::Client>),
    /// `PUBLISH` on the master the sentinels name, asked again at each reconnection.
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<Followed>),
    /// Redis Cluster: `SSUBSCRIBE` on the cluster connection, whose RESP3 pushes bring the
    /// messages; the `redis` crate resubscribes each channel on the node that serves its slot
    /// after a reconnection or a topology change.
    #[cfg(feature = "cluster")]
    Sharded(ClusterConnection, Pushes),
}

/// The listener's end of a feed.
enum Source {
    Dedicated {
        opener: Opener,
        connection: Option<(PubSubSink, PubSubStream)>,
        /// With Sentinel: changes when the client moves to another master.
        switches: Option<watch::Receiver<u64>>,
    },
    #[cfg(feature = "cluster")]
    Sharded {
        conn: ClusterConnection,
        pushes: Pushes,
    },
}

/// Opens a dedicated pub/sub connection.
enum Opener {
    Client(Box<redis::Client>),
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<Followed>),
}

impl Opener {
    async fn open(&self) -> redis::RedisResult<redis::aio::PubSub> {
        match self {
            Opener::Client(client) => client.get_async_pubsub().await,
            #[cfg(feature = "sentinel")]
            Opener::Sentinel(followed) => followed.refresh().await?.client.get_async_pubsub().await,
        }
    }
}

/// What the feed brought.
enum Event {
    Message {
        channel: Vec<u8>,
        payload: Vec<u8>,
    },
    /// The connection was lost: a release may have been missed.
    Lost,
}

/// The task that owns the pub/sub connection.
struct Listener {
    source: Source,
    command_timeout: Duration,
    registry: Registry,
    /// The delay before the next reconnection attempt, doubled after each failure.
    backoff: crate::backoff::Backoff,
    /// When to try to reconnect (`None`: at once, if anyone is waiting).
    retry_at: Option<tokio::time::Instant>,
    /// Channels whose last waiter went away, and when to unsubscribe them unless a new one
    /// came (in that order).
    lingering: std::collections::VecDeque<(String, tokio::time::Instant)>,
}

impl Listener {
    async fn run(mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        loop {
            let reconnect = self.needs_connection() && !lock(&self.registry).is_empty();
            tokio::select! {
                request = requests.recv() => {
                    let Some(request) = request else { return };
                    self.handle(request).await;
                }
                event = next_event(&mut self.source) => match event {
                    Event::Message { channel, payload } => {
                        if let Ok(channel) = std::str::from_utf8(&channel) {
                            self.deliver(channel, Wake::of(&payload));
                        }
                    }
                    Event::Lost => {
                        tracing::debug!("release listener: pub/sub connection lost");
                        self.disconnected();
                        self.wake_everyone();
                    }
                },
                () = sleep_until(self.retry_at), if reconnect => {
                    if self.connect_and_resubscribe().await {
                        // Waiters may have missed a release while the connection was down.
                        self.wake_everyone();
                    }
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
    fn needs_connection(&self) -> bool {
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
    fn disconnected(&mut self) {
        if let Source::Dedicated { connection, .. } = &mut self.source {
            *connection = None;
        }
        for entry in lock(&self.registry).values_mut() {
            entry.subscribed = false;
        }
        self.retry_at = Some(tokio::time::Instant::now() + self.backoff.next_delay());
    }

    async fn handle(&mut self, request: Request) {
        match request {
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
        }
    }

    /// Unsubscribes a channel that lingered, unless a waiter came back meanwhile.
    async fn unsubscribe_if_idle(&mut self, channel: String) {
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
                connection: Some((sink, _)),
                ..
            } => within(limit, sink.unsubscribe(&channel)).await.is_err(),
            Source::Dedicated { .. } => false,
            #[cfg(feature = "cluster")]
            Source::Sharded { conn, .. } => {
                // A failure leaves a subscription without waiters: harmless.
                let _ = sharded_subscription(conn, &channel, false, limit).await;
                false
            }
        };
        if failed {
            self.disconnected();
        }
    }

    /// Subscribes one channel, connecting first if needed. False if it could not.
    async fn subscribe(&mut self, channel: &str) -> bool {
        let limit = self.command_timeout;
        let result = match &mut self.source {
            #[cfg(feature = "cluster")]
            Source::Sharded { conn, .. } => {
                return match sharded_subscription(conn, channel, true, limit).await {
                    Ok(()) => true,
                    Err(err) => {
                        tracing::debug!(channel, %err, "release listener: ssubscribe failed");
                        false
                    }
                };
            }
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
                connection: Some((sink, _)),
                ..
            } => within(limit, sink.subscribe(channel)).await,
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
    async fn connect_and_resubscribe(&mut self) -> bool {
        let Source::Dedicated {
            opener, connection, ..
        } = &mut self.source
        else {
            return true;
        };
        let connected = within(self.command_timeout, opener.open()).await;
        let (mut sink, stream) = match connected {
            Ok(pubsub) => pubsub.split(),
            Err(err) => {
                tracing::debug!(%err, "release listener: cannot connect");
                self.disconnected();
                return false;
            }
        };
        let channels: Vec<String> = lock(&self.registry).keys().cloned().collect();
        if !channels.is_empty()
            && let Err(err) = within(self.command_timeout, sink.subscribe(&channels)).await
        {
            tracing::debug!(%err, "release listener: resubscribe failed");
            self.disconnected();
            return false;
        }
        *connection = Some((sink, stream));
        let mut registry = lock(&self.registry);
        for channel in &channels {
            if let Some(entry) = registry.get_mut(channel) {
                entry.subscribed = true;
            }
        }
        drop(registry);
        self.backoff.reset();
        self.retry_at = None;
        true
    }

    /// Wakes one local waiter of the channel that was released, the one addressed, or all.
    fn deliver(&self, channel: &str, wake: Wake<'_>) {
        let registry = lock(&self.registry);
        let Some(entry) = registry.get(channel) else {
            return;
        };
        match wake {
            Wake::One => {
                if entry.wake_one.available_permits() < entry.subscriptions {
                    entry.wake_one.add_permits(1);
                }
            }
            Wake::Token(token, pass) => {
                let waiter = std::str::from_utf8(token)
                    .ok()
                    .and_then(|token| entry.addressed.get(token));
                if let Some(waiter) = waiter {
                    if pass.is_some() {
                        *waiter.passed() = pass;
                    }
                    if waiter.wake.available_permits() == 0 {
                        waiter.wake.add_permits(1);
                    }
                }
            }
            Wake::All => entry.generation.send_modify(|g| *g = g.wrapping_add(1)),
        }
    }

    fn wake_everyone(&self) {
        for entry in lock(&self.registry).values() {
            entry.generation.send_modify(|g| *g = g.wrapping_add(1));
        }
    }
}

/// The next message or loss of the feed (never, while there is no connection).
async fn next_event(source: &mut Source) -> Event {
    match source {
        Source::Dedicated {
            connection: Some((_, stream)),
            switches,
            ..
        } => tokio::select! {
            message = stream.next() => match message {
                Some(message) => Event::Message {
                    channel: message.get_channel_name().as_bytes().to_vec(),
                    payload: message.get_payload_bytes().to_vec(),
                },
                None => Event::Lost,
            },
            // The client moved to another master: listen there.
            () = switched(switches) => Event::Lost,
        },
        Source::Dedicated { .. } => std::future::pending().await,
        #[cfg(feature = "cluster")]
        Source::Sharded { pushes, .. } => loop {
            let Some(push) = pushes.recv().await else {
                // The cluster connection is gone with its client: only timers are left.
                return std::future::pending().await;
            };
            match push.kind {
                redis::PushKind::SMessage | redis::PushKind::Message => {
                    let mut data = push.data.into_iter();
                    if let (
                        Some(redis::Value::BulkString(channel)),
                        Some(redis::Value::BulkString(payload)),
                    ) = (data.next(), data.next())
                    {
                        return Event::Message { channel, payload };
                    }
                }
                // A node's connection dropped; the `redis` crate reconnects and resubscribes.
                redis::PushKind::Disconnection => return Event::Lost,
                _ => {}
            }
        },
    }
}

/// Resolves when the followed master changes (never without Sentinel, or once the client is
/// gone).
async fn switched(switches: &mut Option<watch::Receiver<u64>>) {
    match switches {
        Some(switches) => {
            if switches.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => tokio::time::sleep(Duration::ZERO).await,
    }
}

#[cfg(test)]
mod tests {
    use super::{Pass, Wake};
    use crate::script::{WAKE_ALL, WAKE_ONE};

    #[test]
    fn release_payloads_say_whom_to_wake() {
        assert_eq!(Wake::of(WAKE_ONE.as_bytes()), Wake::One);
        assert_eq!(Wake::of(b"to:ab12"), Wake::Token(b"ab12", None));
        assert_eq!(
            Wake::of(b"to:ab12:1764000000123456:1764000005123"),
            Wake::Token(
                b"ab12",
                Some(Pass {
                    fence: 1_764_000_000_123_456,
                    lapses: 1_764_000_005_123
                })
            )
        );
        // A malformed pass wakes the waiter, and passes nothing.
        assert_eq!(Wake::of(b"to:ab12:x:5"), Wake::Token(b"ab12", None));
        assert_eq!(Wake::of(b"to:ab12:7"), Wake::Token(b"ab12", None));
        assert_eq!(Wake::of(WAKE_ALL.as_bytes()), Wake::All);
        assert_eq!(Wake::of(b""), Wake::All);
    }
}
