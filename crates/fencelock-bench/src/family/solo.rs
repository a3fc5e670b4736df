//! W6 uncontended: one task, sequential cycles on one name per kind, the repetitions
//! interleaved across the kinds.

use std::collections::BTreeMap;
use std::time::Duration;

use fencelock::{Client, LockGuard, LockRequest, ReadWriteLock, ReentrantLock};
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use super::{SOLO_PERMITS, W6Params, give, take};
use crate::error::{BenchError, Result};
use crate::report::W6Uncontended;
use crate::stats::{Repetitions, Samples};
use crate::system;

/// Every kind uncontended: every client warmed on every kind, then the interleaved repetitions
/// on the first client. `admin` reads the server's counters.
pub(super) async fn uncontended(
    clients: &[Client],
    admin: &mut MultiplexedConnection,
    p: &W6Params,
) -> Result<Vec<W6Uncontended>> {
    // Warm every client on every kind: connections, the release listener, every script loaded.
    // A kind that fails here is reported in its row; the others go on.
    let mut solos: Vec<SoloRun> = Solo::ALL.into_iter().map(SoloRun::new).collect();
    for (i, client) in clients.iter().enumerate() {
        let prefix = format!("bench:w6:warm-up:{i}:");
        let locks = SoloLocks::new(client, &prefix)?;
        for run in solos.iter_mut().filter(|r| r.error.is_none()) {
            if let Err(e) = run.warm_up(&locks, &prefix, p.ttl).await {
                run.error = Some(format!("warm-up: {e}"));
            }
        }
    }
    let overhead = measure_overhead(admin).await?;

    let prefix = "bench:w6:solo:";
    let first = clients
        .first()
        .ok_or_else(|| BenchError::Bench("W6: no client".into()))?;
    let locks = SoloLocks::new(first, prefix)?;
    for _ in 0..p.repetitions.max(1) {
        for run in solos.iter_mut().filter(|r| r.error.is_none()) {
            if let Err(e) = run.repetition(&locks, prefix, admin, p, overhead).await {
                run.error = Some(e.to_string());
            }
        }
    }
    Ok(solos.into_iter().map(SoloRun::row).collect())
}

/// The uncontended measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Solo {
    Plain,
    Reentrant,
    Reentry,
    Read,
    Write,
    Semaphore,
    Fair,
}

impl Solo {
    const ALL: [Solo; 7] = [
        Solo::Plain,
        Solo::Reentrant,
        Solo::Reentry,
        Solo::Read,
        Solo::Write,
        Solo::Semaphore,
        Solo::Fair,
    ];

    fn label(self) -> String {
        match self {
            Solo::Plain => "plain".into(),
            Solo::Reentrant => "reentrant".into(),
            Solo::Reentry => "reentrant: re-entry only".into(),
            Solo::Read => "read".into(),
            Solo::Write => "write".into(),
            Solo::Semaphore => format!("semaphore (N={SOLO_PERMITS})"),
            Solo::Fair => "fair".into(),
        }
    }

    fn cycle(self) -> &'static str {
        match self {
            Solo::Reentrant => "acquire + re-enter + 2 releases",
            Solo::Reentry => "re-enter + release (the owner holds it)",
            Solo::Semaphore => "one permit: acquire + release",
            _ => "acquire + release",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Solo::Plain => "plain",
            Solo::Reentrant => "reentrant",
            Solo::Reentry => "reentry",
            Solo::Read => "read",
            Solo::Write => "write",
            Solo::Semaphore => "semaphore",
            Solo::Fair => "fair",
        }
    }
}

/// One client's handles for the uncontended kinds.
struct SoloLocks {
    client: Client,
    reentrant: ReentrantLock,
    reentry: ReentrantLock,
    read: ReadWriteLock,
    write: ReadWriteLock,
}

