//! The single-server workloads W1, W2, W3 and W5 (W4 is in `redlock_w4.rs`, W6 in `family/`,
//! W7 in `deployments.rs`, W8 in `fenced_writes.rs`), and what the others share: a fresh
//! `redis-server` with an admin connection (`Bed`), contenders taking turns
//! (`take_turns`, `finish_all`), the critical section's hold (`hold_for`) and W5's CPU per
//! renewal. W1 and W2 measure every contender in turns, each on a server of its own; W3 and W5
//! measure one contender on its own server. Each returns report rows; nothing here decides what
//! is good or bad.

mod w1;
mod w2;
mod w3;
mod w5;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use fencelock_testkit::RedisServer;
use redis::aio::MultiplexedConnection;

use crate::error::{BenchError, Result};
use crate::locker::{Library, Locker};
use crate::system;

pub(crate) use w1::w1;
pub(crate) use w2::w2;
pub(crate) use w3::w3;
pub(crate) use w5::{cpu_us_per_renewal, w5};

/// A fresh server for one measurement, and an admin connection to read its counters.
pub(crate) struct Bed {
    pub(crate) server: RedisServer,
    pub(crate) admin: MultiplexedConnection,
}

impl Bed {
    pub(crate) async fn start() -> Result<Bed> {
        let server = tokio::task::spawn_blocking(RedisServer::start)
            .await
            .map_err(|e| BenchError::join("starting redis-server", e))?
            .map_err(|e| BenchError::io("starting redis-server", e))?;
        let admin = admin_connection(&server.url()).await?;
        Ok(Bed { server, admin })
    }
}

pub(crate) async fn admin_connection(url: &str) -> Result<MultiplexedConnection> {
    redis::Client::open(url)
        .map_err(|e| BenchError::redis(format!("opening {url}"), e))?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| BenchError::redis(format!("connecting to {url}"), e))
}

/// One contender of a workload that takes turns: its client, on a server of its own, and the
/// CPU its measured turns used.
struct Contender {
    library: Library,
    bed: Bed,
    locker: Locker,
    client_cpu: f64,
    server_cpu: f64,
    /// `INFO` calls the measurement made on the server (they count as commands and reads).
    info_calls: u64,
}

impl Contender {
    async fn start(library: Library, ttl: Duration) -> Result<Contender> {
        let mut bed = Bed::start().await?;
        let locker = Locker::connect(library, &bed.server.url(), ttl).await?;
        system::reset_stats(&mut bed.admin).await?;
        Ok(Contender {
            library,
            bed,
            locker,
            client_cpu: 0.0,
            server_cpu: 0.0,
            info_calls: 0,
        })
    }

    /// Runs one turn, `work`, and adds the CPU the client and the server used meanwhile.
    async fn measured<T>(&mut self, work: impl AsyncFnOnce(&Locker) -> Result<T>) -> Result<T> {
        let server_cpu_before = system::server_cpu_seconds(&mut self.bed.admin).await?;
        let client_cpu_before = system::process_cpu_seconds()?;
        let out = work(&self.locker).await?;
        self.client_cpu += system::process_cpu_seconds()? - client_cpu_before;
        self.server_cpu +=
            system::server_cpu_seconds(&mut self.bed.admin).await? - server_cpu_before;
        self.info_calls += 2;
        Ok(out)
    }
}

/// `turns` turns over the contenders' `runs`: in each, every contender's `step` once, each turn
/// starting with the next contender, so that a machine that slows down or speeds up over the
/// run weighs on each alike. A contender whose step fails keeps the error and takes no more
/// turns.
pub(crate) async fn take_turns<R>(
    runs: &mut [(Library, Result<R>)],
    turns: usize,
    mut step: impl AsyncFnMut(Library, &mut R, usize) -> Result<()>,
) {
    let count = runs.len();
    for turn in 0..turns {
        for next in 0..count {
            if let Some((library, run)) = runs.get_mut((turn + next) % count)
                && let Ok(r) = run
                && let Err(e) = step(*library, r, turn).await
            {
                *run = Err(e);
            }
        }
    }
}

/// Each contender's result from its run (`finish`), or the error its run ended with.
pub(crate) async fn finish_all<R, T, F: Future<Output = Result<T>>>(
    runs: Vec<(Library, Result<R>)>,
    finish: impl Fn(R) -> F,
) -> Vec<(Library, Result<T>)> {
    let mut rows = Vec::new();
    for (library, run) in runs {
        let row = match run {
            Ok(run) => finish(run).await,
            Err(e) => Err(e),
        };
        rows.push((library, row));
    }
    rows
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Stays in a critical section for `hold`. Tokio's timer has a 1 ms granularity and rounds up
/// (a 1 ms sleep lasts 1-2 ms); a thread sleep on the blocking pool is much closer to the
/// requested hold.
pub(crate) async fn hold_for(hold: Duration) {
    if tokio::task::spawn_blocking(move || std::thread::sleep(hold))
        .await
        .is_err()
    {
        tokio::time::sleep(hold).await;
    }
}
