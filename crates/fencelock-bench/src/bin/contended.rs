//! `fencelock-contended [--seconds S] [--hold-ms H] [--rounds R] [--url URL] [N ...]`: what a
//! contended grant costs the server. N contenders (default 8, 64 and 256), each with a client of
//! its own (as N processes would have), take one lock in turn on a `redis-server` of this
//! program's own (or the one at URL: `scripts/callgrind-server` runs one under callgrind), each
//! holding it H ms (default 1). Per N, the median of R rounds (default 3) of S seconds (default
//! 5):
//!
//! - grants per second, and the wait (from asking to holding) at p50 and p99;
//! - the server's CPU per grant (`INFO cpu`, user + system), and its commands per grant
//!   (`total_commands_processed`, commands run inside scripts included) and scripts per grant
//!   (`EVALSHA` and `EVAL` calls, `INFO commandstats`), and the server's time in scripts per
//!   grant (their `usec`);
//! - grants per contender, fewest and most, and the grants of all rounds.
//!
//! A before/after: build this program at each commit and run both, in turns.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fencelock_testkit::RedisServer;

struct Args {
    seconds: f64,
    hold_ms: u64,
    rounds: usize,
    url: Option<String>,
    contenders: Vec<usize>,
}

fn parse() -> Result<Args, String> {
    let mut parsed = Args {
        seconds: 5.0,
        hold_ms: 1,
        rounds: 3,
        url: None,
        contenders: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or_else(|| format!("{what} takes a value"));
        match arg.as_str() {
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
            "--rounds" => {
                parsed.rounds = value("--rounds")?
                    .parse()
                    .ok()
                    .filter(|r| *r > 0)
                    .ok_or("--rounds takes a positive number")?;
            }
            "--url" => parsed.url = Some(value("--url")?),
            n => parsed.contenders.push(
                n.parse()
                    .ok()
                    .filter(|n| *n > 0 && *n <= 4096)
                    .ok_or_else(|| format!("unknown argument {n:?}"))?,
            ),
        }
    }
    if parsed.contenders.is_empty() {
        parsed.contenders = vec![8, 64, 256];
    }
    Ok(parsed)
}

/// One round's numbers.
struct Round {
    grants_per_s: f64,
    wait_p50_ms: f64,
    wait_p99_ms: f64,
    server_us_per_grant: f64,
    commands_per_grant: f64,
    scripts_per_grant: f64,
    script_us_per_grant: f64,
    fewest: u64,
    most: u64,
    grants: u64,
}

