//! The instances a client talks to, and the quorum logic every operation goes through.
//!
//! One instance is the plain single-server lock. N independent instances are Redlock: an
//! operation is sent to every instance at once, each call bounded by a per-instance time limit
//! that is small next to the lease, and the outcome is decided as soon as it is known — a
//! majority agreed, or a majority can no longer agree. The same code serves both: with one
//! instance the majority is that instance.
//!
//! Fencing over a quorum: an acquisition's fence is the largest of the fences its granting
//! majority handed out, and a release writes that fence back (as a floor) on every instance
//! before deleting the key. Any later majority shares an instance with this one; it takes the
//! lock there only after the key went away — by that release (which raised the fence key first),
//! or by expiry at least a lease later (when the fence's server-clock term has moved past it) —
//! so the next fence is larger. This holds as long as instances keep their data, or a restarted
//! instance stays out for at least the longest lease, and instance clocks agree to within a
//! lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::Either;
use futures_util::stream::FuturesUnordered;

use crate::background::{Count, Running};
#[cfg(feature = "sentinel")]
use crate::connection::Followed;
use crate::connection::{Endpoint, Server, Switches, is_unreachable};
use crate::error::Error;
use crate::notify::{Addressed, Feed, Prepared, ReleaseNotifier, Subscription};

/// The servers of one client.
pub(crate) struct Instances {
    servers: Vec<Server>,
    notifiers: Vec<ReleaseNotifier>,
    command_timeout: Duration,
    instance_timeout: Option<Duration>,
    background: Arc<Count>,
    /// Set by [`Self::close`].
    closed: AtomicBool,
}

/// How many instances make a majority, and the two questions every operation asks of its
/// answers: did a majority agree, and can a majority still agree. Every decision over the
/// instances (acquire, extend, release, renewal, inspect, force-release) is made here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quorum {
    total: usize,
    needed: usize,
}

impl Quorum {
    /// The majority of `total` instances (one instance: that instance).
    pub(crate) fn of(total: usize) -> Self {
        Quorum {
            total,
            needed: total / 2 + 1,
        }
    }

    /// How many instances make a majority.
    pub(crate) fn needed(self) -> usize {
        self.needed
    }

    /// Whether `agreed` instances are a majority.
    pub(crate) fn reached(self, agreed: usize) -> bool {
        agreed >= self.needed
    }

    /// Whether, with `against` instances lost to an outcome (refused, failed, or not answering),
    /// a majority for it is no longer possible.
    pub(crate) fn out_of_reach(self, against: usize) -> bool {
        against > self.total.saturating_sub(self.needed)
    }
}

/// The calls of one [`Instances::on_all`] that have not answered yet. When dropped (the outcome
/// was decided, or the caller went away), those left run on in one task, counted as background
/// work until they end.
struct Stragglers<F: Future + Send + 'static> {
    pending: FuturesUnordered<F>,
    running: Option<Running>,
}

impl<F: Future + Send + 'static> Drop for Stragglers<F> {
    fn drop(&mut self) {
        let running = self.running.take();
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        // Outside a runtime (it is shutting down) nothing can run them: they are dropped.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                while pending.next().await.is_some() {}
                drop(running);
            });
        }
    }
}

/// What one instance answered (or that it did not answer before the outcome was decided).
pub(crate) type Answer<T> = Option<redis::RedisResult<T>>;

