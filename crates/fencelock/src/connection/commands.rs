//! What the server's own commands can do for a lock, learned from its answers: whether it has
//! `SET … IFEQ` (Valkey 8.1 and later, Redis 8.4 and later), which re-arms a lease with no
//! script. Assumed until the server refuses the syntax once: asking costs a server without it
//! one error reply, and needs no permission (`INFO`) that a lock's user may not have.

use std::sync::atomic::{AtomicBool, Ordering};

use super::Server;

/// The commands a server was found to lack.
#[derive(Debug, Default)]
pub(super) struct Commands {
    no_set_ifeq: AtomicBool,
}

impl Server {
    /// Whether `SET … IFEQ` may be sent here: not known to be missing, and not on Redis
    /// Cluster (whose nodes could differ; its renewals go by script, per slot).
    pub(crate) fn may_set_ifeq(&self) -> bool {
        !self.sharded() && !self.commands.no_set_ifeq.load(Ordering::Relaxed)
    }

    /// The server refused `SET … IFEQ` as a syntax error: ask it by script from now on.
    pub(crate) fn lacks_set_ifeq(&self) {
        if !self.commands.no_set_ifeq.swap(true, Ordering::Relaxed) {
            tracing::debug!(server = %self.addr, "no SET IFEQ here: leases are re-armed by script");
        }
    }
}
