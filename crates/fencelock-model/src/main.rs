//! Checks the model with a bound given on the command line:
//! `cargo run --release -p fencelock-model -- fences --clients 3 --time 4 --grants 4`
//! (`fences`: [`LockModel::fences`], the default; `passing`: [`LockModel::passing`]), or
//! `cargo run --release -p fencelock-model -- fair --clients 3 --time 5 --grants 4` (the fair
//! lock, [`FairModel::small`]), `-- semaphore --time 6 --grants 5` ([`SemModel::small`]),
//! `-- election --clients 4 --time 8 --terms 6` ([`ElectionModel::small`]), `-- multi --rounds 3
//! --third 1 --max-failed 6` ([`MultiModel::small`]), `-- redlock --time 4`
//! ([`RedlockModel::small`]); each prints the arguments it takes when given a wrong one
//! (docs/how-it-works.md has their state counts).

use std::fmt::Debug;
use std::process::ExitCode;
use std::time::Instant;

use fencelock_model::LockModel;
use fencelock_model::election::ElectionModel;
use fencelock_model::fair::FairModel;
use fencelock_model::multi::MultiModel;
use fencelock_model::redlock::RedlockModel;
use fencelock_model::semaphore::SemModel;
use fencelock_model::trace;
use stateright::{Checker, Model};

const USAGE: &str = "usage: fencelock-model trace HISTORY.jsonl..., or fencelock-model [fences|passing|fair|semaphore|election|multi|redlock] [--clients N] [--time STEPS] [--grants N] [--depth N] [--failovers N] [--crashes N] [--back N] [--jumps N] [--passing 0|1] [--lossy 0|1] [--writes 0|1]";

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
        Some("trace") => {
            args.next();
            return trace(args.collect());
        }
        Some(kind @ ("fair" | "semaphore" | "election" | "multi" | "redlock")) => {
            let kind = kind.to_owned();
            args.next();
            return other(&kind, args.collect());
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

/// Checks each chaos history against the model ([`fencelock_model::trace`]): exit 0 when the
/// model explains every one, 1 when it does not explain one (the first event it cannot explain
/// is printed), 2 for a file that cannot be read.
fn trace(files: Vec<String>) -> ExitCode {
    if files.is_empty() {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let mut code = ExitCode::SUCCESS;
    for file in files {
        let read = std::fs::File::open(&file)
            .map_err(|e| e.to_string())
            .and_then(|f| trace::read_chaos_history(std::io::BufReader::new(f)));
        let history = match read {
            Ok(history) => history,
            Err(e) => {
                eprintln!("{file}: {e}");
                return ExitCode::from(2);
            }
        };
        let started = Instant::now();
        match trace::check(&history) {
            Ok(explained) => println!(
                "{file}: explained: {} operations on {} lock(s), at most {} model states at once, {:.1?}",
                explained.operations,
                explained.locks,
                explained.widest,
                started.elapsed()
            ),
            Err(unexplained) => {
                println!("{file}: NOT EXPLAINED: {unexplained}");
                code = ExitCode::from(1);
            }
        }
    }
    code
}

/// Reads `--name value` pairs into `set` (which answers whether it knows the name); `--depth`
/// is the checker's. Answers the depth, or the exit code of a usage error.
fn pairs(
    args: Vec<String>,
    takes: &str,
    mut set: impl FnMut(&str, usize) -> bool,
) -> Result<Option<usize>, ExitCode> {
    let mut depth = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<usize>().ok());
        let known = match value {
            Some(value) if arg == "--depth" => {
                depth = Some(value);
                true
            }
            Some(value) => set(&arg, value),
            None => false,
        };
        if !known {
            eprintln!("{arg}: this model takes {takes} --depth N");
            return Err(ExitCode::from(2));
        }
    }
    Ok(depth)
}

fn small(value: usize) -> u8 {
    u8::try_from(value).unwrap_or(u8::MAX)
}

/// The fair lock's, the semaphore's, the election's, multi_lock's or Redlock's model, with the
/// arguments each takes.
fn other(kind: &str, args: Vec<String>) -> ExitCode {
    let depth = match kind {
        "fair" => {
            let mut model = FairModel::small();
            let takes = "--clients N --time STEPS --grants N --crashes N --back N --lossy 0|1";
            let depth = pairs(args, takes, |arg, value| {
                match arg {
                    "--clients" => model.clients = value,
                    "--time" => model.max_time = small(value),
                    "--grants" => model.max_grants = small(value),
                    "--crashes" => model.crashes = small(value),
                    "--back" => model.steps_back = small(value),
                    "--lossy" => model.lossy = value != 0,
                    _ => return false,
                }
                true
            });
            return depth.map_or_else(|code| code, |depth| check(model, depth));
        }
        "semaphore" => {
            let mut model = SemModel::small();
            let takes = "--permits N --clients N (taking 2, 2, 1, 2, ...) --time STEPS --grants N --crashes N";
            let mut takes_arg = None;
            let depth = pairs(args, takes, |arg, value| {
                match arg {
                    "--permits" => model.permits = small(value),
                    "--time" => model.max_time = small(value),
                    "--grants" => model.max_grants = small(value),
                    "--crashes" => model.crashes = small(value),
                    "--clients" => takes_arg = Some(value),
                    _ => return false,
                }
                true
            });
            if let Some(clients) = takes_arg {
                // N clients taking 2, 2, 1, 2, 2, 1, ...
                model.takes = (0..clients)
                    .map(|i| if i % 3 == 2 { 1 } else { 2 })
                    .collect();
            }
            depth.map(|depth| check(model, depth))
        }
        "redlock" => {
            let mut model = RedlockModel::small();
            let takes = "--clients N --time STEPS --requests N --restarts N";
            let depth = pairs(args, takes, |arg, value| {
                match arg {
                    "--clients" => model.clients = value,
                    "--time" => model.max_time = small(value),
                    "--requests" => model.max_requests = small(value),
                    "--restarts" => model.restarts = small(value),
                    _ => return false,
                }
                true
            });
            depth.map(|depth| check(model, depth))
        }
        "election" => {
            let mut model = ElectionModel::small();
            let takes = "--clients N --time STEPS --terms N --crashes N";
            let depth = pairs(args, takes, |arg, value| {
                match arg {
                    "--clients" => model.clients = value,
                    "--time" => model.max_time = small(value),
                    "--terms" => model.max_terms = small(value),
                    "--crashes" => model.crashes = small(value),
                    _ => return false,
                }
                true
            });
            depth.map(|depth| check(model, depth))
        }
        _ => {
            let mut model = MultiModel::small();
            let takes = "--rounds N --max-failed N --atomic 0|1 --third 0|1";
            let depth = pairs(args, takes, |arg, value| {
                match arg {
                    "--rounds" => model.rounds = small(value),
                    "--max-failed" => model.max_failed = small(value),
                    "--atomic" => model.atomic_rounds = value != 0,
                    // A third request, for name 1 alone.
                    "--third" if value != 0 => model.requests.push(vec![1]),
                    "--third" => {}
                    _ => return false,
                }
                true
            });
            depth.map(|depth| check(model, depth))
        }
    };
    depth.unwrap_or_else(|code| code)
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