impl Instances {
    /// Sets up connections and release listeners; must run inside a Tokio runtime.
    pub(crate) fn new(
        endpoints: Vec<Endpoint>,
        command_timeout: Duration,
        instance_timeout: Option<Duration>,
    ) -> redis::RedisResult<Self> {
        let mut servers = Vec::with_capacity(endpoints.len());
        let mut notifiers = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let notifier = Prepared::new();
            let (server, feed) = match endpoint {
                Endpoint::Single(client) => (
                    Server::new(client.clone(), command_timeout)?,
                    Feed::Client(Box::new(client)),
                ),
                #[cfg(feature = "cluster")]
                Endpoint::Cluster(seeds) => {
                    let conn = seeds.connect(command_timeout)?;
                    let pushes = seeds.subscriptions(command_timeout, notifier.router())?;
                    (
                        Server::cluster(conn, seeds, command_timeout),
                        Feed::Sharded(pushes),
                    )
                }
                #[cfg(feature = "sentinel")]
                Endpoint::Sentinel(set) => {
                    let followed = Followed::start(set, command_timeout);
                    (Server::sentinel(followed.clone()), Feed::Sentinel(followed))
                }
            };
            servers.push(server);
            notifiers.push(notifier.start(feed, command_timeout));
        }
        if servers.len() > 1 {
            servers = servers.into_iter().map(Server::in_call_order).collect();
        }
        Ok(Instances {
            servers,
            notifiers,
            command_timeout,
            instance_timeout,
            background: Arc::default(),
            closed: AtomicBool::new(false),
        })
    }

    /// Closes every instance (the client's close): the release listeners end (waited for,
    /// their connections with them), and the command connections are dropped, so that every
    /// later call fails at once with [`Error::Closed`]; a call on its way keeps its handle
    /// until it ends. Closing twice does nothing more.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let servers = self.servers.iter().map(Server::close);
        let notifiers = self.notifiers.iter().map(ReleaseNotifier::close);
        futures_util::future::join(
            futures_util::future::join_all(servers),
            futures_util::future::join_all(notifiers),
        )
        .await;
    }

    /// Whether [`Self::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// The master switches of these instances (only Sentinel ones switch).
    pub(crate) fn switches(&self) -> Switches {
        Switches::new(self.servers.iter().filter_map(Server::switches).collect())
    }

    /// How many master switches these instances have seen so far, in all.
    pub(crate) fn switch_epoch(&self) -> u64 {
        self.servers
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.switch_epoch()))
    }

    pub(crate) fn is_single(&self) -> bool {
        self.servers.len() == 1
    }

    /// The majority of these instances.
    pub(crate) fn quorum(&self) -> Quorum {
        Quorum::of(self.servers.len())
    }

    /// A ticket that counts as background work until it is dropped (see [`Self::wait_idle`]).
    pub(crate) fn running(&self) -> Running {
        self.background.ticket()
    }

    /// The count of background work itself, for work that takes its ticket later.
    pub(crate) fn background(&self) -> &Arc<Count> {
        &self.background
    }

    /// Runs `work` as a task, counted as background work until it ends.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        let running = self.running();
        tokio::spawn(async move {
            work.await;
            drop(running);
        });
    }

    /// The time limit for one call to one instance, for a lease of `ttl`: the command timeout
    /// for a single instance; over Redlock the configured instance timeout, or 5 % of the lease
    /// (at least 5 ms, at most the command timeout).
    pub(crate) fn limit(&self, ttl: Duration) -> Duration {
        if self.is_single() {
            return self.command_timeout;
        }
        self.instance_timeout
            .unwrap_or_else(|| (ttl / 20).max(Duration::from_millis(5)))
            .min(self.command_timeout)
    }

    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// The servers as a list for messages: `a:1, b:2`.
    pub(crate) fn describe(&self) -> String {
        let addrs: Vec<&str> = self.servers.iter().map(|s| &*s.addr).collect();
        addrs.join(", ")
    }

    /// Runs `op` on every instance (or on those in `only`) at once, and returns as soon as
    /// `decided` says the answers so far settle the outcome. Instances that had not answered by
    /// then are `None`; over Redlock their calls run on in one background task, so every
    /// instance still gets the request (and the caller does not wait for it).
    pub(crate) async fn on_all<T, F, Fut>(
        &self,
        only: Option<&[usize]>,
        op: F,
        decided: impl FnMut(&[Answer<T>]) -> bool,
    ) -> Vec<Answer<T>>
    where
        F: Fn(&Server) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.on_all_of(only, op, decided, false).await
    }

    /// [`on_all`](Self::on_all) for an acquisition: over Redlock, an instance that let its last
    /// call time out is asked only by one acquisition at a time until it answers
    /// (`connection/health.rs`); for the others it counts as unanswered at once. Only
    /// acquisitions skip: every hold an instance was asked for still gets its renewals and its
    /// release there, in order.
    pub(crate) async fn acquire_on_all<T, F, Fut>(
        &self,
        op: F,
        decided: impl FnMut(&[Answer<T>]) -> bool,
    ) -> Vec<Answer<T>>
    where
        F: Fn(&Server) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.on_all_of(None, op, decided, true).await
    }

    async fn on_all_of<T, F, Fut>(
        &self,
        only: Option<&[usize]>,
        op: F,
        mut decided: impl FnMut(&[Answer<T>]) -> bool,
        skip_suspects: bool,
    ) -> Vec<Answer<T>>
    where
        F: Fn(&Server) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>> + Send + 'static,
        T: Send + 'static,
    {
        let mut answers: Vec<Answer<T>> = self.servers.iter().map(|_| None).collect();
        let selected = self
            .servers
            .iter()
            .enumerate()
            .filter(|(i, _)| only.is_none_or(|only| only.contains(i)));
        if self.is_single() {
            for (i, server) in selected {
                answers[i] = Some(op(server).await);
            }
            return answers;
        }
        // One future polls every instance's call: no task per call. Calls not answered when
        // the outcome is decided (or when this future is dropped) run on in one task, so every
        // instance still gets the request.
        // An instance that let its last call time out gets one call at a time until it answers
        // (`connection/health.rs`); the others count as unanswered at once.
        let mut calls = Stragglers {
            pending: selected
                .map(|(i, server)| match server.admit(skip_suspects) {
                    Some(admission) => {
                        let call = op(server);
                        Either::Left(async move {
                            let answer = call.await;
                            drop(admission);
                            (i, answer)
                        })
                    }
                    None => Either::Right(std::future::ready((i, Err(skipped(server))))),
                })
                .collect(),
            running: Some(self.background.ticket()),
        };
        while let Some((i, answer)) = calls.pending.next().await {
            if let Some(slot) = answers.get_mut(i) {
                *slot = Some(answer);
            }
            if decided(&answers) {
                break;
            }
        }
        answers
    }

    /// Waits (at most `limit`; a limit too far ahead to represent waits as long as it takes)
    /// until no background work is under way. True if none is.
    pub(crate) async fn wait_idle(&self, limit: Duration) -> bool {
        self.background.zero_within(Some(limit)).await
    }

    /// Registers a waiter for `channel` on every instance, and waits (at most `limit`) for the
    /// servers to confirm. Instances that do not confirm in time are still listened to once
    /// their connection works.
    pub(crate) async fn subscribe(&self, channel: &str, limit: Duration) -> Subscriptions {
        let mut subscriptions = Vec::with_capacity(self.notifiers.len());
        let mut confirmations = Vec::with_capacity(self.notifiers.len());
        for notifier in &self.notifiers {
            let (subscription, confirmed) = notifier.subscribe(channel);
            subscriptions.push(subscription);
            confirmations.push(confirmed);
        }
        let all = futures_util::future::join_all(confirmations);
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::debug!(channel, "some release subscriptions are not confirmed yet");
        }
        Subscriptions(subscriptions)
    }

    /// Registers a waiter for `channel` on every instance if every instance has it subscribed
    /// now (see [`ReleaseNotifier::subscribe_if_live`]): no round trip, and nothing is missed
    /// from here on. `None` if one has not.
    pub(crate) fn subscribed_already(&self, channel: &str) -> Option<Subscriptions> {
        let subscriptions = self
            .notifiers
            .iter()
            .map(|notifier| notifier.subscribe_if_live(channel))
            .collect::<Option<Vec<_>>>()?;
        Some(Subscriptions(subscriptions))
    }

    /// How many requests of this client wait for a release message on `channel` now.
    pub(crate) fn local_waiters(&self, channel: &str) -> usize {
        self.notifiers.first().map_or(0, |n| n.waiters(channel))
    }

    /// The error for an operation that could not gather a majority because instances failed,
    /// or, with a single instance, that instance's own error.
    pub(crate) fn failure<T>(
        &self,
        lock: &str,
        command: &'static str,
        answers: Vec<Answer<T>>,
        agreed: usize,
        refused: usize,
    ) -> Error {
        if self.is_closed() {
            return Error::Closed {
                lock: lock.to_owned(),
            };
        }
        if self.is_single() {
            let err = answers.into_iter().flatten().find_map(Result::err);
            return match err {
                Some(err) => self.servers[0].error(lock, command, err),
                None => Error::NoQuorum {
                    lock: lock.to_owned(),
                    command,
                    agreed,
                    needed: 1,
                    total: 1,
                    details: format!("{} did not answer", self.servers[0].addr),
                },
            };
        }
        let mut details = Vec::new();
        for (server, answer) in self.servers.iter().zip(&answers) {
            match answer {
                None => details.push(format!("{} did not answer in time", server.addr)),
                Some(Err(err)) => details.push(format!("{} {}", server.addr, describe(err))),
                Some(Ok(_)) => {}
            }
        }
        if refused > 0 {
            details.push(format!("{refused} held by another owner"));
        }
        Error::NoQuorum {
            lock: lock.to_owned(),
            command,
            agreed,
            needed: self.quorum().needed(),
            total: self.servers.len(),
            details: details.join(", "),
        }
    }
}

