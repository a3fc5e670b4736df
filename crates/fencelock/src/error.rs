//! The one error type of fencelock, and the reasons a held lock can be lost.

use std::fmt;
use std::time::Duration;

use crate::kind::LockKind;

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
}

/// How a request conflicts with the lock's state (see [`Error::Conflict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conflict {
    /// The name is in use by another kind of lock; every user of a name must use the same kind.
    OtherKind {
        /// What the name is in use as now.
        found: LockKind,
        /// What the refused request was for.
        requested: LockKind,
    },
    /// The semaphore's current holders use another number of permits; every user of a
    /// semaphore must agree on it (it may change only while no permit is held).
    PermitsMismatch {
        /// The number this request used.
        requested: u32,
        /// The number the current holders use, as stored.
        held_with: String,
    },
    /// The owner holds a read lock and asked for the write lock: it would wait for itself
    /// forever. Release the read lock first.
    Upgrade,
    /// The owner already holds the write lock and asked for it again; the write lock is not
    /// reentrant (a read lock under it is allowed: a downgrade).
    WriteReentry,
    /// The owner already holds the reentrant lock as many times as the limit allows.
    ReentryLimit {
        /// The limit.
        limit: u32,
    },
}

impl Conflict {
    /// Every code [`code`](Self::code) gives, one per variant: its name in snake case (see
    /// [`Error::CODES`]).
    pub const CODES: &'static [&'static str] = &[
        "other_kind",
        "permits_mismatch",
        "upgrade",
        "write_reentry",
        "reentry_limit",
    ];

    /// This conflict's stable code, one of [`CODES`](Self::CODES).
    pub fn code(&self) -> &'static str {
        match self {
            Conflict::OtherKind { .. } => "other_kind",
            Conflict::PermitsMismatch { .. } => "permits_mismatch",
            Conflict::Upgrade => "upgrade",
            Conflict::WriteReentry => "write_reentry",
            Conflict::ReentryLimit { .. } => "reentry_limit",
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::OtherKind { found, requested } => write!(
                f,
                "the name is in use as {found}, and this request is for {requested}; every user of a name must use the same kind of lock"
            ),
            Conflict::PermitsMismatch {
                requested,
                held_with,
            } => write!(
                f,
                "the semaphore is held with {held_with} permits, and this request asks for {requested}; every user of a semaphore must agree on the number of permits"
            ),
            Conflict::Upgrade => f.write_str(
                "this owner holds a read lock and asked for the write lock, which would wait for itself forever; release the read lock first (there is no read-to-write upgrade)",
            ),
            Conflict::WriteReentry => f.write_str(
                "this owner already holds the write lock; the write lock is not reentrant",
            ),
            Conflict::ReentryLimit { limit } => write!(
                f,
                "this owner already holds the lock {limit} times, the re-entry limit"
            ),
        }
    }
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

/// A measured duration for a message, rounded as people write it: `250us`, `502ms`, `1.5s`,
/// `1m30s` (not `501.655815ms`).
fn rounded(d: Duration) -> String {
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
            | Error::Unsupported { lock, .. } => Some(lock),
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

/// Why a guard stopped holding its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// Redis answered that the key no longer carries this owner's token: it was deleted
    /// (for instance by an operator's force-release) or it expired and another owner took it.
    NotOwner,
    /// The local deadline passed without a confirmed renewal: the lease may have expired on the
    /// server. `last_error` tells why the renewals failed, when they did.
    Expired {
        /// The last renewal error, if any renewal was attempted and failed.
        last_error: Option<String>,
    },
    /// Renewal stopped because the lock reached its `max_hold` cap, and the lease then ran out.
    MaxHoldReached,
    /// The guard released the lock (or was dropped).
    Released,
}

