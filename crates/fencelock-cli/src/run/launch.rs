//! The launcher between `fencelock run` (or `elect`) and its command, so that nothing the
//! command starts outlives its supervisor: `fencelock __launch --parent PID -- COMMAND [ARGS...]`.
//!
//! The supervisor starts it from `/proc/self/exe` (the running binary, even after an upgrade
//! replaced its file) as the leader of a new process group. It names itself `fl-launcher`, so
//! that `pkill fencelock` reaches only the supervisor, and
//! - asks the kernel for SIGTERM when its parent dies (`PR_SET_PDEATHSIG`; the crate forbids the
//!   `unsafe` of `pre_exec`, and the command must not have to set that up itself), and checks
//!   that the parent is still there (it may have died before);
//! - becomes a child subreaper (`PR_SET_CHILD_SUBREAPER`): what the command starts and leaves
//!   behind, also in a session of its own (`setsid`, a double fork), is re-parented to the
//!   launcher, not to init, and stays in the supervisor's tree;
//! - catches every signal it can (all but SIGKILL, SIGSTOP, SIGILL, SIGFPE and SIGSEGV: the
//!   six the supervisor forwards, and every one `--on-request` accepts), so that a signal sent to
//!   the group reaches the command and leaves the launcher standing;
//! - starts the command in the launcher's process group and collects every child it gets (the command,
//!   and the orphans re-parented to it) until the command has ended; then it exits with the
//!   command's code (128 + N for a signal N), and what the command left behind is re-parented to
//!   the supervisor, a subreaper too, which stops it (`ladder.rs`) before the release.
//!
//! If its parent is gone (a SIGKILLed supervisor: `kill -9`, the OOM killer), the launcher kills
//! the group and every descendant it has (SIGKILL: also a command that ignores SIGTERM) and
//! exits: nothing may run without its lock. Its own failures exit with [`EXIT_LAUNCHER`] (125).
//!
//! The death signal follows the *thread* that started the launcher: the supervisor starts it
//! from its main thread (a one-thread runtime), which lives as long as the process.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getppid};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use super::status::show;
use super::tree::Tree;
use crate::error::{EXIT_CANNOT_EXECUTE, EXIT_LAUNCHER, EXIT_NOT_FOUND};

/// The hidden subcommand that runs the launcher.
pub const SUBCOMMAND: &str = "__launch";

/// The launcher's process name (`ps`, `pkill`): not `fencelock`, so that a `pkill -9 fencelock`
/// kills the supervisor and leaves the launcher to kill the command's tree, instead of killing
/// both and leaving the command running without its lock.
const NAME: &std::ffi::CStr = c"fl-launcher";
/// [`NAME`] as `/proc/PID/comm` shows it. The launcher takes it once its handlers are set up and
/// the command started: the supervisor sends nothing to the group before it has.
pub(super) const NAME_TEXT: &str = "fl-launcher";

/// How long the launcher of a dead supervisor goes on killing before it gives up.
const KILL_LIMIT: Duration = Duration::from_secs(10);

/// Arguments of `fencelock __launch`.
#[derive(Debug, clap::Args)]
pub struct LaunchArgs {
    /// The supervisor's process id: the launcher ends the command's tree when it is gone
    #[arg(long, value_name = "PID")]
    parent: i32,

    /// The command and its arguments
    #[arg(value_name = "COMMAND", last = true, required = true, num_args = 1..)]
    command: Vec<OsString>,
}

/// Whether the launcher catches `signal` (and so survives it): every signal but those no
/// process can catch (SIGKILL, SIGSTOP) and those a handler cannot return from (SIGILL, SIGFPE,
/// SIGSEGV). `--on-request` accepts exactly these.
pub fn catches(signal: Signal) -> bool {
    !matches!(
        signal,
        Signal::SIGKILL | Signal::SIGSTOP | Signal::SIGILL | Signal::SIGFPE | Signal::SIGSEGV
    )
}

/// Runs the launcher (see the module docs); its exit code is the command's.
pub fn launch(args: &LaunchArgs) -> ExitCode {
    if let Err(err) = nix::sys::prctl::set_pdeathsig(Some(Signal::SIGTERM)) {
        eprintln!("fencelock: launcher: cannot ask to be told of the supervisor's end: {err}");
        return ExitCode::from(EXIT_LAUNCHER);
    }
    // The supervisor may have died before the request above: then nothing is started.
    if getppid().as_raw() != args.parent {
        return ExitCode::from(EXIT_LAUNCHER);
    }
    if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("fencelock: launcher: cannot become a subreaper: {err}");
        return ExitCode::from(EXIT_LAUNCHER);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("fencelock: launcher: cannot start its runtime: {err}");
            return ExitCode::from(EXIT_LAUNCHER);
        }
    };
    let code = runtime.block_on(supervise(args));
    // The collecting thread may still wait for a child: do not wait for it.
    runtime.shutdown_background();
    ExitCode::from(code)
}

