//! A Redis deployment as fencelock talks to it: one server, a Redis Cluster (routed by the
//! lock's slot) or a master found through Sentinel; each behind one [`Server`] with a
//! per-command time limit, and the mapping of Redis errors to [`Error`](crate::Error).
//!
//! - `mod.rs`: [`Server`], how a script call, a pipeline or a command reaches the right node;
//! - `cluster.rs`: the Redis Cluster connection (RESP3, sharded pub/sub pushes, the masters);
//! - `sentinel.rs`: following the master that the sentinels name, across failovers;
//! - `errors.rs`: reading a Redis error (TLS, credentials, ACL, unreachable), and
//!   [`Server::error`], its mapping to fencelock's.

#[cfg(feature = "cluster")]
mod cluster;
mod coalesce;
mod commands;
mod errors;
mod health;
#[cfg(feature = "sentinel")]
mod sentinel;
mod switches;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, RedisError};

#[cfg(feature = "cluster")]
pub(crate) use cluster::{ClusterSeeds, sharded_subscription};
pub(crate) use coalesce::Undelivered;
pub(crate) use errors::{closed, is_unreachable};
pub(crate) use health::{timed_out, within};
#[cfg(feature = "sentinel")]
pub(crate) use sentinel::{Followed, SentinelSet};
pub(crate) use switches::Switches;

use crate::script::Call;

/// TLS certificates for connections opened apart from a URL (a cluster's nodes, the master a
/// sentinel names). Without a TLS feature there are none.
#[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
pub(crate) type Certificates = redis::TlsCertificates;
/// TLS certificates (none without a TLS feature).
#[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
pub(crate) type Certificates = std::convert::Infallible;

/// Where a client's Redis is, as the builder found it.
pub(crate) enum Endpoint {
    /// One server (or one Redlock instance).
    Single(redis::Client),
    /// A Redis Cluster, by its seed nodes.
    #[cfg(feature = "cluster")]
    Cluster(ClusterSeeds),
    /// The master that a set of sentinels names.
    #[cfg(feature = "sentinel")]
    Sentinel(SentinelSet),
}

/// The connection to a deployment.
#[derive(Clone)]
enum Link {
    Single(ConnectionManager),
    /// Commands go to the master of their key's slot.
    #[cfg(feature = "cluster")]
    Cluster(ClusterConnection),
    /// One node of a cluster, by address (to scan its keys).
    #[cfg(feature = "cluster")]
    ClusterNode {
        conn: ClusterConnection,
        host: String,
        port: u16,
    },
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<Followed>),
}

/// A Redis deployment: its connection and its printable address (`host:port`, or the cluster's
/// or the sentinels' description; never credentials).
#[derive(Clone)]
pub(crate) struct Server {
    /// The connection, shared by every clone; `None` once the client is closed
    /// ([`Server::close`]): every call then fails at once with [`closed`], and the connection
    /// goes when the calls on their way with a clone of it end.
    link: Arc<Mutex<Option<Link>>>,
    /// Whether scripts publish with `SPUBLISH` here (Redis Cluster).
    sharded: bool,
    /// The master followed through Sentinel, for its switches (kept when the link is closed).
    #[cfg(feature = "sentinel")]
    followed: Option<Arc<Followed>>,
    pub(crate) addr: Arc<str>,
    /// Whether the connection is TLS (`rediss://`).
    tls: bool,
    /// Script calls waiting for one on its way (`coalesce.rs`).
    coalescer: Arc<coalesce::Coalescer>,
    /// Whether script calls may be sent together (`coalesce.rs`); off for Redlock instances.
    coalesce: bool,
    /// Whether it answers (`health.rs`): what a Redlock set sends it depends on it.
    health: Arc<health::Health>,
    /// The lock commands it lacks (`commands.rs`).
    commands: Arc<commands::Commands>,
    /// A cluster's command connection, replaced when it keeps timing out (`cluster.rs`).
    #[cfg(feature = "cluster")]
    rebuild: Option<Arc<cluster::Rebuild>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

/// How the connection manager of one server behaves: bounded connects, two quick reconnection
/// attempts. Replies are bounded by the caller's limit alone ([`within`], around every command
/// this module sends): a response timeout in the connection too would be a second timer per
/// call, and a timer that the runtime's timer driver is not already waking for costs a wake-up
/// of that driver's thread (an `eventfd` write and an `epoll_wait` return, measured with
/// `strace -c`). An expired response timeout never made the manager reconnect either (it is
/// not an error that drops the connection).
pub(crate) fn manager_config(command_timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(None)
        .set_connection_timeout(Some(command_timeout))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500))
}

