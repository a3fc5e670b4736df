//! The command under the lock: checked before the wait, started in a process group of its own
//! with the lock's name and fence in its environment, watched, and stopped when the lock is
//! lost.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::time::Instant;

use super::signals::Signals;
use crate::duration::format_duration;
use crate::error::{CliError, EXIT_CANNOT_EXECUTE, EXIT_FAILURE, EXIT_NOT_FOUND};

/// How often the process group of a stopped command is checked for survivors.
const GROUP_POLL: Duration = Duration::from_millis(20);
/// How long to wait for a SIGKILLed command to be reaped.
const REAP_LIMIT: Duration = Duration::from_secs(5);

/// A started command and its process group.
pub(super) struct Command {
    pub(super) child: Child,
    pub(super) group: Pid,
}

/// How the command's run ended.
pub(super) enum Outcome {
    Exited(std::io::Result<ExitStatus>),
    Lost(fencelock::LostReason),
    /// Someone asked the holder to release the lock (`fencelock release --ask`).
    Requested,
}

/// Starts `program` with `args` in a process group of its own, with `env` added to its
/// environment (`FENCELOCK_NAME`, `FENCELOCK_FENCE`, and for a semaphore `FENCELOCK_PERMITS`,
/// for an election `FENCELOCK_TERM`). Those of the set that `env` leaves out are not
/// inherited from an outer `fencelock`: they would describe another name.
pub(super) fn start(
    program: &OsStr,
    args: &[OsString],
    env: &[(&'static str, String)],
) -> Result<Command, CliError> {
    // Through the launcher (`launch.rs`), so that the command does not outlive this process;
    // directly if this program cannot find itself.
    let mut command = match std::env::current_exe() {
        Ok(launcher) => {
            let mut command = tokio::process::Command::new(launcher);
            command.args(super::launch::command_line(program, args));
            command
        }
        Err(err) => {
            tracing::warn!(%err, "cannot find this program: the command runs without the launcher");
            let mut command = tokio::process::Command::new(program);
            command.args(args);
            command
        }
    };
    for name in super::env::SET_BY_FENCELOCK {
        command.env_remove(name);
    }
    command
        .envs(env.iter().map(|(name, value)| (name, value)))
        .process_group(0)
        .kill_on_drop(true);
    let child = command.spawn().map_err(|err| spawn_error(program, &err))?;
    let Some(pgid) = child.id().and_then(|pid| i32::try_from(pid).ok()) else {
        return Err(CliError::Failed {
            message: format!("{} exited before it could be watched", show(program)),
            code: EXIT_FAILURE,
        });
    };
    Ok(Command {
        child,
        group: Pid::from_raw(pgid),
    })
}

/// Waits until the command exits, the lock is lost or a release is requested, passing on the
/// signals `fencelock` receives meanwhile.
pub(super) async fn watch(
    command: &mut Command,
    lost: std::pin::Pin<Box<dyn std::future::Future<Output = fencelock::LostReason> + Send>>,
    requested: impl std::future::Future<Output = ()>,
    signals: &mut Signals,
) -> Outcome {
    let mut lost = lost;
    let mut requested = std::pin::pin!(requested);
    loop {
        tokio::select! {
            biased;
            status = command.child.wait() => return Outcome::Exited(status),
            reason = &mut lost => return Outcome::Lost(reason),
            () = &mut requested => return Outcome::Requested,
            signal = signals.recv() => {
                tracing::debug!(signal = signal.as_str(), group = %command.group, "forwarding");
                forward(command.group, signal);
            }
        }
    }
}

/// Passes a release request on to the command: `signal` to its process group, then `grace`
/// for it to end, then SIGKILL to what is left of the group. Returns the command's exit code.
pub(super) async fn pass_on_request(command: &mut Command, signal: Signal, grace: Duration) -> u8 {
    forward(command.group, signal);
    forward(command.group, Signal::SIGCONT);
    let status = match tokio::time::timeout(grace, command.child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            forward(command.group, Signal::SIGKILL);
            tokio::time::timeout(REAP_LIMIT, command.child.wait())
                .await
                .ok()
                .and_then(Result::ok)
        }
    };
    // Whatever else the command left in its group goes too: the lock is about to be released.
    forward(command.group, Signal::SIGKILL);
    status.map_or(EXIT_FAILURE, exit_code_of)
}

/// Sends `signal` to the command's process group (it may already be gone).
pub(super) fn forward(group: Pid, signal: Signal) {
    if let Err(err) = killpg(group, signal)
        && err != Errno::ESRCH
    {
        tracing::debug!(%err, signal = signal.as_str(), "could not forward the signal");
    }
}

/// Stops the command after the lock was lost: SIGTERM to its process group, then SIGKILL to
/// whatever is left of the group after `grace` (or at once when the group is empty). Returns
/// what happened, for the message.
pub(super) async fn stop_group(child: &mut Child, group: Pid, grace: Duration) -> String {
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
pub(super) fn exit_code_of(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code).unwrap_or(EXIT_FAILURE);
    }
    status
        .signal()
        .and_then(|signal| u8::try_from(128 + signal).ok())
        .unwrap_or(EXIT_FAILURE)
}

pub(super) fn show(program: &OsStr) -> String {
    format!("{:?}", program.to_string_lossy())
}

/// The command after `--` (the program and its arguments), checked before anything is taken:
/// a command that cannot run is not worth waiting for.
pub(super) fn split_checked(command: &[OsString]) -> Result<(&OsString, &[OsString]), CliError> {
    let Some((program, args)) = command.split_first() else {
        return Err(CliError::Usage(
            "no command to run was given after --".into(),
        ));
    };
    check_command(program)?;
    Ok((program, args))
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
