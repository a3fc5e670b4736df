//! One lock over several independent Redis servers (Redlock): held only with a majority, with
//! a fence that keeps growing across them.
//!
//! ```sh
//! FENCELOCK_URL=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//!     cargo run -p fencelock --example redlock
//! ```

use std::time::Duration;

#[tokio::main]
async fn main() -> fencelock::Result<()> {
    let urls = std::env::var("FENCELOCK_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let urls: Vec<&str> = urls.split(',').map(str::trim).collect();
    let client = fencelock::Client::redlock(&urls)
        .instance_timeout(Duration::from_millis(50))
        .build()?;
    println!("Redlock over {}", client.server());

    let guard = client
        .lock("payments/settle")
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await?;
    println!("held on a majority with fence {}", guard.fence());
    guard.release().await?;
    // A release returns at a majority; let the slowest instance hear it before exiting.
    client.wait_idle(Duration::from_secs(2)).await;
    Ok(())
}
