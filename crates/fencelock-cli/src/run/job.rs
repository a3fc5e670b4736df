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
use super::child::{self, Command, Outcome};
use super::held::Held;
use super::ladder::{self, Stopped};
use super::signals::Signals;
use super::status::{exit_code_of, show};
use crate::duration::format_duration;
use crate::error::{CliError, EXIT_FAILURE, EXIT_LAUNCHER, EXIT_LOCK_LOST};

/// A command to run while something is held, and how to describe it.
pub(super) struct Job<'a> {
    pub(super) name: &'a str,
    /// What is held, for messages: `lock "NAME"`, `permit of semaphore "NAME" (N permits)`.
    pub(super) held: String,
    /// What its number is called in messages: `fence`, `term`.
    pub(super) number: &'static str,
    pub(super) program: &'a OsStr,
    pub(super) program_args: &'a [OsString],
    /// How long what is left has between SIGTERM and SIGKILL: after a loss, after the command
    /// ended, after the launcher died.
    pub(super) kill_after: Duration,
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
        // A signal that arrived while the lock was being granted: do not start the command.
        if let Some(signal) = signals.pending().await {
            give_back_quietly(held, name).await;
            return Err(acquire::interrupted_while_waiting(signal, name));
        }
        // Caught before the command starts, so that none of them finds fencelock without a
        // handler (which would end it and leave the command running); one that arrives before
        // the command runs is passed on to it once it does.
        if let Err(err) = signals.catch_forwarded() {
            give_back_quietly(held, name).await;
            return Err(err);
        }
        let mut command = match child::start(self.program, self.program_args, &self.env) {
            Ok(command) => command,
            Err(err) => {
                give_back_quietly(held, name).await;
                return Err(err);
            }
        };
        tracing::debug!(lock = %name, fence = held.fence(), launcher = %command.launcher, "command started");
        let outcome =
            child::watch(&mut command, held.lost(), held.release_requested(), signals).await;
        match outcome {
            Outcome::Exited(Err(err)) => {
                // Cannot happen in practice (the launcher is ours); the tree goes all the same.
                let stopped = ladder::stop(
                    &mut command,
                    Signal::SIGKILL,
                    Duration::ZERO,
                    None,
                    None,
                    signals,
                )
                .await;
                self.warn_survivors(&stopped);
                give_back_quietly(held, name).await;
                Err(CliError::Failed {
                    message: format!(
                        "cannot wait for the launcher of {}: {err}",
                        show(self.program)
                    ),
                    code: EXIT_LAUNCHER,
                })
            }
            Outcome::Exited(Ok(status)) if status.signal().is_some() => {
                self.launcher_died(held, &mut command, status, signals)
                    .await
            }
            Outcome::Exited(Ok(status)) => self.ended(held, &mut command, status, signals).await,
            Outcome::Lost(reason) => self.lost(held, &mut command, &reason, signals).await,
            Outcome::Requested => self.requested(held, &mut command, signals).await,
        }
    }

    /// The command ended (its launcher exited with its code): stop what it left behind, give
    /// back, exit with the command's code.
    async fn ended<H: Held>(
        &self,
        held: H,
        command: &mut Command,
        status: ExitStatus,
        signals: &mut Signals,
    ) -> Result<(), CliError> {
        let code = exit_code_of(status);
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
        let stopped = ladder::stop(
            command,
            Signal::SIGTERM,
            self.kill_after,
            Some(status),
            Some(held.lost()),
            signals,
        )
        .await;
        self.after_ladder(held, &stopped, code).await
    }

    /// Someone asked for it: pass the request on, give the command its grace, give back.
    async fn requested<H: Held>(
        &self,
        held: H,
        command: &mut Command,
        signals: &mut Signals,
    ) -> Result<(), CliError> {
        let (signal, grace) = self.on_request;
        eprintln!(
            "fencelock: asked to release {}; sending {} to {} and releasing when it ends \
             (SIGKILL after {})",
            self.held,
            signal.as_str(),
            show(self.program),
            format_duration(grace)
        );
        let stopped = ladder::stop(command, signal, grace, None, Some(held.lost()), signals).await;
        let code = stopped.status.map_or(EXIT_FAILURE, exit_code_of);
        self.after_ladder(held, &stopped, code).await
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

    /// The launcher was killed (its tree may still run): stop the tree, give back, exit 125.
    async fn launcher_died<H: Held>(
        &self,
        held: H,
        command: &mut Command,
        status: ExitStatus,
        signals: &mut Signals,
    ) -> Result<(), CliError> {
        let by = status
            .signal()
            .and_then(|n| Signal::try_from(n).ok())
            .map_or("a signal", Signal::as_str);
        eprintln!(
            "fencelock: the launcher of {} was killed by {by}; stopping what it started \
             (SIGTERM, SIGKILL after {}) before {} is given back",
            show(self.program),
            format_duration(self.kill_after),
            self.held,
        );
        let stopped = ladder::stop(
            command,
            Signal::SIGTERM,
            self.kill_after,
            Some(status),
            Some(held.lost()),
            signals,
        )
        .await;
        self.warn_survivors(&stopped);
        let fence = held.fence();
        give_back_quietly(held, self.name).await;
        let lost = stopped.lost.as_ref().map_or_else(String::new, |reason| {
            format!(" ({} {fence} was lost meanwhile: {reason})", self.number)
        });
        Err(CliError::Failed {
            message: format!(
                "the launcher of {} was killed by {by}; what it had started was stopped and {} \
                 given back{lost}",
                show(self.program),
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
            Ok(true) => {}
            Ok(false) => {
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

    /// It was lost while the command ran: stop the command's tree, exit with 74.
    async fn lost<H: Held>(
        &self,
        held: H,
        command: &mut Command,
        reason: &fencelock::LostReason,
        signals: &mut Signals,
    ) -> Result<(), CliError> {
        eprintln!(
            "fencelock: {} ({} {}) was lost while {} ran: {reason}; stopping it (SIGTERM, \
             SIGKILL after {})",
            self.held,
            self.number,
            held.fence(),
            show(self.program),
            format_duration(self.kill_after)
        );
        let stopped = ladder::stop(
            command,
            Signal::SIGTERM,
            self.kill_after,
            None,
            None,
            signals,
        )
        .await;
        self.warn_survivors(&stopped);
        let ended = stopped.status.map_or_else(
            || "could not be collected".to_owned(),
            |s| format!("exited with status {}", exit_code_of(s)),
        );
        let how = if stopped.killed {
            format!(
                "(or what it started) was still running {} after SIGTERM, got SIGKILL and {ended}",
                format_duration(self.kill_after)
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
                 user's, or in uninterruptible sleep); {} is given back without waiting for \
                 them",
                if pids.len() == 1 { "" } else { "es" },
                pids.join(", "),
                show(self.program),
                self.held
            );
        }
    }
}

/// Gives back what the command never ran under.
pub(super) async fn give_back_quietly<H: Held>(held: H, name: &str) {
    if let Err(err) = held.give_back().await {
        tracing::debug!(lock = %name, %err, "release failed; the lease will run out");
    }
}