async fn supervise(args: &LaunchArgs) -> u8 {
    // Caught before the command starts: the signals sent to the group must not end the launcher
    // (the command gets them too, and decides). TERM also comes from the kernel when the
    // supervisor dies.
    let mut caught = Vec::new();
    for caught_signal in Signal::iterator().filter(|s| catches(*s)) {
        match signal(SignalKind::from_raw(caught_signal as i32)) {
            Ok(s) => caught.push(s),
            Err(err) => {
                eprintln!(
                    "fencelock: launcher: cannot handle {}: {err}",
                    caught_signal.as_str()
                );
                return EXIT_LAUNCHER;
            }
        }
    }
    let Some((program, program_args)) = args.command.split_first() else {
        return EXIT_LAUNCHER;
    };
    // In the launcher's own process group (the supervisor made it the group's leader). The
    // standard library resets the signal mask and SIGPIPE in the child; the handlers above
    // are reset by the exec.
    let command = match std::process::Command::new(program)
        .args(program_args)
        .spawn()
    {
        Ok(command) => command,
        Err(err) => {
            let code = if err.kind() == std::io::ErrorKind::NotFound {
                EXIT_NOT_FOUND
            } else {
                EXIT_CANNOT_EXECUTE
            };
            eprintln!("fencelock: {}: cannot execute: {err}", show(program));
            return code;
        }
    };
    let Ok(pid) = i32::try_from(command.id()) else {
        return EXIT_LAUNCHER;
    };
    let mut collected = tokio::task::spawn_blocking(move || collect_until(Pid::from_raw(pid)));
    // Ready: the supervisor passes signals on from now on.
    if let Err(err) = nix::sys::prctl::set_name(NAME) {
        eprintln!("fencelock: launcher: cannot take its name: {err}");
        kill_tree().await;
        return EXIT_LAUNCHER;
    }
    let parent = Pid::from_raw(args.parent);
    let mut parent_stopped = false;
    let mut look = tokio::time::interval(PARENT_POLL);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let any_signal =
            futures_util::future::select_all(caught.iter_mut().map(|s| Box::pin(s.recv())));
        tokio::select! {
            status = &mut collected => {
                return match status {
                    Ok(Some(code)) => code,
                    _ => {
                        eprintln!("fencelock: launcher: lost track of {}", show(program));
                        EXIT_LAUNCHER
                    }
                };
            }
            _ = any_signal => {
                if getppid().as_raw() != args.parent {
                    // The supervisor is gone: nothing may run without its lock.
                    kill_tree().await;
                    return EXIT_LAUNCHER;
                }
            }
            _ = look.tick() => {
                parent_stopped = stop_with(parent, parent_stopped);
            }
        }
    }
}

/// How often the launcher looks whether the supervisor was stopped (SIGSTOP, which it cannot
/// catch): well within any lease.
const PARENT_POLL: Duration = Duration::from_millis(50);

/// Stops the command's tree when the supervisor (`parent`) is found stopped, and wakes the
/// supervisor's own check once it runs again: the supervisor, continued, finds the stopped tree
/// and continues it only if its hold is still held (`signals.rs`). `was_stopped`: the parent
/// was stopped at the last look. Returns whether it is now.
fn stop_with(parent: Pid, was_stopped: bool) -> bool {
    if getppid() != parent {
        // The supervisor is gone: its death signal is on its way.
        return was_stopped;
    }
    let stopped = is_stopped(parent);
    if stopped && !was_stopped {
        let tree = Tree::new(Pid::this(), getpgrp());
        tree.signal_each(Signal::SIGSTOP);
        // Continued before the tree was stopped, the supervisor may have looked already: it is
        // asked to look again (still this launcher's parent, so the number is its).
        if !is_stopped(parent) && getppid() == parent {
            let _ = nix::sys::signal::kill(parent, Signal::SIGCONT);
        }
    }
    stopped
}

/// Whether `pid` is stopped (`T`, or `t` by a tracer).
fn is_stopped(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, tail) = stat.rsplit_once(')')?;
            tail.split_whitespace()
                .next()
                .map(|s| matches!(s, "T" | "t"))
        })
        .unwrap_or(false)
}

/// Collects every child of the launcher (the orphans re-parented to it as well, so that none
/// stays a zombie) until `command` ends; returns the command's exit code. Blocks: runs on a
/// thread of its own.
fn collect_until(command: Pid) -> Option<u8> {
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command => {
                return u8::try_from(code & 0xff).ok();
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == command => {
                return u8::try_from(128 + signal as i32).ok();
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return None,
        }
    }
}

/// Kills the launcher's process group and every descendant, until none is alive (at most
/// `KILL_LIMIT`): the collecting thread collects them meanwhile.
async fn kill_tree() {
    let tree = Tree::new(Pid::this(), getpgrp());
    let give_up = Instant::now() + KILL_LIMIT;
    loop {
        // One by one: the launcher leads the group, and must outlive the killing.
        let members = tree.signal_each(Signal::SIGKILL);
        if members.alive.is_empty() || Instant::now() >= give_up {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The launcher's command line for `program` and `args`, started by this process.
pub(super) fn command_line(program: &std::ffi::OsStr, args: &[OsString]) -> Vec<OsString> {
    let mut line = vec![
        OsString::from(SUBCOMMAND),
        OsString::from("--parent"),
        OsString::from(std::process::id().to_string()),
        OsString::from("--"),
        program.to_owned(),
    ];
    line.extend(args.iter().cloned());
    line
}
