//! W1, uncontended latency: one client per contender, sequential acquire + release, a new key
//! each cycle.

use std::time::Duration;

use tokio::time::Instant;

use super::{Contender, finish_all, take_turns};
use crate::error::Result;
use crate::locker::Library;
use crate::report::{W1Measured, W1Row};
use crate::stats::{Repetitions, Samples};
use crate::system;

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
        Ok(W1Row::new(
            c.library,
            W1Measured {
                cycles_per_s: self.repetitions.rate(),
                p50_us: self.repetitions.p50_us(),
                p99_us: self.repetitions.p99_us(),
                repetitions: self.repetitions.len(),
                cycles: total_cycles,
                commands_per_cycle: (total_cycles > 0)
                    .then(|| commands as f64 / total_cycles as f64),
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
            },
        ))
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
