//! The contenders behind one interface: fencelock, the raw baselines (unfenced and fenced),
//! rslock and redlock.
//!
//! Every contender takes the same logical lock names and the same lease. fencelock stores a
//! lock `NAME` under `fencelock:{NAME}`; the others use `NAME` as the key.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::{BenchError, Result};

/// A contender in the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Library {
    /// This project's library, with its default options (only the lease is set).
    Fencelock,
    /// No library: `SET k tok NX PX` and a compare-and-delete script by `EVALSHA` over one
    /// multiplexed connection. Two round trips per cycle: the physical limit.
    Raw,
    /// No library, but fenced: one `EVALSHA` of `SET k tok NX PX ttl` + `INCR` of a fence key,
    /// and the same compare-and-delete. The least any fenced Redis lock can do (its fences do
    /// not survive a lost counter, and it checks no types).
    #[serde(rename = "raw-fenced")]
    RawFenced,
    /// The `rslock` crate (async, Redlock algorithm, default retry settings).
    Rslock,
    /// The `redlock` crate (synchronous, run on Tokio's blocking pool).
    Redlock,
    /// node-redlock (the `redlock` npm package on ioredis), run by `node` in a child process:
    /// W4 only (it is the Redlock client the W4 goal names; see `node_redlock.rs`).
    #[serde(rename = "node-redlock")]
    NodeRedlock,
}

impl Library {
    /// Every contender, in report order. The peers are present only with the `peers` feature.
    pub fn all() -> Vec<Library> {
        let mut all = vec![Library::Fencelock, Library::Raw, Library::RawFenced];
        if cfg!(feature = "peers") {
            all.extend([Library::Rslock, Library::Redlock]);
        }
        if Library::NodeRedlock.available() {
            all.push(Library::NodeRedlock);
        }
        all
    }

    /// The lower-case name used in the report and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Library::Fencelock => "fencelock",
            Library::Raw => "raw",
            Library::RawFenced => "raw-fenced",
            Library::Rslock => "rslock",
            Library::Redlock => "redlock",
            Library::NodeRedlock => "node-redlock",
        }
    }

    /// Whether this build can run the contender.
    pub fn available(self) -> bool {
        match self {
            Library::Fencelock | Library::Raw | Library::RawFenced => true,
            Library::Rslock | Library::Redlock => cfg!(feature = "peers"),
            Library::NodeRedlock => crate::node_redlock::installed().is_ok(),
        }
    }

    /// Whether the contender is measured on one server (W1–W3, W5): all but node-redlock,
    /// which is here for W4.
    pub fn single_server(self) -> bool {
        self != Library::NodeRedlock
    }
}

impl std::fmt::Display for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Library {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "fencelock" => Ok(Library::Fencelock),
            "raw" => Ok(Library::Raw),
            "raw-fenced" => Ok(Library::RawFenced),
            "rslock" => Ok(Library::Rslock),
            "redlock" => Ok(Library::Redlock),
            "node-redlock" => Ok(Library::NodeRedlock),
            other => Err(format!(
                "unknown library {other:?} (expected fencelock, raw, raw-fenced, rslock, redlock or node-redlock)"
            )),
        }
    }
}

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

/// One contender, connected.
#[derive(Clone)]
pub(crate) enum Locker {
    Fencelock(fencelock::Client),
    Raw(Raw),
    RawRedlock(RawRedlock),
    #[cfg(feature = "peers")]
    Rslock(rslock::LockManager),
    #[cfg(feature = "peers")]
    Redlock(Arc<redlock::RedLock>),
}

/// A lock held by one of the contenders.
pub(crate) enum Held {
    Fencelock(fencelock::LockGuard),
    Raw(RawHeld),
    #[cfg(feature = "peers")]
    Rslock(rslock::Lock),
    #[cfg(feature = "peers")]
    Redlock {
        resource: Vec<u8>,
        val: Vec<u8>,
    },
}

impl Locker {
    /// A contender for the single server at `url`, connected (and warmed by one cycle on a
    /// throw-away key, so that no measured cycle pays for the connection or a script load).
    pub(crate) async fn connect(library: Library, url: &str, ttl: Duration) -> Result<Locker> {
        let locker = match library {
            Library::Fencelock => Locker::Fencelock(
                fencelock::Client::open(url)
                    .map_err(|e| BenchError::fencelock(format!("fencelock: opening {url}"), e))?,
            ),
            Library::Raw => Locker::Raw(Raw::connect(url).await?),
            Library::RawFenced => Locker::Raw(Raw::connect_fenced(url).await?),
            Library::Rslock => Self::rslock(&[url.to_owned()])?,
            Library::Redlock => Self::redlock(&[url.to_owned()])?,
            Library::NodeRedlock => {
                return Err(BenchError::Bench(
                    "not measured: node-redlock is a W4 (Redlock) contender here".into(),
                ));
            }
        };
        locker.warm_up(ttl).await?;
        Ok(locker)
    }

