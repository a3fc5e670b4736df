//! The contenders behind one interface: fencelock, the raw baselines (unfenced and fenced),
//! rslock and redlock.
//!
//! Every contender takes the same logical lock names and the same lease. fencelock stores a
//! lock `NAME` under `fencelock:{NAME}`; the others use `NAME` as the key.
//!
//! `library` names the contenders, `raw` holds the raw baselines (one server, and Redlock over
//! several), and this module dispatches each operation to the contender's own client.

mod library;
mod raw;

#[cfg(feature = "peers")]
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{BenchError, Result};

pub use library::Library;
pub(crate) use raw::{RAW_POLL, Raw, RawHeld, RawRedlock};

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
