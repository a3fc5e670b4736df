//! Several workers take turns on one lock, and write to a resource that checks the fence: a
//! write whose fence is below the largest one the resource has accepted is refused. Worker 0 is
//! made to stall past its lease once, as a long pause would, so the refusal is seen.
//!
//! ```sh
//! FENCELOCK_URL=redis://127.0.0.1:6379 cargo run -p fencelock --example worker_pool
//! ```

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A resource that remembers the largest fence it has accepted (in a real system: a row in a
/// database, a key in Redis, a file with its fence).
#[derive(Default)]
struct FencedStore {
    accepted: Mutex<(u64, Vec<String>)>,
}

impl FencedStore {
    /// Applies `entry` if `fence` is at least the largest accepted so far.
    fn write(&self, fence: u64, entry: String) -> Result<(), String> {
        let mut state = self.accepted.lock().unwrap_or_else(PoisonError::into_inner);
        if fence < state.0 {
            return Err(format!(
                "refused fence {fence}: {} was accepted already",
                state.0
            ));
        }
        state.0 = fence;
        state.1.push(entry);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("FENCELOCK_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let store = Arc::new(FencedStore::default());
    let mut workers = Vec::new();
    for id in 0..4 {
        // Each worker its own client, as separate processes would have.
        let client = fencelock::Client::open(&url)?;
        let store = store.clone();
        workers.push(tokio::spawn(async move { work(id, client, store).await }));
    }
    for worker in workers {
        worker.await??;
    }
    let state = store
        .accepted
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    println!("{} writes accepted, last fence {}", state.1.len(), state.0);
    Ok(())
}

async fn work(
    id: usize,
    client: fencelock::Client,
    store: Arc<FencedStore>,
) -> fencelock::Result<()> {
    for round in 0..3 {
        let stalls = id == 0 && round == 0;
        let guard = client
            .lock("accounts/42")
            .ttl(Duration::from_millis(300))
            // A stalled process renews nothing: the lease runs out while it sleeps.
            .auto_renew(!stalls)
            .wait_up_to(Duration::from_secs(10))
            .acquire()
            .await?;
        let fence = guard.fence();
        if stalls {
            tokio::time::sleep(Duration::from_millis(800)).await;
        }
        match store.write(fence, format!("worker {id}, round {round}")) {
            Ok(()) => println!("worker {id}: wrote with fence {fence}"),
            Err(refusal) => println!("worker {id}: {refusal} (the lease had run out)"),
        }
        guard.release().await?;
    }
    Ok(())
}
