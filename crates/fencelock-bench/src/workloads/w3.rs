//! W3, contended handoff: several workers, each its own client, on one key.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::{Bed, hold_for, lock};
use crate::error::{BenchError, Result};
use crate::locker::{Library, Locker};
use crate::report::{W3Measured, W3Row};
use crate::stats::Samples;

/// What the W3 workers share.
struct Arena {
    /// Set while someone is in the critical section.
    inside: AtomicBool,
    violations: AtomicU64,
    /// A read-then-write counter: read on entry, written (+1) on exit. Overlapping holders lose
    /// updates.
    counter: AtomicU64,
    /// Workers currently waiting in an acquire call.
    waiting: AtomicUsize,
    /// The instant just before the last release call, and who made it, if someone was waiting.
    last_release: Mutex<Option<(Instant, usize)>>,
    handoffs: Mutex<Samples>,
    holds: Mutex<Samples>,
    /// Each granted acquire call, from the call to the grant.
    waits: Mutex<Samples>,
    /// Grants that went back to the worker that had just released while others waited.
    self_reacquisitions: AtomicU64,
    occupancy: Mutex<Occupancy>,
}

impl Arena {
    fn new() -> Arena {
        Arena {
            inside: AtomicBool::new(false),
            violations: AtomicU64::new(0),
            counter: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            last_release: Mutex::new(None),
            handoffs: Mutex::new(Samples::with_capacity(16 * 1024)),
            holds: Mutex::new(Samples::with_capacity(16 * 1024)),
            waits: Mutex::new(Samples::with_capacity(16 * 1024)),
            self_reacquisitions: AtomicU64::new(0),
            occupancy: Mutex::new(Occupancy {
                since: Instant::now(),
                waiting: 0,
                inside: false,
                waited: Duration::ZERO,
                free_while_waited: Duration::ZERO,
            }),
        }
    }

    /// The row, once every worker is done: `grants` are the workers' grants within the window,
    /// `all` every grant (counted against the read-then-write counter).
    fn row(
        &self,
        library: Library,
        workers: usize,
        duration: Duration,
        grants: &[u64],
        all: u64,
    ) -> W3Row {
        let total: u64 = grants.iter().sum();
        let mut handoffs = std::mem::take(&mut *lock(&self.handoffs));
        let holds = std::mem::take(&mut *lock(&self.holds));
        let mut waits = std::mem::take(&mut *lock(&self.waits));
        let counter = self.counter.load(Ordering::SeqCst);
        let (waited, free) = {
            let o = lock(&self.occupancy);
            (o.waited, o.free_while_waited)
        };
        W3Row::new(
            library,
            W3Measured {
                workers,
                acquisitions_per_s: total as f64 / duration.as_secs_f64(),
                acquisitions: total,
                handoffs: handoffs.len(),
                handoff_p50_us: handoffs.quantile_us(0.50),
                handoff_p99_us: handoffs.quantile_us(0.99),
                free_while_waiting_percent: (!waited.is_zero())
                    .then(|| free.as_secs_f64() / waited.as_secs_f64() * 100.0),
                wait_p50_us: waits.quantile_us(0.50),
                wait_p99_us: waits.quantile_us(0.99),
                self_reacquisitions: self.self_reacquisitions.load(Ordering::SeqCst),
                mean_hold_us: holds.mean_us(),
                min_grants: grants.iter().copied().min().unwrap_or(0),
                max_grants: grants.iter().copied().max().unwrap_or(0),
                violations: self.violations.load(Ordering::SeqCst),
                lost_updates: all.saturating_sub(counter),
                server_us_per_grant: None,
                server_us_per_handoff: None,
                commands_per_grant: None,
                connections: None,
                handoff_floor_p50_us: None,
            },
        )
    }
}

/// How long someone waited, and for how much of that time nobody was in the critical section
/// (the lock was free, being released or being handed over).
struct Occupancy {
    since: Instant,
    waiting: usize,
    inside: bool,
    waited: Duration,
    free_while_waited: Duration,
}

impl Occupancy {
    /// Accounts the time since the last change, then applies `change`.
    fn update(m: &Mutex<Occupancy>, change: impl FnOnce(&mut Occupancy)) {
        let mut o = lock(m);
        let now = Instant::now();
        let span = now.saturating_duration_since(o.since);
        if o.waiting > 0 {
            o.waited += span;
            if !o.inside {
                o.free_while_waited += span;
            }
        }
        o.since = now;
        change(&mut o);
    }
}

/// How many bare `PUBLISH`es measure the handoff's floor.
const FLOOR_SAMPLES: usize = 300;

