//! `fencelock run NAME -- COMMAND [ARGS...]`: the distributed `flock(1)`.
//!
//! Acquire the lock (waiting as asked), run the command in a process group of its own with the
//! lock's name and fencing token in its environment while the library's watchdog renews the
//! lease, release the lock when the command ends, and exit with the command's exit code. If the
//! lock is lost while the command runs, the command's process group gets SIGTERM, then SIGKILL
//! after a grace period, and `fencelock` exits with [`EXIT_LOCK_LOST`].
//!
//! With `--permits N` the command runs under one permit of the semaphore NAME instead (at most N
//! commands at once), with the same environment (plus `FENCELOCK_PERMITS`), renewal, stopping
//! and exit codes.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use crate::duration::{format_duration, parse_duration};
use crate::error::{CliError, EXIT_CANNOT_EXECUTE, EXIT_FAILURE, EXIT_LOCK_LOST, EXIT_NOT_FOUND};
use crate::servers::{ServerArgs, Servers};

/// After an abandoned acquisition, how long the runtime is kept alive so that the library can
/// give back, in the background, whatever the acquisition may have been granted.
const GIVE_BACK_TIME: Duration = Duration::from_millis(150);
/// How often the process group of a stopped command is checked for survivors.
const GROUP_POLL: Duration = Duration::from_millis(20);
/// How long to wait for a SIGKILLed command to be reaped.
const REAP_LIMIT: Duration = Duration::from_secs(5);
/// The command's environment variable with the semaphore's number of permits (`--permits`).
const PERMITS_ENV: &str = "FENCELOCK_PERMITS";

pub const LONG_ABOUT: &str = "\
Run a command while holding a distributed lock: the distributed flock(1).

