//! Optional replica acknowledgement of a grant (Redisson's `syncSlaves`): after a grant, `WAIT`
//! on the connection that made it until enough replicas have the write, so that a failover to
//! a replica is less likely to lose the lock. It narrows the window; it cannot close it
//! (replication stays asynchronous, and a replica that acknowledged can still lose the race to
//! promotion) — the fence is what keeps the data safe.

use std::sync::Arc;
use std::time::Duration;

use crate::connection::Server;
use crate::engine::protocol::Hold;
use crate::error::Error;
use crate::quorum::Instances;

/// What a client asks of replicas after each grant (see
/// [`ClientBuilder::wait_for_replicas`](crate::ClientBuilder::wait_for_replicas)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplicaAck {
    /// How many replicas must have the grant.
    pub(crate) replicas: u32,
    /// How long to wait for them.
    pub(crate) timeout: Duration,
    /// What to do when fewer acknowledge in time.
    pub(crate) on_shortfall: Shortfall,
}

/// What happens when fewer replicas than asked acknowledge a grant in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shortfall {
    /// Give the lock back and fail with [`Error::NotReplicated`].
    Fail,
    /// Keep the lock and log a warning (the grant is as safe as without the option).
    Warn,
}

/// Waits for the replicas of every instance in `granted` to acknowledge the grant. `Ok` when
/// they did, or when the shortfall is only to be logged.
pub(crate) async fn confirm(
    instances: &Arc<Instances>,
    hold: &Hold,
    granted: &[usize],
    ack: ReplicaAck,
) -> Result<(), Error> {
    let limit = instances.command_timeout();
    for &i in granted {
        let Some(server) = instances.servers().get(i) else {
            continue;
        };
        confirm_on(server, &hold.name, hold.keys.lock(), ack, limit, "grant").await?;
    }
    Ok(())
}

/// Waits for `server`'s replicas to acknowledge the writes made on the connection that serves
/// `key` (`what` was written, for the log: a grant, a record), for the lock `name`. `Ok` when
/// they did, or when the shortfall is only to be logged.
pub(crate) async fn confirm_on(
    server: &Server,
    name: &str,
    key: &str,
    ack: ReplicaAck,
    command_timeout: Duration,
    what: &'static str,
) -> Result<(), Error> {
    let mut wait = redis::cmd("WAIT");
    wait.arg(ack.replicas)
        .arg(u64::try_from(ack.timeout.as_millis()).unwrap_or(u64::MAX));
    let limit = ack.timeout.saturating_add(command_timeout);
    let acknowledged = match server.query_at::<u64>(&wait, key, limit).await {
        Ok(n) => u32::try_from(n).unwrap_or(u32::MAX),
        Err(err) => return Err(server.error(name, "wait for replicas", err)),
    };
    if acknowledged >= ack.replicas {
        return Ok(());
    }
    if ack.on_shortfall == Shortfall::Warn {
        tracing::warn!(lock = %name, server = %server.addr, acknowledged, wanted = ack.replicas, "fewer replicas than asked acknowledged the {what}");
        return Ok(());
    }
    Err(Error::NotReplicated {
        lock: name.to_owned(),
        server: server.addr.to_string(),
        acknowledged,
        wanted: ack.replicas,
    })
}
