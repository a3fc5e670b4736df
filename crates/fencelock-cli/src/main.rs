//! `fencelock`: the command-line tool of the fencelock distributed lock library.
//!
//! Each subcommand lives in its own module; `cli` holds the argument definitions and dispatch.

mod cli;
mod demo;
mod duration;
mod error;
mod output;
mod process;
mod redis_server;
mod redis_url;

fn main() -> std::process::ExitCode {
    cli::main()
}
