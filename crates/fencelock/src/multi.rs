//! Several locks at once (Redisson's `MultiLock`): all the names or none, each with its own
//! fence, renewal and lost signal.
//!
//! A request never waits while it holds some of its names. It tries every name at once without
//! waiting; if one is held, it gives back what it took, waits for that name alone (as a plain
//! waiter: woken by its release), and tries the others again, holding just that one. Nobody waits
//! holding a name another waits for, so two requests for overlapping sets, in any order, never
//! deadlock; and on one server the tries of one round go out together (the client sends calls
//! of one script that pile up on a connection as one batch).
//!
//! Every request tries its names sorted by name, whatever the order given, and waits for the
//! first held one in that order, so two requests for overlapping sets mostly wait for the same
//! name rather than each holding the name the other waits for next. Not always: a release that
//! passes the first name to a waiting request while the releaser's next round takes the second
//! for a moment sets the two waiting for different names, each then passed one and failing on
//! the other. A request that waited for a name and then found another held backs off for a
//! short, growing, jittered delay (5 ms, doubling, at most 40 ms), and then waits in that name's
//! line (as a plain waiter, woken by its release). Of two requests each failing on the name the
//! other waited for, the one that waited for the name sorted *after* the other's pauses longer:
//! two of its own last rounds (its tries and give-backs: the other's next round takes about as
//! long) on top of the delay, so that the other's next round ends first and is granted. Equal
//! pauses, each as long as a round, let the two come back together, round after round, when
//! their timers fire together (a CPU-starved process): a CI machine saw 2 of 16 such requests
//! granted in 45 s. `crates/fencelock-model` checks the ordered pause: at most five rounds fail
//! before one request is granted (six beside a third request for one of the names); with a
//! pause that only outlasts the other's give-back they can fail without end, which a fixed cap
//! would allow wherever a round trip to Redis takes longer than the cap.
//!
//! The cap is low on purpose (tens of milliseconds, not seconds). The pause only has to let the
//! request holding the other name finish, so that two requests in opposite orders stop handing
//! names back and forth (the sorted order does most of that; the pause covers a name taken by a
//! third party, such as a hot single-name taker, between the rounds). A long pause (up to 500 ms,
//! never reset within a request, before) left an unlucky request asleep while the others and the
//! hot taker took its names, round after round: some workers starved and a few requests timed out.
//! With the low cap a request that lost is back in line within tens of milliseconds: in the
//! benchmark the worst-served worker got about twice the grants and no request timed out, for a
//! longer p99 wait (more requests pause a few times; docs/BENCHMARKS.md, `fencelock-multi`).
//! Resetting the delay on progress was not needed for that, so the policy stays one capped
//! doubling.
//!
//! ```no_run
//! # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
//! let both = client.multi_lock(["accounts/17", "accounts/42"]).acquire().await?;
//! for (name, fence) in both.fences() {
//!     println!("{name}: fence {fence}");
//! }
//! both.release().await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use futures_util::future::{join_all, select_all};
use tokio::time::Instant;

use crate::client::Client;
use crate::engine::{DEFAULT_TTL, LockGuard, WaitPolicy};
use crate::error::{Error, LostReason, ReleaseOutcome, Result};
use crate::lease::LostSignal;

/// A request for several locks at once (see [`Client::multi_lock`]).
#[derive(Debug, Clone)]
#[must_use = "a request does nothing until acquired"]
pub struct MultiLockRequest {
    client: Client,
    /// In the order given.
    names: Vec<String>,
    ttl: Duration,
    wait: WaitPolicy,
    label: Option<String>,
}

/// Several locks held together (see [`Client::multi_lock`]): each name's own guard, in the
/// order the names were given.
#[derive(Debug)]
#[must_use = "dropping the guard releases its locks at once"]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl Client {
    /// A request for the plain locks `names`, all or none (see [`crate::multi`]). Each name
    /// keeps its own fence. Over Redlock each name is a Redlock lock.
    pub fn multi_lock<I, S>(&self, names: I) -> MultiLockRequest
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiLockRequest {
            client: self.clone(),
            names: names.into_iter().map(Into::into).collect(),
            ttl: DEFAULT_TTL,
            wait: WaitPolicy::Forever,
            label: None,
        }
    }
}

impl MultiLockRequest {
    /// The lease of every name (default 30 s), renewed while held.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// A label for every name's hold (see [`LockRequest::label`](crate::LockRequest::label)).
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// The request for one of the names, with this request's options.
    fn request(&self, name: &str) -> crate::LockRequest {
        let request = self.client.lock(name).ttl(self.ttl);
        match &self.label {
            Some(label) => request.label(label.as_str()),
            None => request,
        }
    }

    /// How long to wait while a name is held (default: forever).
    pub fn wait(mut self, wait: WaitPolicy) -> Self {
        self.wait = wait;
        self
    }

