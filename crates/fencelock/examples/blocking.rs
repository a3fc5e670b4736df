//! The blocking API, for programs without an async runtime: the same locks and guarantees.
//!
//! ```sh
//! FENCELOCK_URL=redis://127.0.0.1:6379 cargo run -p fencelock --example blocking
//! ```

use std::time::Duration;

fn main() -> fencelock::Result<()> {
    let url = std::env::var("FENCELOCK_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = fencelock::blocking::Client::open(&url)?;

    let guard = client
        .lock("migrations")
        .ttl(Duration::from_secs(10))
        .no_wait()
        .acquire()?;
    println!("migrating with fence {}", guard.fence());
    std::thread::sleep(Duration::from_millis(100));
    println!("still held: {}", guard.is_held());
    guard.release()?;

    // One of three licences, fleet-wide.
    let permit = client.semaphore("licences", 3).acquire()?;
    println!("licence taken, fence {}", permit.fence());
    permit.release()?;
    Ok(())
}
