//! W6 — the lock family: fencelock's plain lock (the reference), reentrant lock, read and write
//! locks, semaphore permits and fair lock, side by side on one `redis-server`.
//!
//! **Uncontended**: one task, sequential cycles on one name per kind. The repetitions are
//! interleaved across the kinds (repetition 1 of every kind, then repetition 2, ...), so that a
//! burst of load from elsewhere on the machine hits every kind alike; the report shows medians
//! of the repetitions. The server's counters are reset before each repetition, so each kind's
//! round trips, commands and script time per cycle are its own.
//!
//! **Contended**: workers on two clients repeatedly take one name and hold it briefly (the
//! plain, reentrant, write and fair locks: 4 workers; the semaphore: 6 workers, 2 permits; the
//! read-write lock: 1 writer and 4 readers; the plain and fair locks once more with 16 workers, to
//! show how a handoff scales with the number of waiters). Rounds are interleaved across the kinds
//! like the repetitions. The server's counters are reset before each round and its script calls
//! (`EVALSHA` + `EVAL`) read at the window's end: *scripts per grant* is those over the grants of
//! the window (for read-write, the writer's and the readers' together: the server does not say
//! whose a script was). *Handoff* is W3's: the instant the next holder's acquire returns minus the
//! instant just before the previous holder's release call, counted only when someone was
//! waiting and the lock went to another worker. The bookkeeping also counts, per kind, what
//! must never happen (two holders of an exclusive lock, more than N permits, a writer with
//! readers, a reader with a writer, a re-entry refused, a hold found gone at its release), fences
//! that do not grow as promised, and grants that overtook a worker that asked earlier (the fair
//! lock promises none).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Client, LockGuard, LockRequest, ReadWriteLock, ReentrantLock};
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use crate::error::{BenchError, Result};
use crate::report::{W6Contended, W6Report, W6Uncontended};
use crate::stats::{Samples, median};
use crate::system;
use crate::workloads::{Bed, hold_for, lock};

/// Clients of the contended runs (workers are spread over them round-robin).
pub(crate) const CLIENTS: usize = 2;
/// Workers on the exclusive kinds (plain, reentrant, write, fair).
pub(crate) const WORKERS: usize = 4;
/// Workers of the second plain and fair runs: many waiters per handoff.
pub(crate) const MANY_WORKERS: usize = 16;
/// Permits of the semaphore in the uncontended run.
pub(crate) const SOLO_PERMITS: u32 = 4;
/// Permits of the semaphore in the contended run, and how many workers compete for them.
pub(crate) const CROWD_PERMITS: u32 = 2;
/// See [`CROWD_PERMITS`].
pub(crate) const PERMIT_WORKERS: usize = 6;
/// Readers next to the one writer of the read-write run.
pub(crate) const READERS: usize = 4;
/// A grant overtook a waiting worker if that worker's request began more than this before the
/// grantee's. Closer requests are ambiguous: a request reaches Redis some time after the call
/// begins (a few dozen µs, more on a busy machine), so the one that began first may have been
/// queued second. Such near ties are reported apart.
pub(crate) const ORDER_TOLERANCE: Duration = Duration::from_millis(1);

