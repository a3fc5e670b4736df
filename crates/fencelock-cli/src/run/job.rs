//! The command's run under what is held ([`Job`]), for `run` and `elect` alike: started through
//! the launcher, watched, its tree stopped by the ladder (`ladder.rs`) however the run ends,
//! and only then the give-back.
//!
//! What is guaranteed: the lock (the permits, the leadership) is given back only once nothing
//! of the command's tree is alive, meaning every process in its process group and every
//! descendant of `fencelock`, which is a child subreaper (as is the launcher): a process that
//! leaves the group with `setsid` or a double fork is still found and stopped. That holds when
//! the command exits (what it left is stopped: SIGTERM, `--kill-after`, SIGKILL), when the hold
//! is lost (exit 74), when a release is requested (`--on-request`, `--grace`, SIGKILL), and when
//! the launcher is killed (exit 125). While the launcher lives no process can fork its way out
//! of its subtree, and a new session, group or cgroup does not change a process's parent. What
//! the tree cannot hold is work handed to a process outside it (a service manager starting a
//! unit on request, `systemd-run --user`, a D-Bus-activated daemon; `at`; a container engine):
//! `fencelock` neither sees nor stops it. A SIGKILLed `fencelock` stops nothing itself; its
//! launcher then kills the tree.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::acquire;
use super::child::{self, Command};
use super::held::{Finish, Held};
use super::ladder::{self, Holding, Stopped};
use super::signals::{Relay, Signals};
use super::status::{exit_code_of, show};
use super::watch::{self, Outcome};
use crate::duration::format_duration;
use crate::error::{CliError, EXIT_FAILURE, EXIT_LAUNCHER, EXIT_LOCK_LOST, EXIT_NOT_RECORDED};

/// A command to run while something is held, and how to describe it.
pub(super) struct Job<'a> {
    pub(super) name: &'a str,
    /// What is held, for messages: `lock "NAME"`, `permit of semaphore "NAME" (N permits)`.
    pub(super) held: String,
    /// What its number is called in messages: `fence`, `term`.
    pub(super) number: &'static str,
    pub(super) program: &'a OsStr,
    pub(super) program_args: &'a [OsString],
    /// How long what is left has between SIGTERM and SIGKILL while it is held: after the
    /// command ended, after the launcher died.
    pub(super) kill_after: Duration,
    /// The same, once it is lost.
    pub(super) kill_after_loss: Duration,
    /// When a release is requested: the signal passed on to the command, and its grace.
    pub(super) on_request: (Signal, Duration),
    /// The command's own environment variables (the rest is inherited).
    pub(super) env: Vec<(&'static str, String)>,
}

