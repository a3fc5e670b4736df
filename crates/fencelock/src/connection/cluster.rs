//! Redis Cluster: one connection (the `redis` crate's `cluster-async`) that routes each command
//! to the master of its key's slot, follows `MOVED` and failovers, and carries the sharded
//! pub/sub pushes (RESP3) that wake waiters. Every key of a lock shares its hash tag, so every
//! script of a lock runs on one node.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::aio::AsyncPushSender;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;

use super::{Link, Server, within};

/// A cluster's seed nodes, as the builder opened them, and the TLS certificates for every
/// node (the seeds' and the ones found later).
pub(crate) struct ClusterSeeds {
    pub(crate) nodes: Vec<redis::ConnectionInfo>,
    pub(crate) certs: Option<super::Certificates>,
}

impl ClusterSeeds {
    /// `cluster of a:1, b:2` (the seeds).
    pub(crate) fn describe(&self) -> String {
        let seeds: Vec<String> = self.nodes.iter().map(|n| n.addr().to_string()).collect();
        format!("cluster of {}", seeds.join(", "))
    }

    pub(crate) fn tls(&self) -> bool {
        self.nodes.first().is_some_and(super::is_tls)
    }

    /// Prepares the connection for commands: the nodes as the seeds' URLs give them, and no
    /// subscriptions, so no push ever comes on it (see [`Self::subscriptions`]). The nodes are
    /// reached in the background, and a cluster that cannot be reached shows up at the first
    /// command. Must run inside a Tokio runtime.
    pub(crate) fn connect(
        &self,
        command_timeout: Duration,
    ) -> redis::RedisResult<ClusterConnection> {
        self.open(
            self.nodes.iter().cloned(),
            command_timeout,
            None::<NoPushes>,
        )
    }

    /// Prepares the connection for sharded pub/sub, apart from the commands' one: RESP3, whose
    /// pushes (the release messages, and its disconnection notices) go to `pushes`.
    ///
    /// Apart because a node that stops serving a slot (a failover, a migration) tells its
    /// subscribers with an `sunsubscribe` push nobody asked for, which the `redis` crate takes
    /// as the reply to the oldest command on its way on that connection, and every later reply
    /// as the reply to the command after its own (valkey-io/valkey#1066): over one connection
    /// an acquire could be answered with another call's reply. Here only (un)subscriptions are
    /// on their way, and their replies are only logged. Must run inside a Tokio runtime.
    pub(crate) fn subscriptions(
        &self,
        command_timeout: Duration,
        pushes: impl AsyncPushSender,
    ) -> redis::RedisResult<ClusterConnection> {
        let nodes = self.nodes.iter().map(|n| {
            let settings = n
                .redis_settings()
                .clone()
                .set_protocol(redis::ProtocolVersion::RESP3);
            n.clone().set_redis_settings(settings)
        });
        self.open(nodes, command_timeout, Some(pushes))
    }

    fn open(
        &self,
        nodes: impl Iterator<Item = redis::ConnectionInfo>,
        command_timeout: Duration,
        pushes: Option<impl AsyncPushSender>,
    ) -> redis::RedisResult<ClusterConnection> {
        let mut builder = ClusterClientBuilder::new(nodes)
            .connection_timeout(command_timeout)
            .response_timeout(command_timeout)
            .retries(3)
            .min_retry_wait(20)
            .max_retry_wait(500);
        if let Some(pushes) = pushes {
            builder = builder
                .use_protocol(redis::ProtocolVersion::RESP3)
                .push_sender(pushes);
        }
        if let Some(certs) = &self.certs {
            #[cfg(feature = "tls-rustls")]
            {
                builder = builder.certs(certs.clone());
            }
            #[cfg(not(feature = "tls-rustls"))]
            {
                let _ = certs;
                return Err(redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "a custom CA or client certificate on Redis Cluster needs the tls-rustls feature",
                )));
            }
        }
        let client = builder.build()?;
        let config = redis::cluster::ClusterConfig::new()
            .set_connection_timeout(command_timeout)
            .set_response_timeout(command_timeout);
        Ok(client.get_pending_async_connection_with_config(config))
    }
}

/// How many command timeouts a cluster connection may go on timing out, with no answer in
/// between, before it is replaced by a new one.
const STUCK_TIMEOUTS: u32 = 3;

/// The replacement of a cluster's command connection that keeps timing out while the cluster
/// may answer again. The `redis` crate's cluster connection can stay stuck after a failover in
/// which its calls timed out (the old master paused while calls were on their way to it): every
/// call then times out, for minutes, though every node answers (the old master as a replica,
/// its replica as the slot's master). A new connection from the seeds finds the cluster as it is
/// now; the stuck one goes when the calls on their way with it end.
pub(crate) struct Rebuild {
    seeds: ClusterSeeds,
    command_timeout: Duration,
    /// Since when every call has timed out (`None`: the last call was answered), and when the
    /// connection was last replaced.
    state: Mutex<(Option<Instant>, Option<Instant>)>,
}

impl Rebuild {
    pub(crate) fn new(seeds: ClusterSeeds, command_timeout: Duration) -> Self {
        Rebuild {
            seeds,
            command_timeout,
            state: Mutex::new((None, None)),
        }
    }