/// What W6 runs, and for how long.
#[derive(Debug, Clone)]
pub(crate) struct W6Params {
    pub(crate) ttl: Duration,
    pub(crate) repetitions: usize,
    pub(crate) repetition: Duration,
    pub(crate) rounds: usize,
    pub(crate) round: Duration,
    pub(crate) hold: Duration,
    pub(crate) max_cycles: u64,
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
        let handle = |e| BenchError::fencelock("W6: creating a lock handle", e);
        Ok(SoloLocks {
            client: client.clone(),
            reentrant: client
                .reentrant_lock(format!("{prefix}reentrant"))
                .map_err(handle)?,
            reentry: client
                .reentrant_lock(format!("{prefix}reentry"))
                .map_err(handle)?,
            read: client
                .read_write_lock(format!("{prefix}read"))
                .map_err(handle)?,
            write: client
                .read_write_lock(format!("{prefix}write"))
                .map_err(handle)?,
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

/// Takes a lock that nobody else uses.
async fn take(request: LockRequest, ttl: Duration, what: &str) -> Result<LockGuard> {
    match request.ttl(ttl).no_wait().acquire().await {
        Ok(guard) => Ok(guard),
        Err(fencelock::Error::Busy { .. }) => Err(BenchError::Bench(format!(
            "W6: {what} was not granted although nobody else uses it"
        ))),
        Err(e) => Err(BenchError::fencelock(format!("W6: acquiring {what}"), e)),
    }
}

/// Releases; `Ok(false)` if the hold was already gone.
async fn give(guard: LockGuard, what: &str) -> Result<bool> {
    guard
        .release()
        .await
        .map_err(|e| BenchError::fencelock(format!("W6: releasing {what}"), e))
}

/// One kind's uncontended measurement, over the repetitions.
struct SoloRun {
    kind: Solo,
    rates: Vec<f64>,
    p50s: Vec<f64>,
    p99s: Vec<f64>,
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
            rates: Vec::new(),
            p50s: Vec::new(),
            p99s: Vec::new(),
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
        self.rates.push(cycles as f64 / elapsed);
        self.p50s
            .push(samples.quantile_us(0.50).unwrap_or(f64::NAN));
        self.p99s
            .push(samples.quantile_us(0.99).unwrap_or(f64::NAN));
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
            cycles_per_s: median(&self.rates).unwrap_or(0.0),
            p50_us: median(&self.p50s),
            p99_us: median(&self.p99s),
            repetitions: self.rates.len(),
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

/// W6: every kind uncontended, then every kind contended, on one server.
pub(crate) async fn w6(p: &W6Params) -> Result<W6Report> {
    let mut bed = Bed::start().await?;
    let url = bed.server.url();
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        clients.push(
            Client::open(&url)
                .map_err(|e| BenchError::fencelock(format!("W6: opening {url}"), e))?,
        );
    }
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
    let overhead = measure_overhead(&mut bed.admin).await?;

    let prefix = "bench:w6:solo:";
    let first = clients
        .first()
        .ok_or_else(|| BenchError::Bench("W6: no client".into()))?;
    let locks = SoloLocks::new(first, prefix)?;
    for _ in 0..p.repetitions.max(1) {
        for run in solos.iter_mut().filter(|r| r.error.is_none()) {
            if let Err(e) = run
                .repetition(&locks, prefix, &mut bed.admin, p, overhead)
                .await
            {
                run.error = Some(e.to_string());
            }
        }
    }
    let uncontended = solos.into_iter().map(SoloRun::row).collect();

    let mut crowds: Vec<CrowdRun> = Crowd::ALL.into_iter().map(CrowdRun::new).collect();
    for round in 0..p.rounds.max(1) {
        for run in crowds.iter_mut().filter(|r| r.error.is_none()) {
            match crowd_round(run.crowd, round, &clients, &mut bed.admin, p).await {
                Ok(rows) => run.rounds.push(rows),
                Err(e) => run.error = Some(e.to_string()),
            }
        }
    }
    let contended = crowds.into_iter().flat_map(CrowdRun::rows).collect();
    drop(bed);
    Ok(W6Report {
        uncontended,
        contended,
        error: None,
    })
}

/// The contended runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crowd {
    /// The plain lock, with this many workers.
    Plain(usize),
    Reentrant,
    Write,
    /// The fair lock, with this many workers.
    Fair(usize),
    Semaphore,
    ReadWrite,
}

impl Crowd {
    const ALL: [Crowd; 8] = [
        Crowd::Plain(WORKERS),
        Crowd::Reentrant,
        Crowd::Write,
        Crowd::Fair(WORKERS),
        Crowd::Semaphore,
        Crowd::ReadWrite,
        Crowd::Plain(MANY_WORKERS),
        Crowd::Fair(MANY_WORKERS),
    ];

    /// Part of the run's lock name: distinct for every run.
    fn slug(self) -> String {
        match self {
            Crowd::Plain(n) => format!("plain-{n}"),
            Crowd::Reentrant => "reentrant".into(),
            Crowd::Write => "write".into(),
            Crowd::Fair(n) => format!("fair-{n}"),
            Crowd::Semaphore => "semaphore".into(),
            Crowd::ReadWrite => "rw".into(),
        }
    }

    /// The rows of this run: the read-write run has two (the writer, the readers).
    fn sides(self) -> Vec<Side> {
        let one = |kind: String, handoff| {
            vec![Side {
                kind,
                contenders: format!("{} workers on {CLIENTS} clients", self.workers()),
                workers: self.workers(),
                handoff,
            }]
        };
        let next = "a release → the next holder's grant";
        match self {
            Crowd::Plain(_) => one("plain".into(), next),
            Crowd::Reentrant => one("reentrant (each grant re-entered once)".into(), next),
            Crowd::Write => one("write (writers only)".into(), next),
            Crowd::Fair(_) => one("fair".into(), next),
            Crowd::Semaphore => one(
                format!("semaphore (N={CROWD_PERMITS})"),
                "a permit's release → the next grant",
            ),
            Crowd::ReadWrite => vec![
                Side {
                    kind: "read-write: the writer".into(),
                    contenders: format!("1 writer + {READERS} readers on {CLIENTS} clients"),
                    workers: 1,
                    handoff: "the last reader's release → the writer's grant",
                },
                Side {
                    kind: "read-write: readers".into(),
                    contenders: format!("{READERS} readers + 1 writer on {CLIENTS} clients"),
                    workers: READERS,
                    handoff: "the writer's release → the first reader's grant",
                },
            ],
        }
    }

    fn workers(self) -> usize {
        match self {
            Crowd::Plain(n) | Crowd::Fair(n) => n,
            Crowd::Reentrant | Crowd::Write => WORKERS,
            Crowd::Semaphore => PERMIT_WORKERS,
            Crowd::ReadWrite => 1 + READERS,
        }
    }
}

/// One report row of a contended run.
struct Side {
    kind: String,
    contenders: String,
    workers: usize,
    handoff: &'static str,
}

/// Which side of the bookkeeping a worker is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// One holder at a time (plain, reentrant, write-only, fair).
    Exclusive,
    /// At most this many holders at once.
    Permit(u32),
    /// The writer of the read-write run.
    Writer,
    /// A reader of the read-write run.
    Reader,
}

impl Role {
    /// The row this role's numbers go to: 0 (everyone but readers), 1 (readers).
    fn side(self) -> usize {
        usize::from(self == Role::Reader)
    }
}

/// What a worker acquires.
enum Handle {
    Plain(Client),
    /// Each grant is re-entered once inside the critical section.
    Reentrant(ReentrantLock),
    Write(ReadWriteLock),
    Read(ReadWriteLock),
    Fair(Client),
    Permit(Client, u32),
}

impl Handle {
    fn new(crowd: Crowd, id: usize, client: &Client, name: &str) -> Result<Self> {
        let handle = |e| BenchError::fencelock("W6: creating a lock handle", e);
        Ok(match crowd {
            Crowd::Plain(_) => Handle::Plain(client.clone()),
            Crowd::Reentrant => Handle::Reentrant(client.reentrant_lock(name).map_err(handle)?),
            Crowd::Write => Handle::Write(client.read_write_lock(name).map_err(handle)?),
            Crowd::Fair(_) => Handle::Fair(client.clone()),
            Crowd::Semaphore => Handle::Permit(client.clone(), CROWD_PERMITS),
            Crowd::ReadWrite if id == 0 => {
                Handle::Write(client.read_write_lock(name).map_err(handle)?)
            }
            Crowd::ReadWrite => Handle::Read(client.read_write_lock(name).map_err(handle)?),
        })
    }

