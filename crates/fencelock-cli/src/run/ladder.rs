//! The ladder that stops the command's process tree before what it runs under is given back:
//! a first signal (SIGTERM, or `--on-request`'s), a grace, then SIGKILL to whatever is left,
//! until nothing of the tree is alive. Every ending climbs it: the command's exit (for what it
//! left behind), a loss, a release request, and the launcher's death.
//!
//! While it climbs, the signals `fencelock` receives are still passed on to the command's
//! process group (a Ctrl-C during a long grace reaches the command), and the hold is still
//! watched: a loss on the way cuts the grace short (SIGKILL at once) and the run then ends with
//! exit 74.

use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::time::Instant;

use super::child::Command;
use super::held::Loss;
use super::signals::Signals;
use super::tree::send_to_group;

/// How often the tree is looked at while it is being stopped.
const POLL: Duration = Duration::from_millis(20);
/// How long processes have to end after SIGKILL before the give-back goes ahead without them
/// (a process in uninterruptible sleep, or one of another user's that cannot be signalled).
const KILL_LIMIT: Duration = Duration::from_secs(10);

/// How the ladder ended.
#[derive(Debug)]
pub(super) struct Stopped {
    /// The launcher's exit status: the command's, as the launcher reports it (128 + N for a
    /// signal N), or the launcher's own death by a signal. `None` if it could not be collected.
    pub(super) status: Option<ExitStatus>,
    /// Something was still alive when the grace ran out (or the hold was lost): it got SIGKILL.
    pub(super) killed: bool,
    /// The hold was lost while the ladder ran.
    pub(super) lost: Option<fencelock::LostReason>,
    /// Processes still alive `KILL_LIMIT` after SIGKILL.
    pub(super) survivors: Vec<Pid>,
}

/// Stops the command's tree: `first` (and SIGCONT, for a stopped process) to all of it, then
/// `grace`, then SIGKILL, until nothing is alive and the launcher has been collected. `status`
/// is the launcher's, when it has already ended. Returns at once when nothing is left.
pub(super) async fn stop(
    command: &mut Command,
    first: Signal,
    grace: Duration,
    status: Option<ExitStatus>,
    loss: Option<Loss>,
    signals: &mut Signals,
) -> Stopped {
    let mut stopped = Stopped {
        status,
        killed: false,
        lost: None,
        survivors: Vec::new(),
    };
    let mut loss = loss;
    let tree = command.tree;
    let launcher = command.launcher;
    let mut members = tree.members();
    if stopped.status.is_some() && members.alive.is_empty() {
        tree.reap(&members, Some(launcher));
        return stopped;
    }
    tree.signal(first);
    tree.signal(Signal::SIGCONT);
    let mut deadline = Instant::now() + grace;
    let mut kill_limit = None;
    loop {
        if stopped.status.is_none() {
            stopped.status = command.child.try_wait().ok().flatten();
        }
        members = tree.members();
        tree.reap(&members, Some(launcher));
        if stopped.status.is_some() && members.alive.is_empty() {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            let limit = *kill_limit.get_or_insert(now + KILL_LIMIT);
            // Again each round: what a dying process forks in the meantime goes too.
            tree.signal(Signal::SIGKILL);
            stopped.killed = true;
            if now >= limit {
                stopped.survivors = members.alive;
                break;
            }
        }
        let lost = async {
            match loss.as_mut() {
                Some(loss) => loss.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            reason = lost => {
                loss = None;
                stopped.lost = Some(reason);
                deadline = Instant::now();
            }
            signal = signals.recv() => {
                tracing::debug!(signal = signal.as_str(), group = %tree.group(), "forwarding");
                send_to_group(tree.group(), signal);
            }
            () = tokio::time::sleep(POLL) => {}
        }
    }
    // The launcher's status, if it ended in the last round.
    if stopped.status.is_none() {
        stopped.status = command.child.try_wait().ok().flatten();
    }
    stopped
}
