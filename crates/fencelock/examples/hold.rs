//! Hold a lock for a while from a plain Rust program: waits for it as long as it takes,
//! prints `fence N` when granted, holds it for the given seconds, releases it and prints
//! `released`. The Python package's tests use it as the Rust holder beside Python and the CLI.
//!
//! ```sh
//! cargo run -p fencelock --example hold -- redis://127.0.0.1:6379 reports/nightly 5
//! ```

use std::io::Write;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(name), Some(seconds)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: hold URL NAME SECONDS".into());
    };
    let hold = Duration::try_from_secs_f64(seconds.parse()?)?;
    let client = fencelock::Client::open(&url)?;
    let guard = client.lock(name).acquire().await?;
    println!("fence {}", guard.fence());
    std::io::stdout().flush()?;
    tokio::select! {
        reason = guard.lost() => return Err(format!("lock lost: {reason}").into()),
        () = tokio::time::sleep(hold) => {}
    }
    let held = guard.release().await?;
    println!("released {held}");
    Ok(())
}