    /// Takes note of a call's outcome: a new connection when calls have timed out, and none
    /// was answered, for [`STUCK_TIMEOUTS`] command timeouts (and as long since the last
    /// replacement). Any answer (an error reply too, or a refused connection) is a connection
    /// that works. Must run inside a Tokio runtime.
    pub(crate) fn record<T>(&self, result: &redis::RedisResult<T>) -> Option<ClusterConnection> {
        let timed_out = matches!(result, Err(e) if e.is_timeout());
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (since, replaced) = &mut *state;
        if !timed_out {
            *since = None;
            return None;
        }
        let now = Instant::now();
        let stuck = self.command_timeout.saturating_mul(STUCK_TIMEOUTS);
        let started = *since.get_or_insert(now);
        let due = |at: Instant| now.saturating_duration_since(at) >= stuck;
        if !due(started) || replaced.is_some_and(|at| !due(at)) {
            return None;
        }
        match self.seeds.connect(self.command_timeout) {
            Ok(conn) => {
                *since = None;
                *replaced = Some(now);
                tracing::warn!(
                    cluster = %self.seeds.describe(),
                    "calls to the cluster timed out for {:?} with no answer: its connection is \
                     replaced by a new one",
                    now.saturating_duration_since(started),
                );
                Some(conn)
            }
            Err(err) => {
                tracing::warn!(cluster = %self.seeds.describe(), %err, "a new cluster connection failed");
                None
            }
        }
    }
}

impl Server {
    /// Every master of the cluster behind `conn`, each as a `Server` that sends to it alone.
    pub(super) async fn cluster_masters(
        &self,
        conn: &ClusterConnection,
        limit: Duration,
    ) -> redis::RedisResult<Vec<Server>> {
        let masters = within(limit, masters(conn)).await?;
        Ok(masters
            .into_iter()
            .map(|(host, port)| Server {
                addr: format!("{host}:{port}").into(),
                tls: self.tls,
                link: Arc::new(Mutex::new(Some(Link::ClusterNode {
                    conn: conn.clone(),
                    host,
                    port,
                }))),
                sharded: true,
                #[cfg(feature = "sentinel")]
                followed: None,
                coalescer: Arc::default(),
                coalesce: false,
                health: Arc::default(),
                commands: Arc::default(),
                rebuild: None,
            })
            .collect())
    }
}

/// The push sender of a connection that wants none.
struct NoPushes;

impl AsyncPushSender for NoPushes {
    fn send(&self, _: redis::PushInfo) -> Result<(), redis::aio::SendError> {
        Ok(())
    }
}

/// The masters of the cluster (`host`, `port`), as `CLUSTER SLOTS` on any node says.
pub(crate) async fn masters(conn: &ClusterConnection) -> redis::RedisResult<Vec<(String, u16)>> {
    use redis::Value;
    use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
    let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let reply = conn
        .clone()
        .route_command(redis::cmd("CLUSTER").arg("SLOTS").clone(), routing)
        .await?;
    let Value::Array(ranges) = reply else {
        return Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "unexpected CLUSTER SLOTS reply",
        )));
    };
    let mut masters = Vec::new();
    for range in ranges {
        let Value::Array(parts) = range else { continue };
        let Some(Value::Array(master)) = parts.get(2) else {
            continue;
        };
        let host = match master.first() {
            Some(Value::BulkString(host)) => String::from_utf8_lossy(host).into_owned(),
            Some(Value::SimpleString(host)) => host.clone(),
            _ => continue,
        };
        let Some(Value::Int(port)) = master.get(1) else {
            continue;
        };
        let Ok(port) = u16::try_from(*port) else {
            continue;
        };
        if !masters.contains(&(host.clone(), port)) {
            masters.push((host, port));
        }
    }
    Ok(masters)
}

/// Subscribes (`SSUBSCRIBE`) or unsubscribes a sharded channel within `limit`.
pub(crate) async fn sharded_subscription(
    conn: &ClusterConnection,
    channel: &str,
    subscribe: bool,
    limit: Duration,
) -> redis::RedisResult<()> {
    let mut conn = conn.clone();
    if subscribe {
        within(limit, conn.ssubscribe(channel)).await
    } else {
        within(limit, conn.sunsubscribe(channel)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;

    fn timeout() -> redis::RedisResult<()> {
        Err(super::super::timed_out("no reply".to_owned()))
    }

    #[tokio::test]
    async fn a_connection_is_replaced_after_timeouts_with_no_answer_for_three_command_timeouts() {
        let seeds = ClusterSeeds {
            nodes: vec!["redis://127.0.0.1:1".into_connection_info().unwrap()],
            certs: None,
        };
        let limit = Duration::from_millis(100);
        let rebuild = Rebuild::new(seeds, limit);
        assert!(rebuild.record(&timeout()).is_none(), "the first timeout");
        tokio::time::sleep(limit).await;
        assert!(rebuild.record(&timeout()).is_none(), "one timeout in");
        assert!(rebuild.record(&Ok(())).is_none());
        tokio::time::sleep(limit * 2).await;
        assert!(
            rebuild.record(&timeout()).is_none(),
            "an answer starts the count again"
        );
        tokio::time::sleep(limit * 3).await;
        assert!(rebuild.record(&timeout()).is_some(), "three timeouts in");
        assert!(
            rebuild.record(&timeout()).is_none(),
            "the new connection gets its own three"
        );
        tokio::time::sleep(limit).await;
        assert!(rebuild.record(&timeout()).is_none(), "one in");
        tokio::time::sleep(limit * 2).await;
        assert!(rebuild.record(&timeout()).is_some(), "and three");
    }
}
