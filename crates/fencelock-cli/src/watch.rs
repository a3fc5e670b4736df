//! `fencelock watch NAME`: a live view of one lock — holder, fence, remaining lease, waiters —
//! read again at every release message and at least once a second, printed when it changes,
//! until Ctrl-C (or SIGTERM), which ends it cleanly with exit 0.

use crate::error::{exit, exit_help};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::error::CliError;
use crate::inspect::{lock_fields, remaining, waiter_text};
use crate::output::print_line;
use crate::servers::ServerArgs;

pub const ABOUT: &str = "\
Watch one lock: who holds it, its fence, the lease left, who waits.

Reads the lock at every release message and at least once a second (nothing is changed), and \
prints a line (or, with --json, one JSON object) each time the holder, the fence, the kind or \
the line of waiters (who waits, in which order) changes. Ends cleanly on Ctrl-C or SIGTERM.";

/// The help after the options.
pub fn after_help() -> String {
    exit_help(
        &[
            exit::SUCCESS.saying("ended by Ctrl-C or SIGTERM"),
            exit::USAGE,
            exit::REDIS,
            exit::OTHER,
        ],
        "\
JSON (--json): one object per change, with the fields of `fencelock status --json` from `name`
to `waiters`, plus `at` (milliseconds since the Unix epoch).

Examples:
  fencelock watch nightly-report
  fencelock watch --json nightly-report | jq -c '{at, holder, fence}'",
    )
}

/// How often the lock is read when no release message comes.
const EVERY: Duration = Duration::from_secs(1);

/// Arguments of `fencelock watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// Print one JSON object per change instead of a line
    #[arg(long)]
    json: bool,

    /// The lock's name
    #[arg(value_name = "NAME")]
    name: String,
}

/// What counts as a change: everything `status --json` says but the remaining leases and how
/// long the waiters have waited.
fn identity(fields: &serde_json::Map<String, Value>) -> Value {
    let mut fields = fields.clone();
    fields.remove("remaining_ms");
    for (list, clock) in [("shared", "remaining_ms"), ("waiters", "waited_ms")] {
        if let Some(Value::Array(entries)) = fields.get_mut(list) {
            for entry in entries {
                if let Value::Object(entry) = entry {
                    entry.remove(clock);
                }
            }
        }
    }
    Value::Object(fields)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One line for people.
fn line(info: &fencelock::admin::LockInfo) -> String {
    let mut out = match &info.holder {
        Some(holder) => format!(
            "{:?}: held by {}, fence {}, {} left",
            info.name,
            holder.token_prefix,
            holder.fence.map_or_else(|| "-".into(), |f| f.to_string()),
            remaining(holder.remaining)
        ),
        None if !info.shared.is_empty() => format!(
            "{:?}: held by {} (shared)",
            info.name,
            info.shared
                .iter()
                .map(|h| h.token_prefix.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => format!("{:?}: free", info.name),
    };
    if info.waiting > 0 {
        out.push_str(&format!(", {} waiting", info.waiting));
    }
    if !info.waiters.is_empty() {
        let line: Vec<String> = info.waiters.iter().map(waiter_text).collect();
        out.push_str(&format!(" ({})", line.join("; ")));
    }
    if let Some(last) = info.last_fence {
        out.push_str(&format!(" (last fence {last})"));
    }
    out
}

/// Runs `fencelock watch`.
pub async fn watch(args: WatchArgs) -> Result<(), CliError> {
    let servers = args.servers.resolve()?;
    let client = servers.client()?;
    let mut releases = client.releases(&args.name).await?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| CliError::Failed {
        message: format!("cannot watch for SIGTERM: {e}"),
        code: 1,
    })?;
    let mut last: Option<Value> = None;
    loop {
        let info = client.inspect(&args.name).await?;
        let fields = lock_fields(&info);
        let now = identity(&fields);
        if last.as_ref() != Some(&now) {
            if args.json {
                let mut fields = fields;
                fields.insert("at".into(), json!(now_ms()));
                print_line(&Value::Object(fields).to_string())?;
            } else {
                print_line(&line(&info))?;
            }
            last = Some(now);
        }
        tokio::select! {
            _ = releases.next() => {}
            () = tokio::time::sleep(EVERY) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
        }
    }
}