/// Whether a server is reached over TLS (`rediss://`).
pub(crate) fn is_tls(info: &redis::ConnectionInfo) -> bool {
    matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
}

impl Server {
    /// One server. Nothing is sent until the first command. Must run inside a Tokio runtime.
    pub(crate) fn new(
        client: redis::Client,
        command_timeout: Duration,
    ) -> redis::RedisResult<Self> {
        let addr = client.get_connection_info().addr().to_string();
        let tls = is_tls(client.get_connection_info());
        let conn =
            ConnectionManager::new_lazy_with_config(client, manager_config(command_timeout))?;
        Ok(Server {
            link: Arc::new(Mutex::new(Some(Link::Single(conn)))),
            sharded: false,
            #[cfg(feature = "sentinel")]
            followed: None,
            addr: addr.into(),
            tls,
            coalescer: Arc::default(),
            coalesce: true,
            health: Arc::default(),
            commands: Arc::default(),
            #[cfg(feature = "cluster")]
            rebuild: None,
        })
    }

    /// A Redis Cluster, over a connection from [`ClusterSeeds::connect`] (replaced by a new
    /// one from `seeds` when its calls keep timing out).
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster(
        conn: ClusterConnection,
        seeds: ClusterSeeds,
        command_timeout: Duration,
    ) -> Self {
        Server {
            link: Arc::new(Mutex::new(Some(Link::Cluster(conn)))),
            sharded: true,
            #[cfg(feature = "sentinel")]
            followed: None,
            addr: seeds.describe().into(),
            tls: seeds.tls(),
            coalescer: Arc::default(),
            coalesce: true,
            health: Arc::default(),
            commands: Arc::default(),
            rebuild: Some(Arc::new(cluster::Rebuild::new(seeds, command_timeout))),
        }
    }

    /// The master that `followed` finds through the sentinels.
    #[cfg(feature = "sentinel")]
    pub(crate) fn sentinel(followed: Arc<Followed>) -> Self {
        Server {
            addr: followed.describe().into(),
            tls: followed.tls(),
            link: Arc::new(Mutex::new(Some(Link::Sentinel(followed.clone())))),
            sharded: false,
            followed: Some(followed),
            coalescer: Arc::default(),
            coalesce: true,
            health: Arc::default(),
            commands: Arc::default(),
            #[cfg(feature = "cluster")]
            rebuild: None,
        }
    }

    /// This server as one instance of a Redlock set: every script call is sent at once, in the
    /// order it was made, never held back for a batch.
    ///
    /// Group commit keeps one queue per script, and queues keep no order with each other: a
    /// release waiting in its queue could reach an instance after the same client's next
    /// acquire of that lock, sent at once, and a slow instance would then refuse its vote. On
    /// one server the caller always waits for a release's answer before it acquires again, so
    /// the order cannot break there; over Redlock a call returns at a majority, and the slowest
    /// instance's share is still on its way.
    pub(crate) fn in_call_order(mut self) -> Self {
        self.coalesce = false;
        self
    }

    /// Changes each time the client moves to another master (Sentinel only).
    pub(crate) fn switches(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        #[cfg(feature = "sentinel")]
        return self.followed.as_ref().map(|followed| followed.switches());
        #[cfg(not(feature = "sentinel"))]
        None
    }

