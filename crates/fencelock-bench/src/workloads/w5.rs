//! W5, keeping many locks alive: each contender's own automatic renewal (raw: a hand-written
//! renewer), measured on a server of its own.

use std::sync::Arc;
#[cfg(feature = "peers")]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use super::Bed;
use crate::error::{BenchError, Result};
use crate::locker::{Held, Library, Locker};
use crate::report::{W5Measured, W5Row};
use crate::system;

/// W5: `count` locks held with automatic renewal (lease `ttl`) for `hold`.
pub(crate) async fn w5(
    library: Library,
    ttl: Duration,
    count: usize,
    hold: Duration,
) -> Result<W5Row> {
    let mut bed = Bed::start().await?;
    let url = bed.server.url();
    let locker = Locker::connect(library, &url, ttl).await?;
    system::reset_stats(&mut bed.admin).await?;
    let rss_before = system::resident_bytes()?;
    let keeper = Keeper::start(library, &locker, ttl, count).await?;
    let rss_after = system::resident_bytes()?;
    // Keep the acquisition burst and the first renewal round (which may have to load the
    // renewal script) out of the measured window.
    tokio::time::sleep(ttl / 2).await;
    let setup = system::counters(&mut bed.admin).await?;
    system::reset_stats(&mut bed.admin).await?;
    let cpu_before = system::process_cpu_seconds()?;
    let started = Instant::now();
    tokio::time::sleep(hold).await;
    let cpu_after = system::process_cpu_seconds()?;
    let wall = started.elapsed().as_secs_f64();
    let counters = system::counters(&mut bed.admin).await?;
    let held_in_redis = count_w5_locks(&mut bed.admin).await?;
    let still_held = keeper.finish(&locker).await?;
    let renew_scripts = counters.evalsha + counters.eval;
    let client_cpu_percent = (cpu_after - cpu_before) / wall * 100.0;
    let renewals_per_s = counters.renewals as f64 / wall;
    Ok(W5Row::new(
        library,
        W5Measured {
            locks: count,
            seconds: wall,
            renewal_commands_per_s: renew_scripts as f64 / wall,
            renewals_per_s,
            total_commands_per_s: counters.commands.saturating_sub(1) as f64 / wall,
            reads_per_s: counters.reads.saturating_sub(1) as f64 / wall,
            client_cpu_percent,
            client_cpu_us_per_renewal: cpu_us_per_renewal(client_cpu_percent, renewals_per_s),
            bytes_per_lock: rss_after.saturating_sub(rss_before) as f64 / count.max(1) as f64,
            still_held,
            held_in_redis,
            noscript_replies: setup.evalsha_failed,
        },
    ))
}

/// Client CPU per renewal, µs, from CPU in % of a core and renewals per second over the same
/// window (0 when nothing was renewed).
pub(crate) fn cpu_us_per_renewal(cpu_percent: f64, renewals_per_s: f64) -> f64 {
    if renewals_per_s > 0.0 {
        cpu_percent * 1e4 / renewals_per_s
    } else {
        0.0
    }
}

