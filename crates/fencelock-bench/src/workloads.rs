//! The single-server workloads W1, W2, W3 and W5 (W4 is in `redlock_w4.rs`, W6 in `family/`,
//! W7 in `deployments.rs`, W8 in `fenced_writes.rs`), and what the others share: a fresh
//! `redis-server` with an admin connection (`Bed`), contenders taking turns
//! (`take_turns`, `finish_all`), the critical section's hold (`hold_for`) and W5's CPU per
//! renewal. W1 and W2 measure every contender in turns, each on a server of its own; W3 and W5
//! measure one contender on its own server. Each returns report rows; nothing here decides what
//! is good or bad.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fencelock_testkit::RedisServer;
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use crate::error::{BenchError, Result};
use crate::locker::{Held, Library, Locker};
use crate::report::{W1Row, W2Row, W3Row, W5Row};
use crate::stats::{Repetitions, Samples};
use crate::system;

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

/// One contender of W1, and what its repetitions measured so far.
struct W1Run {
    contender: Contender,
    repetitions: Repetitions,
    cycles: u64,
    key_no: u64,
}

impl W1Run {
    async fn start(library: Library, ttl: Duration) -> Result<W1Run> {
        Ok(W1Run {
            contender: Contender::start(library, ttl).await?,
            repetitions: Repetitions::default(),
            cycles: 0,
            key_no: 0,
        })
    }

    /// One repetition: sequential cycles for `duration` (at most `max_cycles`).
    async fn repetition(
        &mut self,
        rep: usize,
        ttl: Duration,
        duration: Duration,
        max_cycles: u64,
    ) -> Result<()> {
        let key_no = &mut self.key_no;
        let (cycles, elapsed, mut samples) = self
            .contender
            .measured(async |locker| {
                let mut samples = Samples::with_capacity(16 * 1024);
                let started = Instant::now();
                let end = started + duration;
                let mut cycles = 0u64;
                while cycles < max_cycles {
                    let t0 = Instant::now();
                    if t0 >= end {
                        break;
                    }
                    *key_no += 1;
                    locker
                        .cycle(&format!("bench:w1:{rep}:{key_no}"), ttl)
                        .await?;
                    samples.push(t0.elapsed());
                    cycles += 1;
                }
                Ok((cycles, started.elapsed().as_secs_f64(), samples))
            })
            .await?;
        self.repetitions.record(cycles, elapsed, &mut samples);
        self.cycles += cycles;
        Ok(())
    }

    async fn row(mut self) -> Result<W1Row> {
        let c = &mut self.contender;
        let mix = system::command_mix(&mut c.bed.admin).await?;
        let counters = system::counters(&mut c.bed.admin).await?;
        // The INFO calls that read the counters are themselves counted (the repetitions' and
        // the command mix's before the count).
        let infos = c.info_calls + 1;
        let commands = counters.commands.saturating_sub(infos);
        let total_cycles = self.cycles;
        let per_cycle = |x: f64| (total_cycles > 0).then(|| x / total_cycles as f64);
        Ok(W1Row {
            library: c.library.name().into(),
            cycles_per_s: self.repetitions.rate(),
            p50_us: self.repetitions.p50_us(),
            p99_us: self.repetitions.p99_us(),
            repetitions: self.repetitions.len(),
            cycles: total_cycles,
            commands_per_cycle: (total_cycles > 0).then(|| commands as f64 / total_cycles as f64),
            reads_per_cycle: per_cycle(counters.reads.saturating_sub(infos) as f64),
            client_cpu_us_per_cycle: per_cycle(c.client_cpu * 1e6),
            server_cpu_us_per_cycle: per_cycle(c.server_cpu * 1e6),
            command_usec_per_cycle: mix
                .iter()
                .filter_map(|(k, (_, usec))| per_cycle(*usec as f64).map(|x| (k.clone(), x)))
                .collect(),
            command_mix_per_cycle: mix
                .into_iter()
                .filter_map(|(k, (n, _))| per_cycle(n as f64).map(|x| (k, x)))
                .collect(),
            ratio_to_raw: None,
            error: None,
        })
    }
}

