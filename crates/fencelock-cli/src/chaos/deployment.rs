//! The lock servers of a chaos run: one redis-server or Redlock's five, each behind a fault
//! proxy, a Redis Cluster, or a Sentinel set; how workers reach them, and the nodes and proxies
//! the nemesis acts on.

use super::Topology;
use crate::error::CliError;
use fencelock_testkit::{FaultProxy, RedisCluster, RedisServer, SentinelSet};

/// The deployment of a run: its lock servers, and how workers reach them.
pub enum Deployment {
    /// One server, or Redlock's independent instances, each behind a fault proxy.
    Servers {
        servers: Vec<RedisServer>,
        proxies: Vec<FaultProxy>,
    },
    /// A Redis Cluster of 3 masters with a replica each.
    Cluster(RedisCluster),
    /// A master with 2 replicas and 3 sentinels.
    Sentinel(SentinelSet),
}

impl Deployment {
    /// Starts the servers of `topology` (each of one server and Redlock behind a fault proxy).
    pub async fn start(topology: Topology) -> Result<Deployment, CliError> {
        let started =
            |what: &str, e: std::io::Error| CliError::RedisServerStart(format!("{what}: {e}"));
        match topology {
            Topology::Single | Topology::Redlock => {
                let n = if topology == Topology::Single { 1 } else { 5 };
                let mut servers = Vec::new();
                let mut proxies = Vec::new();
                for _ in 0..n {
                    let server =
                        blocking(RedisServer::start).map_err(|e| started("redis-server", e))?;
                    proxies.push(
                        FaultProxy::start(server.addr())
                            .await
                            .map_err(|e| started("a fault proxy", e))?,
                    );
                    servers.push(server);
                }
                Ok(Deployment::Servers { servers, proxies })
            }
            Topology::Cluster => blocking(|| RedisCluster::start(3, 1))
                .map(Deployment::Cluster)
                .map_err(|e| started("a Redis Cluster", e)),
            Topology::Sentinel => blocking(|| SentinelSet::start(2, 3))
                .map(Deployment::Sentinel)
                .map_err(|e| started("a Sentinel set", e)),
        }
    }

    /// The worker's `FENCELOCK_URL` (comma-separated).
    pub fn urls(&self) -> String {
        match self {
            Deployment::Servers { proxies, .. } => proxies
                .iter()
                .map(FaultProxy::url)
                .collect::<Vec<_>>()
                .join(","),
            Deployment::Cluster(cluster) => cluster.urls().join(","),
            Deployment::Sentinel(set) => set.sentinel_urls().join(","),
        }
    }

    /// The deployment in words, for the run's first line.
    pub fn describe(&self) -> String {
        match self {
            Deployment::Servers { servers, .. } if servers.len() == 1 => {
                "one redis-server (behind a fault proxy)".to_owned()
            }
            Deployment::Servers { servers, .. } => format!(
                "Redlock over {} redis-servers (each behind a fault proxy)",
                servers.len()
            ),
            Deployment::Cluster(cluster) => format!(
                "a Redis Cluster of {} masters with a replica each",
                cluster.masters().len()
            ),
            Deployment::Sentinel(set) => format!(
                "a Sentinel master with {} replicas and {} sentinels",
                set.nodes.len().saturating_sub(1),
                set.sentinels.len()
            ),
        }
    }

    /// The servers that take locks now (one server, Redlock's instances, the cluster's
    /// masters, the Sentinel master), as indices into [`Deployment::node`].
    pub fn lock_servers(&self) -> Vec<usize> {
        match self {
            Deployment::Servers { servers, .. } => (0..servers.len()).collect(),
            Deployment::Cluster(cluster) => cluster
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| is_master(n))
                .map(|(i, _)| i)
                .collect(),
            Deployment::Sentinel(set) => set.master_index().into_iter().collect(),
        }
    }

    /// Node `index` (a server, a cluster node, a Sentinel data node).
    pub fn node(&mut self, index: usize) -> Option<&mut RedisServer> {
        match self {
            Deployment::Servers { servers, .. } => servers.get_mut(index),
            Deployment::Cluster(cluster) => cluster.nodes.get_mut(index),
            Deployment::Sentinel(set) => set.nodes.get_mut(index),
        }
    }

    /// The fault proxy in front of server `index`, if there is one.
    pub fn proxy(&self, index: usize) -> Option<&FaultProxy> {
        match self {
            Deployment::Servers { proxies, .. } => proxies.get(index),
            _ => None,
        }
    }

    /// Whether server faults must stay short of a failover (Cluster and Sentinel detect a
    /// master as down after 1 s).
    pub fn fails_over(&self) -> bool {
        !matches!(self, Deployment::Servers { .. })
    }

    /// A graceful failover (Cluster: of the master serving `lock`; Sentinel: of the master).
    /// Returns what failed over.
    pub fn failover(&self, lock: &str) -> Result<String, String> {
        match self {
            Deployment::Cluster(cluster) => {
                let master = cluster
                    .master_of(&format!("fencelock:{{{lock}}}"))
                    .map_err(|e| e.to_string())?;
                let id = cluster.node_id(master).map_err(|e| e.to_string())?;
                let replica = cluster
                    .nodes
                    .iter()
                    .find(|n| replica_of(n, &id))
                    .ok_or_else(|| format!("no replica of the master on port {}", master.port()))?;
                cluster
                    .failover(replica, false)
                    .map_err(|e| e.to_string())?;
                Ok(format!("cluster master on port {}", master.port()))
            }
            Deployment::Sentinel(set) => {
                let old = set.master().map_err(|e| e.to_string())?.port();
                set.failover().map_err(|e| e.to_string())?;
                Ok(format!("sentinel master on port {old}"))
            }
            Deployment::Servers { .. } => Err("no failover without replicas".into()),
        }
    }
}

/// Whether a cluster node says it is a master.
fn is_master(node: &RedisServer) -> bool {
    node.is_running()
        && matches!(node.cmd(&["ROLE"]), Ok(redis::Value::Array(parts))
            if matches!(parts.first(), Some(redis::Value::BulkString(b)) if b == b"master"))
}

/// Whether a cluster node is a replica of the master with node id `id`.
fn replica_of(node: &RedisServer, id: &str) -> bool {
    let Ok(value) = node.cmd(&["CLUSTER", "NODES"]) else {
        return false;
    };
    let text = match value {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        _ => return false,
    };
    text.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields
            .get(2)
            .is_some_and(|f| f.contains("myself") && f.contains("slave"))
            && fields.get(3) == Some(&id)
    })
}

/// Runs a blocking test-kit call without stalling the other tasks (the fault proxies relay on
/// this runtime).
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}