    fn request(&self, name: &str) -> LockRequest {
        match self {
            Handle::Plain(client) => client.lock(name),
            Handle::Reentrant(lock) => lock.request(),
            Handle::Write(lock) => lock.write(),
            Handle::Read(lock) => lock.read(),
            Handle::Fair(client) => client.fair_lock(name),
            Handle::Permit(client, permits) => client.semaphore(name, *permits),
        }
    }

    fn role(&self, crowd: Crowd) -> Role {
        match self {
            Handle::Write(_) if crowd == Crowd::ReadWrite => Role::Writer,
            Handle::Read(_) => Role::Reader,
            Handle::Permit(_, n) => Role::Permit(*n),
            _ => Role::Exclusive,
        }
    }
}

/// The shared bookkeeping of one contended round. One mutex: the checks of a grant and of a
/// release are atomic with respect to each other (the lock under test serialises the holders;
/// this only keeps the books straight).
#[derive(Default)]
struct Book {
    /// Holders of an exclusive kind, or the writer.
    exclusive: usize,
    readers: usize,
    permits: usize,
    /// Workers inside an acquire call, by side.
    waiting: [usize; 2],
    /// Per worker: when its current request began, and the largest fence granted before then.
    asked: Vec<Option<(Instant, u64)>>,
    /// The largest fence granted so far (kinds that give each grant its own fence).
    max_fence: u64,
    /// The fence of the last write granted (readers must see it).
    last_write: u64,
    /// Releases made while someone waited, oldest first, with who made them (exclusive kinds
    /// and permits; an exclusive lock has at most one).
    pending: VecDeque<(Instant, usize)>,
    /// Read-write: the last reader left while the writer waited.
    last_reader_out: Option<Instant>,
    /// Read-write: the writer left while readers waited.
    writer_out: Option<Instant>,
    violations: [u64; 2],
    fence_errors: [u64; 2],
    out_of_order: u64,
    near_ties: u64,
    handoffs: [Samples; 2],
    holds: [Samples; 2],
}

impl Book {
    fn ask(&mut self, id: usize, role: Role) {
        if let Some(slot) = self.asked.get_mut(id) {
            *slot = Some((Instant::now(), self.max_fence));
        }
        self.waiting[role.side()] += 1;
    }

