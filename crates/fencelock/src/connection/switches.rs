//! The master switches of a client's Sentinel-followed servers, watched together (none without
//! Sentinel).

use tokio::sync::watch;

/// The master switches of every Sentinel-followed server of one client, watched together.
///
/// The watchdog uses them to check every hold on the new master as soon as the client moves
/// there: replication is asynchronous, and a grant the old master had not passed on is gone.
pub(crate) struct Switches {
    receivers: Vec<watch::Receiver<u64>>,
}

impl Switches {
    pub(crate) fn new(receivers: Vec<watch::Receiver<u64>>) -> Self {
        Switches { receivers }
    }

    /// Resolves at the next switch (never, without Sentinel, or once every followed master is
    /// gone with its client). Cancel safe: a switch seen by a dropped call is seen by the
    /// next one.
    pub(crate) async fn changed(&mut self) {
        loop {
            if self.receivers.is_empty() {
                return std::future::pending().await;
            }
            let (result, index, _) = futures_util::future::select_all(
                self.receivers.iter_mut().map(|r| Box::pin(r.changed())),
            )
            .await;
            match result {
                Ok(()) => return,
                Err(_) => {
                    self.receivers.swap_remove(index);
                }
            }
        }
    }
}