fn info(conn: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query(conn)
        .unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

fn number(map: &HashMap<String, String>, key: &str) -> f64 {
    map.get(key).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// A field (`calls`, `usec`) of a `cmdstat_*` line.
fn stat(map: &HashMap<String, String>, command: &str, field: &str) -> f64 {
    map.get(&format!("cmdstat_{command}"))
        .and_then(|line| {
            line.split(',')
                .find_map(|pair| pair.strip_prefix(field)?.strip_prefix('='))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

struct Totals {
    cpu: f64,
    commands: f64,
    scripts: f64,
    script_us: f64,
}

fn totals(conn: &mut redis::Connection) -> Totals {
    let cpu = info(conn, "cpu");
    let stats = info(conn, "stats");
    let commands = info(conn, "commandstats");
    Totals {
        cpu: number(&cpu, "used_cpu_user") + number(&cpu, "used_cpu_sys"),
        commands: number(&stats, "total_commands_processed"),
        scripts: stat(&commands, "evalsha", "calls") + stat(&commands, "eval", "calls"),
        script_us: stat(&commands, "evalsha", "usec") + stat(&commands, "eval", "usec"),
    }
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

async fn round(
    url: &str,
    admin: &mut redis::Connection,
    n: usize,
    name: &str,
    args: &Args,
) -> Result<Round, String> {
    let clients = (0..n)
        .map(|_| fencelock::Client::open(url).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    // Connected before the window opens.
    for client in &clients {
        let guard = client
            .lock(format!("{name}/warm"))
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        guard.release().await.map_err(|e| e.to_string())?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let hold = Duration::from_millis(args.hold_ms);
    let before = totals(admin);
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let stop = stop.clone();
            let name = name.to_owned();
            tokio::spawn(async move {
                let mut waits = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let asked = Instant::now();
                    let guard = client
                        .lock(name.clone())
                        .ttl(Duration::from_secs(10))
                        .acquire()
                        .await
                        .map_err(|e| e.to_string())?;
                    waits.push(asked.elapsed());
                    tokio::time::sleep(hold).await;
                    guard.release().await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(waits)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut waits = Vec::new();
    let mut per_contender = Vec::new();
    for task in tasks {
        let mine = task.await.map_err(|e| e.to_string())??;
        per_contender.push(mine.len() as u64);
        waits.extend(mine);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let after = totals(admin);
    waits.sort();
    let grants = waits.len() as f64;
    Ok(Round {
        grants_per_s: grants / elapsed,
        wait_p50_ms: percentile(&waits, 0.50),
        wait_p99_ms: percentile(&waits, 0.99),
        server_us_per_grant: (after.cpu - before.cpu) * 1e6 / grants,
        commands_per_grant: (after.commands - before.commands) / grants,
        scripts_per_grant: (after.scripts - before.scripts) / grants,
        script_us_per_grant: (after.script_us - before.script_us) / grants,
        grants: waits.len() as u64,
        fewest: per_contender.iter().copied().min().unwrap_or(0),
        most: per_contender.iter().copied().max().unwrap_or(0),
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("fencelock-contended: {e}");
            eprintln!(
                "usage: fencelock-contended [--seconds S] [--hold-ms H] [--rounds R] [--url URL] [N ...]"
            );
            return ExitCode::from(2);
        }
    };
    // A server of its own, stopped when this program ends, unless one was given.
    let (_own, url) = match &args.url {
        Some(url) => (None, url.clone()),
        None => match RedisServer::start() {
            Ok(redis) => {
                let url = redis.url();
                (Some(redis), url)
            }
            Err(e) => {
                eprintln!("fencelock-contended: no redis-server: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fencelock-contended: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut admin = match redis::Client::open(url.as_str()).and_then(|c| c.get_connection()) {
        Ok(conn) => conn,
        Err(e) => {
            eprintln!("fencelock-contended: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "| contenders | grants/s | wait p50 ms | wait p99 ms | p99/p50 | server µs/grant | commands/grant | scripts/grant | script µs/grant | grants per contender | grants |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for &n in &args.contenders {
        let mut rounds = Vec::new();
        for r in 0..args.rounds {
            let name = format!("contended/{n}/{r}");
            match runtime.block_on(round(&url, &mut admin, n, &name, &args)) {
                Ok(round) => rounds.push(round),
                Err(e) => {
                    eprintln!("fencelock-contended: {n} contenders, round {r}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        let m = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
        let p50 = m(|r| r.wait_p50_ms);
        let p99 = m(|r| r.wait_p99_ms);
        let fewest = rounds.iter().map(|r| r.fewest).min().unwrap_or(0);
        let most = rounds.iter().map(|r| r.most).max().unwrap_or(0);
        let grants: u64 = rounds.iter().map(|r| r.grants).sum();
        println!(
            "| {n} | {:.0} | {p50:.2} | {p99:.2} | {:.2} | {:.1} | {:.1} | {:.2} | {:.1} | {fewest}–{most} | {grants} |",
            m(|r| r.grants_per_s),
            p99 / p50,
            m(|r| r.server_us_per_grant),
            m(|r| r.commands_per_grant),
            m(|r| r.scripts_per_grant),
            m(|r| r.script_us_per_grant),
        );
    }
    ExitCode::SUCCESS
}