    /// How many times the client has moved to another master here (Sentinel; else 0).
    pub(crate) fn switch_epoch(&self) -> u64 {
        #[cfg(feature = "sentinel")]
        return self
            .followed
            .as_ref()
            .map_or(0, |followed| followed.epoch());
        #[cfg(not(feature = "sentinel"))]
        0
    }

    /// Whether scripts publish with `SPUBLISH` here (Redis Cluster's sharded pub/sub).
    pub(crate) fn sharded(&self) -> bool {
        self.sharded
    }

    /// The connection, for one call (a clone: the call keeps it until it ends), or the
    /// [`closed`] error once the client is closed. One uncontended lock and a handle's clone.
    fn link(&self) -> redis::RedisResult<Link> {
        self.link
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(closed)
    }

    /// Drops the connection (every clone of this server shares it): later calls fail at once
    /// with [`closed`]; a call on its way keeps its own handle until it ends, and the sockets
    /// close when the last handle goes. A Sentinel-followed master's connection and the
    /// sentinels' are closed too (see [`Followed::close`]).
    pub(crate) async fn close(&self) {
        let link = self
            .link
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        #[cfg(feature = "sentinel")]
        if let Some(followed) = &self.followed {
            followed.close().await;
        }
        drop(link);
    }

    /// Runs a script call within `limit`: `EVALSHA`, and `EVAL` with the source when the node
    /// answers `NOSCRIPT` (a restarted or failed-over node, `SCRIPT FLUSH`), which also loads
    /// it there. On Redis Cluster both go to the master of the call's slot, and nowhere else.
    pub(crate) async fn run_script<T: FromRedisValue>(
        &self,
        call: &Call<'_>,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        let variant = call.lua.variant(self.sharded());
        self.eval(|by_source| call.command(variant, by_source), limit)
            .await
    }

