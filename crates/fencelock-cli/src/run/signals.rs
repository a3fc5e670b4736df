//! Every signal `fencelock run` and `elect` (the supervisor) can receive, and what it does with
//! each in each phase of a run: the one table ([`TABLE`]) that `docs/command.md` mirrors and
//! `tests/signals.rs` walks.
//!
//! The phases: *waiting* (for the lock, the permits, the leadership), *starting* (the launcher
//! runs but the command does not yet, or the launcher has not yet set up its own handlers),
//! *running*, and the *ladder* (the tree being stopped: `ladder.rs`).
//!
//! - [`Kind::Ending`] (HUP, INT, QUIT, TERM): ends a wait at once, with nothing held (exit
//!   128 + N); from *starting* on, passed on to the command's process group.
//! - [`Kind::Passed`]: passed on to the command's process group. One that arrives before the
//!   command runs (while waiting, or starting) is kept, and delivered once it runs; if it never
//!   runs, nothing was started.
//! - [`Kind::Stop`] (TSTP, TTIN, TTOU: job control, Ctrl-Z): the command's tree is stopped first
//!   (SIGSTOP, which it cannot ignore), then `fencelock` stops itself. While it waits, only
//!   `fencelock` stops (its wait goes on once continued).
//! - [`Kind::Continue`] (CONT): `fencelock` was continued. If it had stopped the command's tree,
//!   it first checks its hold: still held (its deadline not passed), the tree is continued; lost,
//!   the tree is killed (SIGKILL) without running again, and the run exits 74.
//! - Not caught (`None`): SIGKILL and SIGSTOP cannot be. The faults (ILL, TRAP, BUS, FPE, SEGV,
//!   SYS) end `fencelock` as the signal says, as do KILL (a BUS or SEGV sent with `kill` only
//!   the second time: the Rust runtime's stack-overflow handler takes the first and puts the
//!   default back); its launcher, told by the kernel, then kills the command's tree at once,
//!   and the lease runs out. A SIGSTOP stops `fencelock`
//!   alone; the launcher sees it stopped and stops the command's tree, and `fencelock`, once
//!   continued, checks its hold as after a Ctrl-Z. PIPE is ignored (a write to a closed pipe
//!   fails instead), CHLD is the runtime's.
//!
//! The launcher (`launch.rs`) catches every signal it can and ignores them; the supervisor sends
//! nothing to the command's group before the launcher says it is ready (its handlers set up and
//! the command started), so that no signal can end the launcher (exit 125) or be lost.

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

use super::child::Command;
use super::tree::send_to_group;
use crate::error::CliError;

/// What the supervisor does with a signal (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Ends a wait; passed on to the command once it runs.
    Ending,
    /// Passed on to the command; kept until it runs.
    Passed,
    /// Job control: the command's tree is stopped, then `fencelock`.
    Stop,
    /// `fencelock` was continued: the hold is checked before the command is.
    Continue,
}

/// Every signal from 1 to 31 and what the supervisor does with it (`None`: not caught).
pub const TABLE: [(Signal, Option<Kind>); 31] = [
    (Signal::SIGHUP, Some(Kind::Ending)),
    (Signal::SIGINT, Some(Kind::Ending)),
    (Signal::SIGQUIT, Some(Kind::Ending)),
    (Signal::SIGILL, None),
    (Signal::SIGTRAP, None),
    (Signal::SIGABRT, Some(Kind::Passed)),
    (Signal::SIGBUS, None),
    (Signal::SIGFPE, None),
    (Signal::SIGKILL, None),
    (Signal::SIGUSR1, Some(Kind::Passed)),
    (Signal::SIGSEGV, None),
    (Signal::SIGUSR2, Some(Kind::Passed)),
    (Signal::SIGPIPE, None),
    (Signal::SIGALRM, Some(Kind::Passed)),
    (Signal::SIGTERM, Some(Kind::Ending)),
    (Signal::SIGSTKFLT, Some(Kind::Passed)),
    (Signal::SIGCHLD, None),
    (Signal::SIGCONT, Some(Kind::Continue)),
    (Signal::SIGSTOP, None),
    (Signal::SIGTSTP, Some(Kind::Stop)),
    (Signal::SIGTTIN, Some(Kind::Stop)),
    (Signal::SIGTTOU, Some(Kind::Stop)),
    (Signal::SIGURG, Some(Kind::Passed)),
    (Signal::SIGXCPU, Some(Kind::Passed)),
    (Signal::SIGXFSZ, Some(Kind::Passed)),
    (Signal::SIGVTALRM, Some(Kind::Passed)),
    (Signal::SIGPROF, Some(Kind::Passed)),
    (Signal::SIGWINCH, Some(Kind::Passed)),
    (Signal::SIGIO, Some(Kind::Passed)),
    (Signal::SIGPWR, Some(Kind::Passed)),
    (Signal::SIGSYS, None),
];

