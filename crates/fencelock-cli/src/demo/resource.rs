//! The resource the demo's lock protects: a hash and a log in Redis, written only through the
//! library's fenced store ([`fencelock::fenced::FencedStore`]), which refuses writes that carry a
//! fence older than the newest it has accepted.

use std::time::Duration;

use fencelock::fenced::{FencedStore, Writes};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError};

use crate::error::CliError;
use crate::redis_url;

/// The resource's name in the fenced store: the lock's name (one resource, one lock).
pub const RESOURCE_NAME: &str = super::LOCK_NAME;
/// The resource (a hash of `fence`, `writer`, `value`). The braces keep every key of the
/// resource, its fence key included, in one Redis Cluster slot.
pub const RESOURCE_KEY: &str = "fencelock-demo:{demo/report}";
/// The log of accepted writes (a list of `fence:writer`).
pub const LOG_KEY: &str = "fencelock-demo:{demo/report}:log";

/// The time limit for connecting and for each read.
const TIMEOUT: Duration = Duration::from_secs(2);
/// Extra time a reply gets once the limit has passed; see [`within`].
const GRACE: Duration = Duration::from_millis(200);

/// A connection to the protected resource.
pub struct Resource {
    store: FencedStore,
    /// For reads and the reset; every write goes through `store`.
    conn: MultiplexedConnection,
    server: String,
    url: String,
}

/// What the resource said to one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The write was accepted.
    pub accepted: bool,
    /// The largest fence the resource has accepted now.
    pub current: u64,
    /// The worker that last wrote (0 if unknown).
    pub by: u32,
}

/// The resource's own record of what happened to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRecord {
    /// The largest fence the fenced store accepted.
    pub fence: u64,
    /// Accepted writes in the order the resource accepted them: (fence, writer).
    pub log: Vec<(u64, u32)>,
}

impl Resource {
    /// Connects (within a time limit) and checks the server answers `PING`.
    pub async fn connect(url: &str) -> Result<Self, CliError> {
        let server = redis_url::server_of(url).map_err(CliError::InvalidUrl)?;
        let store = fencelock::Client::open(url)?.fenced_store(RESOURCE_NAME)?;
        let client = redis::Client::open(url)
            .map_err(|e| CliError::InvalidUrl(redis_url::redact(&e.to_string(), url)))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            // Replies are timed by `within`, which tolerates a pause of this process.
            .set_response_timeout(None);
        let connecting = client.get_multiplexed_async_connection_with_config(&config);
        let conn = match tokio::time::timeout(TIMEOUT * 2, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(err)) => return Err(CliError::from_redis(&server, url, "the connection", &err)),
            Err(_) => {
                return Err(CliError::Unreachable {
                    server,
                    reason: format!(
                        "no connection within {}",
                        crate::duration::format_rounded(TIMEOUT * 2)
                    ),
                });
            }
        };
        let mut resource = Resource {
            store,
            conn,
            server,
            url: url.to_owned(),
        };
        let _: String = resource.query(&redis::cmd("PING"), "PING").await?;
        Ok(resource)
    }

    /// `host:port` of the server.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Empties the resource and its log, and forgets the fences it accepted (the demo's own
    /// keys only: a real resource's fence key is never reset while its lock is in use).
    pub async fn reset(&mut self) -> Result<(), CliError> {
        let fence_key = self.store.fence_key().to_owned();
        let _: i64 = self
            .query(
                redis::cmd("DEL")
                    .arg(RESOURCE_KEY)
                    .arg(LOG_KEY)
                    .arg(fence_key),
                "DEL",
            )
            .await?;
        Ok(())
    }

    /// Writes `value` as `writer` with `fence`; the resource refuses it (and changes nothing)
    /// if it has accepted a larger fence.
    pub async fn write(
        &mut self,
        fence: u64,
        writer: u32,
        value: &str,
    ) -> Result<WriteOutcome, CliError> {
        let writes = Writes::new()
            .hset(RESOURCE_KEY, "fence", fence.to_string())
            .hset(RESOURCE_KEY, "writer", writer.to_string())
            .hset(RESOURCE_KEY, "value", value)
            .rpush(LOG_KEY, format!("{fence}:{writer}"));
        match self.store.apply(fence, &writes).await {
            Ok(current) => Ok(WriteOutcome {
                accepted: true,
                current,
                by: writer,
            }),
            Err(fencelock::Error::Fenced { accepted, .. }) => {
                let by: Option<u32> = self
                    .query(redis::cmd("HGET").arg(RESOURCE_KEY).arg("writer"), "HGET")
                    .await?;
                Ok(WriteOutcome {
                    accepted: false,
                    current: accepted,
                    by: by.unwrap_or(0),
                })
            }
            Err(err) => Err(err.into()),
        }
    }

    /// The largest fence the resource accepted, and its log of accepted writes.
    pub async fn record(&mut self) -> Result<ResourceRecord, CliError> {
        let fence = self.store.accepted().await?;
        let entries: Vec<String> = self
            .query(redis::cmd("LRANGE").arg(LOG_KEY).arg(0).arg(-1), "LRANGE")
            .await?;
        let mut log = Vec::with_capacity(entries.len());
        for entry in entries {
            let parsed = entry
                .split_once(':')
                .and_then(|(f, w)| Some((f.parse().ok()?, w.parse().ok()?)));
            let Some(item) = parsed else {
                return Err(CliError::Redis {
                    server: self.server.clone(),
                    what: "LRANGE",
                    reason: format!("unexpected log entry {entry:?} in {LOG_KEY}"),
                });
            };
            log.push(item);
        }
        Ok(ResourceRecord { fence, log })
    }

    async fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
        what: &'static str,
    ) -> Result<T, CliError> {
        let reply = within(cmd.query_async(&mut self.conn)).await;
        reply.map_err(|e| CliError::from_redis(&self.server, &self.url, what, &e))
    }
}

/// Runs a command with the time limit [`TIMEOUT`], plus a short [`GRACE`] counted from the
/// moment the limit is noticed.
///
/// The grace matters in this demo: when a worker is frozen (SIGSTOP) with a command in flight,
/// the reply arrives while it is frozen, and on waking the timer has long expired before the
/// connection's reader has had a chance to hand the reply over. Without the grace, the pause of
/// this very process would be blamed on the server.
async fn within<T>(fut: impl Future<Output = redis::RedisResult<T>>) -> redis::RedisResult<T> {
    let mut fut = std::pin::pin!(fut);
    if let Ok(result) = tokio::time::timeout(TIMEOUT, &mut fut).await {
        return result;
    }
    tokio::time::timeout(GRACE, &mut fut)
        .await
        .unwrap_or_else(|_| {
            Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no reply within {}",
                    crate::duration::format_rounded(TIMEOUT)
                ),
            )))
        })
}