/// The answer of an instance a call was not sent to: it let its last call time out, and a probe
/// to it is on its way.
fn skipped(server: &Server) -> redis::RedisError {
    crate::connection::timed_out(format!(
        "not asked: {} let its last call time out, and a call to it is still on its way",
        server.addr
    ))
}

/// A short description of why one instance failed.
fn describe(err: &redis::RedisError) -> String {
    if err.is_timeout() {
        "timed out".into()
    } else if err.is_connection_refusal() {
        "refused the connection".into()
    } else if is_unreachable(err) {
        format!("is unreachable ({err})")
    } else {
        format!("answered an error ({err})")
    }
}

/// A waiter's subscriptions to one lock's release channel on every instance.
pub(crate) struct Subscriptions(Vec<Subscription>);

impl Subscriptions {
    /// One subscription per instance, in the instances' order.
    pub(crate) fn into_inner(self) -> Vec<Subscription> {
        self.0
    }

    /// Makes messages addressed to `token` (the owner token of the current request) wake this
    /// waiter.
    pub(crate) fn answer_to(&mut self, token: &str) {
        for subscription in &mut self.0 {
            subscription.answer_to(token);
        }
    }

    /// Subscribes the current request's own channel (see
    /// [`Subscription::listen_on_own_channel`]).
    pub(crate) fn listen_on_own_channel(&mut self) {
        for subscription in &mut self.0 {
            subscription.listen_on_own_channel();
        }
    }

    /// Resolves at a release message from any instance, with what it said to this waiter: the
    /// lock passed to it, or to the waiter ahead of it (on one server only: nobody takes a place
    /// in line over Redlock).
    pub(crate) async fn released(&mut self) -> Option<Addressed> {
        let waits = self.0.iter_mut().map(|s| Box::pin(s.released()));
        futures_util::future::select_all(waits).await.0
    }
}
