//! Redis Cluster: the sharded (un)subscriptions of a listener that need no confirmation, sent
//! by a task of their own beside it (see `sharded.rs` for the ones that do).

use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use tokio::sync::mpsc;

use crate::connection::sharded_subscription;

/// Sharded (un)subscriptions that need no confirmation: waiters' own channels (see
/// [`super::Request::Own`]) and lingering channels' unsubscriptions. Each batch goes at once,
/// batches in the order asked (a waiter's own channel is never unsubscribed before it is
/// subscribed); a failure is only logged.
pub(super) struct Batch {
    pub(super) subscribe: Vec<String>,
    pub(super) unsubscribe: Vec<String>,
}

/// The task that sends the [`Batch`]es.
pub(super) struct Writer {
    pub(super) conn: ClusterConnection,
    pub(super) limit: Duration,
}

impl Writer {
    pub(super) async fn run(self, mut batches: mpsc::UnboundedReceiver<Batch>) {
        while let Some(batch) = batches.recv().await {
            let subscriptions = batch.subscribe.iter().map(|c| (c, true));
            let unsubscriptions = batch.unsubscribe.iter().map(|c| (c, false));
            let (conn, limit) = (&self.conn, self.limit);
            let sent = subscriptions.chain(unsubscriptions).map(|(channel, on)| async move {
                let result = sharded_subscription(conn, channel, on, limit).await;
                if let Err(err) = result {
                    tracing::debug!(channel, on, %err, "release listener: sharded (un)subscription failed");
                }
            });
            futures_util::future::join_all(sent).await;
        }
    }
}
