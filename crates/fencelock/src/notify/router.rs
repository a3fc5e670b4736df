//! The pushes of a RESP3 connection, handed to the waiters they name inside the connection's
//! own task: a release message wakes its waiter with no task in between.

use redis::aio::{AsyncPushSender, SendError};
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::registry::{Registry, deliver};

/// The push sender of one listener's connection (one per connection of a dedicated feed, told
/// apart by their numbers; one for a cluster's connection).
pub(super) struct Router {
    pub(super) registry: Registry,
    pub(super) losses: Losses,
}

/// Where a router reports what its connection lost.
pub(super) enum Losses {
    /// A dedicated connection, by its number: the listener reconnects.
    Connection {
        losses: mpsc::UnboundedSender<u64>,
        connection: u64,
    },
    /// The cluster's subscriptions connection: each channel lost, to subscribe again (see
    /// [`Subscriber`](super::sharded::Subscriber)).
    #[cfg(feature = "cluster")]
    Sharded(mpsc::UnboundedSender<super::sharded::Wanted>),
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
            PushKind::Disconnection => self.disconnected(),
            // A confirmation that names the channel: the redis crate hands each one to the
            // oldest command on its way on that connection, whichever it was, and a copy here.
            #[cfg(feature = "cluster")]
            PushKind::SSubscribe => {
                if let Some(channel) = first_channel(&info.data) {
                    tracing::trace!(channel, "release listener: ssubscribe confirmed");
                    super::registry::confirmed(&self.registry, channel);
                }
            }
            // A node that stops serving a slot (a failover, a migration) unsubscribes its
            // sharded channels unasked: a channel someone here still listens on is subscribed
            // again. The listener's own unsubscriptions name channels nobody listens on any
            // more (forgotten before they are sent).
            #[cfg(feature = "cluster")]
            PushKind::SUnsubscribe => {
                if let Losses::Sharded(wanted) = &self.losses
                    && let Some(channel) = first_channel(&info.data)
                    && super::registry::unsubscribed(&self.registry, channel)
                {
                    tracing::debug!(
                        channel,
                        "release listener: sharded channel unsubscribed by the server"
                    );
                    // The listener is gone with its client: nobody to tell.
                    let _ = wanted.send(super::sharded::Wanted::again(channel.to_owned()));
                }
            }
            // Confirmations of a dedicated connection's (un)subscriptions: the listener's own
            // calls read them.
            _ => {}
        }
        Ok(())
    }
}

impl Router {
    /// The connection dropped (on Redis Cluster, one node's: which channels it served is not
    /// known).
    fn disconnected(&self) {
        match &self.losses {
            // The listener is gone with its client: nobody to tell.
            Losses::Connection { losses, connection } => drop(losses.send(*connection)),
            #[cfg(feature = "cluster")]
            Losses::Sharded(wanted) => {
                for channel in super::registry::all_unsubscribed(&self.registry) {
                    let _ = wanted.send(super::sharded::Wanted::again(channel));
                }
            }
        }
    }
}

/// The channel a (un)subscription push names.
#[cfg(feature = "cluster")]
fn first_channel(data: &[Value]) -> Option<&str> {
    match data.first() {
        Some(Value::BulkString(channel)) => std::str::from_utf8(channel).ok(),
        _ => None,
    }
}
