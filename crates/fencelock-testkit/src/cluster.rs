//! A Redis Cluster of real processes on free ports: `masters` masters, each with `replicas`
//! replicas, slots split evenly, built with `CLUSTER ADDSLOTSRANGE` / `MEET` / `REPLICATE` (no
//! `redis-cli` needed), and ready when every node reports `cluster_state:ok` and every replica
//! is linked to its master. Every node is a [`RedisServer`], so the usual faults apply (pause,
//! kill, restart), and [`RedisCluster::failover`] promotes a replica.

use std::io;
use std::time::{Duration, Instant};

use crate::RedisServer;

/// How long the cluster may take to form.
const FORM_LIMIT: Duration = Duration::from_secs(30);
/// The number of hash slots.
const SLOTS: u32 = 16384;

/// A running cluster; its processes are stopped when it is dropped.
#[derive(Debug)]
pub struct RedisCluster {
    /// Every node: the masters first, then the replicas (replica `i` of master `m` at
    /// `masters + m * replicas + i`).
    pub nodes: Vec<RedisServer>,
    masters: usize,
}

/// What a node's `INFO replication` and `CLUSTER INFO` say, as text.
fn info(node: &RedisServer, args: &[&str]) -> io::Result<String> {
    match node.cmd(args).map_err(io::Error::other)? {
        redis::Value::BulkString(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        redis::Value::VerbatimString { text, .. } => Ok(text),
        other => Ok(format!("{other:?}")),
    }
}

fn ok(node: &RedisServer, args: &[&str]) -> io::Result<()> {
    node.cmd(args)
        .map(drop)
        .map_err(|e| io::Error::other(format!("{} on port {}: {e}", args.join(" "), node.port())))
}

impl RedisCluster {
    /// Starts and forms a cluster (`cluster-node-timeout` 1 s, so a failover takes seconds).
    pub fn start(masters: usize, replicas: usize) -> io::Result<RedisCluster> {
        if masters == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cluster needs at least one master",
            ));
        }
        let total = masters * (replicas + 1);
        let mut nodes = Vec::with_capacity(total);
        for _ in 0..total {
            nodes.push(RedisServer::start_with_args(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "1000",
            ])?);
        }
        let cluster = RedisCluster { nodes, masters };
        cluster.form(replicas)?;
        Ok(cluster)
    }

    fn form(&self, replicas: usize) -> io::Result<()> {
        let per = SLOTS / u32::try_from(self.masters).map_err(io::Error::other)?;
        // Each node its own config epoch (1, 2, ...), as `redis-cli --cluster create` gives
        // them, so the cluster starts without epoch collisions. Left to resolve them itself, it
        // bumps colliding nodes' epochs one by one over the first second, and a replica that
        // takes over while it has not yet heard of the last bump (it was paused, say) claims
        // its master's slots with an epoch no higher than the master's own: the master keeps
        // its slots, and the takeover is undone (seen in CI as a lock that survived a
        // `CLUSTER FAILOVER TAKEOVER`).
        for (epoch, node) in (1_u64..).zip(&self.nodes) {
            ok(node, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch.to_string()])?;
        }
        for (i, master) in self.masters().iter().enumerate() {
            let i = u32::try_from(i).map_err(io::Error::other)?;
            let first = i * per;
            let last = if i + 1 == u32::try_from(self.masters).unwrap_or(u32::MAX) {
                SLOTS - 1
            } else {
                first + per - 1
            };
            ok(
                master,
                &[
                    "CLUSTER",
                    "ADDSLOTSRANGE",
                    &first.to_string(),
                    &last.to_string(),
                ],
            )?;
        }
        let first = &self.nodes[0];
        for node in &self.nodes[1..] {
            ok(
                first,
                &["CLUSTER", "MEET", "127.0.0.1", &node.port().to_string()],
            )?;
        }
        // Every node knows every other under its real id: a node still in its handshake is
        // counted in `cluster_known_nodes` under a made-up name, and `CLUSTER REPLICATE` of the
        // real one then fails with "Unknown node" (seen once in CI).
        let ids = self
            .nodes
            .iter()
            .map(|node| self.node_id(node))
            .collect::<io::Result<Vec<String>>>()?;
        self.wait("every node known by its id", |node| {
            let nodes = info(node, &["CLUSTER", "NODES"])?;
            Ok(!nodes.contains("handshake") && ids.iter().all(|id| nodes.contains(id.as_str())))
        })?;
        for m in 0..self.masters {
            let id = self.node_id(&self.nodes[m])?;
            for r in 0..replicas {
                let replica = &self.nodes[self.masters + m * replicas + r];
                ok(replica, &["CLUSTER", "REPLICATE", &id])?;
            }
        }
        // Every node has heard of the highest config epoch, so a failover bumps past it.
        let epoch = format!("cluster_current_epoch:{}", self.nodes.len());
        self.wait(
            "state ok, every replica's link up, every node at the last epoch given",
            |node| {
                let state = info(node, &["CLUSTER", "INFO"])?;
                let role = info(node, &["INFO", "replication"])?;
                Ok(state.contains("cluster_state:ok")
                    && state.lines().any(|line| line.trim_end() == epoch)
                    && (role.contains("role:master") || role.contains("master_link_status:up")))
            },
        )
    }

    /// Waits until `ready` holds on every running node. On timeout the error says what was
    /// waited for, which node had not got there, and what that node's `CLUSTER INFO` state and
    /// `CLUSTER NODES` said.
    fn wait(&self, what: &str, ready: impl Fn(&RedisServer) -> io::Result<bool>) -> io::Result<()> {
        let started = Instant::now();
        loop {
            let behind = match self
                .nodes
                .iter()
                .filter(|node| node.is_running())
                .map(|node| ready(node).map(|ready| (!ready).then_some(node)))
                .find(|behind| !matches!(behind, Ok(None)))
            {
                None => return Ok(()),
                Some(behind) => behind?,
            };
            if started.elapsed() > FORM_LIMIT {
                let detail = behind.map_or_else(String::new, |node| {
                    let state = info(node, &["CLUSTER", "INFO"]).unwrap_or_default();
                    let state = state
                        .lines()
                        .filter(|l| l.starts_with("cluster_state:") || l.contains("epoch"))
                        .map(str::trim_end)
                        .collect::<Vec<_>>()
                        .join(", ");
                    let nodes = info(node, &["CLUSTER", "NODES"]).unwrap_or_default();
                    format!(
                        ": not yet on port {} ({state}); its CLUSTER NODES:\n{nodes}",
                        node.port()
                    )
                });
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the cluster did not settle in {FORM_LIMIT:?} ({what}){detail}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The node's cluster id.
    pub fn node_id(&self, node: &RedisServer) -> io::Result<String> {
        match node.cmd(&["CLUSTER", "MYID"]).map_err(io::Error::other)? {
            redis::Value::BulkString(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            other => Err(io::Error::other(format!("CLUSTER MYID: {other:?}"))),
        }
    }

    /// The nodes started as masters.
    pub fn masters(&self) -> &[RedisServer] {
        &self.nodes[..self.masters]
    }

    /// Every node: the masters as started, then their replicas.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Seed URLs for a cluster client: every node's.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The master that serves `key`'s slot now, as the first running node's `CLUSTER SLOTS`
    /// says.
    pub fn master_of(&self, key: &str) -> io::Result<&RedisServer> {
        let asker = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .ok_or_else(|| io::Error::other("no node is running"))?;
        let slot = match asker
            .cmd(&["CLUSTER", "KEYSLOT", key])
            .map_err(io::Error::other)?
        {
            redis::Value::Int(slot) => slot,
            other => return Err(io::Error::other(format!("CLUSTER KEYSLOT: {other:?}"))),
        };
        let redis::Value::Array(ranges) =
            asker.cmd(&["CLUSTER", "SLOTS"]).map_err(io::Error::other)?
        else {
            return Err(io::Error::other("CLUSTER SLOTS: not an array"));
        };
        for range in ranges {
            let redis::Value::Array(parts) = range else {
                continue;
            };
            let (
                Some(redis::Value::Int(lo)),
                Some(redis::Value::Int(hi)),
                Some(redis::Value::Array(master)),
            ) = (parts.first(), parts.get(1), parts.get(2))
            else {
                continue;
            };
            if !(*lo <= slot && slot <= *hi) {
                continue;
            }
            let Some(redis::Value::Int(port)) = master.get(1) else {
                continue;
            };
            if let Some(node) = self.nodes.iter().find(|n| i64::from(n.port()) == *port) {
                return Ok(node);
            }
        }
        Err(io::Error::other(format!("no master serves slot {slot}")))
    }

    /// A graceful `CLUSTER FAILOVER` on `replica` (or `TAKEOVER` with `takeover`, which needs
    /// no agreement of the master: for a master that is paused or gone), then waits until the
    /// replica is a master and the cluster is `ok` again.
    pub fn failover(&self, replica: &RedisServer, takeover: bool) -> io::Result<()> {
        let mut args = vec!["CLUSTER", "FAILOVER"];
        if takeover {
            args.push("TAKEOVER");
        }
        ok(replica, &args)?;
        self.wait_promoted(replica)
    }

    /// The replica started for the `m`-th master (before any failover), if there is one.
    pub fn replica_of_master(&self, m: usize) -> Option<&RedisServer> {
        let replicas = (self.nodes.len() / self.masters).saturating_sub(1);
        if replicas == 0 || m >= self.masters {
            return None;
        }
        self.nodes.get(self.masters + m * replicas)
    }

    /// Waits until every running node sees `node` as a master and the cluster as `ok` (after
    /// a failover, or a master's death that its replica takes over from).
    pub fn wait_promoted(&self, node: &RedisServer) -> io::Result<()> {
        let id = self.node_id(node)?;
        // Done when every running node sees the replica as a master and the cluster as ok.
        self.wait("the promoted node a master everywhere, state ok", |node| {
            let state = info(node, &["CLUSTER", "INFO"])?;
            let nodes = info(node, &["CLUSTER", "NODES"])?;
            let promoted = nodes.lines().any(|line| {
                let mut fields = line.split_whitespace();
                fields.next() == Some(id.as_str())
                    && fields.nth(1).is_some_and(|flags| flags.contains("master"))
            });
            Ok(promoted && state.contains("cluster_state:ok"))
        })
    }
}
