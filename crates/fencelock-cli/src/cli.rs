//! Command-line arguments, logging set-up and dispatch to the subcommands.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand};

use crate::error::CliError;
use crate::{bench, inspect, leader, release, run, watch};
use crate::{chaos, demo};

const ABOUT: &str = "Fenced distributed locks on Redis, from the command line";

const LONG_ABOUT: &str = "\
Fenced distributed locks on Redis, from the command line.

A lock on Redis is a lease, not a mutex: a holder that stalls for longer than its lease can \
lose the lock without knowing it. fencelock gives every acquisition a fencing token, strictly \
larger than every earlier one, so that the protected resource can refuse a stale holder. \
`fencelock run` runs a command under a lock, with its token in $FENCELOCK_FENCE, and stops the \
command if the lock is lost. `fencelock demo` shows a fencing token at work.";

const EXAMPLES: &str = "\
Examples:
  fencelock run nightly-report -- ./make-report.sh   # one host at a time, across the fleet
  fencelock run --no-wait backup -- ./backup.sh      # skip (exit 73) if another host runs it
  fencelock run --permits 3 encode -- ./encode.sh    # at most 3 at once, across the fleet
  fencelock status nightly-report                    # holder, remaining lease, fences
  fencelock list                                     # every held lock
  fencelock release --force nightly-report           # operator: the holder is gone
  fencelock demo                                     # throwaway redis-server, 4 worker processes
  FENCELOCK_URL=redis://127.0.0.1:6379 fencelock demo   # use your own Redis
  fencelock -v run job -- ./job                      # with the library's debug log on stderr

Servers: --url (repeatable: several mean Redlock), else $FENCELOCK_URL (comma-separated),
else the file named by $FENCELOCK_URL_FILE, else redis://127.0.0.1:6379.
Exit status of `run`: the command's own, or fencelock's (listed by `fencelock run --help`).
Output into a pipe whose reader has gone (`fencelock list | head`) ends the command quietly,
with status 0, as other Unix tools do.";

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

    /// The log's format on stderr (with -v or RUST_LOG): `text`, or `json`, one object per line
    /// with the event's fields (the lock, its kind and fence, a loss's reason) and its spans'
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding a lock; stop it if the lock is lost
    #[command(long_about = run::LONG_ABOUT, after_help = run::after_help())]
    Run(run::RunArgs),
    /// Run a command while leading an election; stop it if the leadership is lost
    #[command(long_about = run::elect::LONG_ABOUT, after_help = run::elect::after_help())]
    Elect(run::elect::ElectArgs),
    /// Show the leader of an election, or follow it with --watch
    #[command(long_about = leader::LONG_ABOUT, after_help = leader::after_help())]
    Leader(leader::LeaderArgs),

    /// Show whether a lock is held, by whom, for how long, and its fences
    #[command(long_about = inspect::STATUS_ABOUT, after_help = inspect::status_after_help())]
    Status(inspect::StatusArgs),

    /// Watch locks change hands: holder, fence, lease left, waiters (--prometheus: serve them)
    #[command(long_about = watch::ABOUT, after_help = watch::after_help())]
    Watch(watch::WatchArgs),

    /// List the held locks (SCAN, never KEYS)
    #[command(long_about = inspect::LIST_ABOUT, after_help = inspect::list_after_help())]
    List(inspect::ListArgs),

    /// Force-release a lock, whoever holds it (an operator's action; needs --force)
    #[command(long_about = release::ABOUT, after_help = release::after_help())]
    Release(release::ReleaseArgs),

    /// Watch a fencing token stop a paused lock holder (starts its own redis-server)
    #[command(long_about = demo::LONG_ABOUT, after_help = demo::after_help())]
    Demo(demo::DemoArgs),

    /// Fault injection with a history checker (starts its own redis-servers)
    #[command(long_about = chaos::ABOUT, after_help = chaos::after_help())]
    Chaos(chaos::ChaosArgs),

    /// Check a history written by `fencelock chaos`
    ChaosCheck(chaos::CheckArgs),

    /// Run the benchmark (fencelock against raw Redis and the peer crates)
    #[command(long_about = bench::ABOUT, after_help = bench::AFTER_HELP)]
    Bench(bench::BenchArgs),

    /// One worker process of `fencelock demo` (internal: started by the demo itself)
    #[command(hide = true)]
    DemoWorker(demo::worker::WorkerArgs),

    /// One worker process of `fencelock chaos` (internal: started by the run itself)
    #[command(hide = true)]
    ChaosWorker(chaos::worker::ChaosWorkerArgs),

    /// The launcher between `run` (or `elect`) and its command (internal: a subreaper that
    /// holds the command's tree, and kills it if its supervisor dies)
    #[command(name = "__launch", hide = true)]
    Launch(run::launch::LaunchArgs),
}