    fn gave_up(&mut self, id: usize, role: Role) {
        if let Some(slot) = self.asked.get_mut(id) {
            *slot = None;
        }
        self.waiting[role.side()] = self.waiting[role.side()].saturating_sub(1);
    }

    /// Books a grant; returns its instant.
    fn granted(&mut self, id: usize, role: Role, fence: u64, tolerance: Duration) -> Instant {
        let now = Instant::now();
        let side = role.side();
        let asked = self.asked.get_mut(id).and_then(Option::take);
        self.waiting[side] = self.waiting[side].saturating_sub(1);
        match role {
            Role::Exclusive | Role::Writer => {
                if self.exclusive > 0 || self.readers > 0 {
                    self.violations[side] += 1;
                }
                self.exclusive += 1;
                // Holders follow each other: every fence is larger than all before it.
                if fence <= self.max_fence {
                    self.fence_errors[side] += 1;
                }
            }
            Role::Permit(n) => {
                self.permits += 1;
                if self.permits > n as usize {
                    self.violations[side] += 1;
                }
                // Permits overlap: a fence must be larger than those granted before the
                // request began (grants seen later may come from concurrent requests).
                if asked.is_some_and(|(_, floor)| fence <= floor) {
                    self.fence_errors[side] += 1;
                }
            }
            Role::Reader => {
                if self.exclusive > 0 {
                    self.violations[side] += 1;
                }
                self.readers += 1;
                // A reader's fence is that of the last write granted before it.
                if fence != self.last_write {
                    self.fence_errors[side] += 1;
                }
            }
        }
        if role != Role::Reader {
            self.max_fence = self.max_fence.max(fence);
        }
        if role == Role::Writer {
            self.last_write = fence;
        }
        // Order: did this grant overtake a worker still waiting that asked earlier?
        if let (Role::Exclusive | Role::Permit(_), Some((asked_at, _))) = (role, asked) {
            let earlier = |margin: Duration| {
                self.asked
                    .iter()
                    .flatten()
                    .any(|(t, _)| *t + margin < asked_at)
            };
            if earlier(tolerance) {
                self.out_of_order += 1;
            } else if earlier(Duration::ZERO) {
                self.near_ties += 1;
            }
        }
        // Handoff: from the release that let this holder in.
        match role {
            Role::Exclusive | Role::Permit(_) => {
                if let Some((released_at, releaser)) = self.pending.pop_front()
                    && releaser != id
                {
                    self.handoffs[side].push(now.saturating_duration_since(released_at));
                }
            }
            Role::Writer => {
                if let Some(released_at) = self.last_reader_out.take() {
                    self.handoffs[side].push(now.saturating_duration_since(released_at));
                }
            }
            Role::Reader => {
                // Another reader came in: the lock did not pass to the writer.
                self.last_reader_out = None;
                if let Some(released_at) = self.writer_out.take() {
                    self.handoffs[side].push(now.saturating_duration_since(released_at));
                }
            }
        }
        now
    }