fencelock acquires the lock NAME (waiting for it as long as it takes, or up to --wait, or not at \
all with --no-wait), then runs COMMAND directly (no shell) with its arguments. The command gets \
FENCELOCK_NAME (the lock's name) and FENCELOCK_FENCE (the fencing token: larger than that of \
every earlier holder of NAME) in its environment; stdin, stdout and stderr are inherited. The \
lease (--ttl) is renewed every third of its length while the command runs, and the lock is \
released when the command ends; fencelock then exits with the command's exit code (128+N if a \
signal N killed it).

A lock on Redis is a lease, not a mutex. If the lock is lost while the command runs (the lease \
could not be renewed in time, or an operator ran `fencelock release --force`), the command's \
process group gets SIGTERM, then SIGKILL after --kill-after, and fencelock exits with 74. Pass \
$FENCELOCK_FENCE to the resource the command writes to, so that it can refuse a holder that \
lost the lock without knowing it.

The command runs in a process group of its own, like under timeout(1): SIGINT, SIGTERM, SIGHUP, \
SIGQUIT, SIGUSR1 and SIGUSR2 sent to fencelock are forwarded to that group, and the lock is \
released when the command has ended. It should not read from the terminal (it is not in the \
terminal's foreground process group). While fencelock is still waiting for the lock, SIGINT, \
SIGTERM and SIGHUP stop the wait at once (exit 130, 143, 129) with nothing held.

With --permits N, NAME is a semaphore of N permits instead of a lock: up to N commands run at \
once under it, each holding one permit (a lease of its own, renewed and lost like a lock) with a \
fence of its own, and FENCELOCK_PERMITS=N in its environment. Every user of NAME must pass the \
same --permits while any permit is held (exit 2 otherwise, nothing run); --permits 1 is a \
semaphore of one permit, not the plain lock, and refuses a `fencelock run NAME` without \
--permits (and the other way round). A semaphore needs a single Redis server: over Redlock \
majority voting cannot bound the holders to N, so --permits with several servers is refused \
(exit 2) before anything is sent.";

pub const AFTER_HELP: &str = "\
Exit status:
  0-255  the command's own exit status (128+N if signal N killed it)
  2      usage error (nothing was run): bad option, invalid lock name or Redis URL,
         --permits with several servers, --permits other than that of NAME's holders,
         or NAME in use as another kind of lock (a semaphore vs a plain lock)
  69     Redis unreachable, no quorum (Redlock), or Redis refused a command
  73     lock not acquired: held by another owner, or all N permits held (--no-wait),
         or --wait ran out
  74     the lock (or permit) was lost while the command ran (the command was stopped)
  126    the command was found but cannot be executed
  127    the command was not found
  129, 130, 143  SIGHUP, SIGINT, SIGTERM while waiting for the lock (nothing was run)
  1      any other error
fencelock prints a line starting with \"fencelock:\" on stderr whenever the status is its own.

Servers: --url (repeatable: several mean Redlock), else $FENCELOCK_URL (comma-separated),
else the file named by $FENCELOCK_URL_FILE, else redis://127.0.0.1:6379. Put URLs with a
password in the environment or the file, never on the command line.

Examples:
  fencelock run nightly-report -- ./make-report.sh --date today
  fencelock run --no-wait backup -- rsync -a /data/ backup:/data/
  fencelock run --wait 5m --ttl 10s migrate -- sh -c 'exec ./migrate --fence \"$FENCELOCK_FENCE\"'
  fencelock run --permits 3 transcode -- ./transcode.sh   # at most 3 at once, fleet-wide
  FENCELOCK_URL=redis://r1:6379,redis://r2:6379,redis://r3:6379 fencelock run job -- ./job";

/// Arguments of `fencelock run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// The lease: how long the lock outlives a fencelock that stops renewing it (crashed,
    /// frozen, cut off). Renewed every third of it while the command runs
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    ttl: Duration,

    /// Wait at most this long for the lock, then exit with 73 [default: wait as long as it takes]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "no_wait")]
    wait: Option<Duration>,

    /// Do not wait: exit with 73 at once if the lock is held
    #[arg(long)]
    no_wait: bool,

    /// When the lock is lost: how long the command has between SIGTERM and SIGKILL
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    kill_after: Duration,

    /// Take one permit of the semaphore NAME with N permits instead of the lock: at most N
    /// commands run at once. Every user of NAME must pass the same N (--permits 1 is not the
    /// plain lock); a single Redis server only (not Redlock)
    #[arg(long, value_name = "N", value_parser = parse_permits)]
    permits: Option<u32>,

    /// The lock's name (no braces, no control characters)
    #[arg(value_name = "NAME")]
    name: String,

    /// The command to run and its arguments, after `--`
    #[arg(value_name = "COMMAND", last = true, required = true, num_args = 1..)]
    command: Vec<OsString>,
}

/// Runs `fencelock run`. `Ok(())` means exit 0; the command's non-zero exit code comes back as
/// [`CliError::Reported`].
/// How long `run` waits, after the lock is released, for calls still under way to the slowest
/// of several servers.
const FINISH_LIMIT: Duration = Duration::from_secs(2);

pub async fn run(args: RunArgs) -> Result<(), CliError> {
    let servers = args.servers.resolve()?;
    let Some((program, program_args)) = args.command.split_first() else {
        return Err(CliError::Usage(
            "no command to run was given after --".into(),
        ));
    };
    // Before the lock is taken: a command that cannot run is not worth waiting for.
    check_command(program)?;
    let mut signals = Signals::new()?;
    let client = servers.client()?;
    let outcome = async {
        let mut request = match args.permits {
            Some(permits) => client.semaphore(args.name.clone(), permits),
            None => client.lock(args.name.clone()),
        }
        .ttl(args.ttl);
        request = match (args.no_wait, args.wait) {
            (true, _) => request.no_wait(),
            (false, Some(limit)) => request.wait_up_to(limit),
            (false, None) => request.wait(fencelock::WaitPolicy::Forever),
        };
        // What is held, for messages: `lock "NAME"` or `permit of semaphore "NAME" (N permits)`.
        let held = match args.permits {
            Some(n) => format!("permit of semaphore {:?} ({n} permits)", args.name),
            None => format!("lock {:?}", args.name),
        };
        tracing::debug!(lock = %args.name, permits = ?args.permits, servers = %servers.describe(), "acquiring");

        let acquired = tokio::select! {
            biased;
            signal = signals.recv() => {
                // Dropping the acquisition gives back, in the background, what it may hold.
                tokio::time::sleep(GIVE_BACK_TIME).await;
                return Err(interrupted_while_waiting(signal, &args.name));
            }
            acquired = request.acquire() => acquired,
        };
        let guard = match acquired {
            Ok(guard) => guard,
            Err(err) => {
                let refused_unsent = matches!(
                    err,
                    fencelock::Error::Unsupported { .. } | fencelock::Error::InvalidArgument { .. }
                );
                if servers.urls.len() > 1 && !refused_unsent {
                    // Redlock: a lost round may be giving back partial grants in the background.
                    tokio::time::sleep(GIVE_BACK_TIME).await;
                }
                return Err(acquire_error(err, &servers, args.permits));
            }
        };
        let fence = guard.fence();
        tracing::debug!(lock = %args.name, fence, "acquired");

        // A signal that arrived while the lock was being granted: do not start the command.
        if let Some(signal) = signals.pending().await {
            release_quietly(guard, &args.name).await;
            return Err(interrupted_while_waiting(signal, &args.name));
        }

        let mut command = tokio::process::Command::new(program);
        match args.permits {
            Some(permits) => command.env(PERMITS_ENV, permits.to_string()),
            // Not inherited from an outer `fencelock run --permits`: it would describe another name.
            None => command.env_remove(PERMITS_ENV),
        };
        command
            .args(program_args)
            .env("FENCELOCK_NAME", &args.name)
            .env("FENCELOCK_FENCE", fence.to_string())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(err) => {
                release_quietly(guard, &args.name).await;
                return Err(spawn_error(program, &err));
            }
        };
        let Some(pgid) = child.id().and_then(|pid| i32::try_from(pid).ok()) else {
            release_quietly(guard, &args.name).await;
            return Err(CliError::Failed {
                message: format!("{} exited before it could be watched", show(program)),
                code: EXIT_FAILURE,
            });
        };
        let group = Pid::from_raw(pgid);
        tracing::debug!(lock = %args.name, fence, pid = pgid, "command started");
        // Now that the command runs, the other signals worth passing on are caught too.
        signals.catch_forwarded()?;

        let mut lost = guard.lost().into_future();
        let outcome = loop {
            tokio::select! {
                biased;
                status = child.wait() => break Outcome::Exited(status),
                reason = &mut lost => break Outcome::Lost(reason),
                signal = signals.recv() => {
                    tracing::debug!(signal = signal.as_str(), pid = pgid, "forwarding");
                    forward(group, signal);
                }
            }
        };

        match outcome {
            Outcome::Exited(Err(err)) => {
                // Cannot happen in practice (the child is ours); the lock still goes back.
                let _ = killpg(group, Signal::SIGKILL);
                release_quietly(guard, &args.name).await;
                Err(CliError::io(
                    format!("cannot wait for {}", show(program)),
                    err,
                ))
            }
            Outcome::Exited(Ok(status)) => {
                let code = exit_code_of(status);
                tracing::debug!(lock = %args.name, %status, "command ended; releasing");
                match guard.release().await {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(CliError::Failed {
                            message: format!(
                                "{held} (fence {fence}) was lost before {} ended (exit status \
                                 {code}); another holder may have run at the same time",
                                show(program)
                            ),
                            code: EXIT_LOCK_LOST,
                        });
                    }
                    Err(err) => {
                        eprintln!(
                            "fencelock: warning: {err}; the lock will be free when its lease runs out"
                        );
                    }
                }
                if code == 0 {
                    Ok(())
                } else {
                    Err(CliError::Reported { code })
                }
            }
            Outcome::Lost(reason) => {
                eprintln!(
                    "fencelock: {held} (fence {fence}) was lost while {} ran: {reason}; \
                     stopping it (SIGTERM, SIGKILL after {})",
                    show(program),
                    format_duration(args.kill_after)
                );
                let how = stop_group(&mut child, group, args.kill_after).await;
                // Nothing to give back any more (the hold is gone); this ends the renewal.
                let _ = guard.release().await;
                Err(CliError::Failed {
                    message: format!("{held} was lost while the command ran; the command {how}"),
                    code: EXIT_LOCK_LOST,
                })
            }
        }
    }
    .await;
    // Over several servers a release returns at a majority; let the slowest server hear it
    // before the process (and the calls still under way) ends.
    client.wait_idle(FINISH_LIMIT).await;
    outcome
}

