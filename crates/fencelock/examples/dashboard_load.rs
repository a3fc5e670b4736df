//! A fleet's mix of lock traffic in one process, with fencelock's metrics scraped every second:
//! the load behind docs/observability.md's dashboard picture (`scripts/dashboard-picture`).
//!
//! Six workers take turns on one hot lock (`reports/nightly`: waits, passes, fenced writes, now
//! and then a stale one refused), four lock accounts at random (`account:N`, labelled `account`),
//! five share a semaphore of three permits, a job runs once per 5 s tick, and every few seconds
//! a holder's key is deleted behind its back (a loss). Every second, the registry's Prometheus
//! text is printed after a line `# SCRAPE <ms since the epoch>`.
//!
//! ```sh
//! FENCELOCK_URL=redis://127.0.0.1:6379 cargo run --release -p fencelock --features metrics \
//!     --example dashboard_load -- 60 > scrapes.txt
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fencelock::metrics::{LockLabels, Registry, set_lock_labels};
use fencelock::{Client, Error, WaitPolicy};

type Failure = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map_or(Ok(40), |s| s.parse())
        .map_err(|e| format!("the number of seconds: {e}"))?;
    let url = std::env::var("FENCELOCK_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let registry = Registry::new();
    registry.install()?;
    set_lock_labels(LockLabels::patterns([
        ("account:*", "account"),
        ("reports/nightly", "reports/nightly"),
        ("transcode", "transcode"),
        ("digest", "digest"),
    ]));
    let client = Client::open(&url)?;
    let redis = redis::Client::open(url.as_str())?;
    let running = Arc::new(AtomicBool::new(true));
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..6u64 {
        tasks.spawn(hot(client.clone(), running.clone(), worker));
    }
    for worker in 0..4u64 {
        tasks.spawn(accounts(client.clone(), running.clone(), worker));
    }
    for worker in 0..5u64 {
        tasks.spawn(permits(client.clone(), running.clone(), worker));
    }
    tasks.spawn(ticks(client.clone(), running.clone()));
    tasks.spawn(losses(client.clone(), redis, running.clone()));
    for _ in 0..seconds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let at = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis();
        print!("# SCRAPE {at}\n{}", registry.render());
    }
    running.store(false, Ordering::Release);
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    client.close().await;
    Ok(())
}

/// A pause of `base` plus up to as much again, from the clock's nanoseconds.
fn jitter(base: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    base + Duration::from_nanos(nanos % (u64::try_from(base.as_nanos()).unwrap_or(1).max(1)))
}

/// Takes turns on the hot lock, writing with its fence; one write in twenty with an old one.
async fn hot(client: Client, running: Arc<AtomicBool>, worker: u64) -> Result<(), Failure> {
    let store = client.fenced_store("reports/nightly")?;
    let mut round = 0u64;
    let mut last = 0u64;
    while running.load(Ordering::Acquire) {
        round += 1;
        let request = client
            .lock("reports/nightly")
            .ttl(Duration::from_millis(900))
            .wait(WaitPolicy::UpTo(Duration::from_millis(400)));
        match request.acquire().await {
            Ok(guard) => {
                let writes =
                    fencelock::fenced::Writes::new().set("reports:last", worker.to_string());
                // Now and then the fence of this worker's previous hold: older than the
                // fences accepted since, so refused.
                let stale = (round + worker).is_multiple_of(20) && last > 0;
                let fence = if stale { last } else { guard.fence() };
                last = guard.fence();
                match store.apply(fence, &writes).await {
                    Ok(_) | Err(Error::Fenced { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
                tokio::time::sleep(jitter(Duration::from_millis(40))).await;
                let _ = guard.release().await;
            }
            Err(Error::TimedOut { .. } | Error::Busy { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        tokio::time::sleep(jitter(Duration::from_millis(20))).await;
    }
    Ok(())
}

/// Locks accounts at random: mostly uncontended.
async fn accounts(client: Client, running: Arc<AtomicBool>, worker: u64) -> Result<(), Failure> {
    let mut n = worker;
    while running.load(Ordering::Acquire) {
        n = (n * 7 + 3) % 50;
        let guard = client.lock(format!("account:{n}")).acquire().await?;
        tokio::time::sleep(jitter(Duration::from_millis(5))).await;
        guard.release().await?;
        tokio::time::sleep(jitter(Duration::from_millis(10))).await;
    }
    Ok(())
}

/// Shares a semaphore of three permits among five workers.
async fn permits(client: Client, running: Arc<AtomicBool>, _worker: u64) -> Result<(), Failure> {
    while running.load(Ordering::Acquire) {
        let permit = client
            .semaphore("transcode", 3)
            .wait(WaitPolicy::UpTo(Duration::from_secs(1)))
            .acquire()
            .await;
        match permit {
            Ok(permit) => {
                tokio::time::sleep(jitter(Duration::from_millis(60))).await;
                permit.release().await?;
            }
            Err(Error::TimedOut { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Three workers start the digest job every second; it runs once per 5 s tick.
async fn ticks(client: Client, running: Arc<AtomicBool>) -> Result<(), Failure> {
    while running.load(Ordering::Acquire) {
        for _ in 0..3 {
            client
                .once("digest")
                .tick(fencelock::once::Tick::every(Duration::from_secs(5)))
                .keep(Duration::from_secs(60))
                .run(|_| async { Ok::<_, std::io::Error>(()) })
                .await?;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

/// Every 4 s, deletes the hot lock's key while it is held: its holder loses it.
async fn losses(
    client: Client,
    redis: redis::Client,
    running: Arc<AtomicBool>,
) -> Result<(), Failure> {
    let mut connection = redis.get_multiplexed_async_connection().await?;
    let _ = client;
    let key = format!("{}:{{reports/nightly}}", fencelock::DEFAULT_PREFIX);
    while running.load(Ordering::Acquire) {
        tokio::time::sleep(Duration::from_secs(4)).await;
        let _: () = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut connection)
            .await?;
    }
    Ok(())
}