impl SoloLocks {
    fn new(client: &Client, prefix: &str) -> Result<Self> {
        Ok(SoloLocks {
            client: client.clone(),
            reentrant: client.reentrant_lock(format!("{prefix}reentrant")),
            reentry: client.reentrant_lock(format!("{prefix}reentry")),
            read: client.read_write_lock(format!("{prefix}read")),
            write: client.read_write_lock(format!("{prefix}write")),
        })
    }

    fn request(&self, kind: Solo, prefix: &str) -> LockRequest {
        let name = format!("{prefix}{}", kind.slug());
        match kind {
            Solo::Plain => self.client.lock(name),
            Solo::Reentrant => self.reentrant.request(),
            Solo::Reentry => self.reentry.request(),
            Solo::Read => self.read.read(),
            Solo::Write => self.write.write(),
            Solo::Semaphore => self.client.semaphore(name, SOLO_PERMITS),
            Solo::Fair => self.client.fair_lock(name),
        }
    }
}

/// One kind's uncontended measurement, over the repetitions.
struct SoloRun {
    kind: Solo,
    repetitions: Repetitions,
    cycles: u64,
    commands: u64,
    reads: u64,
    server_cpu: f64,
    client_cpu: f64,
    mix: BTreeMap<String, (u64, u64)>,
    /// The fence of the previous cycle (fences must grow from cycle to cycle).
    last_fence: u64,
    failed_checks: u64,
    error: Option<String>,
}

impl SoloRun {
    fn new(kind: Solo) -> Self {
        SoloRun {
            kind,
            repetitions: Repetitions::default(),
            cycles: 0,
            commands: 0,
            reads: 0,
            server_cpu: 0.0,
            client_cpu: 0.0,
            mix: BTreeMap::new(),
            last_fence: 0,
            failed_checks: 0,
            error: None,
        }
    }

    /// A new fence must be larger than the previous cycle's.
    fn check_grows(&mut self, fence: u64) {
        if fence <= self.last_fence {
            self.failed_checks += 1;
        }
        self.last_fence = fence;
    }

    fn check(&mut self, ok: bool) {
        if !ok {
            self.failed_checks += 1;
        }
    }

    /// One measured cycle. `outer` is the owner's standing hold for [`Solo::Reentry`].
    async fn cycle(
        &mut self,
        locks: &SoloLocks,
        prefix: &str,
        ttl: Duration,
        outer: Option<u64>,
    ) -> Result<()> {
        let what = self.kind.label();
        let guard = take(locks.request(self.kind, prefix), ttl, &what).await?;
        match self.kind {
            Solo::Reentrant => {
                self.check_grows(guard.fence());
                let inner = take(locks.request(self.kind, prefix), ttl, &what).await?;
                self.check(inner.fence() == guard.fence());
                let released = give(inner, &what).await?;
                self.check(released);
            }
            // A re-entry keeps the standing hold's fence.
            Solo::Reentry => self.check(Some(guard.fence()) == outer),
            // Nothing ever wrote this read-write lock: a reader sees fence 0.
            Solo::Read => self.check(guard.fence() == 0),
            Solo::Plain | Solo::Write | Solo::Semaphore | Solo::Fair => {
                self.check_grows(guard.fence());
            }
        }
        let released = give(guard, &what).await?;
        self.check(released);
        Ok(())
    }

    /// A few unmeasured cycles (their checks are not counted).
    async fn warm_up(&mut self, locks: &SoloLocks, prefix: &str, ttl: Duration) -> Result<()> {
        let outer = match self.kind {
            Solo::Reentry => Some(take(locks.request(self.kind, prefix), ttl, "warm-up").await?),
            _ => None,
        };
        let outer_fence = outer.as_ref().map(LockGuard::fence);
        let (last_fence, failed_checks) = (self.last_fence, self.failed_checks);
        for _ in 0..3 {
            self.cycle(locks, prefix, ttl, outer_fence).await?;
        }
        (self.last_fence, self.failed_checks) = (last_fence, failed_checks);
        if let Some(outer) = outer {
            give(outer, "warm-up").await?;
        }
        Ok(())
    }

