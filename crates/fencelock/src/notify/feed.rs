//! Where release messages come from (a dedicated pub/sub connection, or a cluster's sharded
//! pushes), and the next event of a feed.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
use tokio::sync::watch;

#[cfg(feature = "sentinel")]
use crate::connection::Followed;
#[cfg(feature = "cluster")]
use crate::connection::Pushes;

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
pub(super) enum Source {
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
pub(super) enum Opener {
    Client(Box<redis::Client>),
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<Followed>),
}

impl Opener {
    pub(super) async fn open(&self) -> redis::RedisResult<redis::aio::PubSub> {
        match self {
            Opener::Client(client) => client.get_async_pubsub().await,
            #[cfg(feature = "sentinel")]
            Opener::Sentinel(followed) => followed.refresh().await?.client.get_async_pubsub().await,
        }
    }
}

/// What the feed brought.
pub(super) enum Event {
    Message {
        channel: Vec<u8>,
        payload: Vec<u8>,
    },
    /// The connection was lost: a release may have been missed.
    Lost,
}

/// The next message or loss of the feed (never, while there is no connection).
pub(super) async fn next_event(source: &mut Source) -> Event {
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
pub(super) async fn switched(switches: &mut Option<watch::Receiver<u64>>) {
    match switches {
        Some(switches) => {
            if switches.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

pub(super) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => tokio::time::sleep(Duration::ZERO).await,
    }
}