/// How many W5 lock keys exist in Redis (fence keys not counted).
async fn count_w5_locks(admin: &mut MultiplexedConnection) -> Result<usize> {
    let mut cursor: u64 = 0;
    let mut count = 0;
    // Bounded: SCAN visits each key at most a few times; 100,000 pages is far more than enough.
    for _ in 0..100_000 {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("*bench:w5:*")
            .arg("COUNT")
            .arg(1000)
            .query_async(admin)
            .await
            .map_err(|e| BenchError::redis("W5: SCAN for the lock keys", e))?;
        count += keys.iter().filter(|k| !k.ends_with(":fence")).count();
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok(count)
}

/// The locks W5 keeps alive, per contender.
enum Keeper {
    /// fencelock's guards, renewed by the client's watchdog.
    Guards(Vec<fencelock::LockGuard>),
    /// Raw locks renewed by one task: one pipeline of compare-and-pexpire scripts every third
    /// of the lease (what a hand-written watchdog does at best).
    Raw {
        stop: Arc<tokio::sync::Notify>,
        task: tokio::task::JoinHandle<Result<(Vec<crate::locker::RawHeld>, usize)>>,
    },
    /// rslock's own renewal: `LockManager::using` (one timer and one extend per lock, shortly
    /// before its validity ends).
    #[cfg(feature = "peers")]
    Using {
        stop: tokio::sync::watch::Sender<bool>,
        tasks: tokio::task::JoinSet<Result<bool>>,
    },
}

/// How many acquisitions W5 runs at once while it takes its locks.
const ACQUIRE_CONCURRENCY: usize = 64;

impl Keeper {
    async fn start(library: Library, locker: &Locker, ttl: Duration, count: usize) -> Result<Self> {
        let key = |i: usize| format!("bench:w5:{i}");
        match locker {
            Locker::Fencelock(_) | Locker::Raw(_) => {
                let mut held = Vec::with_capacity(count);
                let mut set = tokio::task::JoinSet::new();
                let mut next = 0;
                while held.len() < count {
                    while next < count && set.len() < ACQUIRE_CONCURRENCY {
                        let locker = locker.clone();
                        let name = key(next);
                        set.spawn(async move { locker.try_acquire(&name, ttl).await });
                        next += 1;
                    }
                    let Some(joined) = set.join_next().await else {
                        break;
                    };
                    let h = joined
                        .map_err(|e| BenchError::join("W5 acquire", e))??
                        .ok_or_else(|| BenchError::Bench("W5: a fresh lock was busy".into()))?;
                    held.push(h);
                }
                match locker {
                    Locker::Raw(raw) => {
                        let raw_held: Vec<_> = held
                            .into_iter()
                            .filter_map(|h| match h {
                                Held::Raw(r) => Some(r),
                                _ => None,
                            })
                            .collect();
                        let stop = Arc::new(tokio::sync::Notify::new());
                        let task = tokio::spawn(raw_renewer(
                            raw.clone(),
                            raw_held,
                            ttl,
                            Arc::clone(&stop),
                        ));
                        Ok(Keeper::Raw { stop, task })
                    }
                    _ => Ok(Keeper::Guards(
                        held.into_iter()
                            .filter_map(|h| match h {
                                Held::Fencelock(g) => Some(g),
                                _ => None,
                            })
                            .collect(),
                    )),
                }
            }
            #[cfg(feature = "peers")]
            Locker::Rslock(manager) => {
                let (stop, stopped) = tokio::sync::watch::channel(false);
                let acquired = Arc::new(AtomicUsize::new(0));
                let mut tasks = tokio::task::JoinSet::new();
                for i in 0..count {
                    let manager = manager.clone();
                    let mut stopped = stopped.clone();
                    let acquired = Arc::clone(&acquired);
                    let name = key(i);
                    tasks.spawn(async move {
                        manager
                            .using(name.as_bytes(), ttl, async || {
                                acquired.fetch_add(1, Ordering::SeqCst);
                                let _ = stopped.wait_for(|s| *s).await;
                            })
                            .await
                            .map(|()| true)
                            .or_else(|e| match e {
                                rslock::LockError::Unavailable | rslock::LockError::TtlExceeded => {
                                    Ok(false)
                                }
                                other => Err(BenchError::peer("rslock", "using", other)),
                            })
                    });
                }
                // Wait until every lock is taken (bounded).
                let deadline = Instant::now() + Duration::from_secs(60);
                while acquired.load(Ordering::SeqCst) < count {
                    if Instant::now() > deadline {
                        let _ = stop.send(true);
                        return Err(BenchError::Bench(format!(
                            "W5 rslock: only {} of {count} locks taken after 60 s",
                            acquired.load(Ordering::SeqCst)
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(Keeper::Using { stop, tasks })
            }
            _ => Err(BenchError::Bench(format!(
                "{library} has no automatic renewal to measure"
            ))),
        }
    }

    /// Stops renewing, releases everything; returns how many locks were still held.
    async fn finish(self, locker: &Locker) -> Result<usize> {
        match self {
            Keeper::Guards(guards) => {
                let held = guards.iter().filter(|g| g.is_held()).count();
                let mut set = tokio::task::JoinSet::new();
                for chunk in chunked(guards, ACQUIRE_CONCURRENCY) {
                    let locker = locker.clone();
                    set.spawn(async move {
                        for g in chunk {
                            locker.release(Held::Fencelock(g)).await?;
                        }
                        Ok::<_, BenchError>(())
                    });
                }
                while let Some(j) = set.join_next().await {
                    j.map_err(|e| BenchError::join("W5 release", e))??;
                }
                Ok(held)
            }
            Keeper::Raw { stop, task } => {
                stop.notify_one();
                let (held, still) = task
                    .await
                    .map_err(|e| BenchError::join("W5 raw renewer", e))??;
                for h in held {
                    locker.release(Held::Raw(h)).await?;
                }
                Ok(still)
            }
            #[cfg(feature = "peers")]
            Keeper::Using { stop, mut tasks } => {
                let _ = stop.send(true);
                let mut still = 0;
                while let Some(j) = tasks.join_next().await {
                    if j.map_err(|e| BenchError::join("W5 rslock using", e))?? {
                        still += 1;
                    }
                }
                Ok(still)
            }
        }
    }
}

fn chunked<T>(items: Vec<T>, chunks: usize) -> Vec<Vec<T>> {
    let size = items.len().div_ceil(chunks.max(1)).max(1);
    let mut out: Vec<Vec<T>> = Vec::new();
    for item in items {
        match out.last_mut() {
            Some(last) if last.len() < size => last.push(item),
            _ => out.push(vec![item]),
        }
    }
    out
}

async fn raw_renewer(
    raw: crate::locker::Raw,
    held: Vec<crate::locker::RawHeld>,
    ttl: Duration,
    stop: Arc<tokio::sync::Notify>,
) -> Result<(Vec<crate::locker::RawHeld>, usize)> {
    let mut still = held.len();
    let mut next = Instant::now() + ttl / 3;
    // Bounded: one renewal per third of the lease until told to stop (a day at most).
    for _ in 0..(86_400 * 3) {
        tokio::select! {
            () = stop.notified() => break,
            () = tokio::time::sleep_until(next) => {
                still = raw.extend_many(&held, ttl).await?;
                next += ttl / 3;
            }
        }
    }
    Ok((held, still))
}
