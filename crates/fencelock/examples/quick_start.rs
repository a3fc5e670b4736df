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

    tokio::select! {
        reason = guard.lost() => eprintln!("lock lost ({reason}); stopping"),
        () = write_report(guard.fence()) => println!("report written"),
    }
    let was_still_held = guard.release().await?;
    println!("released; still held until the end: {was_still_held}");
    Ok(())
}

/// The work under the lock. A real resource would be given `fence` with every write and refuse
/// one smaller than the largest it has seen (see the `worker_pool` example).
async fn write_report(fence: u64) {
    println!("writing the report with fence {fence}");
    tokio::time::sleep(Duration::from_millis(200)).await;
}
