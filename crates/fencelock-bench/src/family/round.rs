//! W6 contended: the workers of one round, the round's numbers, and the rows over the rounds
//! (medians, grants per worker summed).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::Client;
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use super::book::{Book, Role};
use super::crowd::{Crowd, Handle};
use super::{ORDER_TOLERANCE, W6Params, give};
use crate::error::{BenchError, Result};
use crate::report::W6Contended;
use crate::stats::median;
use crate::system;
use crate::workloads::{hold_for, lock};

/// Every contended kind, the rounds interleaved across the kinds. A kind that fails is
/// reported in its row; the others go on.
pub(super) async fn contended(
    clients: &[Client],
    admin: &mut MultiplexedConnection,
    p: &W6Params,
) -> Vec<W6Contended> {
    let mut crowds: Vec<CrowdRun> = Crowd::ALL.into_iter().map(CrowdRun::new).collect();
    for round in 0..p.rounds.max(1) {
        for run in crowds.iter_mut().filter(|r| r.error.is_none()) {
            match crowd_round(run.crowd, round, clients, admin, p).await {
                Ok(rows) => run.rounds.push(rows),
                Err(e) => run.error = Some(e.to_string()),
            }
        }
    }
    crowds.into_iter().flat_map(CrowdRun::rows).collect()
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
    let book = Arc::new(Mutex::new(Book::new(workers)));
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

    #[test]
    fn scripts_per_grant_needs_grants() {
        assert_eq!(per_grant(34, 2), Some(17.0));
        assert_eq!(per_grant(5, 0), None);
        assert_eq!(per_grant(0, 3), Some(0.0));
    }
}
