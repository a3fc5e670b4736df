//! The ladder that stops the command's process tree before what it runs under is given back:
//! a first signal (SIGTERM, or `--on-request`'s), a grace, then SIGKILL to whatever is left,
//! until nothing of the tree is alive. Every ending climbs it: the command's exit (for what it
//! left behind), a loss, a release request, and the launcher's death.
//!
//! While it climbs, the signals `fencelock` receives are still passed on to the command's
//! process group (a Ctrl-C during a long grace reaches the command), and the hold is still
//! watched: a loss on the way cuts the grace short (SIGKILL at once) and the run then ends with
//! exit 74. While it is held, it outlives every process of the tree: one that survives SIGKILL
//! (uninterruptible sleep, another user's) is reported, and the hold is kept, renewed, until it
//! has ended or the hold is lost.

use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::time::Instant;

use super::child::Command;
use super::held::Loss;
use super::signals::{Relay, Relayed};

/// How often the tree is looked at while it is being stopped.
const POLL: Duration = Duration::from_millis(20);
/// How long processes have to end after SIGKILL before they are reported (a process in
/// uninterruptible sleep, or one of another user's that cannot be signalled). While the hold is
/// held, it is kept (renewed) until they end; once it is lost, the run ends without them.
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
    /// Processes still alive `KILL_LIMIT` after SIGKILL, when the run ended without them (the
    /// hold was lost).
    pub(super) survivors: Vec<Pid>,
}

/// What is held while the ladder climbs: whether it still is, and its loss.
pub(super) struct Holding<'a> {
    pub(super) is_held: &'a dyn Fn() -> bool,
    pub(super) loss: Loss,
    /// What is held, for the report of survivors (`lock "NAME"`).
    pub(super) what: &'a str,
}

/// Stops the command's tree: `first` (and SIGCONT, for a stopped process) to all of it, then
/// `grace`, then SIGKILL, until nothing is alive; then collects the launcher. `holding`: what is
/// still held (`None` once it is lost): a loss on the way cuts the grace short, and while it is
/// held the ladder waits for survivors of SIGKILL however long they live. Returns at once when
/// nothing is left.
pub(super) async fn stop(
    command: &mut Command,
    first: Signal,
    grace: Duration,
    holding: Option<Holding<'_>>,
    relay: &mut Relay<'_>,
) -> Stopped {
    let mut stopped = Stopped {
        status: command.try_wait().ok().flatten(),
        killed: false,
        lost: None,
        survivors: Vec::new(),
    };
    let tree = command.tree;
    let launcher = command.launcher;
    let (is_held, what, mut loss) = match holding {
        Some(h) => (Some(h.is_held), h.what, Some(h.loss)),
        None => (None, "", None),
    };
    let mut members = tree.members();
    if stopped.status.is_some() && members.alive.is_empty() {
        tree.reap(&members, Some(launcher));
        command.reap();
        return stopped;
    }
    tree.signal(first);
    // A tree stopped by job control is continued only while the hold is held.
    if !(loss.is_none() && relay.tree_stopped(command)) {
        tree.signal(Signal::SIGCONT);
    }
    let mut deadline = Instant::now() + grace;
    let mut kill_limit = None;
    let mut reported = false;
    loop {
        if stopped.status.is_none() {
            stopped.status = command.try_wait().ok().flatten();
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
                if loss.is_none() {
                    stopped.survivors = members.alive;
                    break;
                }
                if !reported {
                    reported = true;
                    report_survivors(&members.alive, what);
                }
            }
        }
        let held = is_held.filter(|_| loss.is_some());
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
                if reported {
                    eprintln!("fencelock: {what} was lost while the survivors lived: {reason}");
                }
                stopped.lost = Some(reason);
                deadline = Instant::now();
            }
            signal = relay.recv() => {
                tracing::debug!(signal = signal.as_str(), group = %tree.group(), "received");
                if relay.handle(signal, command, held) == Relayed::LostWhileStopped {
                    deadline = Instant::now();
                }
            }
            () = tokio::time::sleep(POLL) => relay.flush(command),
        }
    }
    // The launcher's status, if it ended in the last round; then it is collected.
    if stopped.status.is_none() {
        stopped.status = command.try_wait().ok().flatten();
    }
    command.reap();
    stopped
}

/// Says which processes outlive SIGKILL while the hold is kept for them.
fn report_survivors(pids: &[Pid], what: &str) {
    let pids: Vec<String> = pids.iter().map(ToString::to_string).collect();
    eprintln!(
        "fencelock: warning: process{} {} still alive {} after SIGKILL (another user's, or in \
         uninterruptible sleep); {what} is kept until {} ended",
        if pids.len() == 1 { "" } else { "es" },
        pids.join(", "),
        crate::duration::format_duration(KILL_LIMIT),
        if pids.len() == 1 {
            "it has"
        } else {
            "they have"
        },
    );
}
