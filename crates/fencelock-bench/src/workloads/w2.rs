//! W2, uncontended throughput: many tasks on one client per contender, each its own key.

use std::time::Duration;

use tokio::time::Instant;

use super::{Contender, finish_all, take_turns};
use crate::error::{BenchError, Result};
use crate::locker::Library;
use crate::report::{W2Measured, W2Row};
use crate::system;

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
        Ok(W2Row::new(
            c.library,
            W2Measured {
                client_cpu_us_per_cycle: per_cycle(c.client_cpu * 1e6),
                server_cpu_us_per_cycle: per_cycle(c.server_cpu * 1e6),
                script_runs_per_cycle: per_cycle((counters.evalsha + counters.eval) as f64),
                // The INFO calls that read the counters are themselves counted (the turns', and
                // one before the count).
                reads_per_cycle: per_cycle(counters.reads.saturating_sub(c.info_calls + 1) as f64),
                tasks: self.per_task.len(),
                cycles_per_s: if self.seconds > 0.0 {
                    total as f64 / self.seconds
                } else {
                    0.0
                },
                cycles: total,
                min_task_cycles: self.per_task.iter().copied().min().unwrap_or(0),
                max_task_cycles: self.per_task.iter().copied().max().unwrap_or(0),
            },
        ))
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
