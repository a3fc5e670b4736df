//! Following an election: the current leader, then every announcement in term order, from the
//! election's channel (no polling); a lost subscription is an item of its own.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::stream::{BoxStream, Stream, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;

use super::{Announcement, Election, Leader};
use crate::error::Result;
use crate::notify::{Heard, Subscription};

/// What an observer of an election sees (see [`Election::observe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Observation {
    /// A leader: a new term, or a new value the leader proclaimed in its term.
    Leader(Leader),
    /// Nobody leads: the leader resigned (or, first or after a [`Gap`](Self::Gap), nobody
    /// led when the observer looked).
    Vacant,
    /// The subscription to the election's channel was lost (the connection dropped, the
    /// client moved to another master, or the observer fell too far behind): announcements
    /// may have been missed. The then-current leader (or `Vacant`) follows once the
    /// subscription is back.
    Gap,
}

impl Observation {
    /// Every code [`code`](Self::code) gives, one per variant: its name in snake case (see
    /// [`Error::CODES`](crate::Error::CODES)).
    pub const CODES: &'static [&'static str] = &["leader", "vacant", "gap"];

    /// This observation's stable code, one of [`CODES`](Self::CODES): the `event` of
    /// `fencelock leader --watch --json`, the kind of the Python package's observations.
    pub fn code(&self) -> &'static str {
        match self {
            Observation::Leader(_) => "leader",
            Observation::Vacant => "vacant",
            Observation::Gap => "gap",
        }
    }
}

/// The leaders of an election as a [`Stream`] (see [`Election::observe`]). It never ends while
/// the client lives.
#[must_use = "a stream does nothing unless polled"]
pub struct Observe {
    inner: BoxStream<'static, Observation>,
}

impl std::fmt::Debug for Observe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observe").finish_non_exhaustive()
    }
}

impl Stream for Observe {
    type Item = Observation;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Observation>> {
        self.inner.poll_next_unpin(cx)
    }
}

