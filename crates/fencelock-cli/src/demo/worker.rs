//! One worker process of the demo (the hidden `demo-worker` subcommand).
//!
//! It loops: take the lock, write to the resource with its fence, "work" for 50–150 ms, write
//! again, release, and reports each step as a line on stdout (see [`Event`]). It stops when its
//! stdin closes (the demo's signal to finish), after a bounded number of rounds, or after a
//! bounded time. Like a real process that does not know it was paused, it does not ask its
//! guard before writing: the resource's fence check is what stops a stale write.

use std::io::Write;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::LOCK_NAME;
use super::events::Event;
use super::resource::Resource;
use crate::duration::parse_duration;
use crate::error::{CliError, EXIT_FAILURE};
use crate::process::stop_on_stdin_eof;
use crate::rng::Rng;

/// At most this many rounds per worker.
const MAX_ROUNDS: u32 = 1000;
/// A worker stops on its own after this long.
const MAX_RUN: Duration = Duration::from_secs(120);
/// How long a worker waits for the lock before it gives up (and reports an error).
const ACQUIRE_LIMIT: Duration = Duration::from_secs(15);

/// Arguments of `fencelock demo-worker` (started by `fencelock demo`, not by people).
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The Redis server (the demo passes it in the environment, never on the command line)
    #[arg(long, env = "FENCELOCK_URL", hide_env_values = true)]
    url: String,

    /// This worker's number
    #[arg(long)]
    id: u32,

    /// The lease of the lock
    #[arg(long, value_parser = parse_duration)]
    ttl: Duration,

    /// Exit if this process is no longer the parent (the demo died before we started)
    #[arg(long)]
    parent_pid: Option<u32>,
}

/// Runs the worker. Errors are reported to the demo as an `ERROR` line.
pub async fn run(args: WorkerArgs, _verbose: u8) -> Result<(), CliError> {
    follow_parent(args.parent_pid);
    let span = tracing::info_span!("worker", id = args.id);
    match work(&args).instrument(span).await {
        Ok(()) => Ok(()),
        Err(err) => {
            // If stdout is gone too, the demo is gone and nobody is left to tell.
            let _ = emit(&Event::Failed {
                message: err.to_string(),
            });
            Err(CliError::Reported { code: EXIT_FAILURE })
        }
    }
}

async fn work(args: &WorkerArgs) -> Result<(), CliError> {
    let client = fencelock::Client::open(&args.url)?;
    let mut resource = Resource::connect(&args.url).await?;
    let mut stop = stop_on_stdin_eof();
    let mut rng = Rng::from_clock(args.id);
    let started = Instant::now();
    emit(&Event::Ready)?;

    for round in 1..=MAX_ROUNDS {
        if *stop.borrow() || started.elapsed() > MAX_RUN {
            break;
        }
        let request = client
            .lock(LOCK_NAME)
            .ttl(args.ttl)
            .wait_up_to(ACQUIRE_LIMIT);
        let guard = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => break,
            guard = request.acquire() => guard?,
        };
        let fence = guard.fence();
        emit(&Event::Acquired { fence })?;

        // The work: write, think for a while, write again. If this process is paused in
        // between for longer than the lease, the second write carries a stale fence.
        let think = Duration::from_millis(rng.between(50, 150));
        for step in 1..=2u8 {
            if step == 2 {
                tokio::time::sleep(think).await;
            }
            let value = format!("report by worker {} (round {round}, part {step})", args.id);
            let outcome = resource.write(fence, args.id, &value).await?;
            emit(&Event::Wrote {
                fence,
                step,
                accepted: outcome.accepted,
                current: outcome.current,
                by: outcome.by,
                held: guard.is_held(),
            })?;
        }

        let lost = guard.lost();
        if lost.is_lost() {
            let reason = lost.wait().await;
            emit(&Event::Lost {
                fence,
                reason: reason.to_string(),
            })?;
        }
        let held = guard.release().await?;
        emit(&Event::Released { fence, held })?;
        // A short breath, so that the waiters woken by the release get their turn.
        tokio::time::sleep(Duration::from_millis(rng.between(10, 40))).await;
    }
    Ok(())
}

/// Writes one event line to stdout, flushed at once (the demo reacts to it).
fn emit(event: &Event) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", event.to_line())
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::io("cannot report to the demo (stdout)", e))
}

/// On Linux, asks to be killed when the demo dies, so that a worker the demo had stopped
/// (SIGSTOP) is not left behind if the demo itself is killed. Exits at once if the demo is
/// already gone.
fn follow_parent(parent_pid: Option<u32>) {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::signal::Signal;
        if let Err(err) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
            tracing::debug!(%err, "cannot ask for a parent-death signal");
        }
        if let Some(expected) = parent_pid {
            let parent = nix::unistd::getppid().as_raw();
            if u32::try_from(parent).ok() != Some(expected) {
                std::process::exit(i32::from(EXIT_FAILURE));
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent_pid;
}
