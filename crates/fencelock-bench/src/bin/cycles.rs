//! `fencelock-cycles URL N [one|acquire|tasks|keep] [renew]`: a load of fencelock's plain lock
//! against the server at URL, then exit. `one` (the default): N acquire + release cycles on new
//! names, one after another (W1's load); `acquire`: N acquires only, each lock left to its
//! lease; `tasks`: 32 tasks on one client, N cycles each, each task on a name of its own (W2's
//! load: the fence key is there from the second cycle on); `keep`: W5's load, 10,000 locks kept
//! alive by the watchdog for N seconds, then released. With `renew`, every hold of the other
//! loads is auto-renewed (the watchdog schedules it, as in the benchmark's W1 and W2); without,
//! none is. A load for counting instructions under callgrind, the server's
//! (`scripts/callgrind-server`) or this process's, where timings mean nothing; the benchmark
//! itself is `fencelock-bench`.
//!
//! Built with the feature `metrics` and run with `FENCELOCK_CYCLES_METRICS=1`, it records
//! fencelock's metrics into fencelock's own registry; with `FENCELOCK_CYCLES_METRICS=off`, it
//! turns the library's recording off (as the Python and Node.js packages do until their metrics
//! are asked for); unset, no recorder is installed (the overhead of metrics: two builds side by
//! side, docs/BENCHMARKS.md).

use std::process::ExitCode;
use std::time::Duration;

use fencelock::Client;

const TASKS: usize = 32;
const LEASE: Duration = Duration::from_secs(10);
/// `keep`: as many locks as W5 keeps alive, with its lease.
const KEPT: usize = 10_000;
const KEPT_LEASE: Duration = Duration::from_secs(3);

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(Ok(cycles))) = (args.first(), args.get(1).map(|n| n.parse::<usize>()))
    else {
        eprintln!("usage: fencelock-cycles URL N [one|acquire|tasks|keep] [renew]");
        return ExitCode::from(2);
    };
    let mode = args.get(2).map_or("one", String::as_str);
    let renew = match args.get(3).map(String::as_str) {
        None => false,
        Some("renew") => true,
        Some(other) => {
            eprintln!("fencelock-cycles: unknown option {other:?} (renew)");
            return ExitCode::from(2);
        }
    };
    if let Err(err) = metrics() {
        eprintln!("fencelock-cycles: {err}");
        return ExitCode::from(2);
    }
    let client = match Client::builder(url).build() {
        Ok(client) => client,
        Err(err) => {
            eprintln!("fencelock-cycles: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = match mode {
        "one" => run(&client, "one", cycles, true, renew).await,
        "acquire" => run(&client, "acquire", cycles, false, renew).await,
        "tasks" => {
            let mut tasks = tokio::task::JoinSet::new();
            for task in 0..TASKS {
                let client = client.clone();
                tasks.spawn(async move { on_one_name(&client, task, cycles, renew).await });
            }
            let mut result = Ok(());
            while let Some(done) = tasks.join_next().await {
                result = result.and(done.unwrap_or_else(|err| Err(err.to_string())));
            }
            result
        }
        "keep" => keep(&client, cycles).await,
        other => Err(format!(
            "unknown mode {other:?}: one, acquire, tasks or keep"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("fencelock-cycles: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Installs fencelock's registry if `FENCELOCK_CYCLES_METRICS=1` asks for it, or turns the
/// library's recording off for `FENCELOCK_CYCLES_METRICS=off`.
fn metrics() -> Result<(), String> {
    let asked = std::env::var("FENCELOCK_CYCLES_METRICS");
    if !matches!(asked.as_deref(), Ok("1" | "off")) {
        return Ok(());
    }
    #[cfg(feature = "metrics")]
    {
        if asked.as_deref() == Ok("off") {
            fencelock::metrics::set_recording(false);
            return Ok(());
        }
        fencelock::metrics::Registry::new()
            .install()
            .map_err(|e| e.to_string())
    }
    #[cfg(not(feature = "metrics"))]
    Err("FENCELOCK_CYCLES_METRICS needs a build with the feature `metrics`".into())
}

/// W5's load: `KEPT` locks with a lease of `KEPT_LEASE`, kept alive by the watchdog for
/// `seconds`, then released.
async fn keep(client: &Client, seconds: usize) -> Result<(), String> {
    let mut guards = Vec::with_capacity(KEPT);
    for i in 0..KEPT {
        let guard = client
            .lock(format!("cycles:keep:{i}"))
            .ttl(KEPT_LEASE)
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        guards.push(guard);
    }
    tokio::time::sleep(Duration::from_secs(
        u64::try_from(seconds).unwrap_or(u64::MAX),
    ))
    .await;
    let lost = guards.iter().filter(|g| !g.is_held()).count();
    for guard in guards {
        guard.release().await.map_err(|e| e.to_string())?;
    }
    if lost > 0 {
        return Err(format!("{lost} of {KEPT} locks were lost"));
    }
    Ok(())
}

/// `cycles` acquisitions and releases of one name, `cycles:task<task>`.
async fn on_one_name(
    client: &Client,
    task: usize,
    cycles: usize,
    renew: bool,
) -> Result<(), String> {
    let name = format!("cycles:task{task}");
    for _ in 0..cycles {
        let guard = client
            .lock(&name)
            .ttl(LEASE)
            .auto_renew(renew)
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        guard.release().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `cycles` acquisitions of new names (`cycles:<prefix>:<i>`), each released unless `release`
/// is false (then the lease runs out).
async fn run(
    client: &Client,
    prefix: &str,
    cycles: usize,
    release: bool,
    renew: bool,
) -> Result<(), String> {
    for i in 0..cycles {
        let guard = client
            .lock(format!("cycles:{prefix}:{i}"))
            .ttl(LEASE)
            .auto_renew(renew)
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        if release {
            guard.release().await.map_err(|e| e.to_string())?;
        } else {
            std::mem::forget(guard);
        }
    }
    Ok(())
}
