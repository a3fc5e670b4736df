//! The raw baselines: no library, `SET NX PX` and compare-and-delete scripts by `EVALSHA` on
//! one server (unfenced and fenced), and the same over several instances (Redlock).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use crate::error::{BenchError, Result};

/// How often the raw baseline retries `SET NX` while the lock is held (it has no notification;
/// a fixed short poll is what a hand-written lock usually does).
pub(crate) const RAW_POLL: Duration = Duration::from_millis(1);

const RAW_RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
const RAW_FENCED_ACQUIRE: &str = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('incr', KEYS[2]) end return 0";
const RAW_EXTEND: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

/// The raw baseline on one server: one multiplexed connection, scripts run by SHA.
#[derive(Clone)]
pub(crate) struct Raw {
    conn: MultiplexedConnection,
    release: Arc<redis::Script>,
    extend: Arc<redis::Script>,
    /// The fenced acquire script (`raw-fenced`); `None`: a plain `SET NX PX` (`raw`).
    fenced: Option<Arc<redis::Script>>,
    tokens: Arc<TokenSource>,
}

/// Owner tokens for the raw baseline: 128 random bits drawn once, plus a counter. Unique and
/// unguessable enough for a baseline, and free of a system call per acquisition.
struct TokenSource {
    prefix: String,
    next: AtomicU64,
}

impl TokenSource {
    fn new() -> Result<Self> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)
            .map_err(|e| BenchError::Bench(format!("the OS random source failed: {e}")))?;
        let prefix = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(TokenSource {
            prefix,
            next: AtomicU64::new(0),
        })
    }

    fn next(&self) -> String {
        format!(
            "{}-{}",
            self.prefix,
            self.next.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// A held raw lock.
pub(crate) struct RawHeld {
    key: String,
    token: String,
}

impl Raw {
    pub(crate) async fn connect_fenced(url: &str) -> Result<Raw> {
        let mut raw = Raw::connect(url).await?;
        let script = Arc::new(redis::Script::new(RAW_FENCED_ACQUIRE));
        script
            .prepare_invoke()
            .load_async(&mut raw.conn.clone())
            .await
            .map_err(|e| BenchError::redis(format!("raw-fenced: SCRIPT LOAD on {url}"), e))?;
        raw.fenced = Some(script);
        Ok(raw)
    }

    pub(crate) async fn connect(url: &str) -> Result<Raw> {
        let client = redis::Client::open(url)
            .map_err(|e| BenchError::redis(format!("raw: opening {url}"), e))?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| BenchError::redis(format!("raw: connecting to {url}"), e))?;
        let raw = Raw {
            conn,
            release: Arc::new(redis::Script::new(RAW_RELEASE)),
            extend: Arc::new(redis::Script::new(RAW_EXTEND)),
            fenced: None,
            tokens: Arc::new(TokenSource::new()?),
        };
        // The baseline is the physical limit: its scripts are loaded before anything is timed.
        for script in [&raw.release, &raw.extend] {
            script
                .prepare_invoke()
                .load_async(&mut raw.conn.clone())
                .await
                .map_err(|e| BenchError::redis(format!("raw: SCRIPT LOAD on {url}"), e))?;
        }
        Ok(raw)
    }

    /// One `SET key token NX PX ttl` (raw-fenced: with the `INCR` of `key:fence`, in one
    /// script).
    pub(crate) async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<RawHeld>> {
        let token = self.tokens.next();
        let granted = match &self.fenced {
            None => set_nx(&mut self.conn.clone(), key, &token, ttl)
                .await
                .map_err(|e| BenchError::redis(format!("raw: SET {key} NX PX"), e))?,
            Some(script) => {
                let fence: u64 = script
                    .key(key)
                    .key(format!("{key}:fence"))
                    .arg(&token)
                    .arg(millis(ttl))
                    .invoke_async(&mut self.conn.clone())
                    .await
                    .map_err(|e| BenchError::redis(format!("raw-fenced: acquiring {key}"), e))?;
                fence > 0
            }
        };
        Ok(granted.then(|| RawHeld {
            key: key.to_owned(),
            token,
        }))
    }

    /// Compare-and-delete by `EVALSHA`.
    pub(crate) async fn release(&self, held: RawHeld) -> Result<bool> {
        let deleted: i64 = self
            .release
            .key(&held.key)
            .arg(&held.token)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| BenchError::redis(format!("raw: releasing {}", held.key), e))?;
        Ok(deleted == 1)
    }

    /// Re-arms many leases in one pipeline of compare-and-pexpire scripts (one round trip).
    /// Returns how many were still held.
    pub(crate) async fn extend_many(&self, held: &[RawHeld], ttl: Duration) -> Result<usize> {
        let millis = millis(ttl);
        let build = || {
            let mut pipe = redis::pipe();
            for h in held {
                pipe.cmd("EVALSHA")
                    .arg(self.extend.get_hash())
                    .arg(1)
                    .arg(&h.key)
                    .arg(&h.token)
                    .arg(millis);
            }
            pipe
        };
        let mut conn = self.conn.clone();
        let replies: redis::RedisResult<Vec<i64>> = build().query_async(&mut conn).await;
        let replies = match replies {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.extend
                    .prepare_invoke()
                    .load_async(&mut conn)
                    .await
                    .map_err(|e| BenchError::redis("raw: SCRIPT LOAD of extend", e))?;
                build().query_async(&mut conn).await
            }
            other => other,
        }
        .map_err(|e| BenchError::redis("raw: renewal pipeline", e))?;
        Ok(replies.iter().filter(|r| **r == 1).count())
    }
}

