//! A Sentinel-managed master of real processes on free ports: one master, its replicas, and
//! sentinels that monitor it (`down-after-milliseconds` 1000, so a failover takes seconds).
//! Every process is a [`RedisServer`], so the usual faults apply; [`SentinelSet::failover`]
//! asks the sentinels for a graceful failover, [`SentinelSet::wait_new_master`] waits for one.

use std::io;
use std::time::{Duration, Instant};

use crate::RedisServer;

/// The name the sentinels know the master by.
pub const MASTER_NAME: &str = "fencelock-master";
/// How long the set may take to form, or a failover to finish.
const LIMIT: Duration = Duration::from_secs(30);

/// A running Sentinel set; its processes are stopped when it is dropped.
#[derive(Debug)]
pub struct SentinelSet {
    /// The data nodes: the first master first, then its replicas.
    pub nodes: Vec<RedisServer>,
    /// The sentinels.
    pub sentinels: Vec<RedisServer>,
}

fn text(value: redis::Value) -> String {
    match value {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => format!("{other:?}"),
    }
}

impl SentinelSet {
    /// Starts a master, `replicas` replicas and `sentinels` sentinels (quorum: a majority of
    /// them), and waits until every sentinel sees every replica and every other sentinel.
    pub fn start(replicas: usize, sentinels: usize) -> io::Result<SentinelSet> {
        // No 5 s wait for more replicas before a full sync (the diskless default).
        let no_delay = ["--repl-diskless-sync-delay", "0"];
        let master = RedisServer::start_with_args(&no_delay)?;
        let port = master.port().to_string();
        let mut nodes = vec![master];
        for _ in 0..replicas {
            nodes.push(RedisServer::start_with_args(&[
                "--replicaof",
                "127.0.0.1",
                &port,
                no_delay[0],
                no_delay[1],
            ])?);
        }
        let quorum = sentinels / 2 + 1;
        let config = format!(
            "sentinel monitor {MASTER_NAME} 127.0.0.1 {port} {quorum}\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 10000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n"
        );
        let mut started = Vec::with_capacity(sentinels);
        for _ in 0..sentinels {
            started.push(RedisServer::start_sentinel(&config)?);
        }
        let set = SentinelSet {
            nodes,
            sentinels: started,
        };
        set.wait(|set| {
            // Every replica synced with the master.
            for replica in &set.nodes[1..] {
                let info = text(
                    replica
                        .cmd(&["INFO", "replication"])
                        .map_err(io::Error::other)?,
                );
                if !info.contains("master_link_status:up") {
                    return Ok(false);
                }
            }
            for sentinel in &set.sentinels {
                let info = text(
                    sentinel
                        .cmd(&["INFO", "sentinel"])
                        .map_err(io::Error::other)?,
                );
                let wanted = format!("slaves={replicas},sentinels={sentinels}");
                if !info.contains(&wanted) {
                    return Ok(false);
                }
            }
            Ok(true)
        })?;
        Ok(set)
    }

    /// The sentinels' URLs.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The data node the first running sentinel names as master now.
    pub fn master(&self) -> io::Result<&RedisServer> {
        let port = self.named_master_port()?;
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .ok_or_else(|| io::Error::other(format!("the sentinels name port {port}")))
    }

    fn named_master_port(&self) -> io::Result<u16> {
        let sentinel = self
            .sentinels
            .iter()
            .find(|s| s.is_running())
            .ok_or_else(|| io::Error::other("no sentinel is running"))?;
        let reply = sentinel
            .cmd(&["SENTINEL", "get-master-addr-by-name", MASTER_NAME])
            .map_err(io::Error::other)?;
        let (_, port): (String, u16) = redis::from_redis_value(reply).map_err(io::Error::other)?;
        Ok(port)
    }

    /// The index in [`SentinelSet::nodes`] of the data node the sentinels name as master now.
    pub fn master_index(&self) -> io::Result<usize> {
        let port = self.named_master_port()?;
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .ok_or_else(|| io::Error::other(format!("the sentinels name port {port}")))
    }

    /// A graceful `SENTINEL FAILOVER`, then waits until a replica is the master everywhere.
    pub fn failover(&self) -> io::Result<&RedisServer> {
        let old = self.named_master_port()?;
        let sentinel = self
            .sentinels
            .iter()
            .find(|s| s.is_running())
            .ok_or_else(|| io::Error::other("no sentinel is running"))?;
        sentinel
            .cmd(&["SENTINEL", "FAILOVER", MASTER_NAME])
            .map_err(io::Error::other)?;
        self.wait_new_master(old)
    }

    /// Waits until every running sentinel names a master other than the one on `old_port`, and
    /// that server says it is a master.
    pub fn wait_new_master(&self, old_port: u16) -> io::Result<&RedisServer> {
        self.wait(|set| {
            let mut named = None;
            for sentinel in set.sentinels.iter().filter(|s| s.is_running()) {
                let reply = sentinel
                    .cmd(&["SENTINEL", "get-master-addr-by-name", MASTER_NAME])
                    .map_err(io::Error::other)?;
                let (_, port): (String, u16) =
                    redis::from_redis_value(reply).map_err(io::Error::other)?;
                if port == old_port || named.is_some_and(|p| p != port) {
                    return Ok(false);
                }
                named = Some(port);
            }
            let Some(node) = named.and_then(|p| set.nodes.iter().find(|n| n.port() == p)) else {
                return Ok(false);
            };
            let role = text(
                node.cmd(&["INFO", "replication"])
                    .map_err(io::Error::other)?,
            );
            Ok(role.contains("role:master"))
        })?;
        self.master()
    }

    fn wait(&self, ready: impl Fn(&SentinelSet) -> io::Result<bool>) -> io::Result<()> {
        let started = Instant::now();
        loop {
            match ready(self) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) if started.elapsed() > LIMIT => return Err(e),
                Err(_) => {}
            }
            if started.elapsed() > LIMIT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the Sentinel set did not settle in time",
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
