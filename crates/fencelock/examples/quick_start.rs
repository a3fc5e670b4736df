//! The README's quick start: take a lock, do fenced work while watching for its loss, release.
//!
//! ```sh
//! FENCELOCK_URL=redis://127.0.0.1:6379 cargo run -p fencelock --example quick_start
//! ```

use std::time::Duration;

#[tokio::main]
async fn main() -> fencelock::Result<()> {
    let url = std::env::var("FENCELOCK_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = fencelock::Client::open(&url)?;

    let guard = client
        .lock("reports/nightly")
        .ttl(Duration::from_secs(10)) // the lease; renewed automatically
        .wait_up_to(Duration::from_secs(30))
        .acquire()
        .await?;
    println!("holding {:?} with fence {}", guard.name(), guard.fence());

    // The resource checks the fence: a holder that stalled past its lease, and was replaced,
    // cannot overwrite the newer holder's report.
    let store = client.fenced_store("reports/nightly")?;
    tokio::select! {
        reason = guard.lost() => eprintln!("lock lost ({reason}); stopping"),
        result = write_report(&store, guard.fence()) => {
            result?;
            println!("report written");
        }
    }
    let was_still_held = guard.release().await?;
    println!("released; still held until the end: {was_still_held}");
    Ok(())
}

/// The work under the lock: written only if no newer holder of the lock has written
/// (`Error::Fenced` otherwise, and nothing changes).
async fn write_report(store: &fencelock::fenced::FencedStore, fence: u64) -> fencelock::Result<()> {
    println!("writing the report with fence {fence}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let writes = fencelock::fenced::Writes::new()
        .set("report:{reports/nightly}", "...the report...")
        .rpush("report:{reports/nightly}:log", "written");
    store.apply(fence, &writes).await?;
    Ok(())
}