    /// Sends `command(false)` (an `EVALSHA`) within `limit`, and `command(true)` (the `EVAL` of
    /// the source, which also loads it) when the node answers `NOSCRIPT`: a restarted or
    /// failed-over node, `SCRIPT FLUSH`.
    async fn eval<T: FromRedisValue>(
        &self,
        command: impl Fn(bool) -> redis::Cmd,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        let result = within(limit, async {
            match self.send(&command(false)).await {
                Err(err)
                    if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    self.send(&command(true)).await
                }
                other => other,
            }
        })
        .await;
        self.observe(&result);
        result
    }

    /// Takes note of a call's outcome: the server's health (`health.rs`), and on Redis Cluster
    /// whether its connection keeps timing out and is replaced (`cluster.rs`).
    fn observe<T>(&self, result: &redis::RedisResult<T>) {
        self.health.record(result);
        #[cfg(feature = "cluster")]
        if let Some(rebuild) = &self.rebuild
            && let Some(conn) = rebuild.record(result)
        {
            let mut link = self.link.lock().unwrap_or_else(PoisonError::into_inner);
            // (A closed client stays closed.)
            if link.is_some() {
                *link = Some(Link::Cluster(conn));
            }
        }
    }

    /// Leave to send this server a call now (see `health.rs`): with `skip_suspect`, `None`
    /// while it is suspect and another call to it is on its way.
    pub(crate) fn admit(&self, skip_suspect: bool) -> Option<health::Admission> {
        if skip_suspect {
            self.health.admit()
        } else {
            Some(health::Admission::always())
        }
    }

    /// Sends a pipeline within `limit`. On Redis Cluster every command with a key must be in
    /// one slot (the pipeline goes to that slot's master).
    pub(crate) async fn pipeline<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        within(limit, async {
            match self.link()? {
                Link::Single(mut conn) => pipe.query_async(&mut conn).await,
                #[cfg(feature = "cluster")]
                Link::Cluster(mut conn) => pipe.query_async(&mut conn).await,
                #[cfg(feature = "cluster")]
                Link::ClusterNode {
                    mut conn,
                    host,
                    port,
                } => {
                    let route = by_address(&host, port);
                    let values = conn
                        .route_pipeline(pipe.clone(), 0, pipe.len(), route)
                        .await?;
                    T::from_redis_value(redis::Value::Array(values)).map_err(RedisError::from)
                }
                #[cfg(feature = "sentinel")]
                Link::Sentinel(followed) => {
                    Box::pin(
                        followed
                            .on_master(|mut conn| async move { pipe.query_async(&mut conn).await }),
                    )
                    .await
                }
            }
        })
        .await
    }

    /// Sends one command within `limit`. On Redis Cluster a command with a key goes to its
    /// slot's master; use [`Self::query_at`] for one without.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        let result = within(limit, self.send(cmd)).await;
        self.observe(&result);
        result
    }

    /// Sends one command without a key of its own (`WAIT`) to the node that serves `key`,
    /// within `limit`.
    pub(crate) async fn query_at<T: FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        key: &str,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        #[cfg(not(feature = "cluster"))]
        let _ = key;
        within(limit, async {
            match self.link()? {
                #[cfg(feature = "cluster")]
                Link::Cluster(mut conn) => {
                    let route = redis::cluster_routing::Route::with_key(
                        key,
                        redis::cluster_routing::SlotAddr::Master,
                    );
                    let routing = redis::cluster_routing::RoutingInfo::SingleNode(
                        redis::cluster_routing::SingleNodeRoutingInfo::SpecificNode(route),
                    );
                    let value = conn.route_command(cmd.clone(), routing).await?;
                    T::from_redis_value(value).map_err(RedisError::from)
                }
                link => Self::send_on(link, cmd).await,
            }
        })
        .await
    }

    /// The nodes whose keys together are every key here: this server, or every master of a
    /// cluster (each as a `Server` that sends to that node alone).
    pub(crate) async fn key_holders(&self, limit: Duration) -> redis::RedisResult<Vec<Server>> {
        #[cfg(feature = "cluster")]
        if let Link::Cluster(conn) = self.link()? {
            return self.cluster_masters(&conn, limit).await;
        }
        #[cfg(not(feature = "cluster"))]
        let _ = limit;
        Ok(vec![self.clone()])
    }

    /// Sends `cmd` without a time limit of its own.
    async fn send<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        Self::send_on(self.link()?, cmd).await
    }

    /// Sends `cmd` on `link` without a time limit of its own.
    async fn send_on<T: FromRedisValue>(link: Link, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        match link {
            Link::Single(mut conn) => cmd.query_async(&mut conn).await,
            // The cluster's futures are boxed: they are large, and every call's future (the
            // single server's too) would be as large as the largest arm.
            #[cfg(feature = "cluster")]
            Link::Cluster(mut conn) => Box::pin(cmd.query_async(&mut conn)).await,
            #[cfg(feature = "cluster")]
            Link::ClusterNode {
                mut conn,
                host,
                port,
            } => {
                let routing =
                    redis::cluster_routing::RoutingInfo::SingleNode(by_address(&host, port));
                let value = Box::pin(conn.route_command(cmd.clone(), routing)).await?;
                T::from_redis_value(value).map_err(RedisError::from)
            }
            #[cfg(feature = "sentinel")]
            Link::Sentinel(followed) => {
                // Boxed: the retry around the call would make every operation's future type
                // deeper than the compiler's default limit.
                Box::pin(
                    followed.on_master(|mut conn| async move { cmd.query_async(&mut conn).await }),
                )
                .await
            }
        }
    }
}

#[cfg(feature = "cluster")]
fn by_address(host: &str, port: u16) -> redis::cluster_routing::SingleNodeRoutingInfo {
    redis::cluster_routing::SingleNodeRoutingInfo::ByAddress {
        host: host.to_owned(),
        port,
    }
}
