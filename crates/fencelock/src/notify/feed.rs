//! Where release messages come from (a dedicated RESP3 connection, or a cluster's sharded
//! pushes), and the next loss of a feed. The messages themselves never pass through here: the
//! connection's task hands them to the waiters ([`Router`](super::router::Router)).

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
use tokio::sync::{mpsc, watch};

#[cfg(feature = "sentinel")]
use crate::connection::Followed;

use super::router::Router;

/// Where release messages come from.
pub(crate) enum Feed {
    /// `PUBLISH` on one server: a RESP3 connection of the listener's own.
    Client(Box<redis::Client>),
    /// `PUBLISH` on the master the sentinels name, asked again at each reconnection.
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<Followed>),
    /// Redis Cluster: `SSUBSCRIBE` on the cluster connection kept for subscriptions (apart
    /// from the commands'), whose RESP3 pushes bring the messages and the confirmations (it was
    /// made with the listener's [`Router`](super::Prepared::router)); the `redis` crate
    /// resubscribes each channel on the node that serves its slot after a reconnection or a
    /// topology change, but forgets one a node unsubscribed unasked.
    #[cfg(feature = "cluster")]
    Sharded(ClusterConnection),
}

/// The listener's end of a feed.
pub(super) enum Source {
    Dedicated {
        opener: Opener,
        connection: Option<MultiplexedConnection>,
        /// With Sentinel: changes when the client moves to another master.
        switches: Option<watch::Receiver<u64>>,
    },
    /// Redis Cluster: subscriptions go to the [`Subscriber`](super::sharded::Subscriber),
    /// which confirms and retries them, and the rest to the [`Writer`](super::writer::Writer);
    /// losses are heard by the router, channel by channel.
    #[cfg(feature = "cluster")]
    Sharded {
        wanted: mpsc::UnboundedSender<super::sharded::Wanted>,
        batches: mpsc::UnboundedSender<super::writer::Batch>,
        /// Dropped with the listener: the subscriber stops (the connection's router, which
        /// the subscriber keeps alive, holds a sender of `wanted` too).
        _stop: tokio::sync::oneshot::Sender<()>,
    },
}

/// Opens a dedicated connection for the release messages.
pub(super) enum Opener {
    Client(Box<redis::Client>),
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<Followed>),
}

impl Opener {
    /// A RESP3 connection whose pushes go to `router`.
    pub(super) async fn open(
        &self,
        router: Router,
        limit: Duration,
    ) -> redis::RedisResult<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(limit))
            .set_response_timeout(Some(limit))
            .set_push_sender(router);
        let client = match self {
            Opener::Client(client) => resp3(client)?,
            #[cfg(feature = "sentinel")]
            Opener::Sentinel(followed) => resp3(&followed.refresh().await?.client)?,
        };
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }
}

/// The same server, user and TLS settings as `client`, over RESP3 (which carries pub/sub
/// messages as pushes on an ordinary connection).
fn resp3(client: &redis::Client) -> redis::RedisResult<redis::Client> {
    let info = client.get_connection_info().clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    redis::Client::open(info.set_redis_settings(settings))
}

/// Resolves when the feed's connection is lost (a release may have been missed): its router
/// reported it (`current`: the number of the connection in use; a report of an earlier one is
/// old news), or the followed master changed. Never while there is no connection, nor on
/// Redis Cluster (whose router hands each lost channel to the subscriber).
pub(super) async fn lost(
    source: &mut Source,
    losses: &mut mpsc::UnboundedReceiver<u64>,
    current: u64,
) {
    match source {
        Source::Dedicated {
            connection: None, ..
        } => std::future::pending().await,
        Source::Dedicated { switches, .. } => tokio::select! {
            () = reported(losses, current) => {}
            // The client moved to another master: listen there.
            () = switched(switches) => {}
        },
        #[cfg(feature = "cluster")]
        Source::Sharded { .. } => std::future::pending().await,
    }
}

async fn reported(losses: &mut mpsc::UnboundedReceiver<u64>, current: u64) {
    loop {
        match losses.recv().await {
            Some(connection) if connection == current => return,
            Some(_) => {}
            // Cannot happen: the listener keeps a sender to make routers with.
            None => return std::future::pending().await,
        }
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