enum Outcome {
    Exited(std::io::Result<ExitStatus>),
    Lost(fencelock::LostReason),
}

/// `--permits`: a number of permits, at least 1.
fn parse_permits(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) => Err("a semaphore needs at least 1 permit; --permits 0 would let no one in".into()),
        Ok(permits) => Ok(permits),
        Err(_) => Err(format!(
            "{text:?} is not a number of permits: write a whole number from 1 to {}",
            u32::MAX
        )),
    }
}

/// The error of a failed acquisition, with the servers named where the library does not, and
/// what to do about a semaphore's refusals in the tool's own terms.
fn acquire_error(err: fencelock::Error, servers: &Servers, permits: Option<u32>) -> CliError {
    use fencelock::{Conflict, Error};

    let code = crate::error::lock_error_code(&err);
    let on = servers.describe();
    let message = match (&err, permits) {
        (Error::Busy { lock, remaining }, Some(n)) => {
            let next = remaining.map_or_else(String::new, |d| {
                format!(" (the first of their leases runs out in {d:?})")
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
            "{err} (on {on}). --permits needs a single Redis server, and {} were given; nothing \
             was sent to them and nothing was run",
            servers.urls.len()
        ),
        (Error::Conflict { conflict, .. }, _) => {
            let hint = match (conflict, permits) {
                (Conflict::PermitsMismatch { held_with, .. }, _) => format!(
                    " Pass --permits {held_with} as its holders do (the number can change only \
                     while no permit is held)."
                ),
                (Conflict::OtherKind { found, .. }, None) if found.contains("semaphore") => {
                    " Its users hold permits of it: pass the same --permits as they do.".to_owned()
                }
                (Conflict::OtherKind { found, .. }, Some(_)) if found.contains("plain") => {
                    " Its users hold it as a lock, not a semaphore: drop --permits.".to_owned()
                }
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

fn interrupted_while_waiting(signal: Signal, name: &str) -> CliError {
    CliError::Failed {
        message: format!(
            "interrupted by {} while waiting for lock {name:?}; nothing is held and the command \
             was not run",
            signal.as_str()
        ),
        code: 128 + signal_number(signal),
    }
}

/// Releases a lock the command never ran under.
async fn release_quietly(guard: fencelock::LockGuard, name: &str) {
    if let Err(err) = guard.release().await {
        tracing::debug!(lock = %name, %err, "release failed; the lease will run out");
    }
}

/// Sends `signal` to the command's process group (it may already be gone).
fn forward(group: Pid, signal: Signal) {
    if let Err(err) = killpg(group, signal)
        && err != Errno::ESRCH
    {
        tracing::debug!(%err, signal = signal.as_str(), "could not forward the signal");
    }
}

/// Stops the command after the lock was lost: SIGTERM to its process group, then SIGKILL to
/// whatever is left of the group after `grace` (or at once when the group is empty). Returns
/// what happened, for the message.
async fn stop_group(child: &mut Child, group: Pid, grace: Duration) -> String {
    forward(group, Signal::SIGTERM);
    // A stopped process would only see the SIGTERM once continued.
    forward(group, Signal::SIGCONT);
    let deadline = Instant::now() + grace;
    let mut status = tokio::time::timeout_at(deadline, child.wait())
        .await
        .ok()
        .and_then(Result::ok);
    // The command may have left other processes in its group: they get the same grace.
    let mut killed = false;
    loop {
        let group_alive = killpg(group, None).is_ok();
        if !group_alive {
            break;
        }
        if Instant::now() >= deadline {
            forward(group, Signal::SIGKILL);
            killed = true;
            break;
        }
        tokio::time::sleep(GROUP_POLL).await;
        if status.is_none() {
            status = child.try_wait().ok().flatten();
        }
    }
    if status.is_none() {
        status = tokio::time::timeout(REAP_LIMIT, child.wait())
            .await
            .ok()
            .and_then(Result::ok);
    }
    let ended = status.map_or_else(
        || "could not be reaped".to_owned(),
        |s| format!("exited with status {}", exit_code_of(s)),
    );
    if killed {
        format!(
            "ignored SIGTERM for {}, got SIGKILL and {ended}",
            format_duration(grace)
        )
    } else {
        format!("got SIGTERM and {ended}")
    }
}

/// The exit status as a shell reports it: the code, or 128 + the signal that killed it.
fn exit_code_of(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code).unwrap_or(EXIT_FAILURE);
    }
    status
        .signal()
        .and_then(|signal| u8::try_from(128 + signal).ok())
        .unwrap_or(EXIT_FAILURE)
}

fn signal_number(signal: Signal) -> u8 {
    u8::try_from(signal as i32).unwrap_or(0)
}

fn show(program: &OsStr) -> String {
    format!("{:?}", program.to_string_lossy())
}

/// Fails like a shell would (127: not found, 126: not executable) if `program` cannot be run.
fn check_command(program: &OsStr) -> Result<(), CliError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;

    let not_found = || CliError::Failed {
        message: format!("{}: command not found", show(program)),
        code: EXIT_NOT_FOUND,
    };
    let cannot_execute = |why: &str| CliError::Failed {
        message: format!("{}: cannot execute: {why}", show(program)),
        code: EXIT_CANNOT_EXECUTE,
    };
    if program.is_empty() {
        return Err(not_found());
    }
    let executable = |path: &Path| -> Result<(), &'static str> {
        match path.metadata() {
            Err(_) => Err("not found"),
            Ok(meta) if meta.is_dir() => Err("is a directory"),
            Ok(meta) if meta.permissions().mode() & 0o111 == 0 => Err("permission denied"),
            Ok(_) => Ok(()),
        }
    };
    if program.as_bytes().contains(&b'/') {
        return match executable(Path::new(program)) {
            Ok(()) => Ok(()),
            Err("not found") => Err(not_found()),
            Err(why) => Err(cannot_execute(why)),
        };
    }
    // Without PATH the operating system's default applies: let the spawn decide.
    let Some(path) = std::env::var_os("PATH") else {
        return Ok(());
    };
    let mut refusal = None;
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".").to_path_buf()
        } else {
            dir
        };
        match executable(&dir.join(program)) {
            Ok(()) => return Ok(()),
            Err("not found" | "is a directory") => {}
            Err(why) => refusal = refusal.or(Some(why)),
        }
    }
    Err(refusal.map_or_else(not_found, cannot_execute))
}

