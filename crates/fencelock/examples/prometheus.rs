//! fencelock's metrics in the Prometheus text format: install a Prometheus recorder for the
//! `metrics` facade, use locks, render what was recorded (a real program would serve it on
//! `/metrics`, with the exporter's HTTP listener or its own web framework).
//!
//! ```sh
//! FENCELOCK_URL=redis://127.0.0.1:6379 cargo run -p fencelock --features metrics --example prometheus
//! ```

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    let url = std::env::var("FENCELOCK_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = fencelock::Client::open(&url)?;

    let guard = client
        .lock("reports/nightly")
        .ttl(Duration::from_millis(300))
        .acquire()
        .await?;
    // A second owner finds it busy; the holder's lease is renewed meanwhile.
    let busy = client.lock("reports/nightly").try_acquire().await?;
    assert!(busy.is_none());
    tokio::time::sleep(Duration::from_millis(400)).await;
    guard.release().await?;

    print!("{}", prometheus.render());
    Ok(())
}
