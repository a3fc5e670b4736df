//! The pushes of a RESP3 connection, handed to the waiters they name inside the connection's
//! own task: a release message wakes its waiter with no task in between.

use redis::aio::{AsyncPushSender, SendError};
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::registry::{Registry, deliver, listened};

/// The push sender of one listener's connection (one per connection of a dedicated feed, told
/// apart by `connection`; one for a cluster's connection).
pub(super) struct Router {
    pub(super) registry: Registry,
    /// Where a lost connection is reported, with its number: the listener reconnects.
    pub(super) losses: mpsc::UnboundedSender<u64>,
    pub(super) connection: u64,
}

impl AsyncPushSender for Router {
    fn send(&self, info: PushInfo) -> Result<(), SendError> {
        match info.kind {
            PushKind::Message | PushKind::SMessage => {
                let mut data = info.data.into_iter();
                if let (Some(Value::BulkString(channel)), Some(Value::BulkString(payload))) =
                    (data.next(), data.next())
                    && let Ok(channel) = std::str::from_utf8(&channel)
                {
                    deliver(&self.registry, channel, &payload);
                }
            }
            // The listener is gone with its client: nobody to tell.
            PushKind::Disconnection => drop(self.losses.send(self.connection)),
            // A node that stops serving a slot (a failover, a migration) unsubscribes its
            // sharded channels unasked: for a channel someone here still listens on, as good as
            // a lost connection (they may miss a release, and subscribe again). The listener's
            // own unsubscriptions name channels nobody listens on any more.
            PushKind::SUnsubscribe => {
                if let Some(Value::BulkString(channel)) = info.data.first()
                    && let Ok(channel) = std::str::from_utf8(channel)
                    && listened(&self.registry, channel)
                {
                    let _ = self.losses.send(self.connection);
                }
            }
            // Confirmations of (un)subscriptions: the listener's own calls read them.
            _ => {}
        }
        Ok(())
    }
}
