//! W4: the Redlock algorithm over several independent instances, first all healthy, then with
//! one instance stopped (`SIGSTOP`: it accepts connections but never answers).

use std::sync::Arc;
use std::time::Duration;

use fencelock_testkit::RedisServer;
use tokio::time::Instant;

use crate::error::{BenchError, Result};
use crate::locker::{Library, Locker, RawRedlock};
use crate::node_redlock::{NodePhase, NodeRedlock};
use crate::report::{W4Measured, W4Phase, W4Row};
use crate::stats::Samples;
use crate::workloads::{finish_all, take_turns};

/// Builds a fencelock client over several Redis instances (Redlock), from their URLs. The
/// default is `fencelock::Client::redlock` (see
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

/// How many turns the healthy phase is cut into: the contenders take turns, a slice each, so
/// that a machine that slows down or speeds up over the run weighs on each alike.
const HEALTHY_TURNS: u32 = 4;

/// One contender of W4: its instances and its client, and its healthy phase so far.
struct W4Run {
    library: Library,
    servers: Vec<RedisServer>,
    driver: Driver,
    healthy: Tally,
}

/// What runs a contender's cycles: a client in this process, or node-redlock's child process
/// (which runs a whole phase itself).
enum Driver {
    Locker(Locker),
    Node(Box<NodeRedlock>),
}

impl W4Run {
    async fn start(
        library: Library,
        params: &W4Params,
        factory: &FencelockRedlockFactory,
    ) -> Result<W4Run> {
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
        let driver = match library {
            Library::Fencelock => {
                Driver::Locker(Locker::Fencelock(factory(&urls).map_err(|e| {
                    BenchError::fencelock("fencelock: opening a Redlock client", e)
                })?))
            }
            Library::Raw => Driver::Locker(Locker::RawRedlock(
                RawRedlock::connect(&urls, params.per_instance_timeout).await?,
            )),
            Library::RawFenced => unreachable_raw_fenced()?,
            Library::Rslock => Driver::Locker(Locker::rslock(&urls)?),
            Library::Redlock => Driver::Locker(Locker::redlock(&urls)?),
            // (Warmed up as it starts.)
            Library::NodeRedlock => Driver::Node(Box::new(
                NodeRedlock::start(&urls, params.ttl, params.cycle_limit).await?,
            )),
        };
        if let Driver::Locker(locker) = &driver {
            locker.warm_up(params.ttl).await?;
        }
        Ok(W4Run {
            library,
            servers,
            driver,
            healthy: Tally::default(),
        })
    }

    /// The phase with one instance stopped, then the row.
    async fn finish(mut self, params: &W4Params) -> Result<W4Row> {
        let mut stopped = Tally::default();
        {
            let victim = self
                .servers
                .first()
                .ok_or_else(|| BenchError::Bench("W4 needs at least one instance".into()))?;
            victim
                .pause()
                .map_err(|e| BenchError::io("W4: stopping an instance", e))?;
            let _resume = Stopped(victim);
            phase(
                &mut self.driver,
                params,
                "stopped",
                params.phase,
                &mut stopped,
            )
            .await;
        }
        // A contender stuck on the stopped instance (redlock's blocking read) gets its answer
        // now that it runs again; give it a moment before the servers go away.
        if stopped.stalled {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        drop(self.servers);
        Ok(W4Row::new(
            self.library,
            W4Measured {
                instances: params.instances,
                healthy: self.healthy.phase(),
                one_stopped: stopped.phase(),
            },
        ))
    }
}

/// W4 for every contender, each over instances of its own: the healthy phase in turns (see
/// [`HEALTHY_TURNS`]), then each contender's phase with one instance stopped. One result per
/// contender, in `libraries`' order.
pub(crate) async fn w4(
    libraries: &[Library],
    params: &W4Params,
    factory: &FencelockRedlockFactory,
) -> Vec<(Library, Result<W4Row>)> {
    let mut runs: Vec<(Library, Result<W4Run>)> = Vec::new();
    for &library in libraries {
        runs.push((library, W4Run::start(library, params, factory).await));
    }
    let slice = params.phase / HEALTHY_TURNS;
    take_turns(
        &mut runs,
        HEALTHY_TURNS as usize,
        async |_, run: &mut W4Run, _| {
            if !run.healthy.stalled {
                phase(&mut run.driver, params, "healthy", slice, &mut run.healthy).await;
            }
            Ok(())
        },
    )
    .await;
    finish_all(runs, |run| run.finish(params)).await
}

/// What a phase measured so far (it may run in slices).
#[derive(Default)]
struct Tally {
    samples: Samples,
    seconds: f64,
    cycles: u64,
    failures: u64,
    stalled: bool,
    last_error: Option<String>,
}

impl Tally {
    /// Adds what node-redlock's process measured in a phase (or a slice of one).
    fn add(&mut self, measured: NodePhase) {
        for us in measured.latencies_us {
            if let Ok(latency) = Duration::try_from_secs_f64(us / 1e6) {
                self.samples.push(latency);
            }
        }
        self.cycles += measured.cycles;
        self.failures += measured.failures;
        self.seconds += measured.seconds;
        self.stalled |= measured.stalled;
        self.last_error = measured.last_error.or(self.last_error.take());
    }

    fn phase(mut self) -> W4Phase {
        W4Phase {
            cycles_per_s: if self.seconds > 0.0 {
                self.cycles as f64 / self.seconds
            } else {
                0.0
            },
            cycles: self.cycles,
            failures: self.failures,
            p50_us: self.samples.quantile_us(0.50),
            p99_us: self.samples.quantile_us(0.99),
            stalled: self.stalled,
            last_error: self.last_error,
        }
    }
}

/// Sequential cycles on new keys for `duration`, added to `tally`; each cycle bounded by
/// `params.cycle_limit`. A cycle that does not finish in time ends the phase (`stalled`).
async fn phase(
    driver: &mut Driver,
    params: &W4Params,
    label: &str,
    duration: Duration,
    tally: &mut Tally,
) {
    let locker = match driver {
        Driver::Locker(locker) => locker,
        Driver::Node(node) => {
            let limit = params.cycle_limit;
            match node.phase(label, duration, params.max_cycles, limit).await {
                Ok(measured) => tally.add(measured),
                Err(e) => {
                    // No answer from node counts as a contender that hung.
                    tally.stalled = true;
                    tally.last_error = Some(e.to_string());
                }
            }
            return;
        }
    };
    let started = Instant::now();
    let end = started + duration;
    while tally.cycles + tally.failures < params.max_cycles && Instant::now() < end {
        let key = format!("bench:w4:{label}:{}", tally.cycles + tally.failures);
        let t0 = Instant::now();
        match tokio::time::timeout(params.cycle_limit, locker.cycle(&key, params.ttl)).await {
            Ok(Ok(())) => {
                tally.samples.push(t0.elapsed());
                tally.cycles += 1;
            }
            Ok(Err(e)) => {
                tally.failures += 1;
                tally.last_error = Some(e.to_string());
            }
            Err(_) => {
                tally.stalled = true;
                tally.last_error = Some(format!(
                    "a cycle did not finish within {:?}",
                    params.cycle_limit
                ));
                break;
            }
        }
    }
    tally.seconds += started.elapsed().as_secs_f64();
}

/// The raw fenced baseline has no Redlock variant (fences over a quorum are what fencelock's
/// Redlock adds); W4 reports it as not measured.
fn unreachable_raw_fenced<T>() -> Result<T> {
    Err(BenchError::Bench(
        "not measured: the raw fenced baseline is a single-server lock".into(),
    ))
}
