//! `fencelock release --force NAME`: the operator's tool for a lock whose holder is gone or
//! stuck. It deletes the lock whoever holds it, on every server, and wakes its waiters.
//! `fencelock release --ask NAME` asks a live holder to let go, and takes nothing.

use crate::error::CliError;
use crate::error::{exit, exit_help};
use crate::output::print_line;
use crate::servers::ServerArgs;

pub const ABOUT: &str = "\
Ask the holder of a lock to release it (--ask), or force-release it whoever holds it (--force).

--ask is polite revocation: the holder is asked and keeps the lock until it lets go. A \
`fencelock run` holding it passes the request on to its command (SIGTERM, or --on-request), \
waits --grace for it to end, and releases. A Rust holder hears it through \
`LockGuard::release_requested`. Nothing is taken from a holder that does not listen.

--force is for holders that are gone: it takes the lock (an operator's action).

Deletes the lock on every server and wakes the processes waiting for it; its fence counter is \
kept, so the next holder still gets a larger fence. The holder is not asked: if it is alive, it \
learns that it lost the lock at its next renewal (a third of its lease later at most), and a \
`fencelock run` holding it then stops its command and exits with 74. Use it when the holder is \
known to be gone or stuck; a `fencelock run` releases its own lock when its command ends.";

/// The help after the options.
pub fn after_help() -> String {
    exit_help(
        &[
            exit::SUCCESS
                .saying("success, whether or not the lock was held (the output says which)"),
            exit::USAGE.saying("usage error: no --force, an invalid lock name or Redis URL"),
            exit::REDIS,
            exit::OTHER,
        ],
        "\
Examples:
  fencelock status nightly-report            # who holds it, and for how long
  fencelock release --ask nightly-report     # ask the holder to let go
  fencelock release --force nightly-report",
    )
}

/// Arguments of `fencelock release`.
#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// Release the lock whoever holds it (the holder is not asked)
    #[arg(long, conflicts_with = "ask")]
    force: bool,

    /// Ask the holder to release the lock; it keeps the lock until it lets go
    #[arg(long)]
    ask: bool,

    /// The lock's name
    #[arg(value_name = "NAME")]
    name: String,
}

/// Runs `fencelock release`.
pub async fn release(args: ReleaseArgs) -> Result<(), CliError> {
    if args.ask {
        return ask(args).await;
    }
    if !args.force {
        return Err(CliError::Usage(format!(
            "refusing to release lock {name:?} without --force. Releasing a lock you do not hold \
             is an operator's action: whoever holds it loses it while it may still be working \
             (a `fencelock run` holding it stops its command and exits with 74), and a waiter \
             can take it at once. A `fencelock run` releases its own lock when its command \
             ends. To ask a live holder to let go: fencelock release --ask {name:?}. If the \
             holder is known to be gone or stuck, run: fencelock release --force {name:?}",
            name = args.name
        )));
    }
    let servers = args.servers.resolve()?;
    let client = servers.client()?;
    // Who held it, for the operator's record (best effort: the release itself decides).
    let before = client.inspect(&args.name).await.ok().and_then(|i| i.holder);
    let was_held = client.force_release(&args.name).await;
    // Over several servers, let the slowest one hear it before the process ends.
    client.wait_idle(std::time::Duration::from_secs(2)).await;
    let was_held = was_held?;
    if was_held {
        let by = before.map_or_else(String::new, |holder| {
            let fence = holder
                .fence
                .map_or_else(String::new, |f| format!(" with fence {f}"));
            format!(", held by {}{fence}", holder.token_prefix)
        });
        print_line(&format!(
            "lock {:?} released on {}{by}; its holder loses it at its next renewal",
            args.name,
            servers.describe()
        ))?;
    } else {
        print_line(&format!(
            "lock {:?} was not held on {}; nothing to release",
            args.name,
            servers.describe()
        ))?;
    }
    Ok(())
}

/// `fencelock release --ask`: asks the holders, takes nothing.
async fn ask(args: ReleaseArgs) -> Result<(), CliError> {
    let servers = args.servers.resolve()?;
    let client = servers.client()?;
    if client.request_release(&args.name).await? {
        print_line(&format!(
            "asked the holder of lock {:?} on {} to release it; it keeps the lock until it does",
            args.name,
            servers.describe()
        ))?;
    } else {
        print_line(&format!(
            "lock {:?} was not held on {}; nobody to ask",
            args.name,
            servers.describe()
        ))?;
    }
    Ok(())
}
