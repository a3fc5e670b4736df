//! `fencelock`: the command-line tool of the fencelock distributed lock library.
//!
//! Each subcommand lives in its own module; `cli` holds the argument definitions and dispatch.

mod bench;
mod chaos;
mod cli;
mod demo;
mod duration;
mod error;
mod inspect;
mod leader;
mod metrics_file;
mod output;
mod process;
mod redis_url;
mod release;
mod rng;
mod run;
mod servers;
mod watch;
mod watch_metrics;

fn main() -> std::process::ExitCode {
    cli::main()
}
