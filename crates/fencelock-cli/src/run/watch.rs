//! Watching the command's run: until the launcher ends (the command has), the hold is lost or a
//! release is requested, with the signals `fencelock` receives meanwhile relayed
//! (`signals.rs`).

use std::process::ExitStatus;

use super::child::Command;
use super::held::Loss;
use super::signals::{Relay, Relayed};

/// How the command's run ended.
pub(super) enum Outcome {
    /// The launcher ended: with the command's status once the command has ended, or by a
    /// signal of its own (it was killed).
    Exited(std::io::Result<ExitStatus>),
    Lost(fencelock::LostReason),
    /// Someone asked the holder to release the lock (`fencelock release --ask`).
    Requested,
}

/// Waits until the launcher ends, the lock is lost or a release is requested, passing on the
/// signals `fencelock` receives meanwhile to the command's process group as `signals.rs` says
/// (job control included: `held` tells whether the hold is still held).
pub(super) async fn watch(
    command: &mut Command,
    lost: Loss,
    held: &dyn Fn() -> bool,
    requested: impl std::future::Future<Output = ()>,
    relay: &mut Relay<'_>,
) -> Outcome {
    let mut lost = lost;
    let mut requested = std::pin::pin!(requested);
    loop {
        relay.flush(command);
        let retry = relay.has_kept();
        tokio::select! {
            biased;
            status = command.wait() => return Outcome::Exited(status),
            reason = &mut lost => return Outcome::Lost(reason),
            () = &mut requested => return Outcome::Requested,
            signal = relay.recv() => {
                tracing::debug!(signal = signal.as_str(), group = %command.tree.group(), "received");
                if relay.handle(signal, command, Some(held)) == Relayed::LostWhileStopped {
                    return Outcome::Lost((&mut lost).await);
                }
            }
            // Signals kept until the launcher is ready: looked at again shortly.
            () = tokio::time::sleep(READY_POLL), if retry => {}
        }
    }
}

/// How often a launcher that is not yet ready is looked at, while signals wait for it.
const READY_POLL: std::time::Duration = std::time::Duration::from_millis(2);
