//! Watching a lock's releases as an operator: the release messages of one lock, on every
//! instance, without taking part in the lock.

use crate::client::Client;
use crate::error::Result;
use crate::keys;
use crate::quorum::Subscriptions;

/// The release messages of one lock (see [`Client::releases`]).
pub struct Releases {
    subscriptions: Subscriptions,
}

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
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a bad name.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe.
    pub async fn releases(&self, name: &str) -> Result<Releases> {
        keys::validate_name(name)?;
        let keys = self.shared.keys(name);
        let instances = &self.shared.instances;
        let subscriptions = instances
            .subscribe(keys.channel(), instances.command_timeout())
            .await;
        Ok(Releases { subscriptions })
    }
}

impl Releases {
    /// Resolves at the next release of the lock that wakes all or one of its waiters (of any
    /// holder, or by an operator), or when a release may have been missed (a lost pub/sub
    /// connection): read the lock again then. A fair lock's release addressed to its next
    /// waiter does not wake this watch; poll [`Client::inspect`] as well (at least every second
    /// or so) to see every change.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a release that arrives meanwhile is kept for the next call.
    pub async fn next(&mut self) {
        self.subscriptions.released().await;
    }
}
