//! Taking what `fencelock run` runs under (a lock, permits, several locks, a run-once's lock):
//! the request built from the options, the wait that a signal can end, and the errors in the
//! tool's own terms.

use nix::sys::signal::Signal;

use super::RunArgs;
use super::signals::Signals;
use super::signals::signal_number;
use crate::error::CliError;
use crate::servers::Servers;

/// Acquires what `args` asks for, for its one name. A signal that ends the wait drops the
/// acquisition, which gives back in the background whatever it may hold (the caller waits for
/// that with `wait_idle`).
pub(super) async fn acquire(
    client: &fencelock::Client,
    args: &RunArgs,
    servers: &Servers,
    signals: &mut Signals,
) -> Result<fencelock::LockGuard, CliError> {
    let name = args.name().to_owned();
    let request = match args.permits {
        Some(permits) => client
            .semaphore(name.clone(), permits)
            .take(args.take.unwrap_or(1)),
        None => client.lock(name.clone()),
    }
    .ttl(args.ttl)
    .lock_delay(args.lock_delay.unwrap_or_default())
    .label(args.label.text())
    .wait(args.wait.policy());
    tracing::debug!(lock = %name, permits = ?args.permits, take = ?args.take, servers = %servers.describe(), "acquiring");
    tokio::select! {
        biased;
        signal = signals.ending() => Err(interrupted_while_waiting(signal, &name)),
        acquired = request.acquire() => {
            acquired.map_err(|err| acquire_error(err, servers, args.permits))
        }
    }
}

/// Acquires every name of `args`, or none.
pub(super) async fn acquire_all(
    client: &fencelock::Client,
    args: &RunArgs,
    servers: &Servers,
    signals: &mut Signals,
) -> Result<fencelock::multi::MultiGuard, CliError> {
    let request = client
        .multi_lock(args.names.iter().cloned())
        .ttl(args.ttl)
        .label(args.label.text())
        .wait(args.wait.policy());
    tracing::debug!(locks = ?args.names, servers = %servers.describe(), "acquiring");
    tokio::select! {
        biased;
        signal = signals.ending() => Err(interrupted_while_waiting(signal, &args.names.join(", "))),
        acquired = request.acquire() => acquired.map_err(|err| acquire_error(err, servers, None)),
    }
}

/// `--once KEY`: the lock, unless KEY was done (before or while waiting).
pub(super) async fn begin_once(
    client: &fencelock::Client,
    args: &RunArgs,
    key: &str,
    servers: &Servers,
    signals: &mut Signals,
) -> Result<fencelock::once::Begun, CliError> {
    let name = args.name().to_owned();
    let mut once = client
        .once(key)
        .lock(name.clone())
        .ttl(args.ttl)
        .label(args.label.text())
        .wait(args.wait.policy());
    if let Some(tick) = args.schedule.tick() {
        once = once.tick(tick);
    }
    if let Some(keep) = args.schedule.keep() {
        once = once.keep(keep);
    }
    if let Some(attempts) = args.schedule.attempts() {
        once = once.attempts(attempts);
    }
    tokio::select! {
        biased;
        signal = signals.ending() => Err(interrupted_while_waiting(signal, &name)),
        begun = once.begin() => begun.map_err(|err| match err {
            fencelock::Error::Unsupported { .. } => CliError::Failed {
                message: format!(
                    "{err} (on {}): --once records its key with a fenced write, on one server; \
                     nothing was sent and nothing was run",
                    servers.describe()
                ),
                code: crate::error::EXIT_USAGE,
            },
            err => acquire_error(err, servers, None),
        }),
    }
}

/// The error of a failed acquisition, with the servers named where the library does not, and
/// what to do about a semaphore's refusals in the tool's own terms.
pub(super) fn acquire_error(
    err: fencelock::Error,
    servers: &Servers,
    permits: Option<u32>,
) -> CliError {
    use fencelock::{Conflict, Error, LockKind};

    let code = crate::error::lock_error_code(&err);
    let on = servers.describe();
    let message = match (&err, permits) {
        (Error::Busy { lock, remaining }, Some(n)) => {
            let next = remaining.map_or_else(String::new, |d| {
                format!(
                    " (the first of their leases runs out in {})",
                    crate::duration::format_rounded(d)
                )
            });
            format!(
                "semaphore {lock:?}: {} held{next} (on {on})",
                permits_are(n)
            )
        }
        (Error::TimedOut { .. }, Some(n)) => {
            format!("{err}: {} still held (on {on})", permits_are(n))
        }
        (Error::Busy { .. } | Error::TimedOut { .. }, None) => format!("{err} (on {on})"),
        (Error::Unsupported { .. }, _) => format!(
            "{err} (on {on}). --permits needs a single Redis server, a cluster or sentinels, \
             and {} independent servers were given; nothing was sent to them and nothing was run",
            servers.urls.len()
        ),
        (Error::Conflict { conflict, .. }, _) => {
            let hint = match (conflict, permits) {
                (Conflict::PermitsMismatch { held_with, .. }, _) => format!(
                    " Pass --permits {held_with} as its holders do (the number can change only \
                     while no permit is held)."
                ),
                (
                    Conflict::OtherKind {
                        found: LockKind::Semaphore,
                        ..
                    },
                    None,
                ) => {
                    " Its users hold permits of it: pass the same --permits as they do.".to_owned()
                }
                (
                    Conflict::OtherKind {
                        found: LockKind::Lock,
                        ..
                    },
                    Some(_),
                ) => " Its users hold it as a lock, not a semaphore: drop --permits.".to_owned(),
                _ => String::new(),
            };
            format!("{err} (on {on}).{hint} Nothing was run")
        }
        _ => return CliError::Lock(err),
    };
    CliError::Failed { message, code }
}

/// "all N permits are" / "its only permit is", for messages.
fn permits_are(n: u32) -> String {
    if n == 1 {
        "its only permit is".to_owned()
    } else {
        format!("all {n} permits are")
    }
}

pub(super) fn interrupted_while_waiting(signal: Signal, name: &str) -> CliError {
    CliError::Failed {
        message: format!(
            "interrupted by {} while waiting for lock {name:?}; nothing is held and the command \
             was not run",
            signal.as_str()
        ),
        code: 128 + signal_number(signal),
    }
}
