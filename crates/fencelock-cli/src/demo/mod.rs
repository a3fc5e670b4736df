//! `fencelock demo`: worker processes contend for a lock and write to a fenced resource; one
//! holder is frozen (SIGSTOP) for longer than its lease, and when it wakes up, the resource
//! refuses its stale write.
//!
//! - [`worker`]: the worker processes (this binary, re-executed as `demo-worker`);
//! - [`fleet`]: starting, signalling and stopping them;
//! - [`resource`]: the protected resource (a fenced store);
//! - [`story`]: what the demo does and prints as the workers report; [`summary`]: the checks.

mod events;
mod fleet;
mod resource;
mod story;
mod summary;
pub mod worker;

use crate::error::{exit, exit_help};
use std::time::Duration;

use fencelock_testkit::RedisServer;

use crate::duration::{format_duration, parse_duration};
use crate::error::CliError;
use crate::output::{Output, Tone};
use crate::process::until_signalled;
use fleet::Fleet;
use resource::Resource;

/// The lock the workers contend for.
pub const LOCK_NAME: &str = "demo/report";

/// The shortest and longest lease the demo accepts.
const TTL_RANGE: (Duration, Duration) = (Duration::from_millis(200), Duration::from_secs(5));

pub const LONG_ABOUT: &str = "\
Watch a fencing token stop a paused lock holder.

Worker processes take turns on the lock \"demo/report\". Each writes to a protected resource in \
Redis with its fencing token, works for a moment and writes again. The resource (the library's \
fenced store) remembers the largest fence it has accepted and refuses smaller ones.

Then the demo freezes the current holder with SIGSTOP for longer than its lease, as a long GC \
pause or a stopped VM would. Another worker takes the lock with a larger fence. When the frozen \
worker wakes up, its guard reports the lock lost, and the resource refuses its stale write. A \
summary checks that fences only grew and that no two holders overlapped.

Without --url (or FENCELOCK_URL), the demo starts a throwaway redis-server on a free port of \
127.0.0.1 and stops it at the end. With --url, it uses the lock \"demo/report\", the keys \
\"fencelock-demo:{demo/report}*\" and the fence key \"fencelock:fenced:{demo/report}\" on that \
server, and resets those keys first.";

/// The help after the options.
pub fn after_help() -> String {
    exit_help(
        &[
            exit::SUCCESS.saying("the story completed and every check held"),
            exit::CHECK_FAILED,
            exit::USAGE.saying("usage error: an invalid URL"),
            exit::REDIS.saying("Redis cannot be reached, or refuses"),
            exit::OTHER,
            exit::INTERRUPTED,
        ],
        "\
Examples:
  fencelock demo                          # throwaway redis-server, 4 workers, 1s lease
  fencelock demo --workers 3 --ttl 500ms  # the holder is then frozen for 1.25s
  fencelock demo --url redis://127.0.0.1:6379
  fencelock demo | tee demo.log           # plain lines, no colors, in a pipe",
    )
}

/// Arguments of `fencelock demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The Redis server to use, as redis://[user:password@]HOST:PORT[/DB]. Default: start a
    /// throwaway redis-server. Prefer the environment variable for a URL with a password.
    #[arg(
        long,
        env = "FENCELOCK_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    url: Option<String>,

    /// Number of worker processes
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(2..=16))]
    workers: u32,

    /// Lock grants to show before a holder is frozen
    #[arg(long, value_name = "M", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,

    /// The lease of the lock (renewed while held); the holder is frozen for 2.5 times this.
    /// From 200ms to 5s.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_ttl)]
    ttl: Duration,
}

fn parse_ttl(text: &str) -> Result<Duration, String> {
    let ttl = parse_duration(text)?;
    let (min, max) = TTL_RANGE;
    if ttl < min || ttl > max {
        return Err(format!(
            "the lease must be between {} and {}",
            format_duration(min),
            format_duration(max)
        ));
    }
    Ok(ttl)
}

/// Runs the demo. Every process it starts is killed and reaped on every way out: success,
/// error, SIGINT or SIGTERM.
pub async fn run(args: DemoArgs, verbose: u8) -> Result<(), CliError> {
    let mut out = Output::stdout();
    // Dropping the demo's future (on a signal) drops the guards of the processes it started,
    // which kill and reap them.
    let result = until_signalled(demo(&args, verbose, &mut out)).await;
    out.clear_status();
    result
}

/// A throwaway `redis-server`, the first in `PATH`, started by the test kit: on a free port of
/// 127.0.0.1, without persistence, in a temporary directory, killed and reaped when dropped (and
/// by its wrapper should this process die).
async fn start_throwaway() -> Result<RedisServer, CliError> {
    let program = fencelock_testkit::redis_server_in_path().ok_or(CliError::RedisServerNotFound)?;
    let started = tokio::task::spawn_blocking(move || {
        RedisServer::start_binary(&program, &["--protected-mode", "yes"])
    })
    .await;
    match started {
        Ok(Ok(server)) => {
            tracing::debug!(
                pid = server.pid(),
                port = server.port(),
                "redis-server started"
            );
            Ok(server)
        }
        Ok(Err(e)) => Err(CliError::RedisServerStart(e.to_string())),
        Err(e) => Err(CliError::RedisServerStart(e.to_string())),
    }
}

async fn demo(args: &DemoArgs, verbose: u8, out: &mut Output) -> Result<(), CliError> {
    let pause = args.ttl.mul_f64(2.5);
    let title = out.paint(Tone::Strong, "fencelock demo");
    out.line(&format!(
        "{title}: {} worker processes, lock {LOCK_NAME:?}, lease {} (renewed while held)",
        args.workers,
        format_duration(args.ttl)
    ))?;

    // Declared before the workers, so that it is dropped (killed) after them.
    let (url, throwaway) = match &args.url {
        Some(url) => (url.clone(), None),
        None => {
            let server = start_throwaway().await?;
            (server.url(), Some(server))
        }
    };
    let mut resource = Resource::connect(&url).await?;
    let redis_line = match &throwaway {
        None => format!("redis: {}", resource.server()),
        Some(server) => format!(
            "redis: a throwaway redis-server on {} (pid {}, stopped at the end)",
            resource.server(),
            server.pid()
        ),
    };
    out.line(&out.paint(Tone::Dim, &redis_line))?;
    resource.reset().await?;
    let client = fencelock::Client::open(&url)?;

    let (mut fleet, reports) = Fleet::start(args.workers, &url, args.ttl, verbose)?;
    let pids = fleet
        .pids()
        .iter()
        .map(|(id, pid)| format!("{id} (pid {pid})"))
        .collect::<Vec<_>>()
        .join(", ");
    out.line(&out.paint(Tone::Dim, &format!("workers: {pids}")))?;

    let settings = story::Settings {
        workers: args.workers,
        rounds: args.rounds,
        ttl: args.ttl,
        pause,
        verbose: verbose > 0,
    };
    let record = story::Story::new(settings, out, &client, &mut fleet)
        .tell(reports)
        .await?;
    let unclean = fleet.finish(Duration::from_secs(2)).await;
    for (id, status) in unclean {
        let what = status.map_or("had to be killed".to_owned(), |s| {
            format!("exited with {s}")
        });
        out.line(&out.paint(Tone::Note, &format!("   (worker {id} {what})")))?;
    }

    let resource_record = resource.record().await?;
    let verdict = summary::judge(&record, &resource_record);
    summary::report(out, &record, &verdict)
}
