//! Watching a lock's releases as an operator: the release messages of one lock, on every
//! instance, without taking part in the lock.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::{BoxStream, Stream, StreamExt};

use crate::client::Client;
use crate::error::Result;
use crate::keys;

/// The release messages of one lock, as a [`Stream`] (see [`Client::releases`]). It never
/// ends while the client lives.
///
/// ```no_run
/// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
/// use futures_util::StreamExt;
///
/// let mut releases = client.releases("reports/nightly").await?;
/// while let Some(_release) = releases.next().await {
///     let info = client.inspect("reports/nightly").await?;
///     println!("released; now held: {}", info.is_held());
/// }
/// # Ok(()) }
/// ```
#[must_use = "a stream does nothing unless polled"]
pub struct Releases {
    inner: BoxStream<'static, Release>,
}

/// One release of a watched lock (see [`Releases`]): a holder released it or an operator
/// cleared it, or a release may have been missed (a lost pub/sub connection). Read the lock
/// again ([`Client::inspect`]) to see its state now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Release {}

impl std::fmt::Debug for Releases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Releases").finish_non_exhaustive()
    }
}

impl Client {
    /// Subscribes to the release messages of the lock `name` (on every instance; on Redis
    /// Cluster in the lock's slot), to follow a lock as it changes hands, as
    /// `fencelock watch` does. Waits (at most the command timeout) until the servers confirm
    /// the subscription; one that does not is listened to once its connection works.
    ///
    /// A release that wakes all or one of the lock's waiters (of any holder, or by an
    /// operator) is an item of the stream. A release that passes the lock to a waiter (the
    /// plain lock's pass, the fair lock's) is not: it goes on that waiter's own channel. Poll
    /// [`Client::inspect`] as well (`fencelock watch` does every second) to see every change.
    /// The stream does not pattern-subscribe the waiters' channels on purpose: such a
    /// subscription counts as a receiver of the pass, and a waiter of an earlier revision of
    /// the protocol, which listens only on the lock's channel, would miss it (docs/PROTOCOL.md,
    /// "A waiter's own channel").
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a bad name.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe. Polling the stream is cancel-safe too: a release that arrives between two
    /// polls is kept for the next.
    pub async fn releases(&self, name: impl Into<String>) -> Result<Releases> {
        let name = name.into();
        keys::validate_name(&name)?;
        let keys = self.shared.keys(&name);
        let instances = &self.shared.instances;
        let subscriptions = instances
            .subscribe(keys.channel(), instances.command_timeout())
            .await;
        let inner = futures_util::stream::unfold(subscriptions, |mut subscriptions| async move {
            subscriptions.released().await;
            Some((Release {}, subscriptions))
        })
        .boxed();
        Ok(Releases { inner })
    }
}

impl Stream for Releases {
    type Item = Release;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Release>> {
        self.inner.poll_next_unpin(cx)
    }
}
