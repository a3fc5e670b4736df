//! Checks the model with a bound given on the command line:
//! `cargo run --release -p fencelock-model -- fences --clients 3 --time 4 --grants 4`
//! (`fences`: [`LockModel::fences`], the default; `passing`: [`LockModel::passing`]), or
//! `cargo run --release -p fencelock-model -- fair --clients 3 --time 5 --grants 4` (`fair`:
//! [`FairModel::small`] with the same arguments).

use std::fmt::Debug;
use std::process::ExitCode;
use std::time::Instant;

use fencelock_model::LockModel;
use fencelock_model::fair::FairModel;
use stateright::{Checker, Model};

const USAGE: &str = "usage: fencelock-model [fences|passing|fair] [--clients N] [--time STEPS] [--grants N] [--depth N] [--failovers N] [--crashes N] [--back N] [--jumps N] [--passing 0|1] [--lossy 0|1] [--writes 0|1]";

fn main() -> ExitCode {
    let mut model = LockModel::fences();
    let mut args = std::env::args().skip(1).peekable();
    match args.peek().map(String::as_str) {
        Some("fences") => {
            args.next();
        }
        Some("passing") => {
            args.next();
            model = LockModel::passing();
        }
        Some("fair") => {
            args.next();
            return fair(args.collect());
        }
        _ => {}
    }
    let mut depth = None;
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<usize>().ok());
        let Some(value) = value else {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        };
        let small = u8::try_from(value).unwrap_or(u8::MAX);
        match arg.as_str() {
            "--clients" => model.clients = value,
            "--time" => model.max_time = small,
            "--grants" => model.max_grants = small,
            "--failovers" => model.failovers = small,
            "--crashes" => model.crashes = small,
            "--back" => model.steps_back = small,
            "--jumps" => model.jumps = small,
            "--passing" => model.passing = value != 0,
            "--lossy" => model.lossy = value != 0,
            "--writes" => model.writes = value != 0,
            "--depth" => depth = Some(value),
            _ => {
                eprintln!("unknown argument {arg}");
                return ExitCode::from(2);
            }
        }
    }
    check(model, depth)
}

/// The fair lock's model with the arguments it takes.
fn fair(args: Vec<String>) -> ExitCode {
    let mut model = FairModel::small();
    let mut depth = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let Some(value) = args.next().and_then(|v| v.parse::<usize>().ok()) else {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        };
        let small = u8::try_from(value).unwrap_or(u8::MAX);
        match arg.as_str() {
            "--clients" => model.clients = value,
            "--time" => model.max_time = small,
            "--grants" => model.max_grants = small,
            "--crashes" => model.crashes = small,
            "--back" => model.steps_back = small,
            "--lossy" => model.lossy = value != 0,
            "--depth" => depth = Some(value),
            _ => {
                eprintln!(
                    "unknown argument {arg} (fair takes --clients, --time, --grants, --crashes, --back, --lossy, --depth)"
                );
                return ExitCode::from(2);
            }
        }
    }
    check(model, depth)
}

/// Checks `model` exhaustively (to `depth` if given) and prints each property's outcome.
fn check<M>(model: M, depth: Option<usize>) -> ExitCode
where
    M: Model + Clone + Debug + Send + Sync + 'static,
    M::State: Debug + std::hash::Hash + Eq + Send + Sync + Clone,
    M::Action: Debug + std::hash::Hash + Eq + Send + Sync + Clone,
{
    let started = Instant::now();
    let mut checker = model.clone().checker();
    if let Some(depth) = depth {
        checker = checker.target_max_depth(depth);
    }
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let checker = checker.threads(threads).spawn_bfs().join();
    println!(
        "{model:?}\ndepth bound {depth:?}: {} unique states, {} states, max depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    let mut failed = false;
    for property in model.properties() {
        let found = checker.discovery(property.name).is_some();
        let ok = match property.expectation {
            stateright::Expectation::Always | stateright::Expectation::Eventually => !found,
            stateright::Expectation::Sometimes => found,
        };
        failed |= !ok;
        println!(
            "{} {:?}: {}",
            if ok { "ok  " } else { "FAIL" },
            property.expectation,
            property.name
        );
        if !ok && let Some(path) = checker.discovery(property.name) {
            println!("  {:?}", path.into_actions());
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