/// W3: `workers` workers (each its own client) on one key, each holding it for `hold`.
pub(crate) async fn w3(
    library: Library,
    ttl: Duration,
    workers: usize,
    hold: Duration,
    duration: Duration,
    max_cycles: u64,
) -> Result<W3Row> {
    let bed = Bed::start().await?;
    let url = bed.server.url();
    let mut lockers = Vec::with_capacity(workers);
    for _ in 0..workers {
        lockers.push(Locker::connect(library, &url, ttl).await?);
    }
    let floor = handoff_floor(&url, FLOOR_SAMPLES).await?;
    let arena = Arc::new(Arena::new());
    let mut admin = bed.admin.clone();
    let before = server_counters(&mut admin).await?;
    let start = Instant::now() + Duration::from_millis(50);
    let end = start + duration;
    let connections = {
        let mut admin = admin.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(start + duration / 2).await;
            crate::system::connected_clients(&mut admin).await.ok()
        })
    };
    let per_worker_max = max_cycles / workers.max(1) as u64 + 1;
    let mut set = tokio::task::JoinSet::new();
    for (id, locker) in lockers.into_iter().enumerate() {
        let arena = Arc::clone(&arena);
        set.spawn(async move {
            tokio::time::sleep_until(start).await;
            let mut grants = 0u64;
            let mut all_grants = 0u64;
            while all_grants < per_worker_max && Instant::now() < end {
                arena.waiting.fetch_add(1, Ordering::SeqCst);
                Occupancy::update(&arena.occupancy, |o| o.waiting += 1);
                let asked = Instant::now();
                let held = locker.acquire_wait("bench:w3", ttl, end).await;
                let waited = asked.elapsed();
                arena.waiting.fetch_sub(1, Ordering::SeqCst);
                Occupancy::update(&arena.occupancy, |o| {
                    o.waiting = o.waiting.saturating_sub(1);
                });
                let Some(held) = held? else { break };
                lock(&arena.waits).push(waited);
                critical_section(&arena, id, hold).await;
                all_grants += 1;
                if Instant::now() <= end {
                    grants += 1;
                }
                let before_release = Instant::now();
                *lock(&arena.last_release) =
                    (arena.waiting.load(Ordering::SeqCst) > 0).then_some((before_release, id));
                locker.release(held).await?;
            }
            Ok::<_, BenchError>((grants, all_grants))
        });
    }
    let mut grants = Vec::with_capacity(workers);
    let mut all = 0;
    let mut first_error = None;
    while let Some(joined) = set.join_next().await {
        match joined.map_err(|e| BenchError::join("W3 worker", e)) {
            Ok(Ok((g, a))) => {
                grants.push(g);
                all += a;
            }
            Ok(Err(e)) | Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let after = server_counters(&mut admin).await?;
    let connections = connections.await.ok().flatten();
    drop(bed);
    let mut row = arena.row(library, workers, duration, &grants, all);
    if all > 0 {
        let per_grant = |x: f64| Some(x / all as f64);
        row.measured.server_us_per_grant = per_grant((after.0 - before.0) * 1e6);
        row.measured.commands_per_grant = per_grant(after.1.saturating_sub(before.1) as f64);
    }
    if row.measured.handoffs > 0 {
        row.measured.server_us_per_handoff =
            Some((after.0 - before.0) * 1e6 / row.measured.handoffs as f64);
    }
    row.measured.connections = connections;
    row.measured.handoff_floor_p50_us = floor;
    Ok(row)
}

/// The handoff's floor on `url`: the p50 of `samples` bare `PUBLISH`es, each from just before
/// it is sent to the moment a client subscribed to the channel has it (one at a time).
pub(crate) async fn handoff_floor(url: &str, samples: usize) -> Result<Option<f64>> {
    const CHANNEL: &str = "bench:floor";
    let client = redis::Client::open(url).map_err(|e| BenchError::redis("opening", e))?;
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .map_err(|e| BenchError::redis("a pub/sub connection", e))?;
    pubsub
        .subscribe(CHANNEL)
        .await
        .map_err(|e| BenchError::redis("SUBSCRIBE", e))?;
    let mut publisher = super::admin_connection(url).await?;
    let (heard_tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::spawn(async move {
        use futures_util::StreamExt;
        let mut messages = pubsub.on_message();
        while messages.next().await.is_some() {
            if heard_tx.send(Instant::now()).is_err() {
                break;
            }
        }
    });
    let mut floor = Samples::with_capacity(samples);
    for _ in 0..samples {
        let sent = Instant::now();
        redis::cmd("PUBLISH")
            .arg(CHANNEL)
            .arg("x")
            .query_async::<()>(&mut publisher)
            .await
            .map_err(|e| BenchError::redis("PUBLISH", e))?;
        let Ok(Some(at)) = tokio::time::timeout(Duration::from_secs(5), heard.recv()).await else {
            break;
        };
        floor.push(at.saturating_duration_since(sent));
    }
    listener.abort();
    Ok(floor.quantile_us(0.50))
}

/// The server's CPU seconds and commands processed so far.
async fn server_counters(admin: &mut redis::aio::MultiplexedConnection) -> Result<(f64, u64)> {
    let cpu = crate::system::server_cpu_seconds(admin).await?;
    let commands = crate::system::counters(admin).await?.commands;
    Ok((cpu, commands))
}

async fn critical_section(arena: &Arena, id: usize, hold: Duration) {
    let granted_at = Instant::now();
    if arena.inside.swap(true, Ordering::SeqCst) {
        arena.violations.fetch_add(1, Ordering::SeqCst);
    }
    Occupancy::update(&arena.occupancy, |o| o.inside = true);
    match lock(&arena.last_release).take() {
        Some((released_at, releaser)) if releaser != id => {
            lock(&arena.handoffs).push(granted_at.saturating_duration_since(released_at));
        }
        Some(_) => {
            arena.self_reacquisitions.fetch_add(1, Ordering::SeqCst);
        }
        None => {}
    }
    let seen = arena.counter.load(Ordering::SeqCst);
    hold_for(hold).await;
    arena.counter.store(seen + 1, Ordering::SeqCst);
    lock(&arena.holds).push(granted_at.elapsed());
    Occupancy::update(&arena.occupancy, |o| o.inside = false);
    arena.inside.store(false, Ordering::SeqCst);
}
