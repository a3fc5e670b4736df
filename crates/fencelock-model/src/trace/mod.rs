//! Real runs checked against the model (trace validation).
//!
//! A trace is what the workers of a real run saw, in time order: each request and its grant
//! with a fence, each fenced write and the store's answer, each loss a worker was told of, each
//! release and what it found, and the faults that can make a server forget (a restart without
//! persistence, a Sentinel failover). [`check`] searches for a run of the lock's model that
//! produces exactly what was seen, and names the first event that no such run explains.
//!
//! The model here is the lock as the server keeps it, at the level a history shows: per lock,
//! the holds on the server (at most `permits`), the fence counter, and the fenced store (the
//! largest fence it accepted and its log). Each operation takes effect at one instant between its
//! call and its return (so calls that overlap may take effect in either order); between them
//! the model may take its hidden steps, each under the rule that allows it:
//!
//! - **a grant** of fence `f` needs room (its permits free among the lock's `permits`) and `f`
//!   above every fence granted before it (the counter, which a lost server does not reset:
//!   `max(last + 1, clock)`);
//! - **a hold ends without a release** (its lease ran out, or a server forgot it) only if its
//!   holder was told (`lost()` fired within its critical section, or a trace cut short ends
//!   inside it, so it may yet be told; when the holder says what its lease's deadline was, only
//!   from that instant on), or the holder had begun its release or was killed, or a server lost
//!   its data since the grant. This is *the holder knows
//!   before anyone else can have it*, with the holder's side checked by [`crate::lease`];
//! - **a release** that says the lock was still held finds the hold on the server and deletes
//!   it; one that says it was not (or failed) deletes it if it is there;
//! - **a fenced write** is accepted iff its fence is at least the largest the store accepted,
//!   appends to the store's log in the log's order, and a refusal reports the store's fence.
//!
//! The search is the one linearizability checkers use (each return settles its operation,
//! with any operations still in flight placed before it), over sets of model states.

mod chaos;
mod ops;
mod search;
#[cfg(test)]
mod tests;

pub use chaos::read_chaos_history;

/// One thing a worker saw, or a fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The worker asks for the lock (a call).
    Request,
    /// Its request was granted with `fence` (the return), taking `permits` of the lock's (1 but
    /// for a semaphore's take of several).
    Granted { fence: u64, permits: u32 },
    /// Its request was answered without a grant: busy, timed out, or an error.
    NotGranted,
    /// A fenced write with `fence`, begun at `started_ns`, and what the store answered.
    Write {
        fence: u64,
        started_ns: u64,
        outcome: WriteOutcome,
    },
    /// The holder of `fence` was told by its lock that it was lost; `deadline_ns`, if known, is
    /// the lease's deadline then: before it, the lease cannot have run out on the server.
    Told {
        fence: u64,
        deadline_ns: Option<u64>,
    },
    /// The holder of `fence` begins its release: its critical section ends.
    Release { fence: u64 },
    /// The release returned: whether the lock was still held, or `None` (an error: unknown).
    Released { fence: u64, held: Option<bool> },
    /// The worker was killed: its critical section ends, its calls in flight never return.
    Killed,
}

/// What the fenced store answered a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Accepted (appended to the store's log).
    Accepted,
    /// Refused: the store had accepted `store`, a larger fence.
    Refused { store: u64 },
    /// No answer (an error): it may or may not have been applied.
    Unknown,
}

/// A fault that can make a server forget what it acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// A server was killed and restarted without persistence (an instant).
    Restart,
    /// A Sentinel failover begins: the old master may go on answering, and the promoted replica
    /// may lack what was not replicated yet, until it ends.
    FailoverStart,
    /// The failover ends.
    FailoverEnd,
}

/// One line of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The line of the history it came from (1-based), to name it.
    pub line: usize,
    /// When, in nanoseconds of one clock for every process (`CLOCK_MONOTONIC`).
    pub at_ns: u64,
    /// What happened.
    pub what: What,
}

/// What a line of a trace records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// Worker `worker` saw `seen` about lock `lock` (`Killed` applies to every lock).
    Worker {
        worker: u32,
        lock: String,
        seen: Seen,
    },
    /// A fault that may lose data (it applies to every lock).
    Fault(Loss),
    /// The fenced store's log for `lock`, read at the end: (fence, worker) in order.
    StoreLog { lock: String, log: Vec<(u64, u32)> },
}

/// A run's trace: its events in the order they were written, and its locks' permits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// How many may hold a lock at once (1 but for a semaphore).
    pub permits: u32,
    pub events: Vec<Event>,
    /// The run went on past the trace's end (it was killed): a critical section still open at
    /// the end may yet be told of its loss.
    pub cut: bool,
}

/// A trace that the model explains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explained {
    /// The operations placed (grants, writes, releases), over every lock.
    pub operations: usize,
    /// The locks.
    pub locks: usize,
    /// The most model states the search kept at once.
    pub widest: usize,
}

/// The first event no run of the model explains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unexplained {
    /// Its line in the history.
    pub line: usize,
    /// Its lock.
    pub lock: String,
    /// Why: what the model could not do there.
    pub why: String,
}

impl std::fmt::Display for Unexplained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {} ({}): {}", self.line, self.lock, self.why)
    }
}

/// The most model states kept at once before the search gives up (a trace that needs more is
/// reported as unexplained, saying so: never as explained).
pub const MAX_STATES: usize = 200_000;

/// Searches for a run of the model that explains `trace`, lock by lock, keeping at most
/// [`MAX_STATES`] model states at once.
///
/// # Errors
///
/// The first event (by time, over every lock) that no run of the model explains.
pub fn check(trace: &Trace) -> Result<Explained, Unexplained> {
    check_within(trace, MAX_STATES)
}

/// [`check`], keeping at most `most` model states at once.
///
/// # Errors
///
/// As [`check`]; a trace that needs more states is not explained.
pub fn check_within(trace: &Trace, most: usize) -> Result<Explained, Unexplained> {
    let permits = usize::try_from(trace.permits.max(1)).unwrap_or(usize::MAX);
    let mut explained = Explained {
        operations: 0,
        locks: 0,
        widest: 0,
    };
    let mut first: Option<(u64, Unexplained)> = None;
    for (lock, plan) in ops::plans(trace) {
        explained.locks += 1;
        match search::run(&plan, permits, most) {
            Ok((operations, widest)) => {
                explained.operations += operations;
                explained.widest = explained.widest.max(widest);
            }
            Err((at_ns, line, why)) => {
                if first.as_ref().is_none_or(|(t, _)| at_ns < *t) {
                    first = Some((at_ns, Unexplained { line, lock, why }));
                }
            }
        }
    }
    match first {
        Some((_, unexplained)) => Err(unexplained),
        None => Ok(explained),
    }
}