/// The error for a command that could not be started.
fn spawn_error(program: &OsStr, err: &std::io::Error) -> CliError {
    if err.kind() == std::io::ErrorKind::NotFound {
        CliError::Failed {
            message: format!("{}: command not found", show(program)),
            code: EXIT_NOT_FOUND,
        }
    } else {
        CliError::Failed {
            message: format!("{}: cannot execute: {err}", show(program)),
            code: EXIT_CANNOT_EXECUTE,
        }
    }
}

/// The signals `fencelock run` catches: those that stop a wait (INT, TERM, HUP) from the start,
/// and those only passed on to the command (QUIT, USR1, USR2) once it runs.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    forwarded: Option<Forwarded>,
}

struct Forwarded {
    quit: tokio::signal::unix::Signal,
    user1: tokio::signal::unix::Signal,
    user2: tokio::signal::unix::Signal,
}

fn catch(kind: SignalKind, name: &str) -> Result<tokio::signal::unix::Signal, CliError> {
    signal(kind).map_err(|e| CliError::io(format!("cannot handle {name}"), e))
}

impl Signals {
    fn new() -> Result<Self, CliError> {
        Ok(Signals {
            interrupt: catch(SignalKind::interrupt(), "SIGINT")?,
            terminate: catch(SignalKind::terminate(), "SIGTERM")?,
            hangup: catch(SignalKind::hangup(), "SIGHUP")?,
            forwarded: None,
        })
    }

