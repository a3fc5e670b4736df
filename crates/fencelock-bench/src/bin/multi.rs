//! `fencelock-multi [--workers 2,4,8] [--seconds S] [--hold-ms H] [--bound-ms B] [--url URL]
//! [--label L] [--json PATH]`: `Client::multi_lock` under overlapping sets in opposite orders,
//! beside a hot single-name taker.
//!
//! For each P (default 2, 4 and 8), on a `redis-server` of this program's own (started on a free
//! port, stopped by its PID at the end) or the one at URL, over a ring of P names `k00 … k(P-1)`:
//!
//! - P workers, each a task with a client of its own (tasks of one process, one Tokio runtime,
//!   not P processes): worker i takes the two names k_i and k_(i+1 mod P) with `multi_lock`,
//!   given in ascending order for an even i and in descending order for an odd i, holds them H ms
//!   (default 1), releases them, and asks again, for S seconds (default 5). Each request waits at
//!   most B ms (default 2000, `wait_up_to`); a timeout counts as not granted;
//! - one hot taker with a client of its own, which takes and releases k00 with the plain lock
//!   in a tight loop (no hold), with the same bound.
//!
//! Per P it prints one row of a Markdown table: the multi-requests' grants (in all, and the
//! fewest and most of one worker), their wait (from asking to holding) at p50 and p99, the hot
//! taker's grants, and the multi-requests not granted in the window: timed out, and still
//! waiting when the window closed (dropped then: the request is cancel-safe). `--json PATH`
//! writes the same rows as JSON. A before/after: build this program at each commit (or with the
//! other `multi.rs`) and run both, in turns.

use std::process::ExitCode;
use std::time::Duration;

use fencelock::{Client, Error};
use fencelock_testkit::RedisServer;
use serde::Serialize;
use tokio::time::{Instant, timeout_at};

const USAGE: &str = "usage: fencelock-multi [--workers 2,4,8] [--seconds S] [--hold-ms H] [--bound-ms B] [--url URL] [--label L] [--json PATH]";

struct Args {
    help: bool,
    workers: Vec<usize>,
    seconds: f64,
    hold_ms: u64,
    bound_ms: u64,
    url: Option<String>,
    label: String,
    json: Option<String>,
}