/// What the supervisor does with `signal`.
pub fn kind(signal: Signal) -> Option<Kind> {
    TABLE
        .iter()
        .find(|(s, _)| *s == signal)
        .and_then(|(_, kind)| *kind)
}

/// The signals the supervisor catches, from its start: every one of [`TABLE`] with a kind.
pub(super) struct Signals {
    caught: Vec<(Signal, tokio::signal::unix::Signal)>,
    /// Signals received before the command ran, to deliver once it does (in order, once each).
    kept: Vec<Signal>,
}

impl Signals {
    /// Catches every signal of the table that has a kind (before anything is taken).
    pub(super) fn new() -> Result<Self, CliError> {
        let mut caught = Vec::new();
        for (number, kind) in TABLE {
            if kind.is_some() {
                let stream = signal(SignalKind::from_raw(number as i32))
                    .map_err(|e| CliError::io(format!("cannot handle {}", number.as_str()), e))?;
                caught.push((number, stream));
            }
        }
        Ok(Signals {
            caught,
            kept: Vec::new(),
        })
    }

    /// The next signal received (cancel-safe).
    async fn recv(&mut self) -> Signal {
        let waits = self.caught.iter_mut().map(|(number, stream)| {
            let number = *number;
            Box::pin(async move {
                match stream.recv().await {
                    Some(()) => number,
                    None => std::future::pending().await,
                }
            })
        });
        futures_util::future::select_all(waits).await.0
    }

    /// While waiting: resolves with the next signal that ends the wait. Job control stops
    /// `fencelock` (the wait goes on once it is continued); the signals to pass on are kept for
    /// the command. Cancel-safe.
    pub(super) async fn ending(&mut self) -> Signal {
        loop {
            let signal = self.recv().await;
            match kind(signal) {
                Some(Kind::Ending) => return signal,
                Some(Kind::Stop) => stop_self(),
                Some(Kind::Passed) => self.keep(signal),
                Some(Kind::Continue) | None => {}
            }
        }
    }

    /// A signal that ends the wait, already received and not yet seen, if any (the others are
    /// handled as [`ending`](Self::ending) does).
    pub(super) async fn pending_ending(&mut self) -> Option<Signal> {
        tokio::select! {
            biased;
            signal = self.ending() => Some(signal),
            () = std::future::ready(()) => None,
        }
    }

    fn keep(&mut self, signal: Signal) {
        if !self.kept.contains(&signal) {
            self.kept.push(signal);
        }
    }
}

/// Stops this process as the default action of a job-control signal would (SIGSTOP cannot be
/// caught, so its handler never sees it); returns once it is continued.
fn stop_self() {
    if let Err(err) = nix::sys::signal::raise(Signal::SIGSTOP) {
        tracing::debug!(%err, "cannot stop fencelock");
    }
}

/// What a signal handled while the command ran (or its tree was being stopped) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Relayed {
    /// Nothing that changes the run.
    Nothing,
    /// `fencelock` was continued after a stop and its hold was lost meanwhile: the command's
    /// tree was killed without running again.
    LostWhileStopped,
}