    fn catch_forwarded(&mut self) -> Result<(), CliError> {
        if self.forwarded.is_none() {
            self.forwarded = Some(Forwarded {
                quit: catch(SignalKind::quit(), "SIGQUIT")?,
                user1: catch(SignalKind::user_defined1(), "SIGUSR1")?,
                user2: catch(SignalKind::user_defined2(), "SIGUSR2")?,
            });
        }
        Ok(())
    }

    /// The next signal received (cancel-safe).
    async fn recv(&mut self) -> Signal {
        let Signals {
            interrupt,
            terminate,
            hangup,
            forwarded,
        } = self;
        let forwarded = async {
            match forwarded {
                Some(f) => tokio::select! {
                    Some(()) = f.quit.recv() => Signal::SIGQUIT,
                    Some(()) = f.user1.recv() => Signal::SIGUSR1,
                    Some(()) = f.user2.recv() => Signal::SIGUSR2,
                    else => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(()) = interrupt.recv() => Signal::SIGINT,
            Some(()) = terminate.recv() => Signal::SIGTERM,
            Some(()) = hangup.recv() => Signal::SIGHUP,
            signal = forwarded => signal,
            else => std::future::pending().await,
        }
    }

    /// A signal already received and not yet seen, if any.
    async fn pending(&mut self) -> Option<Signal> {
        tokio::select! {
            biased;
            signal = self.recv() => Some(signal),
            () = std::future::ready(()) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_unexecutable_commands_fail_like_a_shell() {
        let code = |p: &str| check_command(OsStr::new(p)).err().map(|e| e.exit_code());
        assert_eq!(code("sh"), None);
        assert_eq!(code("/bin/sh"), None);
        assert_eq!(code("no-such-command-fencelock"), Some(EXIT_NOT_FOUND));
        assert_eq!(code("./no/such/file"), Some(EXIT_NOT_FOUND));
        assert_eq!(code("/"), Some(EXIT_CANNOT_EXECUTE));
        assert_eq!(code(""), Some(EXIT_NOT_FOUND));
    }
}