    /// One repetition: reset the server's counters, cycle for `duration`, read them.
    async fn repetition(
        &mut self,
        locks: &SoloLocks,
        prefix: &str,
        admin: &mut MultiplexedConnection,
        p: &W6Params,
        overhead: Overhead,
    ) -> Result<()> {
        let what = self.kind.label();
        let outer = match self.kind {
            Solo::Reentry => Some(take(locks.request(Solo::Reentry, prefix), p.ttl, &what).await?),
            _ => None,
        };
        let outer_fence = outer.as_ref().map(LockGuard::fence);
        system::reset_stats(admin).await?;
        let server_before = system::server_cpu_seconds(admin).await?;
        let client_before = system::process_cpu_seconds()?;
        let mut samples = Samples::with_capacity(16 * 1024);
        let started = Instant::now();
        let end = started + p.repetition;
        let mut cycles = 0u64;
        while cycles < p.max_cycles {
            let t0 = Instant::now();
            if t0 >= end {
                break;
            }
            self.cycle(locks, prefix, p.ttl, outer_fence).await?;
            samples.push(t0.elapsed());
            cycles += 1;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let client_cpu = system::process_cpu_seconds()? - client_before;
        let server_cpu = system::server_cpu_seconds(admin).await? - server_before;
        let mix = system::command_mix(admin).await?;
        let counters = system::counters(admin).await?;
        if let Some(outer) = outer {
            let released = give(outer, &what).await?;
            self.check(released);
        }
        self.repetitions.record(cycles, elapsed, &mut samples);
        self.cycles += cycles;
        self.commands += counters.commands.saturating_sub(overhead.commands);
        self.reads += counters.reads.saturating_sub(overhead.reads);
        self.server_cpu += server_cpu;
        self.client_cpu += client_cpu;
        for (command, (calls, usec)) in mix {
            let entry = self.mix.entry(command).or_default();
            entry.0 += calls;
            entry.1 += usec;
        }
        Ok(())
    }

    fn row(self) -> W6Uncontended {
        let cycles = self.cycles;
        let per_cycle = |x: f64| (cycles > 0).then(|| x / cycles as f64);
        let (_, script_usec) = system::script_totals(&self.mix);
        W6Uncontended {
            kind: self.kind.label(),
            cycle: self.kind.cycle().into(),
            cycles_per_s: self.repetitions.rate(),
            p50_us: self.repetitions.p50_us(),
            p99_us: self.repetitions.p99_us(),
            repetitions: self.repetitions.len(),
            cycles,
            reads_per_cycle: per_cycle(self.reads as f64),
            commands_per_cycle: per_cycle(self.commands as f64),
            script_us_per_cycle: per_cycle(script_usec as f64),
            server_cpu_us_per_cycle: per_cycle(self.server_cpu * 1e6),
            client_cpu_us_per_cycle: per_cycle(self.client_cpu * 1e6),
            command_mix_per_cycle: self
                .mix
                .iter()
                .filter_map(|(k, (calls, _))| per_cycle(*calls as f64).map(|x| (k.clone(), x)))
                .collect(),
            failed_checks: self.failed_checks,
            ratio_to_plain: None,
            error: self.error,
        }
    }
}

/// What reading the counters costs by itself (the benchmark's own `INFO` and `CONFIG` calls),
/// measured once with no work in between and subtracted from every repetition.
#[derive(Debug, Clone, Copy, Default)]
struct Overhead {
    commands: u64,
    reads: u64,
}

async fn measure_overhead(admin: &mut MultiplexedConnection) -> Result<Overhead> {
    system::reset_stats(admin).await?;
    system::server_cpu_seconds(admin).await?;
    system::server_cpu_seconds(admin).await?;
    system::command_mix(admin).await?;
    let counters = system::counters(admin).await?;
    Ok(Overhead {
        commands: counters.commands,
        reads: counters.reads,
    })
}