/// The signals received while the command runs, and while its tree is stopped: passed on once
/// the launcher is ready, job control applied to the tree.
pub(super) struct Relay<'a> {
    signals: &'a mut Signals,
    /// `fencelock` stopped the command's tree (job control) and has not continued it.
    tree_stopped: bool,
}

impl<'a> Relay<'a> {
    /// The relay for a command about to start; what was kept is delivered once it is ready.
    pub(super) fn new(signals: &'a mut Signals) -> Self {
        Relay {
            signals,
            tree_stopped: false,
        }
    }

    /// Whether the command's tree is stopped: by `fencelock` (job control), or by its launcher
    /// (which saw `fencelock` stopped). Once found, it stays stopped for this relay until
    /// `fencelock` continues it.
    pub(super) fn tree_stopped(&mut self, command: &Command) -> bool {
        if !self.tree_stopped && command.tree.members().stopped > 0 {
            self.tree_stopped = true;
        }
        self.tree_stopped
    }

    /// Whether signals are waiting for the launcher to be ready.
    pub(super) fn has_kept(&self) -> bool {
        !self.signals.kept.is_empty()
    }

    /// The next signal received (cancel-safe).
    pub(super) async fn recv(&mut self) -> Signal {
        self.signals.recv().await
    }

    /// Delivers what was kept, if the launcher is ready now.
    pub(super) fn flush(&mut self, command: &mut Command) {
        if self.signals.kept.is_empty() || !command.ready() {
            return;
        }
        for signal in std::mem::take(&mut self.signals.kept) {
            tracing::debug!(signal = signal.as_str(), group = %command.tree.group(), "passing on");
            send_to_group(command.tree.group(), signal);
        }
    }

    /// Handles `signal` as the table says; `held` tells whether the hold is still held (`None`:
    /// lost already).
    pub(super) fn handle(
        &mut self,
        signal: Signal,
        command: &mut Command,
        held: Option<&dyn Fn() -> bool>,
    ) -> Relayed {
        match kind(signal) {
            Some(Kind::Ending | Kind::Passed) => {
                self.signals.keep(signal);
                self.flush(command);
                Relayed::Nothing
            }
            Some(Kind::Stop) => {
                self.stop_tree(command);
                stop_self();
                // Continued: SIGCONT is handled as it comes (it is queued now).
                self.continued(command, held)
            }
            Some(Kind::Continue) => self.continued(command, held),
            None => Relayed::Nothing,
        }
    }

    /// Stops the command's tree (SIGSTOP), all but the launcher, which must stay able to
    /// end the tree should `fencelock` die while stopped.
    fn stop_tree(&mut self, command: &mut Command) {
        command.tree.signal(Signal::SIGSTOP);
        command.continue_launcher();
        self.tree_stopped = true;
    }

    /// `fencelock` runs again: the tree it stopped is continued if the hold is still held, and
    /// killed if not.
    fn continued(&mut self, command: &mut Command, held: Option<&dyn Fn() -> bool>) -> Relayed {
        // Stopped by this process (job control), or by the launcher (it saw this process
        // stopped by a SIGSTOP, which no handler sees).
        if !self.tree_stopped(command) {
            return Relayed::Nothing;
        }
        if held.is_some_and(|held| held()) {
            command.tree.signal(Signal::SIGCONT);
            self.tree_stopped = false;
            Relayed::Nothing
        } else {
            command.tree.signal(Signal::SIGKILL);
            Relayed::LostWhileStopped
        }
    }
}

/// A signal's number (for the shell's exit status, 128 + N).
pub(super) fn signal_number(signal: Signal) -> u8 {
    u8::try_from(signal as i32).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_every_signal_from_1_to_31_once_in_order() {
        for (i, (signal, _)) in TABLE.iter().enumerate() {
            assert_eq!(*signal as usize, i + 1, "{signal}");
        }
    }

    #[test]
    fn what_the_supervisor_catches_the_launcher_catches_too() {
        for (signal, kind) in TABLE {
            if kind.is_some() {
                assert!(super::super::launch::catches(signal), "{signal}");
            }
        }
    }
}