impl LostReason {
    /// Every code [`code`](Self::code) gives, one per variant: its name in snake case (see
    /// [`Error::CODES`]).
    pub const CODES: &'static [&'static str] =
        &["not_owner", "expired", "max_hold_reached", "released"];

    /// This reason's stable code, one of [`CODES`](Self::CODES): the `reason` label of the
    /// `fencelock_losses_total` counter, the Python guard's `lost_reason`.
    pub fn code(&self) -> &'static str {
        match self {
            LostReason::NotOwner => "not_owner",
            LostReason::Expired { .. } => "expired",
            LostReason::MaxHoldReached => "max_hold_reached",
            LostReason::Released => "released",
        }
    }
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::NotOwner => {
                f.write_str("Redis says another owner has it, or the key was deleted")
            }
            LostReason::Expired { last_error: None } => {
                f.write_str("the lease ran out before it was renewed")
            }
            LostReason::Expired {
                last_error: Some(e),
            } => write!(f, "the lease ran out before it could be renewed ({e})"),
            LostReason::MaxHoldReached => f.write_str("the maximum hold time was reached"),
            LostReason::Released => f.write_str("it was released"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_durations_read_rounded() {
        let busy = Error::Busy {
            lock: "jobs".into(),
            remaining: Some(Duration::from_nanos(501_655_815)),
        };
        assert_eq!(
            busy.to_string(),
            "lock \"jobs\" is held by another owner (its lease has 502ms left)"
        );
        let timed_out = Error::TimedOut {
            lock: "jobs".into(),
            waited: Duration::from_micros(1_502_317),
        };
        assert_eq!(
            timed_out.to_string(),
            "timed out after 1.5s waiting for lock \"jobs\""
        );
        for (d, text) in [
            (Duration::from_micros(250), "250us"),
            (Duration::from_micros(999_600), "1s"),
            (Duration::from_millis(2_000), "2s"),
            (Duration::from_millis(59_960), "1m"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3_605), "1h5s"),
        ] {
            assert_eq!(rounded(d), text, "{d:?}");
        }
    }

    fn redis_error() -> redis::RedisError {
        redis::RedisError::from(std::io::Error::other("down"))
    }

    /// One error of each variant (every code must be given by one of them).
    fn one_of_each() -> Vec<Error> {
        let lock = || "jobs".to_owned();
        let server = || "127.0.0.1:6379".to_owned();
        vec![
            Error::invalid("jobs", "bad"),
            Error::Config {
                reason: "bad".into(),
            },
            Error::TimedOut {
                lock: lock(),
                waited: Duration::ZERO,
            },
            Error::Busy {
                lock: lock(),
                remaining: None,
            },
            Error::NotHeld {
                lock: lock(),
                reason: LostReason::NotOwner,
            },
            Error::NotLeader {
                election: lock(),
                term: 1,
                current: None,
            },
            Error::Unreachable {
                lock: lock(),
                server: server(),
                source: redis_error(),
                hint: None,
            },
            Error::NoQuorum {
                lock: lock(),
                command: "acquire",
                agreed: 1,
                needed: 2,
                total: 3,
                details: String::new(),
            },
            Error::Tls {
                lock: lock(),
                server: server(),
                source: redis_error(),
            },
            Error::NotReplicated {
                lock: lock(),
                server: server(),
                acknowledged: 0,
                wanted: 1,
            },
            Error::AuthFailed {
                lock: lock(),
                server: server(),
                source: redis_error(),
            },
            Error::PermissionDenied {
                lock: lock(),
                server: server(),
                command: "acquire",
                rule: "+evalsha",
                source: redis_error(),
            },
            Error::Redis {
                lock: lock(),
                server: server(),
                command: "acquire",
                source: redis_error(),
            },
            Error::WrongType {
                lock: lock(),
                key: "k".into(),
                found: "list".into(),
            },
            Error::Fenced {
                resource: lock(),
                fence: 1,
                accepted: 2,
            },
            Error::FencedWrongType {
                resource: lock(),
                key: "k".into(),
                found: "list".into(),
            },
            Error::Conflict {
                lock: lock(),
                conflict: Conflict::Upgrade,
            },
            Error::RandomSource {
                lock: lock(),
                reason: "no".into(),
            },
            Error::Unsupported {
                lock: lock(),
                reason: "no".into(),
            },
        ]
    }

    #[test]
    fn every_error_has_one_listed_code_and_every_code_an_error() {
        let mut given: Vec<&str> = one_of_each().iter().map(Error::code).collect();
        // `Sql` needs a PostgreSQL error to be made; its code is listed with the others.
        given.insert(16, "sql");
        assert_eq!(given, Error::CODES);
    }

    #[test]
    fn every_conflict_and_loss_has_one_listed_code() {
        let conflicts = [
            Conflict::OtherKind {
                found: LockKind::Lock,
                requested: LockKind::Semaphore,
            },
            Conflict::PermitsMismatch {
                requested: 1,
                held_with: "2".into(),
            },
            Conflict::Upgrade,
            Conflict::WriteReentry,
            Conflict::ReentryLimit { limit: 3 },
        ];
        let codes: Vec<&str> = conflicts.iter().map(Conflict::code).collect();
        assert_eq!(codes, Conflict::CODES);
        let reasons = [
            LostReason::NotOwner,
            LostReason::Expired { last_error: None },
            LostReason::MaxHoldReached,
            LostReason::Released,
        ];
        let codes: Vec<&str> = reasons.iter().map(LostReason::code).collect();
        assert_eq!(codes, LostReason::CODES);
    }

    /// A code is the variant's name in snake case: derived, not chosen, so that no front end
    /// has a reason to name it differently.
    #[test]
    fn codes_are_the_variants_names_in_snake_case() {
        let snake = |debug: String| {
            let name: String = debug.chars().take_while(|c| c.is_alphanumeric()).collect();
            let mut out = String::new();
            for (i, c) in name.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            }
            out
        };
        for error in one_of_each() {
            assert_eq!(error.code(), snake(format!("{error:?}")));
        }
        for reason in [
            LostReason::NotOwner,
            LostReason::MaxHoldReached,
            LostReason::Released,
        ] {
            assert_eq!(reason.code(), snake(format!("{reason:?}")));
        }
        for conflict in [Conflict::Upgrade, Conflict::WriteReentry] {
            assert_eq!(conflict.code(), snake(format!("{conflict:?}")));
        }
    }
}
