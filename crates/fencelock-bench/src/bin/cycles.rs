//! `fencelock-cycles URL N [one|acquire|tasks]`: N acquire + release cycles of fencelock's plain
//! lock on new names against the server at URL, then exit. `one` (the default): one after
//! another (W1's load); `acquire`: acquires only, each lock left to its lease; `tasks`: 32
//! tasks on one client, N cycles each, each task on a name of its own (W2's load: the fence key
//! is there from the second cycle on). A load for measuring the server's
//! instructions per call under callgrind (`scripts/callgrind-server`), where timings mean
//! nothing; the benchmark itself is `fencelock-bench`.

use std::process::ExitCode;
use std::time::Duration;

use fencelock::Client;

const TASKS: usize = 32;
const LEASE: Duration = Duration::from_secs(10);

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(Ok(cycles))) = (args.first(), args.get(1).map(|n| n.parse::<usize>()))
    else {
        eprintln!("usage: fencelock-cycles URL N [one|acquire|tasks]");
        return ExitCode::from(2);
    };
    let mode = args.get(2).map_or("one", String::as_str);
    let client = match Client::builder(url).build() {
        Ok(client) => client,
        Err(err) => {
            eprintln!("fencelock-cycles: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = match mode {
        "one" => run(&client, "one", cycles, true).await,
        "acquire" => run(&client, "acquire", cycles, false).await,
        "tasks" => {
            let mut tasks = tokio::task::JoinSet::new();
            for task in 0..TASKS {
                let client = client.clone();
                tasks.spawn(async move { on_one_name(&client, task, cycles).await });
            }
            let mut result = Ok(());
            while let Some(done) = tasks.join_next().await {
                result = result.and(done.unwrap_or_else(|err| Err(err.to_string())));
            }
            result
        }
        other => Err(format!("unknown mode {other:?}: one, acquire or tasks")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("fencelock-cycles: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `cycles` acquisitions and releases of one name, `cycles:task<task>`.
async fn on_one_name(client: &Client, task: usize, cycles: usize) -> Result<(), String> {
    let name = format!("cycles:task{task}");
    for _ in 0..cycles {
        let guard = client
            .lock(&name)
            .ttl(LEASE)
            .auto_renew(false)
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        guard.release().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `cycles` acquisitions of new names (`cycles:<prefix>:<i>`), each released unless `release`
/// is false (then the lease runs out).
async fn run(client: &Client, prefix: &str, cycles: usize, release: bool) -> Result<(), String> {
    for i in 0..cycles {
        let guard = client
            .lock(format!("cycles:{prefix}:{i}"))
            .ttl(LEASE)
            .auto_renew(false)
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
