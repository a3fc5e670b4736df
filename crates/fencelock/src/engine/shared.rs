//! The engine's state for one client: its servers, key prefix, clock-drift margin, replica
//! acknowledgements and watchdog. A [`Client`](crate::Client) is an `Arc` of it; every request,
//! guard and handle carries the `Arc`, never the client.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::replicas::ReplicaAck;
use crate::engine::watchdog::Watchdog;
use crate::keys::LockKeys;
use crate::lease::ClockDrift;
use crate::quorum::Instances;
use crate::token::Tokens;

pub(crate) struct Shared {
    pub(crate) instances: Arc<Instances>,
    pub(crate) description: String,
    pub(crate) prefix: String,
    pub(crate) drift: ClockDrift,
    pub(crate) replica_ack: Option<ReplicaAck>,
    pub(crate) watchdog: Watchdog,
    pub(crate) next_id: AtomicU64,
    /// The owner tokens of its acquisitions.
    pub(crate) tokens: Tokens,
}

impl Shared {
    pub(crate) fn keys(&self, name: &str) -> LockKeys {
        LockKeys::new(&self.prefix, name)
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("servers", &self.description)
            .field("prefix", &self.prefix)
            .finish()
    }
}