    /// Books the instant just before a release call.
    fn releasing(&mut self, id: usize, role: Role, granted_at: Instant) {
        let now = Instant::now();
        let side = role.side();
        self.holds[side].push(now.saturating_duration_since(granted_at));
        match role {
            Role::Exclusive | Role::Permit(_) => {
                if role == Role::Exclusive {
                    self.exclusive = self.exclusive.saturating_sub(1);
                } else {
                    self.permits = self.permits.saturating_sub(1);
                }
                if self.waiting[0] > 0 {
                    self.pending.push_back((now, id));
                }
            }
            Role::Writer => {
                self.exclusive = self.exclusive.saturating_sub(1);
                if self.waiting[1] > 0 {
                    self.writer_out = Some(now);
                }
            }
            Role::Reader => {
                self.readers = self.readers.saturating_sub(1);
                if self.readers == 0 && self.waiting[0] > 0 {
                    self.last_reader_out = Some(now);
                }
            }
        }
    }

    fn violation(&mut self, role: Role) {
        self.violations[role.side()] += 1;
    }

    fn fence_error(&mut self, role: Role) {
        self.fence_errors[role.side()] += 1;
    }
}

/// What one worker did in one round.
struct WorkerResult {
    id: usize,
    role: Role,
    /// Grants within the window.
    grants: u64,
}

/// One side's numbers from one round.
#[derive(Debug, Clone, Default)]
struct RoundSide {
    acquisitions_per_s: f64,
    acquisitions: u64,
    handoffs: usize,
    handoff_p50_us: Option<f64>,
    handoff_p99_us: Option<f64>,
    mean_hold_us: Option<f64>,
    grants: Vec<u64>,
    violations: u64,
    fence_errors: u64,
    out_of_order: u64,
    near_ties: u64,
    /// Script calls of the round's window over its grants (every side's: the same for both
    /// read-write rows).
    scripts_per_grant: Option<f64>,
}

/// Script calls per grant; `None` without grants.
fn per_grant(scripts: u64, grants: u64) -> Option<f64> {
    (grants > 0).then(|| scripts as f64 / grants as f64)
}

#[allow(clippy::too_many_arguments)]
async fn worker(
    id: usize,
    crowd: Crowd,
    handle: Handle,
    name: String,
    book: Arc<Mutex<Book>>,
    p: W6Params,
    start: Instant,
    end: Instant,
) -> Result<WorkerResult> {
    let role = handle.role(crowd);
    let per_worker_max = p.max_cycles / crowd.workers() as u64 + 1;
    tokio::time::sleep_until(start).await;
    let (mut grants, mut all) = (0u64, 0u64);
    while all < per_worker_max && Instant::now() < end {
        lock(&book).ask(id, role);
        let limit = end.saturating_duration_since(Instant::now());
        let guard = match handle
            .request(&name)
            .ttl(p.ttl)
            .wait_up_to(limit)
            .acquire()
            .await
        {
            Ok(guard) => guard,
            Err(fencelock::Error::TimedOut { .. } | fencelock::Error::Busy { .. }) => {
                lock(&book).gave_up(id, role);
                break;
            }
            Err(e) => {
                lock(&book).gave_up(id, role);
                return Err(BenchError::fencelock(format!("W6: acquiring {name}"), e));
            }
        };
        let granted_at = lock(&book).granted(id, role, guard.fence(), ORDER_TOLERANCE);
        let inner = match &handle {
            Handle::Reentrant(_) => {
                match handle.request(&name).ttl(p.ttl).no_wait().acquire().await {
                    Ok(inner) => {
                        if inner.fence() != guard.fence() {
                            lock(&book).fence_error(role);
                        }
                        Some(inner)
                    }
                    // The owner holds the lock: a re-entry must never be refused.
                    Err(fencelock::Error::Busy { .. }) => {
                        lock(&book).violation(role);
                        None
                    }
                    Err(e) => {
                        return Err(BenchError::fencelock(format!("W6: re-entering {name}"), e));
                    }
                }
            }
            _ => None,
        };
        hold_for(p.hold).await;
        if let Some(inner) = inner
            && !give(inner, &name).await?
        {
            lock(&book).violation(role);
        }
        all += 1;
        if Instant::now() <= end {
            grants += 1;
        }
        lock(&book).releasing(id, role, granted_at);
        if !give(guard, &name).await? {
            // The hold was gone before its release: someone else may have had the lock.
            lock(&book).violation(role);
        }
    }
    Ok(WorkerResult { id, role, grants })
}

/// One round of one contended kind: its rows' numbers (writer and readers for read-write).
/// `admin` resets the server's counters before the round and reads its script calls at the
/// window's end.
async fn crowd_round(
    crowd: Crowd,
    round: usize,
    clients: &[Client],
    admin: &mut MultiplexedConnection,
    p: &W6Params,
) -> Result<Vec<RoundSide>> {
    let name = format!("bench:w6:crowd:{}:{round}", crowd.slug());
    let workers = crowd.workers();
    let book = Arc::new(Mutex::new(Book {
        asked: vec![None; workers],
        handoffs: [
            Samples::with_capacity(8 * 1024),
            Samples::with_capacity(8 * 1024),
        ],
        holds: [
            Samples::with_capacity(8 * 1024),
            Samples::with_capacity(8 * 1024),
        ],
        ..Book::default()
    }));
    system::reset_stats(admin).await?;
    let start = Instant::now() + Duration::from_millis(50);
    let end = start + p.round;
    let mut set = tokio::task::JoinSet::new();
    for id in 0..workers {
        let client = clients
            .get(id % clients.len().max(1))
            .ok_or_else(|| BenchError::Bench("W6: no client".into()))?;
        let handle = Handle::new(crowd, id, client, &name)?;
        set.spawn(worker(
            id,
            crowd,
            handle,
            name.clone(),
            Arc::clone(&book),
            p.clone(),
            start,
            end,
        ));
    }
    // The window's script calls; the grants counted are those whose hold ended by `end`, so
    // their acquire scripts ran before it.
    tokio::time::sleep_until(end).await;
    let scripts = system::command_mix(admin)
        .await
        .map(|mix| system::script_totals(&mix).0);
    let mut results = Vec::with_capacity(workers);
    let mut first_error = None;
    while let Some(joined) = set.join_next().await {
        match joined.map_err(|e| BenchError::join("W6 worker", e)) {
            Ok(Ok(r)) => results.push(r),
            Ok(Err(e)) | Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let scripts_per_grant = per_grant(scripts?, results.iter().map(|r| r.grants).sum());
    // In worker order, so that grants add up per worker over the rounds.
    results.sort_by_key(|r| r.id);
    let mut book = std::mem::take(&mut *lock(&book));
    let sides = if crowd == Crowd::ReadWrite { 2 } else { 1 };
    let seconds = p.round.as_secs_f64();
    Ok((0..sides)
        .map(|side| {
            let grants: Vec<u64> = results
                .iter()
                .filter(|r| r.role.side() == side)
                .map(|r| r.grants)
                .collect();
            let acquisitions: u64 = grants.iter().sum();
            let handoffs = &mut book.handoffs[side];
            RoundSide {
                acquisitions_per_s: acquisitions as f64 / seconds,
                acquisitions,
                handoffs: handoffs.len(),
                handoff_p50_us: handoffs.quantile_us(0.50),
                handoff_p99_us: handoffs.quantile_us(0.99),
                mean_hold_us: book.holds[side].mean_us(),
                grants,
                violations: book.violations[side],
                fence_errors: book.fence_errors[side],
                out_of_order: if side == 0 { book.out_of_order } else { 0 },
                near_ties: if side == 0 { book.near_ties } else { 0 },
                scripts_per_grant,
            }
        })
        .collect())
}

/// One contended kind over the rounds.
struct CrowdRun {
    crowd: Crowd,
    rounds: Vec<Vec<RoundSide>>,
    error: Option<String>,
}

impl CrowdRun {
    fn new(crowd: Crowd) -> Self {
        CrowdRun {
            crowd,
            rounds: Vec::new(),
            error: None,
        }
    }

    /// The report rows: one, or two for read-write (the writer, the readers).
    fn rows(self) -> Vec<W6Contended> {
        self.crowd
            .sides()
            .into_iter()
            .enumerate()
            .map(|(side, info)| {
                let sides: Vec<&RoundSide> =
                    self.rounds.iter().filter_map(|r| r.get(side)).collect();
                let med = |f: &dyn Fn(&RoundSide) -> Option<f64>| {
                    median(&sides.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
                };
                let sum = |f: &dyn Fn(&RoundSide) -> u64| sides.iter().map(|s| f(s)).sum::<u64>();
                let mut per_worker: Vec<u64> = Vec::new();
                for s in &sides {
                    if per_worker.len() < s.grants.len() {
                        per_worker.resize(s.grants.len(), 0);
                    }
                    for (total, g) in per_worker.iter_mut().zip(&s.grants) {
                        *total += g;
                    }
                }
                let ordered = matches!(
                    self.crowd,
                    Crowd::Plain(_)
                        | Crowd::Reentrant
                        | Crowd::Write
                        | Crowd::Fair(_)
                        | Crowd::Semaphore
                );
                W6Contended {
                    kind: info.kind,
                    contenders: info.contenders,
                    workers: info.workers,
                    handoff: info.handoff.into(),
                    rounds: sides.len(),
                    acquisitions_per_s: med(&|s| Some(s.acquisitions_per_s)).unwrap_or(0.0),
                    acquisitions: sum(&|s| s.acquisitions),
                    handoffs: sides.iter().map(|s| s.handoffs).sum(),
                    handoff_p50_us: med(&|s| s.handoff_p50_us),
                    handoff_p99_us: med(&|s| s.handoff_p99_us),
                    scripts_per_grant: med(&|s| s.scripts_per_grant),
                    mean_hold_us: med(&|s| s.mean_hold_us),
                    min_grants: per_worker.iter().copied().min().unwrap_or(0),
                    max_grants: per_worker.iter().copied().max().unwrap_or(0),
                    violations: sum(&|s| s.violations),
                    fence_errors: sum(&|s| s.fence_errors),
                    out_of_order: ordered.then(|| sum(&|s| s.out_of_order)),
                    near_ties: ordered.then(|| sum(&|s| s.near_ties)),
                    ratio_to_plain: None,
                    handoff_ratio_to_plain: None,
                    error: self.error.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(workers: usize) -> Book {
        Book {
            asked: vec![None; workers],
            ..Book::default()
        }
    }

    #[test]
    fn two_exclusive_holders_are_a_violation() {
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        b.ask(1, Role::Exclusive);
        let t0 = b.granted(0, Role::Exclusive, 10, ORDER_TOLERANCE);
        b.granted(1, Role::Exclusive, 11, ORDER_TOLERANCE);
        assert_eq!(b.violations[0], 1);
        b.releasing(0, Role::Exclusive, t0);
        assert_eq!(b.fence_errors[0], 0);
    }

    #[test]
    fn a_fence_that_does_not_grow_is_counted() {
        let mut b = book(1);
        b.ask(0, Role::Exclusive);
        let t = b.granted(0, Role::Exclusive, 10, ORDER_TOLERANCE);
        b.releasing(0, Role::Exclusive, t);
        b.ask(0, Role::Exclusive);
        b.granted(0, Role::Exclusive, 10, ORDER_TOLERANCE);
        assert_eq!(b.fence_errors[0], 1);
        assert_eq!(b.violations[0], 0);
    }

    #[test]
    fn more_permits_than_n_is_a_violation() {
        let mut b = book(3);
        for id in 0..3 {
            b.ask(id, Role::Permit(2));
        }
        for (id, fence) in [(0, 1), (1, 2)] {
            b.granted(id, Role::Permit(2), fence, ORDER_TOLERANCE);
        }
        assert_eq!(b.violations[0], 0);
        b.granted(2, Role::Permit(2), 3, ORDER_TOLERANCE);
        assert_eq!(b.violations[0], 1);
    }

    #[test]
    fn a_writer_with_readers_and_a_reader_with_a_writer_are_violations() {
        let mut b = book(3);
        b.ask(1, Role::Reader);
        let r = b.granted(1, Role::Reader, 0, ORDER_TOLERANCE);
        b.ask(0, Role::Writer);
        b.granted(0, Role::Writer, 5, ORDER_TOLERANCE);
        assert_eq!(b.violations, [1, 0]);
        b.ask(2, Role::Reader);
        b.granted(2, Role::Reader, 5, ORDER_TOLERANCE);
        assert_eq!(b.violations, [1, 1]);
        // A reader must see the last write's fence.
        b.releasing(1, Role::Reader, r);
        b.ask(1, Role::Reader);
        b.granted(1, Role::Reader, 0, ORDER_TOLERANCE);
        assert_eq!(b.fence_errors, [0, 1]);
    }

    #[test]
    fn overtaking_an_earlier_waiter_is_out_of_order() {
        let mut b = book(3);
        b.ask(0, Role::Exclusive);
        b.asked[0] = Some((Instant::now() - Duration::from_millis(10), 0));
        b.ask(1, Role::Exclusive);
        b.granted(1, Role::Exclusive, 1, ORDER_TOLERANCE);
        assert_eq!((b.out_of_order, b.near_ties), (1, 0));
        // A request that began just before the grantee's is a near tie, not counted.
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        b.ask(1, Role::Exclusive);
        b.asked[0] = b.asked[1].map(|(t, f)| (t - Duration::from_micros(10), f));
        b.granted(1, Role::Exclusive, 1, ORDER_TOLERANCE);
        assert_eq!((b.out_of_order, b.near_ties), (0, 1));
        // In request order: nothing.
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        b.asked[0] = Some((Instant::now() - Duration::from_millis(10), 0));
        b.ask(1, Role::Exclusive);
        b.granted(0, Role::Exclusive, 1, ORDER_TOLERANCE);
        assert_eq!((b.out_of_order, b.near_ties), (0, 0));
    }

    #[test]
    fn many_waiters_served_in_request_order_are_in_order() {
        // 16 workers ask one after the other (1.5 ms apart: more than the tolerance); the lock
        // goes to them in that order, each handing off to the next.
        let mut b = book(MANY_WORKERS);
        let t0 = Instant::now() - Duration::from_millis(100);
        for id in 0..MANY_WORKERS {
            b.ask(id, Role::Exclusive);
            b.asked[id] = Some((t0 + Duration::from_micros(1500) * id as u32, 0));
        }
        let mut fence = 0;
        for id in 0..MANY_WORKERS {
            fence += 1;
            let t = b.granted(id, Role::Exclusive, fence, ORDER_TOLERANCE);
            b.releasing(id, Role::Exclusive, t);
        }
        assert_eq!((b.out_of_order, b.near_ties), (0, 0));
        assert_eq!(b.violations, [0, 0]);
        assert_eq!(b.fence_errors, [0, 0]);
        // Every release but the last had someone waiting, and each went to another worker.
        assert_eq!(b.handoffs[0].len(), MANY_WORKERS - 1);
        // The last asker served first overtakes 15 waiters: one out-of-order grant.
        let mut b = book(MANY_WORKERS);
        for id in 0..MANY_WORKERS {
            b.ask(id, Role::Exclusive);
            b.asked[id] = Some((t0 + Duration::from_micros(1500) * id as u32, 0));
        }
        b.granted(MANY_WORKERS - 1, Role::Exclusive, 1, ORDER_TOLERANCE);
        assert_eq!((b.out_of_order, b.near_ties), (1, 0));
    }

    #[test]
    fn every_crowd_has_its_own_name_and_the_many_worker_rows_say_so() {
        let slugs: std::collections::BTreeSet<String> =
            Crowd::ALL.iter().map(|c| c.slug()).collect();
        assert_eq!(slugs.len(), Crowd::ALL.len());
        for (crowd, kind) in [
            (Crowd::Plain(MANY_WORKERS), "plain"),
            (Crowd::Fair(MANY_WORKERS), "fair"),
        ] {
            assert!(Crowd::ALL.contains(&crowd));
            assert_eq!(crowd.workers(), MANY_WORKERS);
            let sides = crowd.sides();
            assert_eq!(sides.len(), 1);
            assert_eq!(sides[0].kind, kind);
            assert_eq!(sides[0].workers, MANY_WORKERS);
            assert_eq!(sides[0].contenders, "16 workers on 2 clients");
        }
        assert_eq!(
            Crowd::Plain(WORKERS).sides()[0].contenders,
            "4 workers on 2 clients"
        );
    }

    #[test]
    fn scripts_per_grant_needs_grants() {
        assert_eq!(per_grant(34, 2), Some(17.0));
        assert_eq!(per_grant(5, 0), None);
        assert_eq!(per_grant(0, 3), Some(0.0));
    }

    #[test]
    fn handoffs_count_releases_to_another_worker_while_someone_waited() {
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        let t = b.granted(0, Role::Exclusive, 1, ORDER_TOLERANCE);
        b.ask(1, Role::Exclusive);
        b.releasing(0, Role::Exclusive, t);
        b.granted(1, Role::Exclusive, 2, ORDER_TOLERANCE);
        assert_eq!(b.handoffs[0].len(), 1);
        // A release with nobody waiting, then the same worker again: no handoff.
        let mut b = book(2);
        b.ask(0, Role::Exclusive);
        let t = b.granted(0, Role::Exclusive, 1, ORDER_TOLERANCE);
        b.releasing(0, Role::Exclusive, t);
        b.ask(0, Role::Exclusive);
        b.granted(0, Role::Exclusive, 2, ORDER_TOLERANCE);
        assert_eq!(b.handoffs[0].len(), 0);
    }
}