async fn set_nx(
    conn: &mut MultiplexedConnection,
    key: &str,
    token: &str,
    ttl: Duration,
) -> redis::RedisResult<bool> {
    let reply: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(millis(ttl))
        .query_async(conn)
        .await?;
    Ok(reply.is_some())
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The raw baseline over N independent instances (Redlock): requests go to every instance in
/// parallel, each bounded by a per-instance timeout; the caller continues as soon as a majority
/// answered (the stragglers' replies are dropped).
#[derive(Clone)]
pub(crate) struct RawRedlock {
    instances: Vec<Raw>,
    timeout: Duration,
    drift_factor: f64,
}

impl RawRedlock {
    pub(crate) async fn connect(urls: &[String], timeout: Duration) -> Result<RawRedlock> {
        let mut instances = Vec::with_capacity(urls.len());
        for url in urls {
            instances.push(Raw::connect(url).await?);
        }
        Ok(RawRedlock {
            instances,
            timeout,
            drift_factor: 0.01,
        })
    }

    fn quorum(&self) -> usize {
        self.instances.len() / 2 + 1
    }

    pub(crate) async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<RawHeld>> {
        let Some(first) = self.instances.first() else {
            return Err(BenchError::Bench("raw-redlock: no instances".into()));
        };
        let token = first.tokens.next();
        let started = Instant::now();
        let mut pending: FuturesUnordered<_> = self
            .instances
            .iter()
            .map(|raw| {
                let mut conn = raw.conn.clone();
                let token = token.as_str();
                async move {
                    tokio::time::timeout(self.timeout, set_nx(&mut conn, key, token, ttl))
                        .await
                        .ok()
                        .and_then(|r| r.ok())
                        .unwrap_or(false)
                }
            })
            .collect();
        let (mut granted, mut answered) = (0, 0);
        while let Some(ok) = pending.next().await {
            answered += 1;
            granted += usize::from(ok);
            if granted >= self.quorum() || answered - granted > self.instances.len() - self.quorum()
            {
                break;
            }
        }
        drop(pending);
        let drift = ttl.mul_f64(self.drift_factor) + Duration::from_millis(2);
        let held = RawHeld {
            key: key.to_owned(),
            token,
        };
        if granted >= self.quorum() && started.elapsed() + drift < ttl {
            return Ok(Some(held));
        }
        self.release(held).await?;
        Ok(None)
    }

    pub(crate) async fn release(&self, held: RawHeld) -> Result<bool> {
        let mut pending: FuturesUnordered<_> = self
            .instances
            .iter()
            .map(|raw| {
                let mut conn = raw.conn.clone();
                let held = &held;
                async move {
                    let mut invocation = raw.release.prepare_invoke();
                    invocation.key(&held.key).arg(&held.token);
                    let call = invocation.invoke_async::<i64>(&mut conn);
                    tokio::time::timeout(self.timeout, call)
                        .await
                        .ok()
                        .and_then(|r| r.ok())
                }
            })
            .collect();
        let (mut answered, mut deleted) = (0, 0);
        while let Some(reply) = pending.next().await {
            if let Some(n) = reply {
                answered += 1;
                deleted += usize::from(n == 1);
            }
            if answered >= self.quorum() {
                break;
            }
        }
        Ok(deleted >= self.quorum())
    }
}
