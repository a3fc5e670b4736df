//! The error codes: one per variant, listed, and the variants' names in snake case.

use super::*;
use crate::kind::LockKind;

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
        Error::Closed { lock: lock() },
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