    /// Do not wait: fail with [`Error::Busy`] if any name is held.
    pub fn no_wait(self) -> Self {
        self.wait(WaitPolicy::NoWait)
    }

    /// Wait at most `limit` in all, then fail with [`Error::TimedOut`].
    pub fn wait_up_to(self, limit: Duration) -> Self {
        self.wait(WaitPolicy::UpTo(limit))
    }

    /// Takes every name, or none.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for no names, a name given twice, or a bad name (nothing is
    /// sent); [`Error::Busy`] (with `no_wait`) or [`Error::TimedOut`] naming a held name; any
    /// error of [`LockRequest::acquire`](crate::LockRequest::acquire). On any error nothing is
    /// left held.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: whatever a dropped request holds is released in the background.
    pub async fn acquire(self) -> Result<MultiGuard> {
        self.validate()?;
        let started = Instant::now();
        let until = self.wait.deadline(started);
        // One order for every request: the names sorted. The tries go in it, and the name
        // waited for is the first held one in it.
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        order.sort_by(|&x, &y| self.names[x].cmp(&self.names[y]));
        let mut backoff = crate::backoff::MULTI;
        // The name waited for last, held while the others are tried.
        let mut kept: Option<(usize, LockGuard)> = None;
        loop {
            let round_started = Instant::now();
            let waited_for = kept.as_ref().map(|(k, _)| *k);
            let mut round = self.try_round(&order, waited_for).await;
            if let Some((k, guard)) = kept.take()
                && let Some(slot) = round.guards.get_mut(k)
            {
                *slot = Some(guard);
            }
            if round.failure.is_none() && round.held_by_others.is_none() {
                let guards = round.guards.into_iter().flatten().collect();
                return Ok(MultiGuard { guards });
            }
            // Nothing is held while waiting: give back what this round took.
            release_all(round.guards.into_iter().flatten()).await;
            if let Some(e) = round.failure {
                return Err(e);
            }
            if let Some(waited_for) = waited_for {
                let pause = self.pause(waited_for, round.held_by_others, round_started, until);
                tokio::time::sleep(pause.saturating_add(backoff.next_jittered())).await;
            }
            let Some(busy) = round.held_by_others else {
                continue;
            };
            kept = Some((busy, self.wait_for(busy, until, started).await?));
        }
    }

    /// No names, a name given twice, a bad name: refused before anything is sent.
    fn validate(&self) -> Result<()> {
        if self.names.is_empty() {
            return Err(Error::invalid("", "a multi-lock needs at least one name"));
        }
        for (i, name) in self.names.iter().enumerate() {
            crate::keys::validate_name(name)?;
            if self.names[..i].contains(name) {
                return Err(Error::invalid(name, "the name is given twice"));
            }
        }
        Ok(())
    }

    /// One round: every name tried at once, in `order`, but `waited_for` (held already).
    async fn try_round(&self, order: &[usize], waited_for: Option<usize>) -> Round {
        let tries = order.iter().map(|&i| {
            let request = self.request(&self.names[i]);
            async move {
                if waited_for == Some(i) {
                    return Ok(None);
                }
                request.try_acquire().await
            }
        });
        let results = join_all(tries).await;
        let mut round = Round {
            guards: std::iter::repeat_with(|| None)
                .take(self.names.len())
                .collect(),
            held_by_others: None,
            failure: None,
        };
        for (&i, result) in order.iter().zip(results) {
            match result {
                Ok(Some(guard)) => {
                    if let Some(slot) = round.guards.get_mut(i) {
                        *slot = Some(guard);
                    }
                }
                Ok(None) => {
                    if waited_for != Some(i) && round.held_by_others.is_none() {
                        round.held_by_others = Some(i);
                    }
                }
                Err(e) => {
                    round.failure.get_or_insert(e);
                }
            }
        }
        round
    }

    /// The pause (beyond the jittered backoff) before waiting again, after a round that failed
    /// on `busy` while holding `waited_for`, the name waited for last.
    ///
    /// Another request holds a name this one tries beside the one it waited for: let it finish
    /// before waiting again. Of two requests that each waited for the name the other now fails
    /// on, the one that waited for the name sorted after the other pauses for two of its rounds
    /// more, so that the other's next round (its wait, then its tries) ends first: equal pauses
    /// let both come back together, each passed the name the other then fails on, round after
    /// round. Never past the wait's deadline `until`.
    fn pause(
        &self,
        waited_for: usize,
        busy: Option<usize>,
        round_started: Instant,
        until: Option<Instant>,
    ) -> Duration {
        let pause = match busy {
            Some(busy) if self.names.get(waited_for) > self.names.get(busy) => {
                round_started.elapsed().saturating_mul(2)
            }
            _ => Duration::ZERO,
        };
        until.map_or(pause, |at| {
            pause.min(at.saturating_duration_since(Instant::now()))
        })
    }

