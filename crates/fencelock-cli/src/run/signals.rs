//! The signals `fencelock run` handles: those that end a wait, and those passed on to the
//! command.

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

use crate::error::CliError;

/// The signals `fencelock run` catches: those that stop a wait (INT, TERM, HUP) from the start,
/// and those only passed on to the command (QUIT, USR1, USR2) from just before it starts.
pub(super) struct Signals {
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
    pub(super) fn new() -> Result<Self, CliError> {
        Ok(Signals {
            interrupt: catch(SignalKind::interrupt(), "SIGINT")?,
            terminate: catch(SignalKind::terminate(), "SIGTERM")?,
            hangup: catch(SignalKind::hangup(), "SIGHUP")?,
            forwarded: None,
        })
    }

    /// Catches QUIT, USR1 and USR2 too (before the command starts: a signal must never find
    /// fencelock without its handler once the command runs).
    pub(super) fn catch_forwarded(&mut self) -> Result<(), CliError> {
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
    pub(super) async fn recv(&mut self) -> Signal {
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
    pub(super) async fn pending(&mut self) -> Option<Signal> {
        tokio::select! {
            biased;
            signal = self.recv() => Some(signal),
            () = std::future::ready(()) => None,
        }
    }
}

/// A signal's number (for the shell's exit status, 128 + N).
pub(super) fn signal_number(signal: Signal) -> u8 {
    u8::try_from(signal as i32).unwrap_or(0)
}
