//! The command under the lock: checked before the wait, started through the launcher
//! (`launch.rs`) in a process group of its own with the lock's name and fence in its
//! environment, and watched until it ends, the hold is lost or a release is requested.
//!
//! Before it starts the launcher, the supervisor makes itself a child subreaper: if the
//! launcher dies, what it started is re-parented to the supervisor (not to init), which then
//! finds it in its tree, stops it and collects it before it gives the lock back (`ladder.rs`).

use std::ffi::{OsStr, OsString};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;

use super::status::show;
use super::tree::Tree;
use crate::error::{CliError, EXIT_CANNOT_EXECUTE, EXIT_LAUNCHER, EXIT_NOT_FOUND};

/// A started command: its launcher (the supervisor's child, leading the command's process
/// group) and the tree of what it started.
///
/// The launcher is left a zombie when it ends, until [`reap`](Self::reap) once its tree is
/// stopped: while it is one, its number (the process group's) cannot be given to another
/// process or group, so every signal to the group reaches the command's group and no other.
pub(super) struct Command {
    pub(super) launcher: Pid,
    /// SIGCHLD: a child of this process ended (the launcher, or an orphan of the tree).
    child_ended: tokio::signal::unix::Signal,
    /// The launcher's status, once it has ended.
    status: Option<ExitStatus>,
    reaped: bool,
    /// The launcher has set up its handlers and started the command (it names itself then).
    ready: bool,
    pub(super) tree: Tree,
}

impl Command {
    /// The launcher's status if it has ended, without collecting it.
    pub(super) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if self.status.is_none() && !self.reaped {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            self.status = match waitid(Id::Pid(self.launcher), flags)? {
                WaitStatus::Exited(_, code) => Some(ExitStatus::from_raw((code & 0xff) << 8)),
                WaitStatus::Signaled(_, signal, core) => Some(ExitStatus::from_raw(
                    signal as i32 | if core { 0x80 } else { 0 },
                )),
                _ => None,
            };
        }
        Ok(self.status)
    }

    /// Waits until the launcher has ended; its status (it is not collected). Cancel-safe.
    pub(super) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if self.child_ended.recv().await.is_none() {
                return std::future::pending().await;
            }
        }
    }

    /// Whether the launcher is ready for signals: its handlers are set up and the command
    /// started (it then takes its name, `fl-launcher`). A signal before that could end it, or
    /// be lost.
    pub(super) fn ready(&mut self) -> bool {
        if !self.ready && self.status.is_none() {
            self.ready = std::fs::read_to_string(format!("/proc/{}/comm", self.launcher))
                .is_ok_and(|name| name.trim_end() == super::launch::NAME_TEXT);
        }
        self.ready
    }

    /// Continues the launcher alone (after its group was stopped): it must stay able to kill
    /// the tree should `fencelock` die meanwhile.
    pub(super) fn continue_launcher(&mut self) {
        if self.status.is_none() && !self.reaped {
            let _ = kill(self.launcher, Signal::SIGCONT);
        }
    }

    /// Collects the launcher, once nothing is sent to its group any more.
    pub(super) fn reap(&mut self) {
        if !self.reaped
            && let Ok(Some(_)) = self.try_wait()
        {
            let _ = waitpid(self.launcher, None);
            self.reaped = true;
        }
    }
}

/// Starts `program` with `args` through the launcher, in a process group of its own, with `env`
/// added to its environment (the `FENCELOCK_*` names of `env.rs`). Those of the set that `env`
/// leaves out, or gives an empty value, are not set at all: not inherited from an outer
/// `fencelock` (they would describe another name), and never empty, so that a script's
/// `${FENCELOCK_FENCE:?}` stops rather than pass no fence.
pub(super) fn start(
    program: &OsStr,
    args: &[OsString],
    env: &[(&'static str, String)],
) -> Result<Command, CliError> {
    let failed = |what: String| CliError::Failed {
        message: what,
        code: EXIT_LAUNCHER,
    };
    // The orphans of a launcher that dies come back here, to be stopped before the release.
    nix::sys::prctl::set_child_subreaper(true).map_err(|err| {
        failed(format!(
            "cannot become the subreaper of {}'s processes: {err}",
            show(program)
        ))
    })?;
    let launcher = launcher_path().map_err(|err| {
        failed(format!(
            "cannot find this program to launch {}: {err}",
            show(program)
        ))
    })?;
    let mut command = std::process::Command::new(&launcher);
    command.args(super::launch::command_line(program, args));
    for name in super::env::SET_BY_FENCELOCK {
        command.env_remove(name);
    }
    // Not `kill_on_drop`: the launcher is the one process that stops the whole tree should this
    // one end without doing it; killing it would leave the command running.
    command
        .envs(
            env.iter()
                .filter(|(_, value)| !value.is_empty())
                .map(|(name, value)| (name, value)),
        )
        .process_group(0);
    // Before the launcher starts, so that its end cannot come unseen.
    let child_ended = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
        .map_err(|err| {
            failed(format!(
                "cannot watch the launcher of {}: {err}",
                show(program)
            ))
        })?;
    let child = command.spawn().map_err(|err| {
        failed(format!(
            "cannot start the launcher ({}) for {}: {err}",
            launcher.display(),
            show(program)
        ))
    })?;
    // Its status is collected with `waitid` (and left to collect); the `Child` is not needed.
    let Ok(pid) = i32::try_from(child.id()) else {
        return Err(failed(format!(
            "the launcher's pid {} is out of range",
            child.id()
        )));
    };
    let launcher = Pid::from_raw(pid);
    Ok(Command {
        launcher,
        child_ended,
        status: None,
        reaped: false,
        ready: false,
        tree: Tree::new(Pid::this(), launcher),
    })
}

/// This program, to start as the launcher: `/proc/self/exe` names the running binary even after
/// a package upgrade replaced or deleted its file (a run may wait for hours before it starts
/// its command); the path it was started from is only the fallback without `/proc`.
fn launcher_path() -> std::io::Result<PathBuf> {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        Ok(proc_exe.to_path_buf())
    } else {
        std::env::current_exe()
    }
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
