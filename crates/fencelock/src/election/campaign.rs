//! Campaigning for an election, and the leadership it wins: the election's lock, whose grant
//! writes the leader's record and announces it in the same step (`protocol.rs`).

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::Election;
use super::protocol::Elected;
use crate::engine::{LockGuard, LockRequest, WaitPolicy};
use crate::error::Result;
use crate::lease::LostSignal;

/// A campaign for an election (see [`Election::campaign`]): its options, then `.await` it (or
/// call [`campaign`](Self::campaign)). The options are a lock request's, for the election's
/// lock: the lease (default 30 s, renewed while the leadership lives) and how long to wait
/// (default: as long as it takes).
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// use std::time::Duration;
///
/// let leadership = client
///     .election("scheduler")
///     .campaign("node-a")
///     .ttl(Duration::from_secs(10))
///     .wait_up_to(Duration::from_secs(60))
///     .await?;
/// # leadership.resign().await?; Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a campaign does nothing until awaited"]
pub struct Campaign {
    election: Election,
    value: String,
    request: LockRequest,
}

impl Campaign {
    pub(super) fn new(election: Election, value: String) -> Self {
        let protocol = Arc::new(Elected {
            value: value.clone(),
            record: election.record_key.clone(),
        });
        let request = LockRequest::new(
            election.client.shared.clone(),
            election.name.to_string(),
            protocol,
        );
        Campaign {
            election,
            value,
            request,
        }
    }

    /// The leadership's lease (default 30 s): how long it outlives a leader that stops
    /// renewing it. See [`LockRequest::ttl`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.request = self.request.ttl(ttl);
        self
    }

    /// A label for the leadership's hold, shown by [`Client::inspect`](crate::Client::inspect)
    /// beside its token (the election's `value` is what its observers see). See
    /// [`LockRequest::label`].
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.request = self.request.label(label);
        self
    }

    /// How long to wait while another leads (default: forever). See [`LockRequest::wait`].
    pub fn wait(mut self, wait: WaitPolicy) -> Self {
        self.request = self.request.wait(wait);
        self
    }

    /// Do not wait: fail with [`Error::Busy`](crate::Error::Busy) if another leads.
    pub fn no_wait(self) -> Self {
        self.wait(WaitPolicy::NoWait)
    }

    /// Wait at most `limit` while another leads, then fail with
    /// [`Error::TimedOut`](crate::Error::TimedOut).
    pub fn wait_up_to(self, limit: Duration) -> Self {
        self.wait(WaitPolicy::UpTo(limit))
    }

    /// Wait until `deadline` at the latest (a `std` or a Tokio instant).
    pub fn wait_until(self, deadline: impl Into<tokio::time::Instant>) -> Self {
        self.wait(WaitPolicy::Until(deadline.into()))
    }

    /// Waits to become the leader: takes the election's lock as the wait policy allows, and
    /// with it, in the same step, writes the leader's record and announces it (there is no
    /// moment when the lock is held and [`Election::leader`] says nobody). Awaiting the
    /// campaign does the same.
    ///
    /// # Errors
    ///
    /// As [`LockRequest::acquire`] ([`Error::Busy`](crate::Error::Busy),
    /// [`Error::TimedOut`](crate::Error::TimedOut), connection errors, ...);
    /// [`Error::Unsupported`](crate::Error::Unsupported) over Redlock (nothing is sent). On
    /// any error nothing is left held.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a dropped campaign releases in the background whatever it was granted, and
    /// that release announces the resignation.
    pub async fn campaign(self) -> Result<Leadership> {
        let Campaign {
            election,
            value,
            request,
        } = self;
        election.server()?;
        let guard = request.acquire().await?;
        crate::observe::term(&election.name, "won");
        let since = since_of_term(guard.fence());
        Ok(Leadership {
            election,
            guard,
            value,
            since,
        })
    }
}

/// When a term began: the term read as the server's clock in microseconds, in whole
/// milliseconds, as the campaign script records it.
fn since_of_term(term: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(term / 1000)
}

impl IntoFuture for Campaign {
    type Output = Result<Leadership>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Leadership>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.campaign())
    }
}

/// The leadership of an election, won by a [`Campaign`]: the election's lock (renewed while
/// this lives) and the term it was won with.
///
/// Dropping it resigns in the background (the release announces it: observers see
/// [`Observation::Vacant`](super::Observation::Vacant)). Prefer [`resign`](Self::resign), which
/// says whether this was still the leader.
#[must_use = "dropping the leadership releases it at once"]
#[derive(Debug)]
pub struct Leadership {
    election: Election,
    guard: LockGuard,
    value: String,
    since: SystemTime,
}

impl Leadership {
    /// The election.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// The term: the election lock's fence, strictly larger than every earlier leader's. Hand
    /// it to the resources the leader writes as a fence (it is the same number).
    pub fn term(&self) -> u64 {
        self.guard.fence()
    }

    /// The value last announced.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// When the term began, by the server's clock.
    pub fn since(&self) -> SystemTime {
        self.since
    }

    /// The election's lock: its deadline, whether it is held, its lease.
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// A signal that resolves when the leadership is lost (the lock's, see [`LostSignal`]):
    /// stop acting as the leader then.
    pub fn lost(&self) -> LostSignal {
        self.guard.lost()
    }

    /// Announces a new value for this term (the term and its start stay), if this is still the
    /// leader: the record is rewritten and the announcement published only while the
    /// election's lock is held with this term.
    ///
    /// # Errors
    ///
    /// [`Error::NotLeader`](crate::Error::NotLeader) if the lock is no longer held with this
    /// term (nothing was written); connection errors as for any call (the value may or may not
    /// have been announced).
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe in the sense that a dropped call may still be announced; the value
    /// returned by [`value`](Self::value) changes only when the call returns `Ok`.
    pub async fn proclaim(&mut self, value: impl Into<String>) -> Result<()> {
        let value = value.into();
        self.election.announce(self.term(), &value).await?;
        self.value = value;
        Ok(())
    }

    /// Steps down: in one script, announces the resignation (observers see
    /// [`Observation::Vacant`](super::Observation::Vacant)), deletes the leader's record and
    /// releases the lock. Returns whether this was still the leader.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::release`].
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the leadership is consumed; if the future is dropped, the resignation still
    /// reaches Redis (in the background).
    pub async fn resign(self) -> Result<bool> {
        self.guard.release().await
    }
}
