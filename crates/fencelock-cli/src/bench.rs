//! `fencelock bench`: runs the project's benchmark, the `fencelock-bench` program, which is built
//! separately because it links the peer crates it compares against (rslock, redlock).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::EXIT_NOT_FOUND;

pub const ABOUT: &str = "Run the benchmark: fencelock side by side with a raw SET NX baseline and the \
rslock and redlock crates, on redis-server instances it starts itself.\n\n\
This runs the `fencelock-bench` program found next to this binary (or in PATH), passing every \
argument on. Build it with `cargo build --release -p fencelock-bench`, or run `scripts/bench`, \
which builds and runs it.";

pub const AFTER_HELP: &str = "Examples:\n  \
fencelock bench --smoke          every workload for about half a second\n  \
fencelock bench --json out.json  the full run (several minutes), also as JSON\n  \
fencelock bench -- --help        the benchmark's own options";

/// The benchmark's arguments, passed on untouched.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Arguments for fencelock-bench (see `fencelock bench -- --help`)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<OsString>,
}

/// Finds `fencelock-bench` beside the running binary, else in PATH.
fn locate() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("fencelock-bench")))
        .filter(|path| path.is_file());
    beside.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("fencelock-bench"))
                .find(|path| path.is_file())
        })
    })
}

/// Runs the benchmark and returns its exit status.
pub fn run(args: &BenchArgs) -> ExitCode {
    let Some(program) = locate() else {
        eprintln!(
            "fencelock: error: the benchmark program `fencelock-bench` was not found next to this binary \
             or in PATH; build it with `cargo build --release -p fencelock-bench` (or run `scripts/bench`)"
        );
        return ExitCode::from(EXIT_NOT_FOUND);
    };
    match std::process::Command::new(&program)
        .args(&args.args)
        .status()
    {
        Ok(status) => match status.code() {
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => ExitCode::FAILURE,
        },
        Err(err) => {
            eprintln!("fencelock: error: cannot run {}: {err}", program.display());
            ExitCode::FAILURE
        }
    }
}
