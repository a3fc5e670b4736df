//! W4: the Redlock algorithm over several independent instances, first all healthy, then with
//! one instance stopped (`SIGSTOP`: it accepts connections but never answers).

use std::sync::Arc;
use std::time::Duration;

use fencelock_testkit::RedisServer;
use tokio::time::Instant;

use crate::error::{BenchError, Result};
use crate::locker::{Library, Locker, RawRedlock};
use crate::report::{W4Phase, W4Row};
use crate::stats::Samples;

/// Builds a fencelock client over several Redis instances (Redlock), from their URLs. The
/// default is `fencelock::Client::open_redlock` (see
/// [`BenchOptions::fencelock_redlock`](crate::BenchOptions::fencelock_redlock)); another
/// factory can measure other options (an `instance_timeout`, for example).
pub type FencelockRedlockFactory =
    Arc<dyn Fn(&[String]) -> fencelock::Result<fencelock::Client> + Send + Sync>;

/// Resumes a stopped server when dropped, so that an error cannot leave it stopped.
struct Stopped<'a>(&'a RedisServer);

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        let _ = self.0.resume();
    }
}

pub(crate) struct W4Params {
    pub(crate) ttl: Duration,
    pub(crate) instances: usize,
    pub(crate) phase: Duration,
    pub(crate) per_instance_timeout: Duration,
    pub(crate) cycle_limit: Duration,
    pub(crate) max_cycles: u64,
}

pub(crate) async fn w4(
    library: Library,
    params: &W4Params,
    factory: &FencelockRedlockFactory,
) -> Result<W4Row> {
    if library == Library::RawFenced {
        return unreachable_raw_fenced();
    }
    let mut servers = Vec::with_capacity(params.instances);
    for _ in 0..params.instances {
        let server = tokio::task::spawn_blocking(RedisServer::start)
            .await
            .map_err(|e| BenchError::join("starting redis-server", e))?
            .map_err(|e| BenchError::io("starting redis-server", e))?;
        servers.push(server);
    }
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let locker = match library {
        Library::Fencelock => Locker::Fencelock(
            factory(&urls)
                .map_err(|e| BenchError::fencelock("fencelock: opening a Redlock client", e))?,
        ),
        Library::Raw => {
            Locker::RawRedlock(RawRedlock::connect(&urls, params.per_instance_timeout).await?)
        }
        Library::RawFenced => unreachable_raw_fenced()?,
        Library::Rslock => Locker::rslock(&urls)?,
        Library::Redlock => Locker::redlock(&urls)?,
    };
    locker.warm_up(params.ttl).await?;
    let healthy = phase(&locker, params, "healthy").await;
    let stopped = {
        let victim = servers
            .first()
            .ok_or_else(|| BenchError::Bench("W4 needs at least one instance".into()))?;
        victim
            .pause()
            .map_err(|e| BenchError::io("W4: stopping an instance", e))?;
        let _resume = Stopped(victim);
        phase(&locker, params, "stopped").await
    };
    // A contender stuck on the stopped instance (redlock's blocking read) gets its answer now
    // that it runs again; give it a moment before the servers go away.
    if stopped.stalled {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(servers);
    Ok(W4Row {
        library: library.name().into(),
        instances: params.instances,
        healthy,
        one_stopped: stopped,
        ratio_to_raw: None,
        error: None,
    })
}

/// Sequential cycles on new keys for `params.phase`; each cycle bounded by
/// `params.cycle_limit`. A cycle that does not finish in time ends the phase (`stalled`).
async fn phase(locker: &Locker, params: &W4Params, label: &str) -> W4Phase {
    let mut samples = Samples::with_capacity(8 * 1024);
    let started = Instant::now();
    let end = started + params.phase;
    let (mut cycles, mut failures) = (0u64, 0u64);
    let mut stalled = false;
    let mut last_error = None;
    while cycles + failures < params.max_cycles && Instant::now() < end {
        let key = format!("bench:w4:{label}:{}", cycles + failures);
        let t0 = Instant::now();
        match tokio::time::timeout(params.cycle_limit, locker.cycle(&key, params.ttl)).await {
            Ok(Ok(())) => {
                samples.push(t0.elapsed());
                cycles += 1;
            }
            Ok(Err(e)) => {
                failures += 1;
                last_error = Some(e.to_string());
            }
            Err(_) => {
                stalled = true;
                last_error = Some(format!(
                    "a cycle did not finish within {:?}",
                    params.cycle_limit
                ));
                break;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    W4Phase {
        cycles_per_s: cycles as f64 / elapsed,
        cycles,
        failures,
        p50_us: samples.quantile_us(0.50),
        p99_us: samples.quantile_us(0.99),
        stalled,
        last_error,
    }
}

/// The raw fenced baseline has no Redlock variant (fences over a quorum are what fencelock's
/// Redlock adds); W4 reports it as not measured.
fn unreachable_raw_fenced<T>() -> Result<T> {
    Err(BenchError::Bench(
        "not measured: the raw fenced baseline is a single-server lock".into(),
    ))
}