fn parse() -> Result<Args, String> {
    let mut parsed = Args {
        help: false,
        workers: vec![2, 4, 8],
        seconds: 5.0,
        hold_ms: 1,
        bound_ms: 2000,
        url: None,
        label: String::new(),
        json: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or_else(|| format!("{what} takes a value"));
        match arg.as_str() {
            "--workers" => {
                parsed.workers = value("--workers")?
                    .split(',')
                    .map(|p| p.trim().parse().ok().filter(|p| (2..=256).contains(p)))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or("--workers takes numbers from 2 to 256, comma-separated")?;
            }
            "--seconds" => {
                parsed.seconds = value("--seconds")?
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s > 0.0 && *s <= 3600.0)
                    .ok_or("--seconds takes a number of seconds up to 3600")?;
            }
            "--hold-ms" => {
                parsed.hold_ms = value("--hold-ms")?
                    .parse()
                    .map_err(|_| "--hold-ms takes milliseconds")?;
            }
            "--bound-ms" => {
                parsed.bound_ms = value("--bound-ms")?
                    .parse()
                    .ok()
                    .filter(|b| *b > 0)
                    .ok_or("--bound-ms takes a positive number of milliseconds")?;
            }
            "--url" => parsed.url = Some(value("--url")?),
            "--label" => parsed.label = value("--label")?,
            "--json" => parsed.json = Some(value("--json")?),
            "-h" | "--help" => parsed.help = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(parsed)
}

/// One P's numbers.
#[derive(Serialize)]
struct Row {
    label: String,
    workers: usize,
    seconds: f64,
    multi_grants: u64,
    per_worker: Vec<u64>,
    fewest: u64,
    most: u64,
    wait_p50_ms: f64,
    wait_p99_ms: f64,
    hot_grants: u64,
    timed_out: u64,
    open_at_end: u64,
    hot_timed_out: u64,
}

/// What one worker saw.
#[derive(Default)]
struct Tally {
    waits: Vec<Duration>,
    timed_out: u64,
    open_at_end: u64,
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// Worker i's two names of the ring, ascending for an even i, descending for an odd i.
fn names_of(ring: &[String], i: usize) -> [String; 2] {
    let (a, b) = (i, (i + 1) % ring.len());
    let (lo, hi) = (a.min(b), a.max(b));
    if i.is_multiple_of(2) {
        [ring[lo].clone(), ring[hi].clone()]
    } else {
        [ring[hi].clone(), ring[lo].clone()]
    }
}

async fn multi_worker(
    client: Client,
    names: [String; 2],
    hold: Duration,
    bound: Duration,
    end: Instant,
) -> Result<Tally, String> {
    let mut tally = Tally::default();
    while Instant::now() < end {
        let asked = Instant::now();
        let request = client
            .multi_lock(names.clone())
            .ttl(Duration::from_secs(10))
            .wait_up_to(bound)
            .acquire();
        match timeout_at(end, request).await {
            Err(_) => tally.open_at_end += 1,
            Ok(Err(Error::TimedOut { .. })) => tally.timed_out += 1,
            Ok(Err(e)) => return Err(e.to_string()),
            Ok(Ok(guard)) => {
                tally.waits.push(asked.elapsed());
                tokio::time::sleep(hold).await;
                guard.release().await.map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(tally)
}

/// The hot taker: grants and timeouts.
async fn hot_taker(
    client: Client,
    name: String,
    bound: Duration,
    end: Instant,
) -> Result<(u64, u64), String> {
    let (mut grants, mut timed_out) = (0, 0);
    while Instant::now() < end {
        let request = client
            .lock(name.as_str())
            .ttl(Duration::from_secs(10))
            .wait_up_to(bound)
            .acquire();
        match timeout_at(end, request).await {
            Err(_) => {}
            Ok(Err(Error::TimedOut { .. })) => timed_out += 1,
            Ok(Err(e)) => return Err(e.to_string()),
            Ok(Ok(guard)) => {
                grants += 1;
                guard.release().await.map_err(|e| e.to_string())?;
            }
        }
    }
    Ok((grants, timed_out))
}

async fn run(url: &str, p: usize, args: &Args) -> Result<Row, String> {
    let prefix = format!("multi/{}/{p}", std::process::id());
    let ring: Vec<String> = (0..p).map(|j| format!("{prefix}/k{j:02}")).collect();
    // P workers' clients and the hot taker's, each connected before the window opens.
    let clients = (0..=p)
        .map(|_| Client::open(url).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    for client in &clients {
        let guard = client
            .lock(format!("{prefix}/warm"))
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        guard.release().await.map_err(|e| e.to_string())?;
    }
    let hold = Duration::from_millis(args.hold_ms);
    let bound = Duration::from_millis(args.bound_ms);
    let end = Instant::now() + Duration::from_secs_f64(args.seconds);
    let mut clients = clients.into_iter();
    let hot = match clients.next() {
        Some(client) => tokio::spawn(hot_taker(client, ring[0].clone(), bound, end)),
        None => return Err("no client".into()),
    };
    let workers: Vec<_> = clients
        .enumerate()
        .map(|(i, client)| tokio::spawn(multi_worker(client, names_of(&ring, i), hold, bound, end)))
        .collect();
    let mut waits = Vec::new();
    let mut per_worker = Vec::new();
    let (mut timed_out, mut open_at_end) = (0, 0);
    for worker in workers {
        let tally = worker.await.map_err(|e| e.to_string())??;
        per_worker.push(tally.waits.len() as u64);
        timed_out += tally.timed_out;
        open_at_end += tally.open_at_end;
        waits.extend(tally.waits);
    }
    let (hot_grants, hot_timed_out) = hot.await.map_err(|e| e.to_string())??;
    waits.sort();
    Ok(Row {
        label: args.label.clone(),
        workers: p,
        seconds: args.seconds,
        multi_grants: waits.len() as u64,
        fewest: per_worker.iter().copied().min().unwrap_or(0),
        most: per_worker.iter().copied().max().unwrap_or(0),
        per_worker,
        wait_p50_ms: percentile(&waits, 0.50),
        wait_p99_ms: percentile(&waits, 0.99),
        hot_grants,
        timed_out,
        open_at_end,
        hot_timed_out,
    })
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("fencelock-multi: {e}");
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    // A server of its own, stopped (by its PID) when this program ends, unless one was given.
    let (_own, url) = match &args.url {
        Some(url) => (None, url.clone()),
        None => match RedisServer::start() {
            Ok(redis) => {
                let url = redis.url();
                (Some(redis), url)
            }
            Err(e) => {
                eprintln!("fencelock-multi: no redis-server: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fencelock-multi: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "| run | P | multi grants | per worker, fewest–most | wait p50 ms | wait p99 ms | hot taker's grants | multi not granted: timed out + open at the end |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    for &p in &args.workers {
        let row = match runtime.block_on(run(&url, p, &args)) {
            Ok(row) => row,
            Err(e) => {
                eprintln!("fencelock-multi: {p} workers: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!(
            "| {} | {p} | {} | {}–{} | {:.2} | {:.2} | {} | {} + {} |",
            row.label,
            row.multi_grants,
            row.fewest,
            row.most,
            row.wait_p50_ms,
            row.wait_p99_ms,
            row.hot_grants,
            row.timed_out,
            row.open_at_end,
        );
        rows.push(row);
    }
    if let Some(path) = &args.json {
        let written = serde_json::to_string_pretty(&rows)
            .map_err(|e| e.to_string())
            .and_then(|text| std::fs::write(path, text + "\n").map_err(|e| e.to_string()));
        if let Err(e) = written {
            eprintln!("fencelock-multi: {path}: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
