//! `fencelock-bench`: runs the benchmark and prints the markdown report.
//!
//! ```text
//! fencelock-bench                       # the full run (several minutes)
//! fencelock-bench --smoke               # every workload ~0.5 s: does it all work?
//! fencelock-bench --json bench.json --svg docs/benchmark-ratios.svg
//! fencelock-bench --from-json bench.json --svg out.svg   # re-render, no run
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use fencelock_bench::{BenchError, BenchOptions, Library, Report, Workload};

#[derive(Debug, Parser)]
#[command(
    name = "fencelock-bench",
    about = "Benchmark fencelock against a raw SET NX baseline, rslock and redlock, on redis-server instances it starts itself"
)]
struct Args {
    /// Run every workload for about half a second (W5: 500 locks for 2 s; W6: each kind
    /// 2 × 150 ms uncontended, 300 ms contended) to check it works.
    #[arg(long)]
    smoke: bool,
    /// Contenders, comma-separated (default: all built in).
    #[arg(long, value_delimiter = ',')]
    libraries: Option<Vec<Library>>,
    /// Workloads, comma-separated: w1,w2,w3,w4,w5,w6,w7,w8,w9 (default: all).
    #[arg(long, value_delimiter = ',')]
    workloads: Option<Vec<Workload>>,
    /// Write the report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write the markdown report to this file (it is printed in any case).
    #[arg(long, value_name = "PATH")]
    markdown: Option<PathBuf>,
    /// Write a bar chart of the ratios to raw (SVG) to this file.
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,
    /// Do not run: read a report written by --json and render it.
    #[arg(long, value_name = "PATH")]
    from_json: Option<PathBuf>,
    /// W1: seconds per repetition.
    #[arg(long, value_name = "SECONDS")]
    w1_seconds: Option<f64>,
    /// W1: repetitions.
    #[arg(long)]
    w1_repetitions: Option<usize>,
    /// W2: seconds.
    #[arg(long, value_name = "SECONDS")]
    w2_seconds: Option<f64>,
    /// W3: seconds (W9's too).
    #[arg(long, value_name = "SECONDS")]
    w3_seconds: Option<f64>,
    /// W9: numbers of workers, comma-separated (default: 8,64,256).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    w9_workers: Option<Vec<usize>>,
    /// W4: seconds per phase (healthy, one instance stopped).
    #[arg(long, value_name = "SECONDS")]
    w4_seconds: Option<f64>,
    /// W5: locks held.
    #[arg(long)]
    w5_locks: Option<usize>,
    /// W5: seconds to hold them.
    #[arg(long, value_name = "SECONDS")]
    w5_seconds: Option<f64>,
    /// W6: seconds per uncontended repetition of each kind.
    #[arg(long, value_name = "SECONDS")]
    w6_seconds: Option<f64>,
    /// W6: uncontended repetitions of each kind.
    #[arg(long)]
    w6_repetitions: Option<usize>,
    /// W6: seconds per contended round of each kind.
    #[arg(long, value_name = "SECONDS")]
    w6_round_seconds: Option<f64>,
    /// W6: contended rounds of each kind.
    #[arg(long)]
    w6_rounds: Option<usize>,
    /// W5: run in this process instead of one fresh child process per contender.
    #[arg(long)]
    w5_in_process: bool,
    /// Internal: run W5 for this contender only and print its row as JSON.
    #[arg(long, hide = true, value_name = "LIB")]
    w5_child: Option<Library>,
    /// Internal: the W5 lease in milliseconds (with --w5-child).
    #[arg(long, hide = true)]
    w5_ttl_ms: Option<u64>,
}

fn seconds(s: f64, what: &str) -> Result<Duration, BenchError> {
    Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| *d <= Duration::from_secs(3600))
        .ok_or_else(|| {
            BenchError::Bench(format!(
                "--{what}: {s} is not a duration between 0 and 3600 s"
            ))
        })
}