    #[cfg(feature = "peers")]
    pub(crate) fn rslock(urls: &[String]) -> Result<Locker> {
        let clients = urls
            .iter()
            .map(|u| {
                redis::Client::open(u.as_str())
                    .map_err(|e| BenchError::redis(format!("rslock: opening {u}"), e))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Locker::Rslock(rslock::LockManager::from_clients(clients)))
    }

    #[cfg(not(feature = "peers"))]
    pub(crate) fn rslock(_urls: &[String]) -> Result<Locker> {
        Err(BenchError::Bench(
            "rslock is not built in (feature `peers` is off)".into(),
        ))
    }

    #[cfg(feature = "peers")]
    pub(crate) fn redlock(urls: &[String]) -> Result<Locker> {
        // `RedLock::new` only parses the URLs (no connection is made); ours are well-formed.
        Ok(Locker::Redlock(Arc::new(redlock::RedLock::new(
            urls.to_vec(),
        ))))
    }

    #[cfg(not(feature = "peers"))]
    pub(crate) fn redlock(_urls: &[String]) -> Result<Locker> {
        Err(BenchError::Bench(
            "redlock is not built in (feature `peers` is off)".into(),
        ))
    }

    pub(crate) async fn warm_up(&self, ttl: Duration) -> Result<()> {
        for i in 0..3 {
            self.cycle(&format!("bench:warm-up:{i}"), ttl).await?;
        }
        Ok(())
    }

    /// One attempt, no waiting: `Ok(None)` if another owner holds the lock.
    pub(crate) async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<Held>> {
        match self {
            Locker::Fencelock(client) => {
                match client.lock(key).ttl(ttl).no_wait().acquire().await {
                    Ok(guard) => Ok(Some(Held::Fencelock(guard))),
                    Err(fencelock::Error::Busy { .. }) => Ok(None),
                    Err(e) => Err(BenchError::fencelock(
                        format!("fencelock: acquiring {key}"),
                        e,
                    )),
                }
            }
            Locker::Raw(raw) => Ok(raw.try_acquire(key, ttl).await?.map(Held::Raw)),
            Locker::RawRedlock(raw) => Ok(raw.try_acquire(key, ttl).await?.map(Held::Raw)),
            #[cfg(feature = "peers")]
            Locker::Rslock(manager) => match manager.lock(key.as_bytes(), ttl).await {
                Ok(lock) => Ok(Some(Held::Rslock(lock))),
                Err(rslock::LockError::Unavailable) => Ok(None),
                Err(e) => Err(BenchError::peer("rslock", format!("lock {key}"), e)),
            },
            #[cfg(feature = "peers")]
            Locker::Redlock(rl) => {
                let rl = Arc::clone(rl);
                let resource = key.as_bytes().to_vec();
                let ttl_ms = usize::try_from(ttl.as_millis()).unwrap_or(usize::MAX);
                tokio::task::spawn_blocking(move || redlock_lock(&rl, &resource, ttl_ms))
                    .await
                    .map_err(|e| BenchError::join("redlock lock", e))?
            }
        }
    }

    /// Waits for the lock until `deadline` with the contender's own waiting mechanism:
    /// fencelock's release notifications, the raw baseline's [`RAW_POLL`] loop, rslock's and
    /// redlock's retry loops (3 tries, random 0–200 ms apart, repeated — what their own
    /// `acquire` does, here bounded by the deadline). `Ok(None)` if the deadline passed.
    pub(crate) async fn acquire_wait(
        &self,
        key: &str,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Option<Held>> {
        match self {
            Locker::Fencelock(client) => {
                let limit = deadline.saturating_duration_since(Instant::now());
                match client.lock(key).ttl(ttl).wait_up_to(limit).acquire().await {
                    Ok(guard) => Ok(Some(Held::Fencelock(guard))),
                    Err(fencelock::Error::TimedOut { .. } | fencelock::Error::Busy { .. }) => {
                        Ok(None)
                    }
                    Err(e) => Err(BenchError::fencelock(
                        format!("fencelock: acquiring {key}"),
                        e,
                    )),
                }
            }
            Locker::Raw(_) | Locker::RawRedlock(_) => loop {
                if let Some(held) = self.try_acquire(key, ttl).await? {
                    return Ok(Some(held));
                }
                if Instant::now() + RAW_POLL > deadline {
                    return Ok(None);
                }
                tokio::time::sleep(RAW_POLL).await;
            },
            #[cfg(feature = "peers")]
            Locker::Rslock(_) => loop {
                // `lock` itself retries 3 times, 0-200 ms apart.
                if let Some(held) = self.try_acquire(key, ttl).await? {
                    return Ok(Some(held));
                }
                if Instant::now() >= deadline {
                    return Ok(None);
                }
            },
            #[cfg(feature = "peers")]
            Locker::Redlock(rl) => {
                let rl = Arc::clone(rl);
                let resource = key.as_bytes().to_vec();
                let ttl_ms = usize::try_from(ttl.as_millis()).unwrap_or(usize::MAX);
                let deadline = deadline.into_std();
                tokio::task::spawn_blocking(move || {
                    loop {
                        if let Some(held) = redlock_lock(&rl, &resource, ttl_ms)? {
                            return Ok(Some(held));
                        }
                        if std::time::Instant::now() >= deadline {
                            return Ok(None);
                        }
                    }
                })
                .await
                .map_err(|e| BenchError::join("redlock lock", e))?
            }
        }
    }

    /// Releases a held lock. `Ok(true)` if it was still held (rslock and redlock do not say:
    /// always `true`).
    pub(crate) async fn release(&self, held: Held) -> Result<bool> {
        match (self, held) {
            (_, Held::Fencelock(guard)) => {
                let name = guard.name().to_owned();
                guard
                    .release()
                    .await
                    .map_err(|e| BenchError::fencelock(format!("fencelock: releasing {name}"), e))
            }
            (Locker::Raw(raw), Held::Raw(held)) => raw.release(held).await,
            (Locker::RawRedlock(raw), Held::Raw(held)) => raw.release(held).await,
            #[cfg(feature = "peers")]
            (Locker::Rslock(manager), Held::Rslock(lock)) => {
                manager.unlock(&lock).await;
                Ok(true)
            }
            #[cfg(feature = "peers")]
            (Locker::Redlock(rl), Held::Redlock { resource, val }) => {
                let rl = Arc::clone(rl);
                tokio::task::spawn_blocking(move || {
                    redlock_unlock(&rl, resource, val);
                    Ok(true)
                })
                .await
                .map_err(|e| BenchError::join("redlock unlock", e))?
            }
            #[allow(unreachable_patterns)]
            _ => Err(BenchError::Bench(
                "a lock was released through a different contender".into(),
            )),
        }
    }

    /// Acquires `key` (which must be free) and releases it at once. redlock does both in one
    /// trip to the blocking pool.
    pub(crate) async fn cycle(&self, key: &str, ttl: Duration) -> Result<()> {
        #[cfg(feature = "peers")]
        if let Locker::Redlock(rl) = self {
            let rl = Arc::clone(rl);
            let resource = key.as_bytes().to_vec();
            let ttl_ms = usize::try_from(ttl.as_millis()).unwrap_or(usize::MAX);
            let key = key.to_owned();
            return tokio::task::spawn_blocking(move || {
                match redlock_lock(&rl, &resource, ttl_ms)? {
                    Some(Held::Redlock { resource, val }) => {
                        redlock_unlock(&rl, resource, val);
                        Ok(())
                    }
                    _ => Err(not_granted(&key)),
                }
            })
            .await
            .map_err(|e| BenchError::join("redlock cycle", e))?;
        }
        let held = self
            .try_acquire(key, ttl)
            .await?
            .ok_or_else(|| not_granted(key))?;
        self.release(held).await?;
        Ok(())
    }
}

fn not_granted(key: &str) -> BenchError {
    BenchError::Bench(format!(
        "lock {key} was not granted although nobody else uses it"
    ))
}

#[cfg(feature = "peers")]
fn redlock_lock(rl: &redlock::RedLock, resource: &[u8], ttl_ms: usize) -> Result<Option<Held>> {
    match rl.lock(resource, ttl_ms) {
        Ok(Some(lock)) => Ok(Some(Held::Redlock {
            resource: lock.resource,
            val: lock.val,
        })),
        Ok(None) => Ok(None),
        Err(e) => Err(BenchError::peer(
            "redlock",
            format!("lock {}", String::from_utf8_lossy(resource)),
            e,
        )),
    }
}

#[cfg(feature = "peers")]
fn redlock_unlock(rl: &redlock::RedLock, resource: Vec<u8>, val: Vec<u8>) {
    rl.unlock(&redlock::Lock {
        resource,
        val,
        validity_time: 0,
        lock_manager: rl,
    });
}
