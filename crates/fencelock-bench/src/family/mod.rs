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
//!
//! One module per job: `solo` (the uncontended measurement), `crowd` (the contended runs: their
//! kinds, rows and lock handles), `book` (the shared bookkeeping that checks every grant and
//! release of a contended round) and `round` (the contended workers and rounds, and their rows).

mod book;
mod crowd;
mod round;
mod solo;

use std::time::Duration;

use fencelock::{Client, LockGuard, LockRequest};

use crate::error::{BenchError, Result};
use crate::report::W6Report;
use crate::workloads::Bed;

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
/// begins (a short while, longer on a busy machine), so the one that began first may have been
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
    let uncontended = solo::uncontended(&clients, &mut bed.admin, p).await?;
    let contended = round::contended(&clients, &mut bed.admin, p).await;
    drop(bed);
    Ok(W6Report {
        uncontended,
        contended,
        error: None,
    })
}