/// W1: one client per contender, sequential acquire + release, a new key each cycle. The
/// contenders take turns, one repetition each (each turn starting with the next contender), so
/// that a machine that slows down or speeds up over the run weighs on every contender alike;
/// each has a server of its own. One result per contender, in `libraries`' order.
pub(crate) async fn w1(
    libraries: &[Library],
    ttl: Duration,
    repetitions: usize,
    rep_duration: Duration,
    max_cycles: u64,
) -> Vec<(Library, Result<W1Row>)> {
    let mut runs: Vec<(Library, Result<W1Run>)> = Vec::new();
    for &library in libraries {
        runs.push((library, W1Run::start(library, ttl).await));
    }
    take_turns(
        &mut runs,
        repetitions.max(1),
        async |_, run: &mut W1Run, rep| run.repetition(rep, ttl, rep_duration, max_cycles).await,
    )
    .await;
    finish_all(runs, W1Run::row).await
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

/// How many turns W2 is cut into (see [`w2`]).
const W2_TURNS: u32 = 4;

/// One contender of W2, and what its turns measured so far.
struct W2Run {
    contender: Contender,
    seconds: f64,
    per_task: Vec<u64>,
}

impl W2Run {
    async fn start(library: Library, ttl: Duration, tasks: usize) -> Result<W2Run> {
        Ok(W2Run {
            contender: Contender::start(library, ttl).await?,
            seconds: 0.0,
            per_task: vec![0; tasks],
        })
    }

    /// One turn: every task cycles on its own key for `duration`.
    async fn turn(&mut self, ttl: Duration, duration: Duration, max_cycles: u64) -> Result<()> {
        let per_task = &mut self.per_task;
        let tasks = per_task.len();
        let seconds = self
            .contender
            .measured(async |locker| {
                let start = Instant::now() + Duration::from_millis(20);
                let end = start + duration;
                let per_task_max = max_cycles / (W2_TURNS as u64 * tasks.max(1) as u64) + 1;
                let mut set = tokio::task::JoinSet::new();
                for task in 0..tasks {
                    let locker = locker.clone();
                    set.spawn(async move {
                        tokio::time::sleep_until(start).await;
                        let key = format!("bench:w2:{task}");
                        let mut cycles = 0u64;
                        while cycles < per_task_max && Instant::now() < end {
                            locker.cycle(&key, ttl).await?;
                            cycles += 1;
                        }
                        Ok::<_, BenchError>((task, cycles))
                    });
                }
                while let Some(joined) = set.join_next().await {
                    let (task, cycles) = joined.map_err(|e| BenchError::join("W2 task", e))??;
                    if let Some(count) = per_task.get_mut(task) {
                        *count += cycles;
                    }
                }
                Ok(start.elapsed().as_secs_f64())
            })
            .await?;
        self.seconds += seconds;
        Ok(())
    }

    async fn row(mut self) -> Result<W2Row> {
        let c = &mut self.contender;
        let counters = system::counters(&mut c.bed.admin).await?;
        let total: u64 = self.per_task.iter().sum();
        let per_cycle = |x: f64| (total > 0).then(|| x / total as f64);
        Ok(W2Row {
            client_cpu_us_per_cycle: per_cycle(c.client_cpu * 1e6),
            server_cpu_us_per_cycle: per_cycle(c.server_cpu * 1e6),
            script_runs_per_cycle: per_cycle((counters.evalsha + counters.eval) as f64),
            // The INFO calls that read the counters are themselves counted (the turns', and
            // one before the count).
            reads_per_cycle: per_cycle(counters.reads.saturating_sub(c.info_calls + 1) as f64),
            library: c.library.name().into(),
            tasks: self.per_task.len(),
            cycles_per_s: if self.seconds > 0.0 {
                total as f64 / self.seconds
            } else {
                0.0
            },
            cycles: total,
            min_task_cycles: self.per_task.iter().copied().min().unwrap_or(0),
            max_task_cycles: self.per_task.iter().copied().max().unwrap_or(0),
            ratio_to_raw: None,
            error: None,
        })
    }
}

/// W2: `tasks` tasks on one client per contender, each task cycling on its own key. The
/// contenders take turns ([`W2_TURNS`] each, each turn starting with the next contender), so
/// that a machine that slows down or speeds up over the run weighs on every contender alike;
/// each has a server of its own. One result per contender, in `libraries`' order.
pub(crate) async fn w2(
    libraries: &[Library],
    ttl: Duration,
    tasks: usize,
    duration: Duration,
    max_cycles: u64,
) -> Vec<(Library, Result<W2Row>)> {
    let mut runs: Vec<(Library, Result<W2Run>)> = Vec::new();
    for &library in libraries {
        runs.push((library, W2Run::start(library, ttl, tasks).await));
    }
    let slice = duration / W2_TURNS;
    take_turns(
        &mut runs,
        W2_TURNS as usize,
        async |_, run: &mut W2Run, _| run.turn(ttl, slice, max_cycles).await,
    )
    .await;
    finish_all(runs, W2Run::row).await
}

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
    let arena = Arc::new(Arena {
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
    });
    let start = Instant::now() + Duration::from_millis(50);
    let end = start + duration;
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
    drop(bed);
    let total: u64 = grants.iter().sum();
    let mut handoffs = std::mem::take(&mut *lock(&arena.handoffs));
    let holds = std::mem::take(&mut *lock(&arena.holds));
    let mut waits = std::mem::take(&mut *lock(&arena.waits));
    let counter = arena.counter.load(Ordering::SeqCst);
    let (waited, free) = {
        let o = lock(&arena.occupancy);
        (o.waited, o.free_while_waited)
    };
    Ok(W3Row {
        library: library.name().into(),
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
        self_reacquisitions: arena.self_reacquisitions.load(Ordering::SeqCst),
        mean_hold_us: holds.mean_us(),
        min_grants: grants.iter().copied().min().unwrap_or(0),
        max_grants: grants.iter().copied().max().unwrap_or(0),
        violations: arena.violations.load(Ordering::SeqCst),
        lost_updates: all.saturating_sub(counter),
        ratio_to_raw: None,
        error: None,
    })
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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

/// W5: `count` locks held with automatic renewal (lease `ttl`) for `hold`.
pub(crate) async fn w5(
    library: Library,
    ttl: Duration,
    count: usize,
    hold: Duration,
) -> Result<W5Row> {
    let mut bed = Bed::start().await?;
    let url = bed.server.url();
    let locker = Locker::connect(library, &url, ttl).await?;
    system::reset_stats(&mut bed.admin).await?;
    let rss_before = system::resident_bytes()?;
    let keeper = Keeper::start(library, &locker, ttl, count).await?;
    let rss_after = system::resident_bytes()?;
    // Keep the acquisition burst and the first renewal round (which may have to load the
    // renewal script) out of the measured window.
    tokio::time::sleep(ttl / 2).await;
    let setup = system::counters(&mut bed.admin).await?;
    system::reset_stats(&mut bed.admin).await?;
    let cpu_before = system::process_cpu_seconds()?;
    let started = Instant::now();
    tokio::time::sleep(hold).await;
    let cpu_after = system::process_cpu_seconds()?;
    let wall = started.elapsed().as_secs_f64();
    let counters = system::counters(&mut bed.admin).await?;
    let held_in_redis = count_w5_locks(&mut bed.admin).await?;
    let still_held = keeper.finish(&locker).await?;
    let renew_scripts = counters.evalsha + counters.eval;
    let client_cpu_percent = (cpu_after - cpu_before) / wall * 100.0;
    let renewals_per_s = counters.renewals as f64 / wall;
    Ok(W5Row {
        library: library.name().into(),
        locks: count,
        seconds: wall,
        renewal_commands_per_s: renew_scripts as f64 / wall,
        renewals_per_s,
        total_commands_per_s: counters.commands.saturating_sub(1) as f64 / wall,
        reads_per_s: counters.reads.saturating_sub(1) as f64 / wall,
        client_cpu_percent,
        client_cpu_us_per_renewal: cpu_us_per_renewal(client_cpu_percent, renewals_per_s),
        bytes_per_lock: rss_after.saturating_sub(rss_before) as f64 / count.max(1) as f64,
        still_held,
        held_in_redis,
        noscript_replies: setup.evalsha_failed,
        ratio_to_raw: None,
        error: None,
    })
}

/// Client CPU per renewal, µs, from CPU in % of a core and renewals per second over the same
/// window (0 when nothing was renewed).
pub(crate) fn cpu_us_per_renewal(cpu_percent: f64, renewals_per_s: f64) -> f64 {
    if renewals_per_s > 0.0 {
        cpu_percent * 1e4 / renewals_per_s
    } else {
        0.0
    }
}

/// How many W5 lock keys exist in Redis (fence keys not counted).
async fn count_w5_locks(admin: &mut MultiplexedConnection) -> Result<usize> {
    let mut cursor: u64 = 0;
    let mut count = 0;
    // Bounded: SCAN visits each key at most a few times; 100,000 pages is far more than enough.
    for _ in 0..100_000 {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("*bench:w5:*")
            .arg("COUNT")
            .arg(1000)
            .query_async(admin)
            .await
            .map_err(|e| BenchError::redis("W5: SCAN for the lock keys", e))?;
        count += keys.iter().filter(|k| !k.ends_with(":fence")).count();
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok(count)
}

/// The locks W5 keeps alive, per contender.
enum Keeper {
    /// fencelock's guards, renewed by the client's watchdog.
    Guards(Vec<fencelock::LockGuard>),
    /// Raw locks renewed by one task: one pipeline of compare-and-pexpire scripts every third
    /// of the lease (what a hand-written watchdog does at best).
    Raw {
        stop: Arc<tokio::sync::Notify>,
        task: tokio::task::JoinHandle<Result<(Vec<crate::locker::RawHeld>, usize)>>,
    },
    /// rslock's own renewal: `LockManager::using` (one timer and one extend per lock, shortly
    /// before its validity ends).
    #[cfg(feature = "peers")]
    Using {
        stop: tokio::sync::watch::Sender<bool>,
        tasks: tokio::task::JoinSet<Result<bool>>,
    },
}

/// How many acquisitions W5 runs at once while it takes its locks.
const ACQUIRE_CONCURRENCY: usize = 64;

impl Keeper {
    async fn start(library: Library, locker: &Locker, ttl: Duration, count: usize) -> Result<Self> {
        let key = |i: usize| format!("bench:w5:{i}");
        match locker {
            Locker::Fencelock(_) | Locker::Raw(_) => {
                let mut held = Vec::with_capacity(count);
                let mut set = tokio::task::JoinSet::new();
                let mut next = 0;
                while held.len() < count {
                    while next < count && set.len() < ACQUIRE_CONCURRENCY {
                        let locker = locker.clone();
                        let name = key(next);
                        set.spawn(async move { locker.try_acquire(&name, ttl).await });
                        next += 1;
                    }
                    let Some(joined) = set.join_next().await else {
                        break;
                    };
                    let h = joined
                        .map_err(|e| BenchError::join("W5 acquire", e))??
                        .ok_or_else(|| BenchError::Bench("W5: a fresh lock was busy".into()))?;
                    held.push(h);
                }
                match locker {
                    Locker::Raw(raw) => {
                        let raw_held: Vec<_> = held
                            .into_iter()
                            .filter_map(|h| match h {
                                Held::Raw(r) => Some(r),
                                _ => None,
                            })
                            .collect();
                        let stop = Arc::new(tokio::sync::Notify::new());
                        let task = tokio::spawn(raw_renewer(
                            raw.clone(),
                            raw_held,
                            ttl,
                            Arc::clone(&stop),
                        ));
                        Ok(Keeper::Raw { stop, task })
                    }
                    _ => Ok(Keeper::Guards(
                        held.into_iter()
                            .filter_map(|h| match h {
                                Held::Fencelock(g) => Some(g),
                                _ => None,
                            })
                            .collect(),
                    )),
                }
            }
            #[cfg(feature = "peers")]
            Locker::Rslock(manager) => {
                let (stop, stopped) = tokio::sync::watch::channel(false);
                let acquired = Arc::new(AtomicUsize::new(0));
                let mut tasks = tokio::task::JoinSet::new();
                for i in 0..count {
                    let manager = manager.clone();
                    let mut stopped = stopped.clone();
                    let acquired = Arc::clone(&acquired);
                    let name = key(i);
                    tasks.spawn(async move {
                        manager
                            .using(name.as_bytes(), ttl, async || {
                                acquired.fetch_add(1, Ordering::SeqCst);
                                let _ = stopped.wait_for(|s| *s).await;
                            })
                            .await
                            .map(|()| true)
                            .or_else(|e| match e {
                                rslock::LockError::Unavailable | rslock::LockError::TtlExceeded => {
                                    Ok(false)
                                }
                                other => Err(BenchError::peer("rslock", "using", other)),
                            })
                    });
                }
                // Wait until every lock is taken (bounded).
                let deadline = Instant::now() + Duration::from_secs(60);
                while acquired.load(Ordering::SeqCst) < count {
                    if Instant::now() > deadline {
                        let _ = stop.send(true);
                        return Err(BenchError::Bench(format!(
                            "W5 rslock: only {} of {count} locks taken after 60 s",
                            acquired.load(Ordering::SeqCst)
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(Keeper::Using { stop, tasks })
            }
            _ => Err(BenchError::Bench(format!(
                "{library} has no automatic renewal to measure"
            ))),
        }
    }

    /// Stops renewing, releases everything; returns how many locks were still held.
    async fn finish(self, locker: &Locker) -> Result<usize> {
        match self {
            Keeper::Guards(guards) => {
                let held = guards.iter().filter(|g| g.is_held()).count();
                let mut set = tokio::task::JoinSet::new();
                for chunk in chunked(guards, ACQUIRE_CONCURRENCY) {
                    let locker = locker.clone();
                    set.spawn(async move {
                        for g in chunk {
                            locker.release(Held::Fencelock(g)).await?;
                        }
                        Ok::<_, BenchError>(())
                    });
                }
                while let Some(j) = set.join_next().await {
                    j.map_err(|e| BenchError::join("W5 release", e))??;
                }
                Ok(held)
            }
            Keeper::Raw { stop, task } => {
                stop.notify_one();
                let (held, still) = task
                    .await
                    .map_err(|e| BenchError::join("W5 raw renewer", e))??;
                for h in held {
                    locker.release(Held::Raw(h)).await?;
                }
                Ok(still)
            }
            #[cfg(feature = "peers")]
            Keeper::Using { stop, mut tasks } => {
                let _ = stop.send(true);
                let mut still = 0;
                while let Some(j) = tasks.join_next().await {
                    if j.map_err(|e| BenchError::join("W5 rslock using", e))?? {
                        still += 1;
                    }
                }
                Ok(still)
            }
        }
    }
}

fn chunked<T>(items: Vec<T>, chunks: usize) -> Vec<Vec<T>> {
    let size = items.len().div_ceil(chunks.max(1)).max(1);
    let mut out: Vec<Vec<T>> = Vec::new();
    for item in items {
        match out.last_mut() {
            Some(last) if last.len() < size => last.push(item),
            _ => out.push(vec![item]),
        }
    }
    out
}

async fn raw_renewer(
    raw: crate::locker::Raw,
    held: Vec<crate::locker::RawHeld>,
    ttl: Duration,
    stop: Arc<tokio::sync::Notify>,
) -> Result<(Vec<crate::locker::RawHeld>, usize)> {
    let mut still = held.len();
    let mut next = Instant::now() + ttl / 3;
    // Bounded: one renewal per third of the lease until told to stop (a day at most).
    for _ in 0..(86_400 * 3) {
        tokio::select! {
            () = stop.notified() => break,
            () = tokio::time::sleep_until(next) => {
                still = raw.extend_many(&held, ttl).await?;
                next += ttl / 3;
            }
        }
    }
    Ok((held, still))
}