impl Election {
    /// Follows the election: first the current leader (or [`Observation::Vacant`]), then
    /// every change as it is announced, in term order (an announcement older than one already
    /// seen is left out), by pub/sub. A leader whose lease runs out without resigning (it
    /// crashed) is announced by nobody: the observer reads the leader again when the lease of
    /// the one it last saw would run out (about once a lease while a leader renews, never
    /// faster), and gives [`Observation::Vacant`] if it lapsed. When the subscription is lost,
    /// the stream says so
    /// ([`Observation::Gap`]) and, once it is back, gives the then-current leader.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// use fencelock::election::Observation;
    /// use futures_util::StreamExt;
    ///
    /// let mut leaders = client.election("scheduler").observe().await?;
    /// while let Some(seen) = leaders.next().await {
    ///     match seen {
    ///         Observation::Leader(leader) => println!("{} (term {})", leader.value, leader.term),
    ///         Observation::Vacant => println!("nobody leads"),
    ///         Observation::Gap => println!("missed announcements may follow"),
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`](crate::Error::Unsupported) over Redlock;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) (a bad name); the first read
    /// of the leader's errors, as [`leader`](Self::leader).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe. Polling the stream is cancel-safe too: announcements that arrive between
    /// two polls are kept (up to 256; beyond, the stream reports a gap).
    pub async fn observe(&self) -> Result<Observe> {
        self.server()?;
        let instances = &self.client.shared.instances;
        let mut subscriptions = instances
            .subscribe(&self.channel, instances.command_timeout())
            .await
            .into_inner();
        let Some(subscription) = subscriptions.pop() else {
            return Ok(Observe {
                inner: futures_util::stream::empty().boxed(),
            });
        };
        // Before the first read, so that nothing announced after it is missed.
        let heard = subscription.heard();
        let current = self.read().await?;
        let mut observer = Observer {
            election: self.clone(),
            _subscription: subscription,
            heard,
            last: None,
            in_gap: false,
            recheck: None,
        };
        observer.recheck_after(current.as_ref());
        let first = observer.seen(current.map(|(leader, _)| leader), true);
        let inner =
            futures_util::stream::unfold((observer, first), |(mut observer, first)| async move {
                if let Some(first) = first {
                    return Some((first, (observer, None)));
                }
                let next = observer.next().await;
                Some((next, (observer, None)))
            })
            .boxed();
        Ok(Observe { inner })
    }
}

/// What the observer last gave: a leader's term and value, or a vacancy after a term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Last {
    term: u64,
    value: Option<String>,
}

struct Observer {
    election: Election,
    /// Keeps the channel subscribed.
    _subscription: Subscription,
    heard: broadcast::Receiver<Heard>,
    last: Option<Last>,
    in_gap: bool,
    /// When to read the leader again: when the lease of the leader last seen runs out. A leader
    /// whose lease runs out without resigning (it crashed, or its leadership was dropped
    /// where nothing could release it) is announced by nobody.
    recheck: Option<Instant>,
}

impl Observer {
    /// The next observation.
    async fn next(&mut self) -> Observation {
        loop {
            let received = match self.recheck {
                Some(at) => tokio::select! {
                    heard = self.heard.recv() => Some(heard),
                    () = tokio::time::sleep_until(at) => None,
                },
                None => Some(self.heard.recv().await),
            };
            let Some(received) = received else {
                // The lease of the leader last seen is over (it was renewed, or it lapsed), or
                // it is to be learned.
                self.recheck = None;
                if let Some(seen) = self.rechecked().await {
                    return seen;
                }
                continue;
            };
            let heard = match received {
                Ok(heard) => heard,
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(election = %self.election.name, missed, "observer fell behind");
                    if let Some(gap) = self.gap() {
                        return gap;
                    }
                    Heard::Subscribed
                }
                // The client is gone: nothing more will be heard.
                Err(RecvError::Closed) => std::future::pending().await,
            };
            let seen = match heard {
                Heard::Lost => self.gap(),
                Heard::Subscribed => self.current().await,
                // Heard again before the subscription was confirmed (Redis Cluster resubscribes
                // on its own): the read covers this message, which came before it.
                Heard::Message(_) if self.in_gap => self.current().await,
                Heard::Message(payload) => self.announced(&payload),
            };
            if let Some(seen) = seen {
                return seen;
            }
        }
    }

    /// The gap, once per outage.
    fn gap(&mut self) -> Option<Observation> {
        if self.in_gap {
            return None;
        }
        self.in_gap = true;
        Some(Observation::Gap)
    }

    /// The leader now, after a gap (always given) or a confirmation (given if it changed). A
    /// read that fails keeps the gap open: the next confirmation or message reads again.
    async fn current(&mut self) -> Option<Observation> {
        match self.election.read().await {
            Ok(leader) => {
                self.recheck_after(leader.as_ref());
                let after_gap = std::mem::replace(&mut self.in_gap, false);
                self.seen(leader.map(|(leader, _)| leader), after_gap)
            }
            Err(err) => self.unreadable(&err),
        }
    }

    /// The leader now, read when the lease of the leader last seen should be over, or to learn
    /// it. A vacancy is given (nobody announces a lapse); another leader than the one last
    /// given is not: every leader is announced when it takes office, so that announcement (and
    /// those of any leader between) is on its way, and giving the leader read now would skip
    /// them. Its lease is noted, for the next read. After a gap, as [`current`](Self::current).
    async fn rechecked(&mut self) -> Option<Observation> {
        if self.in_gap {
            return self.current().await;
        }
        match self.election.read().await {
            Ok(Some(found)) => {
                self.recheck_after(Some(&found));
                None
            }
            Ok(None) => {
                self.recheck_after(None);
                self.seen(None, false)
            }
            Err(err) => self.unreadable(&err),
        }
    }

    /// A read of the leader that failed: a gap, unless one is open already.
    fn unreadable(&mut self, err: &crate::Error) -> Option<Observation> {
        tracing::debug!(election = %self.election.name, %err, "observer cannot read the leader");
        self.gap()
    }

    /// When to read the leader again, after a read that found `leader` with what was left of
    /// its lease: just after that lease (a little later, so that the server has let the key
    /// go); never, when nobody leads (the next leader announces itself).
    fn recheck_after(&mut self, leader: Option<&(Leader, Option<Duration>)>) {
        self.recheck = match leader {
            Some((_, Some(left))) => Some(Instant::now() + *left + Duration::from_millis(5)),
            // A leader without expiry, or one read by an earlier revision's script: its lease is
            // not known; announcements only.
            Some((_, None)) | None => None,
        };
    }

    /// The observation for an announcement, if it changes what was last given.
    fn announced(&mut self, payload: &[u8]) -> Option<Observation> {
        match Announcement::parse(payload)? {
            Announcement::Leader(leader) => {
                // Its lease is learned by a read (at once): the announcement does not carry it.
                self.recheck = Some(Instant::now());
                self.seen(Some(leader), false)
            }
            Announcement::Resigned(term) => {
                let last = self.last.as_ref();
                if last.is_some_and(|l| l.term > term || (l.term == term && l.value.is_none())) {
                    return None;
                }
                self.recheck = None;
                self.last = Some(Last { term, value: None });
                Some(Observation::Vacant)
            }
        }
    }

    /// The observation for a leader read or announced (`None`: vacant), if it changes what
    /// was last given (or `always`), in term order.
    fn seen(&mut self, leader: Option<Leader>, always: bool) -> Option<Observation> {
        let last = self.last.as_ref();
        match leader {
            None => {
                if !always && last.is_some_and(|l| l.value.is_none()) {
                    return None;
                }
                let term = last.map_or(0, |l| l.term);
                self.last = Some(Last { term, value: None });
                Some(Observation::Vacant)
            }
            Some(leader) => {
                let this = Last {
                    term: leader.term,
                    value: Some(leader.value.clone()),
                };
                let stale = last.is_some_and(|l| {
                    l.term > leader.term || (l.term == leader.term && l.value.is_none())
                });
                if stale || (!always && last == Some(&this)) {
                    return None;
                }
                if last.is_some_and(|l| l.term != leader.term) {
                    crate::observe::term(&self.election.name, "observed");
                }
                self.last = Some(this);
                Some(Observation::Leader(leader))
            }
        }
    }
}