/// Parses the command line, runs the subcommand and turns its outcome into an exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return parse_failed(&err),
    };
    if let Command::Launch(args) = &cli.command {
        return run::launch::launch(args);
    }
    init_tracing(cli.verbose, cli.log_format);
    if let Command::Bench(args) = &cli.command {
        return bench::run(args);
    }
    if let Command::Chaos(args) = cli.command {
        // Several threads: the run's fault proxies relay traffic while the nemesis waits on a
        // server it stopped or restarts (in `block_in_place`).
        return finish(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| CliError::io("cannot start the async runtime", e))
                .and_then(|runtime| {
                    let result = runtime.block_on(chaos::run::run(args));
                    runtime.shutdown_background();
                    result
                }),
        );
    }
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
            Command::Run(args) => run::run(args).await,
            Command::Elect(args) => run::elect::elect(args).await,
            Command::Leader(args) => leader::leader(args).await,
            Command::Status(args) => inspect::status(args).await,
            Command::List(args) => inspect::list(args).await,
            Command::Watch(args) => watch::watch(args).await,
            Command::Release(args) => release::release(args).await,
            Command::Demo(args) => demo::run(args, verbose).await,
            Command::DemoWorker(args) => demo::worker::run(args, verbose).await,
            // Handled above, on a runtime of its own.
            Command::Chaos(_) => Ok(()),
            Command::ChaosCheck(args) => chaos::run::check_command(&args),
            Command::ChaosWorker(args) => chaos::worker::run(args).await,
            // Handled above, without a runtime (the launcher: on one of its own).
            Command::Bench(_) | Command::Launch(_) => Ok(()),
        }
    });
    // Do not wait for background tasks (a blocking read of stdin, the lock client's tasks).
    runtime.shutdown_timeout(Duration::from_millis(200));
    finish(result)
}

/// What the command line's parser found instead of a command: `--help` or `--version` (printed,
/// status 0), or a usage error, printed as clap words it and followed by the `fencelock:` line
/// every status of fencelock's own comes with (status 2).
fn parse_failed(err: &clap::Error) -> ExitCode {
    use std::io::Write;

    // A reader gone (`fencelock --help | head`) is no reason to complain.
    let _ = err.print();
    if !err.use_stderr() {
        return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(0));
    }
    let _ = writeln!(
        std::io::stderr(),
        "fencelock: usage error (exit {}); see `{}`",
        crate::error::EXIT_USAGE,
        help_for(std::env::args_os().skip(1))
    );
    ExitCode::from(crate::error::EXIT_USAGE)
}

/// The help to read after a usage error: `fencelock SUBCOMMAND --help` for the subcommand named
/// in `args` (the arguments after the program's name), else `fencelock --help`.
fn help_for(args: impl Iterator<Item = std::ffi::OsString>) -> String {
    use clap::CommandFactory;

    let command = Cli::command();
    let named = args
        .filter_map(|arg| arg.into_string().ok())
        .find(|arg| !arg.starts_with('-'))
        .and_then(|arg| {
            command
                .get_subcommands()
                .find(|sub| !sub.is_hide_set() && sub.get_name() == arg)
                .map(|sub| sub.get_name().to_owned())
        });
    match named {
        Some(name) => format!("fencelock {name} --help"),
        None => "fencelock --help".to_owned(),
    }
}

/// The exit code of a command's outcome (an error is printed first).
fn finish(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Reported { code }) => ExitCode::from(code),
        // The reader of stdout is gone (`fencelock list | head`): end quietly, as other tools do.
        Err(CliError::StdoutClosed) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("fencelock: error: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

/// The log's format (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for people.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// Sends tracing output to stderr when asked for with `-v` (or `RUST_LOG`).
fn init_tracing(verbose: u8, format: LogFormat) {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;

    let from_env = std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty());
    if verbose == 0 && !from_env {
        return;
    }
    let default = match verbose {
        0 | 1 => "warn,fencelock=debug,fencelock_cli=debug",
        _ => "warn,fencelock=trace,fencelock_cli=trace",
    };
    // `RUST_LOG` as targets and levels (`warn,fencelock=debug`): the directives people write;
    // span and field filters (which need a regular-expression engine) are not taken.
    let parse = |text: &str| text.parse::<Targets>().ok();
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|_| from_env)
        .and_then(|text| parse(&text))
        .or_else(|| parse(default))
        .unwrap_or_default();
    let output = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => tracing_subscriber::registry()
            .with(
                output
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_filter(filter),
            )
            .try_init(),
        LogFormat::Json => tracing_subscriber::registry()
            .with(output.json().with_filter(filter))
            .try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_usage_error_points_to_its_subcommands_help() {
        let help = |args: &[&str]| help_for(args.iter().map(std::ffi::OsString::from));
        assert_eq!(help(&["run", "--ttl", "x", "n"]), "fencelock run --help");
        assert_eq!(help(&["-v", "status"]), "fencelock status --help");
        assert_eq!(help(&["--bogus"]), "fencelock --help");
        assert_eq!(help(&["no-such-command"]), "fencelock --help");
        assert_eq!(help(&[]), "fencelock --help");
    }
}
