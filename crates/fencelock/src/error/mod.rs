//! The one error type of fencelock, and the reasons a held lock can be lost.

use std::time::Duration;

mod conflict;
mod lost;

pub use conflict::Conflict;
pub use lost::{LostReason, ReleaseOutcome};

/// Everything that can go wrong with a fencelock operation.
///
/// Every variant that concerns a lock names it, and every variant that concerns a server names it
/// (as `host:port`, never with credentials), so that a message read in a log says what happened
/// to what.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument was refused before anything was sent to Redis.
    #[error("invalid argument for lock {lock:?}: {reason}")]
    InvalidArgument {
        /// The lock the call was about.
        lock: String,
        /// What was wrong with it.
        reason: String,
    },

    /// The client could not be configured (bad URL, bad option).
    #[error("invalid fencelock configuration: {reason}")]
    Config {
        /// What was wrong.
        reason: String,
    },

    /// The lock was still held by another owner when the caller's wait limit ran out.
    #[error("timed out after {} waiting for lock {lock:?}", rounded(*waited))]
    TimedOut {
        /// The lock waited for.
        lock: String,
        /// How long the caller waited.
        waited: Duration,
    },

    /// The lock is held by another owner and the caller chose not to wait.
    #[error("lock {lock:?} is held by another owner{}", fmt_remaining(*remaining))]
    Busy {
        /// The lock.
        lock: String,
        /// The holder's remaining lease, when Redis reported one.
        remaining: Option<Duration>,
    },

    /// The caller no longer holds the lock (for `extend`): the lease ran out or another owner has it.
    #[error("lock {lock:?} is no longer held: {reason}")]
    NotHeld {
        /// The lock.
        lock: String,
        /// Why it is no longer held.
        reason: LostReason,
    },

    /// A leadership of an election was refused an announcement (a
    /// [`Leadership::proclaim`](crate::election::Leadership::proclaim), or the announcement of
    /// a campaign just won): the election's lock is no longer held with this term (its lease ran
    /// out, or a newer leader holds it). Nothing was written.
    #[error("election {election:?}: term {term} is no longer the leader's{}", fmt_current(*current))]
    NotLeader {
        /// The election.
        election: String,
        /// The refused leadership's term.
        term: u64,
        /// The term of the election's lock now, if it is held.
        current: Option<u64>,
    },

    /// Redis did not answer in time, or the connection failed.
    #[error("Redis at {server} is unreachable for lock {lock:?}: {source}{}", fmt_hint(*hint))]
    Unreachable {
        /// The lock.
        lock: String,
        /// The server, as `host:port`.
        server: String,
        /// The underlying error (a timeout, a refused or dropped connection).
        #[source]
        source: redis::RedisError,
        /// A likely cause, when one is known: a plain connection reset at once by a TLS port,
        /// or a TLS handshake unanswered by a plain one.
        hint: Option<&'static str>,
    },

    /// Over Redlock: not enough instances agreed (they failed, timed out, or are held by
    /// another owner), so the operation did not take effect on a majority.
    #[error(
        "no quorum for {command} of lock {lock:?}: {agreed} of {total} instances agreed ({needed} needed); {details}"
    )]
    NoQuorum {
        /// The lock.
        lock: String,
        /// What fencelock was doing (`acquire`, `release`, `extend`, ...).
        command: &'static str,
        /// How many instances agreed.
        agreed: usize,
        /// How many make a majority.
        needed: usize,
        /// How many instances there are.
        total: usize,
        /// What each failing instance did, by address.
        details: String,
    },

    /// The TLS connection to Redis could not be set up: the server's certificate is not trusted
    /// (not signed by the CA given, or by a system root), the server requires a client
    /// certificate and none (or a wrong one) was given, or one side does not speak TLS.
    #[error("TLS with Redis at {server} failed for lock {lock:?}: {source}")]
    Tls {
        /// The lock.
        lock: String,
        /// The server, as `host:port`.
        server: String,
        /// The underlying error (the handshake's).
        #[source]
        source: redis::RedisError,
    },

    /// Fewer replicas than asked acknowledged a grant in time (see
    /// [`ClientBuilder::wait_for_replicas`](crate::ClientBuilder::wait_for_replicas) with
    /// [`Shortfall::Fail`](crate::Shortfall::Fail)). The lock was given back.
    #[error(
        "lock {lock:?} was granted by {server}, but only {acknowledged} of the {wanted} replicas asked for acknowledged it in time; it was given back"
    )]
    NotReplicated {
        /// The lock.
        lock: String,
        /// The server that granted it, as `host:port`.
        server: String,
        /// How many replicas acknowledged.
        acknowledged: u32,
        /// How many were asked for.
        wanted: u32,
    },

    /// Redis refused the client's credentials: a wrong user or password, or a server that
    /// requires them and got none (`WRONGPASS`, `NOAUTH`). Nothing was done.
    #[error(
        "Redis at {server} refused the credentials for lock {lock:?}: authentication failed ({source})"
    )]
    AuthFailed {
        /// The lock.
        lock: String,
        /// The server, as `host:port`.
        server: String,
        /// The error Redis (or the client, during the handshake) returned.
        #[source]
        source: redis::RedisError,
    },

    /// The ACL user may not run a command, or touch a key or channel, that the operation needs
    /// (`NOPERM`). Nothing was changed: every script that publishes does so before it writes.
    #[error(
        "Redis at {server} denied {command} for lock {lock:?}: the ACL user lacks a permission fencelock needs ({rule}): {source}"
    )]
    PermissionDenied {
        /// The lock.
        lock: String,
        /// The server, as `host:port`.
        server: String,
        /// What fencelock was doing (`acquire`, `release`, `extend`, ...).
        command: &'static str,
        /// The ACL rule that is missing, as docs/deployments.md's ACL section writes it.
        rule: &'static str,
        /// The error Redis returned.
        #[source]
        source: redis::RedisError,
    },

    /// Redis answered with another error (for instance `READONLY`, `OOM`).
    #[error("Redis at {server} refused {command} for lock {lock:?}: {source}")]
    Redis {
        /// The lock.
        lock: String,
        /// The server, as `host:port`.
        server: String,
        /// What fencelock was doing (`acquire`, `release`, `extend`, ...).
        command: &'static str,
        /// The error Redis returned.
        #[source]
        source: redis::RedisError,
    },

    /// A key that fencelock uses for this lock holds something fencelock did not put there.
    /// Nothing was written; the key was left as it was.
    #[error(
        "key {key:?} of lock {lock:?} holds {found}; it is not a fencelock lock and was left untouched"
    )]
    WrongType {
        /// The lock.
        lock: String,
        /// The Redis key in question.
        key: String,
        /// What was found there.
        found: String,
    },

    /// A fenced write carried a fence older than one the resource has already accepted: a newer
    /// holder of the lock has written. Nothing was written (see [`crate::fenced`]).
    #[error(
        "fenced write to {resource:?} refused: fence {fence} is older than {accepted}, which the resource has accepted; a newer holder wrote, nothing was changed"
    )]
    Fenced {
        /// The resource.
        resource: String,
        /// The writer's fence.
        fence: u64,
        /// The largest fence the resource has accepted.
        accepted: u64,
    },

    /// A fenced write would have failed on a key of another type (or the resource's fence key
    /// holds something else). Nothing was written.
    #[error("fenced write to {resource:?}: key {key:?} holds {found}; nothing was written")]
    FencedWrongType {
        /// The resource.
        resource: String,
        /// The Redis key in question.
        key: String,
        /// What was found there.
        found: String,
    },

    /// PostgreSQL refused a fence check or the `fences` table (feature `postgres`).
    #[cfg(feature = "postgres")]
    #[error("PostgreSQL refused the fence check of {resource:?}: {source}")]
    Sql {
        /// The resource (empty when creating the table).
        resource: String,
        /// PostgreSQL's error.
        #[source]
        source: tokio_postgres::Error,
    },

    /// The request conflicts with how the lock is already used (another kind of lock under the
    /// same name, another number of permits, a read-to-write upgrade, the re-entry limit).
    /// Nothing was written.
    #[error("lock {lock:?}: {conflict}")]
    Conflict {
        /// The lock.
        lock: String,
        /// What conflicts.
        conflict: Conflict,
    },

    /// The operating system's random-number source failed, so no owner token could be made.
    /// Nothing was sent to Redis.
    #[error(
        "no owner token for lock {lock:?}: the operating system's random source failed: {reason}"
    )]
    RandomSource {
        /// The lock.
        lock: String,
        /// The operating system's error.
        reason: String,
    },

    /// This kind of lock cannot be offered safely in this deployment (a semaphore or a fair
    /// lock over Redlock). Nothing was sent to Redis.
    #[error("lock {lock:?}: {reason}")]
    Unsupported {
        /// The lock.
        lock: String,
        /// Why, and what to use instead.
        reason: String,
    },

    /// The client was closed ([`Client::close`](crate::Client::close)): a call through it, or
    /// through anything made from it (a request, a guard, a handle, a fenced store), after
    /// the close. Nothing was sent to Redis.
    #[error("lock {lock:?}: the fencelock client is closed")]
    Closed {
        /// The lock (or the resource, or the election) the call was about.
        lock: String,
    },
}

