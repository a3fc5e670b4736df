//! Command-line arguments, logging set-up and dispatch to the subcommands.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand};

use crate::demo;
use crate::error::CliError;

const ABOUT: &str = "Fenced distributed locks on Redis, from the command line";

const LONG_ABOUT: &str = "\
Fenced distributed locks on Redis, from the command line.

A lock on Redis is a lease, not a mutex: a holder that stalls for longer than its lease can \
lose the lock without knowing it. fencelock gives every acquisition a fencing token, strictly \
larger than every earlier one, so that the protected resource can refuse a stale holder. \
`fencelock demo` shows it happen.";

const EXAMPLES: &str = "\
Examples:
  fencelock demo                               # throwaway redis-server, 4 worker processes
  fencelock demo --workers 6 --ttl 500ms       # more workers, shorter lease
  FENCELOCK_URL=redis://127.0.0.1:6379 fencelock demo   # use your own Redis
  fencelock -v demo                            # with the library's debug log on stderr";

/// The `fencelock` command line.
#[derive(Debug, Parser)]
#[command(
    name = "fencelock",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    propagate_version = true
)]
pub struct Cli {
    /// Log to stderr: -v for fencelock's debug messages, -vv for trace (RUST_LOG, if set, decides
    /// what is shown)
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Watch a fencing token stop a paused lock holder (starts its own redis-server)
    #[command(long_about = demo::LONG_ABOUT, after_help = demo::EXAMPLES)]
    Demo(demo::DemoArgs),

    /// One worker process of `fencelock demo` (internal: started by the demo itself)
    #[command(hide = true)]
    DemoWorker(demo::worker::WorkerArgs),
}

/// Parses the command line, runs the subcommand and turns its outcome into an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    // One thread: the demo is I/O-bound, and processes the demo starts are spawned from the main
    // thread (a worker's parent-death signal follows the thread that spawned it).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("fencelock: error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let verbose = cli.verbose;
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Demo(args) => demo::run(args, verbose).await,
            Command::DemoWorker(args) => demo::worker::run(args, verbose).await,
        }
    });
    // Do not wait for background tasks (a blocking read of stdin, the lock client's tasks).
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Reported { code }) => ExitCode::from(code),
        Err(err) => {
            eprintln!("fencelock: error: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

/// Sends tracing output to stderr when asked for with `-v` (or `RUST_LOG`).
fn init_tracing(verbose: u8) {
    use tracing_subscriber::EnvFilter;

    let from_env = std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty());
    if verbose == 0 && !from_env {
        return;
    }
    let default = match verbose {
        0 | 1 => "warn,fencelock=debug,fencelock_cli=debug",
        _ => "warn,fencelock=trace,fencelock_cli=trace",
    };
    let filter = if from_env {
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
    } else {
        EnvFilter::new(default)
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