impl Job<'_> {
    /// Runs the command while `held` lasts: stopped when it is lost (exit 74), `held` given
    /// back when the command and all it started have ended (exit with the command's code).
    pub(super) async fn run<H: Held>(
        &self,
        held: H,
        signals: &mut Signals,
    ) -> Result<(), CliError> {
        let name = self.name;
        // A signal that ends the wait, received while it was being granted: nothing is started.
        if let Some(signal) = signals.pending_ending().await {
            give_back_quietly(held, name).await;
            return Err(acquire::interrupted_while_waiting(signal, name));
        }
        let mut command = match child::start(self.program, self.program_args, &self.env) {
            Ok(command) => command,
            Err(err) => {
                give_back_quietly(held, name).await;
                return Err(err);
            }
        };
        tracing::debug!(lock = %name, fence = held.fence(), launcher = %command.launcher, "command started");
        // What was received before it started is passed on once the launcher is ready.
        let mut relay = Relay::new(signals);
        let outcome = watch::watch(
            &mut command,
            held.lost(),
            &|| held.is_held(),
            held.release_requested(),
            &mut relay,
        )
        .await;
        self.end(outcome, held, &mut command, &mut relay).await
    }

    /// The run ended as `outcome` says: the tree is stopped (the ladder), then it is given
    /// back, and the exit status says how it went.
    async fn end<H: Held>(
        &self,
        outcome: Outcome,
        held: H,
        command: &mut Command,
        relay: &mut Relay<'_>,
    ) -> Result<(), CliError> {
        let name = self.name;
        let is_held = || held.is_held();
        let holding = || Holding {
            is_held: &is_held,
            loss: held.lost(),
            what: &self.held,
        };
        let (stopped, code) = match outcome {
            Outcome::Exited(Err(err)) => {
                // Cannot happen in practice (the launcher is ours); the tree goes all the same.
                let stopped = ladder::stop(
                    command,
                    Signal::SIGKILL,
                    Duration::ZERO,
                    Some(holding()),
                    relay,
                )
                .await;
                self.warn_survivors(&stopped);
                give_back_quietly(held, name).await;
                return Err(CliError::Failed {
                    message: format!(
                        "cannot wait for the launcher of {}: {err}",
                        show(self.program)
                    ),
                    code: EXIT_LAUNCHER,
                });
            }
            Outcome::Exited(Ok(status)) => {
                // The command ended (what it left gets SIGTERM), or its launcher was killed.
                let killed = status.signal().is_some();
                if killed {
                    self.say_launcher_died(status);
                } else {
                    self.say_left(command, exit_code_of(status));
                }
                let stopped = ladder::stop(
                    command,
                    Signal::SIGTERM,
                    self.kill_after,
                    Some(holding()),
                    relay,
                )
                .await;
                if killed {
                    return self.launcher_died(held, &stopped, status).await;
                }
                (stopped, exit_code_of(status))
            }
            Outcome::Lost(reason) => {
                let stopped_first = relay.tree_stopped(command);
                self.say_lost(&reason, held.fence(), stopped_first);
                let (first, grace) = if stopped_first {
                    // Stopped by job control and lost meanwhile: it never runs again.
                    (Signal::SIGKILL, Duration::ZERO)
                } else {
                    (Signal::SIGTERM, self.kill_after_loss)
                };
                let stopped = ladder::stop(command, first, grace, None, relay).await;
                return self.lost(held, &stopped, stopped_first).await;
            }
            Outcome::Requested => {
                let (signal, grace) = self.on_request;
                eprintln!(
                    "fencelock: asked to release {}; sending {} to {} and releasing when it \
                     ends (SIGKILL after {})",
                    self.held,
                    signal.as_str(),
                    show(self.program),
                    format_duration(grace)
                );
                let stopped = ladder::stop(command, signal, grace, Some(holding()), relay).await;
                let code = stopped.status.map_or(EXIT_FAILURE, exit_code_of);
                (stopped, code)
            }
        };
        self.after_ladder(held, &stopped, code).await
    }

    /// The command exited with `code`: says what it left running, if anything.
    fn say_left(&self, command: &Command, code: u8) {
        let left = command.tree.members().alive.len();
        if left > 0 {
            eprintln!(
                "fencelock: {} exited with status {code} and left {left} process{} running; \
                 stopping {} (SIGTERM, SIGKILL after {}) before {} is given back",
                show(self.program),
                if left == 1 { "" } else { "es" },
                if left == 1 { "it" } else { "them" },
                format_duration(self.kill_after),
                self.held,
            );
        }
    }

    /// After the ladder of an ending with the command's `code`: exit 74 if the hold was lost on
    /// the way, else give back and exit with `code`.
    async fn after_ladder<H: Held>(
        &self,
        held: H,
        stopped: &Stopped,
        code: u8,
    ) -> Result<(), CliError> {
        self.warn_survivors(stopped);
        if let Some(reason) = &stopped.lost {
            let fence = held.fence();
            // Nothing to give back any more (the hold is gone); this ends the renewal.
            let _ = held.give_back().await;
            return Err(CliError::Failed {
                message: format!(
                    "{} ({} {fence}) was lost while {} was being stopped: {reason}; what was \
                     left got SIGKILL",
                    self.held,
                    self.number,
                    show(self.program)
                ),
                code: EXIT_LOCK_LOST,
            });
        }
        self.exited(held, code).await
    }

    fn say_launcher_died(&self, status: ExitStatus) {
        eprintln!(
            "fencelock: the launcher of {} was killed by {}; stopping what it started \
             (SIGTERM, SIGKILL after {}) before {} is given back",
            show(self.program),
            killed_by(status),
            format_duration(self.kill_after),
            self.held,
        );
    }

    /// The launcher was killed and its tree stopped: give back, exit 125 (74 if lost
    /// meanwhile).
    async fn launcher_died<H: Held>(
        &self,
        held: H,
        stopped: &Stopped,
        status: ExitStatus,
    ) -> Result<(), CliError> {
        self.warn_survivors(stopped);
        let fence = held.fence();
        give_back_quietly(held, self.name).await;
        let lost = stopped.lost.as_ref().map_or_else(String::new, |reason| {
            format!(" ({} {fence} was lost meanwhile: {reason})", self.number)
        });
        Err(CliError::Failed {
            message: format!(
                "the launcher of {} was killed by {}; what it had started was stopped and {} \
                 given back{lost}",
                show(self.program),
                killed_by(status),
                self.held,
            ),
            code: if stopped.lost.is_some() {
                EXIT_LOCK_LOST
            } else {
                EXIT_LAUNCHER
            },
        })
    }

    /// The command ended with `code`: give back, and exit with the command's code.
    async fn exited<H: Held>(&self, held: H, code: u8) -> Result<(), CliError> {
        let fence = held.fence();
        tracing::debug!(lock = %self.name, code, "command ended; releasing");
        match held.finish(code).await {
            Ok(Finish::Done) => {}
            Ok(Finish::NotRecorded(err)) => {
                return Err(CliError::Failed {
                    message: not_recorded(&err, &self.held, self.program),
                    code: EXIT_NOT_RECORDED,
                });
            }
            Ok(Finish::WasLost) => {
                return Err(CliError::Failed {
                    message: format!(
                        "{} ({} {fence}) was lost before {} ended (exit status {code}); \
                         another holder may have run at the same time",
                        self.held,
                        self.number,
                        show(self.program)
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

    fn say_lost(&self, reason: &fencelock::LostReason, fence: u64, stopped: bool) {
        let how = if stopped {
            "killing it (SIGKILL: it was stopped, and does not run again)".to_owned()
        } else {
            format!(
                "stopping it (SIGTERM, SIGKILL after {})",
                format_duration(self.kill_after_loss)
            )
        };
        eprintln!(
            "fencelock: {} ({} {fence}) was lost while {} ran: {reason}; {how}",
            self.held,
            self.number,
            show(self.program),
        );
    }

    /// It was lost while the command ran, and the tree was stopped: exit with 74.
    async fn lost<H: Held>(
        &self,
        held: H,
        stopped: &Stopped,
        stopped_first: bool,
    ) -> Result<(), CliError> {
        self.warn_survivors(stopped);
        let ended = stopped.status.map_or_else(
            || "could not be collected".to_owned(),
            |s| format!("exited with status {}", exit_code_of(s)),
        );
        let how = if stopped_first {
            format!("was stopped when it was lost, got SIGKILL and {ended}")
        } else if stopped.killed {
            format!(
                "(or what it started) was still running {} after SIGTERM, got SIGKILL and {ended}",
                format_duration(self.kill_after_loss)
            )
        } else {
            format!("got SIGTERM and {ended}")
        };
        // Nothing to give back any more (the hold is gone); this ends the renewal.
        let _ = held.give_back().await;
        Err(CliError::Failed {
            message: format!(
                "{} was lost while the command ran; the command {how}",
                self.held
            ),
            code: EXIT_LOCK_LOST,
        })
    }

    /// Says which processes outlived SIGKILL (the give-back goes ahead without them).
    fn warn_survivors(&self, stopped: &Stopped) {
        if !stopped.survivors.is_empty() {
            let pids: Vec<String> = stopped.survivors.iter().map(ToString::to_string).collect();
            eprintln!(
                "fencelock: warning: process{} {} of {} still alive after SIGKILL (another \
                 user's, or in uninterruptible sleep) when {} was lost; the run ends without \
                 waiting for them",
                if pids.len() == 1 { "" } else { "es" },
                pids.join(", "),
                show(self.program),
                self.held
            );
        }
    }
}

/// Why a run-once whose command succeeded is not recorded as done, in the command's words.
fn not_recorded(err: &fencelock::Error, held: &str, program: &OsStr) -> String {
    let why = match err {
        fencelock::Error::NotReplicated {
            server,
            acknowledged,
            wanted,
            ..
        } => format!(
            "its record was written on {server} but only {acknowledged} of the {wanted} \
             replicas asked for acknowledged it (a failover may lose it)"
        ),
        err => format!("it could not be recorded: {err}"),
    };
    format!(
        "{} succeeded under {held}, but {why}; the lock is given back (or free when its lease \
         runs out), and the next run will do the work again",
        show(program)
    )
}

/// The signal that killed the launcher, by name.
fn killed_by(status: ExitStatus) -> &'static str {
    status
        .signal()
        .and_then(|n| Signal::try_from(n).ok())
        .map_or("a signal", Signal::as_str)
}

/// Gives back what the command never ran under.
pub(super) async fn give_back_quietly<H: Held>(held: H, name: &str) {
    if let Err(err) = held.give_back().await {
        tracing::debug!(lock = %name, %err, "release failed; the lease will run out");
    }
}