fn fmt_hint(hint: Option<&str>) -> String {
    match hint {
        Some(hint) => format!(" ({hint})"),
        None => String::new(),
    }
}

fn fmt_current(current: Option<u64>) -> String {
    match current {
        Some(term) => format!(" (the leader's term is {term})"),
        None => " (nobody leads it)".to_owned(),
    }
}

/// A measured duration for a message, rounded as people write it: `250us`, `502ms`, `1.5s`
/// (tenths below a minute), `1m30s`, `2h5m` (whole seconds above), not `501.655815ms`. The
/// command prints its own measured durations with it too (`fencelock::rounded_duration`).
pub fn rounded(d: Duration) -> String {
    let ms = (d.as_micros() + 500) / 1000;
    if ms == 0 {
        return format!("{}us", d.as_micros());
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let tenths = (ms + 50) / 100;
    if tenths < 600 {
        return match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        };
    }
    let secs = (ms + 500) / 1000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut text = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            text.push_str(&format!("{n}{unit}"));
        }
    }
    text
}

fn fmt_remaining(remaining: Option<Duration>) -> String {
    match remaining {
        Some(d) => format!(" (its lease has {} left)", rounded(d)),
        None => String::new(),
    }
}

impl Error {
    /// The lock (or, for a fenced write, the resource; for an election, the election, which is
    /// also its lock's name) this error is about, if any.
    pub fn lock_name(&self) -> Option<&str> {
        match self {
            Error::InvalidArgument { lock, .. }
            | Error::TimedOut { lock, .. }
            | Error::Busy { lock, .. }
            | Error::NotHeld { lock, .. }
            | Error::Unreachable { lock, .. }
            | Error::Redis { lock, .. }
            | Error::AuthFailed { lock, .. }
            | Error::Tls { lock, .. }
            | Error::NotReplicated { lock, .. }
            | Error::PermissionDenied { lock, .. }
            | Error::NoQuorum { lock, .. }
            | Error::WrongType { lock, .. }
            | Error::Conflict { lock, .. }
            | Error::RandomSource { lock, .. }
            | Error::Unsupported { lock, .. }
            | Error::Closed { lock } => Some(lock),
            Error::NotLeader { election, .. } => Some(election),
            Error::Fenced { resource, .. } | Error::FencedWrongType { resource, .. } => {
                Some(resource)
            }
            #[cfg(feature = "postgres")]
            Error::Sql { resource, .. } => Some(resource),
            Error::Config { .. } => None,
        }
    }

