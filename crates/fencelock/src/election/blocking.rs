//! The blocking twins of the election's types, re-exported by `crate::blocking` (each call
//! blocks on the blocking client's runtime).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::StreamExt;

use super::{Leader, Observation};
use crate::engine::WaitPolicy;
use crate::error::{LostReason, Result};

type Runtime = Arc<tokio::runtime::Runtime>;

/// An election (blocking); see [`crate::election::Election`].
#[derive(Debug, Clone)]
pub struct Election {
    runtime: Runtime,
    inner: super::Election,
}

impl Election {
    pub(crate) fn new(runtime: Runtime, inner: super::Election) -> Self {
        Election { runtime, inner }
    }

    /// See [`crate::election::Election::name`].
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// A campaign to lead with `value`; see [`crate::election::Election::campaign`].
    ///
    /// ```no_run
    /// # fn main() -> fencelock::Result<()> {
    /// let client = fencelock::blocking::Client::open("redis://127.0.0.1:6379")?;
    /// let leadership = client.election("scheduler").campaign("node-a").campaign()?;
    /// println!("term {}", leadership.term());
    /// leadership.resign()?;
    /// # Ok(()) }
    /// ```
    pub fn campaign(&self, value: impl Into<String>) -> Campaign {
        Campaign {
            runtime: self.runtime.clone(),
            inner: self.inner.campaign(value),
        }
    }

    /// See [`crate::election::Election::leader`].
    ///
    /// # Errors
    ///
    /// As [`crate::election::Election::leader`].
    pub fn leader(&self) -> Result<Option<Leader>> {
        self.runtime.block_on(self.inner.leader())
    }

    /// The election's leaders as a blocking iterator; see
    /// [`crate::election::Election::observe`].
    ///
    /// # Errors
    ///
    /// As [`crate::election::Election::observe`].
    pub fn observe(&self) -> Result<Observer> {
        let inner = self.runtime.block_on(self.inner.observe())?;
        Ok(Observer {
            runtime: self.runtime.clone(),
            inner,
        })
    }
}

/// A campaign (blocking); see [`crate::election::Campaign`] for each option.
#[derive(Debug)]
#[must_use = "a campaign does nothing until run"]
pub struct Campaign {
    runtime: Runtime,
    inner: super::Campaign,
}

impl Campaign {
    /// See [`crate::election::Campaign::ttl`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.inner = self.inner.ttl(ttl);
        self
    }
    /// See [`crate::election::Campaign::wait`].
    pub fn wait(mut self, wait: WaitPolicy) -> Self {
        self.inner = self.inner.wait(wait);
        self
    }
    /// See [`crate::election::Campaign::no_wait`].
    pub fn no_wait(self) -> Self {
        self.wait(WaitPolicy::NoWait)
    }
    /// See [`crate::election::Campaign::wait_up_to`].
    pub fn wait_up_to(self, limit: Duration) -> Self {
        self.wait(WaitPolicy::UpTo(limit))
    }
    /// See [`crate::election::Campaign::wait_until`].
    pub fn wait_until(self, deadline: std::time::Instant) -> Self {
        self.wait(WaitPolicy::Until(deadline.into()))
    }

    /// Blocks until this is the leader, as the wait policy allows.
    ///
    /// # Errors
    ///
    /// As [`crate::election::Campaign::campaign`].
    pub fn campaign(self) -> Result<Leadership> {
        let inner = self.runtime.block_on(self.inner.campaign())?;
        Ok(Leadership {
            runtime: self.runtime,
            inner: Some(inner),
        })
    }
}

/// A leadership (blocking); see [`crate::election::Leadership`]. Dropping it resigns before
/// `drop` returns (bounded by the command time limit); inside an async runtime, where blocking
/// is not allowed, it is released in the background without an announcement instead.
#[derive(Debug)]
#[must_use = "dropping the leadership resigns at once"]
pub struct Leadership {
    runtime: Runtime,
    // Always `Some` until `resign` takes it.
    inner: Option<super::Leadership>,
}

impl Leadership {
    fn leadership(&self) -> &super::Leadership {
        match &self.inner {
            Some(inner) => inner,
            None => unreachable!("the leadership is only taken by resign, which consumes self"),
        }
    }

    /// See [`crate::election::Leadership::term`].
    pub fn term(&self) -> u64 {
        self.leadership().term()
    }
    /// See [`crate::election::Leadership::value`].
    pub fn value(&self) -> &str {
        self.leadership().value()
    }
    /// See [`crate::election::Leadership::since`].
    pub fn since(&self) -> SystemTime {
        self.leadership().since()
    }
    /// Whether this is still the leader as far as this process can tell (see
    /// [`crate::LockGuard::is_held`]).
    pub fn is_held(&self) -> bool {
        self.leadership().guard().is_held()
    }
    /// Blocks until the leadership is lost, or `limit` passes (`None`).
    pub fn wait_lost(&self, limit: Duration) -> Option<LostReason> {
        let signal = self.leadership().lost();
        self.runtime
            .block_on(async { tokio::time::timeout(limit, signal.wait()).await.ok() })
    }

    /// See [`crate::election::Leadership::proclaim`].
    ///
    /// # Errors
    ///
    /// As [`crate::election::Leadership::proclaim`].
    pub fn proclaim(&mut self, value: impl Into<String>) -> Result<()> {
        let runtime = self.runtime.clone();
        match &mut self.inner {
            Some(inner) => runtime.block_on(inner.proclaim(value)),
            None => unreachable!("the leadership is only taken by resign, which consumes self"),
        }
    }

    /// See [`crate::election::Leadership::resign`].
    ///
    /// # Errors
    ///
    /// As [`crate::election::Leadership::resign`].
    pub fn resign(mut self) -> Result<bool> {
        match self.inner.take() {
            Some(inner) => self.runtime.block_on(inner.resign()),
            None => Ok(false),
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            drop(inner);
            return;
        }
        if let Err(err) = self.runtime.block_on(inner.resign()) {
            tracing::debug!(%err, "resign on drop failed; the lease will run out");
        }
    }
}

/// An election's leaders as a blocking iterator (see [`Election::observe`]); it never ends
/// while the client lives.
#[derive(Debug)]
pub struct Observer {
    runtime: Runtime,
    inner: super::Observe,
}

impl Observer {
    /// The next observation, or `None` if none comes within `limit`.
    pub fn next_within(&mut self, limit: Duration) -> Option<Observation> {
        self.runtime
            .block_on(async { tokio::time::timeout(limit, self.inner.next()).await.ok()? })
    }
}

impl Iterator for Observer {
    type Item = Observation;

    fn next(&mut self) -> Option<Observation> {
        self.runtime.block_on(self.inner.next())
    }
}
