//! The launcher between `fencelock run` (or `elect`) and its command, so that the command never
//! outlives its supervisor: `fencelock __launch --parent PID -- COMMAND [ARGS...]`.
//!
//! A SIGKILLed supervisor (the OOM killer, `kill -9`) cannot stop its command, and the command's
//! lease then lapses while it runs: another holder starts the same work beside it. The kernel
//! can signal a process when its parent dies (`PR_SET_PDEATHSIG`); the command must not have to
//! set that up itself, and the crate forbids the `unsafe` of `pre_exec`. So the supervisor starts
//! this launcher in the command's process group: it asks for SIGTERM when its parent dies,
//! checks that the parent is still there (it may have died before), starts the command in the
//! same process group, and waits for it. The signals the supervisor sends to the group reach the
//! command as before; the launcher only looks whether its parent is gone, and if it is, kills the
//! whole group (SIGKILL: also a command that ignores SIGTERM, and what it started). It exits with
//! the command's code (128 + N for a signal N), which the supervisor reports as the command's.
//!
//! The death signal follows the *thread* that started the launcher: the supervisor starts it
//! from its main thread (a one-thread runtime), which lives as long as the process.

use std::ffi::OsString;
use std::process::ExitCode;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::{getpgrp, getppid};
use tokio::signal::unix::{SignalKind, signal};

use super::child;
use crate::error::{EXIT_CANNOT_EXECUTE, EXIT_FAILURE, EXIT_NOT_FOUND};

/// The hidden subcommand that runs the launcher.
pub const SUBCOMMAND: &str = "__launch";

/// Arguments of `fencelock __launch`.
#[derive(Debug, clap::Args)]
pub struct LaunchArgs {
    /// The supervisor's process id: the launcher ends the command's group when it is gone
    #[arg(long, value_name = "PID")]
    parent: i32,

    /// The command and its arguments
    #[arg(value_name = "COMMAND", last = true, required = true, num_args = 1..)]
    command: Vec<OsString>,
}

/// Runs the launcher (see the module docs); its exit code is the command's.
pub fn launch(args: &LaunchArgs) -> ExitCode {
    if let Err(err) = nix::sys::prctl::set_pdeathsig(Some(Signal::SIGTERM)) {
        eprintln!("fencelock: cannot ask to be told of the supervisor's end: {err}");
        return ExitCode::from(EXIT_FAILURE);
    }
    // The supervisor may have died before the request above: then nothing is started.
    if getppid().as_raw() != args.parent {
        return ExitCode::from(EXIT_FAILURE);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("fencelock: cannot start the launcher's runtime: {err}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    ExitCode::from(runtime.block_on(supervise(args)))
}

async fn supervise(args: &LaunchArgs) -> u8 {
    // Caught before the command starts: the signals sent to the group must not end the launcher
    // (the command gets them too, and decides). TERM also comes from the kernel when the
    // supervisor dies.
    let kinds = [
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
        SignalKind::quit(),
        SignalKind::user_defined1(),
        SignalKind::user_defined2(),
    ];
    let mut caught = Vec::with_capacity(kinds.len());
    for kind in kinds {
        match signal(kind) {
            Ok(s) => caught.push(s),
            Err(err) => {
                eprintln!("fencelock: cannot handle a signal in the launcher: {err}");
                return EXIT_FAILURE;
            }
        }
    }
    let Some((program, program_args)) = args.command.split_first() else {
        return EXIT_FAILURE;
    };
    // In the launcher's own process group (the supervisor made it the group's leader).
    let mut command = match tokio::process::Command::new(program)
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
            eprintln!("fencelock: {}: cannot execute: {err}", child::show(program));
            return code;
        }
    };
    loop {
        let any_signal =
            futures_util::future::select_all(caught.iter_mut().map(|s| Box::pin(s.recv())));
        tokio::select! {
            status = command.wait() => {
                return match status {
                    Ok(status) => child::exit_code_of(status),
                    Err(_) => EXIT_FAILURE,
                };
            }
            _ = any_signal => {
                if getppid().as_raw() != args.parent {
                    // The supervisor is gone: nothing may run without its lock.
                    let _ = killpg(getpgrp(), Signal::SIGKILL);
                    return EXIT_FAILURE;
                }
            }
        }
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