    /// Every code [`code`](Self::code) gives, one per variant, in the order the variants are
    /// declared: the variant's name in snake case. The codes are the vocabulary every front
    /// end shows (the Python package's exception classes, the command's `--json` output):
    /// they are stable, and a new variant comes with a new code. `sql` exists with the
    /// feature `postgres` only, and is listed always.
    pub const CODES: &'static [&'static str] = &[
        "invalid_argument",
        "config",
        "timed_out",
        "busy",
        "not_held",
        "not_leader",
        "unreachable",
        "no_quorum",
        "tls",
        "not_replicated",
        "auth_failed",
        "permission_denied",
        "redis",
        "wrong_type",
        "fenced",
        "fenced_wrong_type",
        "sql",
        "conflict",
        "random_source",
        "unsupported",
        "closed",
    ];

    /// This error's stable code, one of [`CODES`](Self::CODES) (`"timed_out"` for
    /// [`Error::TimedOut`]): what a program matches on, where the message is for people.
    ///
    /// ```
    /// let err = fencelock::Error::Busy { lock: "jobs".into(), remaining: None };
    /// assert_eq!(err.code(), "busy");
    /// assert!(fencelock::Error::CODES.contains(&err.code()));
    /// ```
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidArgument { .. } => "invalid_argument",
            Error::Config { .. } => "config",
            Error::TimedOut { .. } => "timed_out",
            Error::Busy { .. } => "busy",
            Error::NotHeld { .. } => "not_held",
            Error::NotLeader { .. } => "not_leader",
            Error::Unreachable { .. } => "unreachable",
            Error::NoQuorum { .. } => "no_quorum",
            Error::Tls { .. } => "tls",
            Error::NotReplicated { .. } => "not_replicated",
            Error::AuthFailed { .. } => "auth_failed",
            Error::PermissionDenied { .. } => "permission_denied",
            Error::Redis { .. } => "redis",
            Error::WrongType { .. } => "wrong_type",
            Error::Fenced { .. } => "fenced",
            Error::FencedWrongType { .. } => "fenced_wrong_type",
            #[cfg(feature = "postgres")]
            Error::Sql { .. } => "sql",
            Error::Conflict { .. } => "conflict",
            Error::RandomSource { .. } => "random_source",
            Error::Unsupported { .. } => "unsupported",
            Error::Closed { .. } => "closed",
        }
    }

    pub(crate) fn invalid(lock: &str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            lock: lock.to_owned(),
            reason: reason.into(),
        }
    }
}

/// A `Result` with fencelock's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests;