fn options(args: &Args) -> Result<BenchOptions, BenchError> {
    let mut opts = if args.smoke {
        BenchOptions::smoke()
    } else {
        BenchOptions::full()
    };
    if let Some(l) = &args.libraries {
        opts.libraries = l.clone();
    }
    if let Some(w) = &args.workloads {
        opts.workloads = w.clone();
    }
    if let Some(s) = args.w1_seconds {
        opts.w1_duration = seconds(s, "w1-seconds")?;
    }
    if let Some(n) = args.w1_repetitions {
        opts.w1_repetitions = n;
    }
    if let Some(s) = args.w2_seconds {
        opts.w2_duration = seconds(s, "w2-seconds")?;
    }
    if let Some(workers) = &args.w9_workers {
        opts.w9_workers.clone_from(workers);
    }
    if let Some(s) = args.w3_seconds {
        opts.w3_duration = seconds(s, "w3-seconds")?;
    }
    if let Some(s) = args.w4_seconds {
        opts.w4_phase = seconds(s, "w4-seconds")?;
    }
    if let Some(n) = args.w5_locks {
        opts.w5_locks = n;
    }
    if let Some(s) = args.w5_seconds {
        opts.w5_hold = seconds(s, "w5-seconds")?;
    }
    if let Some(s) = args.w6_seconds {
        opts.w6_duration = seconds(s, "w6-seconds")?;
    }
    if let Some(n) = args.w6_repetitions {
        opts.w6_repetitions = n;
    }
    if let Some(s) = args.w6_round_seconds {
        opts.w6_round = seconds(s, "w6-round-seconds")?;
    }
    if let Some(n) = args.w6_rounds {
        opts.w6_rounds = n;
    }
    if let Some(ms) = args.w5_ttl_ms {
        opts.w5_ttl = Duration::from_millis(ms);
    }
    if !args.w5_in_process {
        // If the path of this executable cannot be found, W5 runs in this process.
        opts.w5_child = std::env::current_exe().ok();
    }
    Ok(opts)
}

fn write(path: &PathBuf, text: &str) -> Result<(), BenchError> {
    std::fs::write(path, text).map_err(|e| BenchError::Io {
        context: format!("writing {}", path.display()),
        source: e,
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, BenchError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::Io {
            context: "starting the Tokio runtime".into(),
            source: e,
        })
}

/// `--w5-child LIB`: one W5 measurement, its row printed as one line of JSON.
fn w5_child(args: &Args, library: Library) -> Result<(), BenchError> {
    let opts = options(args)?;
    let runtime = runtime()?;
    let row = runtime.block_on(fencelock_bench::run_w5_child(
        library,
        opts.w5_ttl,
        opts.w5_locks,
        opts.w5_hold,
    ));
    runtime.shutdown_timeout(Duration::from_secs(5));
    let row = serde_json::to_string(&row?).map_err(|e| BenchError::Json {
        context: "serialising the W5 row".into(),
        source: e,
    })?;
    println!("{row}");
    Ok(())
}

fn main_inner(args: Args) -> Result<(), BenchError> {
    if let Some(library) = args.w5_child {
        return w5_child(&args, library);
    }
    let report = match &args.from_json {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| BenchError::Io {
                context: format!("reading {}", path.display()),
                source: e,
            })?;
            Report::from_json(&text)?
        }
        None => {
            let opts = options(&args)?;
            let runtime = runtime()?;
            let report = runtime.block_on(fencelock_bench::run(opts));
            // A peer stuck on a stopped instance must not keep the process alive.
            runtime.shutdown_timeout(Duration::from_secs(5));
            report?
        }
    };
    let markdown = report.to_markdown();
    println!("{markdown}");
    if let Some(path) = &args.markdown {
        write(path, &markdown)?;
    }
    if let Some(path) = &args.json {
        write(path, &report.to_json()?)?;
    }
    if let Some(path) = &args.svg {
        write(path, &report.to_svg())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    // The libraries' own warnings (a failed renewal, a lost lock) go to stderr: a benchmark
    // should show them. RUST_LOG overrides the default.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|text| text.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new()
                .with_default(tracing_subscriber::filter::LevelFilter::WARN)
        });
    {
        use tracing_subscriber::prelude::*;
        let output = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        tracing_subscriber::registry()
            .with(output.with_filter(filter))
            .init();
    }
    match main_inner(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fencelock-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
