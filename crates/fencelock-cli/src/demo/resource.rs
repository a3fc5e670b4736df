//! The resource the demo's lock protects: a hash in Redis written only through
//! `fenced_write.lua`, which refuses writes that carry a fence older than the newest it has seen.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, Script};

use crate::error::CliError;
use crate::redis_url;

/// The resource (a hash). The braces keep both keys in one Redis Cluster slot.
pub const RESOURCE_KEY: &str = "fencelock-demo:{resource}";
/// The log of accepted writes (a list of `fence:writer`).
pub const LOG_KEY: &str = "fencelock-demo:{resource}:log";

/// The time limit for connecting and for each command.
const TIMEOUT: Duration = Duration::from_secs(2);
/// Extra time a reply gets once the limit has passed; see [`within`].
const GRACE: Duration = Duration::from_millis(200);

/// A connection to the protected resource.
pub struct Resource {
    conn: MultiplexedConnection,
    script: Script,
    server: String,
    url: String,
}

/// What the resource said to one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The write was accepted.
    pub accepted: bool,
    /// The highest fence the resource holds now.
    pub current: u64,
    /// The worker that wrote with that fence.
    pub by: u32,
}

/// The resource's own record of what happened to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRecord {
    /// Writes accepted.
    pub accepted: u64,
    /// Writes refused.
    pub refused: u64,
    /// Accepted writes in the order the resource accepted them: (fence, writer).
    pub log: Vec<(u64, u32)>,
}

impl Resource {
    /// Connects (within a time limit) and checks the server answers `PING`.
    pub async fn connect(url: &str) -> Result<Self, CliError> {
        let server = redis_url::server_of(url).map_err(CliError::InvalidUrl)?;
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
                    reason: format!("no connection within {:?}", TIMEOUT * 2),
                });
            }
        };
        let mut resource = Resource {
            conn,
            script: Script::new(include_str!("fenced_write.lua")),
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

    /// Empties the resource and its log.
    pub async fn reset(&mut self) -> Result<(), CliError> {
        let _: i64 = self
            .query(redis::cmd("DEL").arg(RESOURCE_KEY).arg(LOG_KEY), "DEL")
            .await?;
        Ok(())
    }

    /// Writes `value` as `writer` with `fence`; the resource refuses it if it has seen a larger
    /// fence.
    pub async fn write(
        &mut self,
        fence: u64,
        writer: u32,
        value: &str,
    ) -> Result<WriteOutcome, CliError> {
        let mut invocation = self.script.key(RESOURCE_KEY);
        invocation.key(LOG_KEY).arg(fence).arg(writer).arg(value);
        let reply: Result<(i64, String, String), RedisError> =
            within(invocation.invoke_async(&mut self.conn)).await;
        let (accepted, current, by) = reply
            .map_err(|e| CliError::from_redis(&self.server, &self.url, "the fenced write", &e))?;
        let malformed = || CliError::Redis {
            server: self.server.clone(),
            what: "the fenced write",
            reason: format!("unexpected reply ({accepted}, {current:?}, {by:?})"),
        };
        Ok(WriteOutcome {
            accepted: accepted == 1,
            current: current.parse().map_err(|_| malformed())?,
            by: if by.is_empty() {
                0
            } else {
                by.parse().map_err(|_| malformed())?
            },
        })
    }

    /// The resource's own counters and its log of accepted writes.
    pub async fn record(&mut self) -> Result<ResourceRecord, CliError> {
        let (accepted, refused): (Option<u64>, Option<u64>) = self
            .query(
                redis::cmd("HMGET")
                    .arg(RESOURCE_KEY)
                    .arg("accepted")
                    .arg("refused"),
                "HMGET",
            )
            .await?;
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
        Ok(ResourceRecord {
            accepted: accepted.unwrap_or(0),
            refused: refused.unwrap_or(0),
            log,
        })
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
                format!("no reply within {TIMEOUT:?}"),
            )))
        })
}