    /// Waits for name `busy` (the first held one), up to `until`; the guard of its grant.
    async fn wait_for(
        &self,
        busy: usize,
        until: Option<Instant>,
        started: Instant,
    ) -> Result<LockGuard> {
        let name = &self.names[busy];
        let request = self.request(name);
        let request = match until {
            Some(at) if at <= Instant::now() => {
                return Err(match self.wait {
                    WaitPolicy::NoWait => Error::Busy {
                        lock: name.clone(),
                        remaining: None,
                    },
                    _ => Error::TimedOut {
                        lock: name.clone(),
                        waited: started.elapsed(),
                    },
                });
            }
            Some(at) => request.wait_until(at),
            None => request.wait(WaitPolicy::Forever),
        };
        request.acquire().await.map_err(|err| match err {
            Error::TimedOut { lock, .. } => Error::TimedOut {
                lock,
                waited: started.elapsed(),
            },
            err => err,
        })
    }
}

/// What one round of tries found.
struct Round {
    /// Each name's guard, by the names' index, where a try took it.
    guards: Vec<Option<LockGuard>>,
    /// The first name, in the sorted order, that another request holds.
    held_by_others: Option<usize>,
    /// The first error.
    failure: Option<Error>,
}

/// Releases `guards` together, waiting for the answers (so that the names are free at once for
/// others); a failed release is retried in the background by the library.
async fn release_all(guards: impl IntoIterator<Item = LockGuard>) {
    join_all(guards.into_iter().map(|g| async move {
        let _ = g.release().await;
    }))
    .await;
}

impl MultiGuard {
    /// Each name with its fence, in the order the names were given.
    pub fn fences(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.guards.iter().map(|g| (g.name(), g.fence()))
    }

    /// Each name's guard, in the order the names were given.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Whether every name is still held, as far as this process can tell now.
    pub fn is_held(&self) -> bool {
        self.guards.iter().all(LockGuard::is_held)
    }

    /// Resolves when any of the names is lost (or released): which, and why.
    pub async fn lost(&self) -> (String, LostReason) {
        self.lost_signal().wait().await
    }

    /// The names' lost signals together, as an owned value (see [`MultiLost`]).
    pub fn lost_signal(&self) -> MultiLost {
        MultiLost {
            signals: self
                .guards
                .iter()
                .map(|g| (g.name().to_owned(), g.lost()))
                .collect(),
        }
    }

    /// Releases every name. `true` if every one was still held.
    ///
    /// # Errors
    ///
    /// The first error of the releases (each is tried; see [`LockGuard::release`]).
    pub async fn release(self) -> Result<bool> {
        self.release_outcome().await.map(|o| o.is_released())
    }

    /// Releases every name, as [`release`](Self::release) does, and says what the releases
    /// found: [`ReleaseOutcome::Released`] if every name was still held, else the first name
    /// (in the order given) that was not, and why (see [`LockGuard::release_outcome`]).
    ///
    /// # Errors
    ///
    /// The first error of the releases (each is tried).
    ///
    /// # Cancel safety
    ///
    /// As [`LockGuard::release`]: every release still reaches Redis if the future is dropped.
    pub async fn release_outcome(self) -> Result<ReleaseOutcome> {
        let results = join_all(self.guards.into_iter().map(LockGuard::release_outcome)).await;
        let mut found = ReleaseOutcome::Released;
        for result in results {
            let outcome = result?;
            if found.is_released() {
                found = outcome;
            }
        }
        Ok(found)
    }
}

/// The lost signals of a [`MultiGuard`]'s names, owned (cheap to clone, `'static`): which name
/// was lost, and why.
#[derive(Debug, Clone)]
pub struct MultiLost {
    /// Each name's signal, in the order the names were given.
    signals: Vec<(String, LostSignal)>,
}

impl MultiLost {
    /// Whether every name is still held, as far as this process can tell now.
    pub fn is_held(&self) -> bool {
        self.signals.iter().all(|(_, l)| !l.is_lost())
    }

    /// A name that is no longer held now, and why (one lost rather than released, if any is);
    /// `None` while every name is held.
    pub fn reason(&self) -> Option<(String, LostReason)> {
        let mut found = None;
        for (name, lost) in &self.signals {
            if let Some(reason) = lost.reason() {
                let released = reason == LostReason::Released;
                if found.is_none() || !released {
                    found = Some((name.clone(), reason));
                }
                if !released {
                    break;
                }
            }
        }
        found
    }

    /// Resolves when any of the names is lost (or released): which, and why.
    pub async fn wait(&self) -> (String, LostReason) {
        let waits = self.signals.iter().map(|(name, lost)| {
            let lost = lost.clone();
            let name = name.clone();
            Box::pin(async move { (name, lost.wait().await) })
        });
        select_all(waits).await.0
    }
}
