//! `fencelock watch NAME...`: a live view of locks (and with `--prometheus`, their series
//! served for a dashboard, `watch_metrics.rs`): for each — holder, fence, remaining lease, waiters —
//! read again at every release message on the lock's channel and at least every [`EVERY`],
//! printed when it changes, until Ctrl-C (or SIGTERM), which ends it cleanly with exit 0.
//!
//! A lock passed to a waiter (the plain lock's pass, the fair lock's) is announced on that
//! waiter's own channel (`PREFIX:{NAME}:released:<token>`), not on the lock's, so `watch` sees
//! such a change by reading the lock again, within [`EVERY`]. It does not `PSUBSCRIBE` the
//! waiters' channels: a pattern subscription counts as a receiver of `PUBLISH`, so a release
//! would take the pass as delivered and not repeat it on the lock's channel, and a waiter that
//! listens only there (an earlier revision of the protocol) would miss it and wait out the
//! claim (docs/PROTOCOL.md, "A waiter's own channel"). An operator's view must not slow the
//! lock down.

use crate::error::{exit, exit_help};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::error::CliError;
use crate::inspect::{holder_text, lock_fields, remaining, waiter_text};
use crate::output::print_line;
use crate::servers::ServerArgs;
use crate::watch_metrics::Served;

pub const ABOUT: &str = "\
Watch locks: who holds each, its fence, the lease left, who waits.

Reads the lock at every release message on the lock's channel and at least every 1s (nothing is \
changed), and prints a line (or, with --json, one JSON object) each time the holder, the fence, \
the kind or the line of waiters (who waits, in which order) changes. Ends cleanly on Ctrl-C or \
SIGTERM.

A lock passed from its holder to a waiter is announced to that waiter alone, on a channel of \
its own, so watch sees the new holder when it next reads the lock: up to 1s late. (Listening on \
every waiter's channel with a pattern would make a release believe its pass was heard, and a \
waiter of an older fencelock, which listens only on the lock's channel, would miss it and wait \
longer for the lock.)";

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
  fencelock watch --json nightly-report | jq -c '{at, holder, fence}'
  fencelock watch --prometheus 0.0.0.0:9779 nightly-report backup > /dev/null",
    )
}

/// How often the lock is read when no release message comes: the most a pass to a waiter (not
/// announced on the lock's channel) is shown late. `ABOUT` and docs/command.md state it.
const EVERY: Duration = Duration::from_secs(1);

/// Arguments of `fencelock watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// Print one JSON object per change instead of a line
    #[arg(long)]
    json: bool,

    /// Also serve what watch sees of the locks (held, waiters, last fence, lease left) on
    /// http://ADDR/metrics in the Prometheus text format, e.g. 0.0.0.0:9779. A read that fails
    /// then does not end watch: fencelock_watch_up is 0 until a read succeeds again
    #[arg(long, value_name = "ADDR")]
    prometheus: Option<String>,

    /// The locks' names (one or more)
    #[arg(value_name = "NAME", required = true, num_args = 1..)]
    names: Vec<String>,
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

/// Every lock named, read once.
async fn read(
    client: &fencelock::Client,
    names: &[String],
) -> fencelock::Result<Vec<fencelock::admin::LockInfo>> {
    let mut infos = Vec::with_capacity(names.len());
    for name in names {
        infos.push(client.inspect(name).await?);
    }
    Ok(infos)
}

/// Prints the lock's line (or JSON object) if it changed since `last`.
fn show(
    info: &fencelock::admin::LockInfo,
    last: &mut Option<Value>,
    json: bool,
) -> Result<(), CliError> {
    let fields = lock_fields(info);
    let now = identity(&fields);
    if last.as_ref() != Some(&now) {
        if json {
            let mut fields = fields;
            fields.insert("at".into(), json!(now_ms()));
            print_line(&Value::Object(fields).to_string())?;
        } else {
            print_line(&line(info))?;
        }
        *last = Some(now);
    }
    Ok(())
}

/// One line for people.
fn line(info: &fencelock::admin::LockInfo) -> String {
    let mut out = match &info.holder {
        Some(holder) => format!(
            "{:?}: held by {}, fence {}, {} left",
            info.name,
            holder_text(holder),
            holder.fence.map_or_else(|| "-".into(), |f| f.to_string()),
            remaining(holder.remaining)
        ),
        None if !info.shared.is_empty() => format!(
            "{:?}: held by {} (shared)",
            info.name,
            info.shared
                .iter()
                .map(holder_text)
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
    let served = match &args.prometheus {
        Some(addr) => {
            let served = Served::default();
            crate::watch_metrics::serve(addr, served.clone()).await?;
            Some(served)
        }
        None => None,
    };
    let mut streams = Vec::with_capacity(args.names.len());
    for name in &args.names {
        streams.push(client.releases(name).await?);
    }
    let mut releases = futures_util::stream::select_all(streams);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| CliError::Failed {
        message: format!("cannot watch for SIGTERM: {e}"),
        code: 1,
    })?;
    let mut last: Vec<Option<Value>> = vec![None; args.names.len()];
    loop {
        match read(&client, &args.names).await {
            Ok(infos) => {
                if let Some(served) = &served {
                    served.read(Some(&infos));
                }
                for (info, last) in infos.iter().zip(last.iter_mut()) {
                    show(info, last, args.json)?;
                }
            }
            // Serving, a failed read is a gap in the series, not the end of the exporter.
            Err(e) => match &served {
                Some(served) => {
                    served.read(None);
                    tracing::warn!(error = %e, "cannot read the locks");
                }
                None => return Err(e.into()),
            },
        }
        tokio::select! {
            _ = releases.next() => {}
            () = tokio::time::sleep(EVERY) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ABOUT, EVERY};

    /// The interval as the help and the guide write it.
    fn stated() -> String {
        assert_eq!(EVERY.subsec_nanos(), 0, "the help states whole seconds");
        format!("{}s", EVERY.as_secs())
    }

    #[test]
    fn the_help_states_the_read_interval_and_the_delay_of_a_pass() {
        let every = stated();
        assert!(
            ABOUT.contains(&format!("at least every {every}")),
            "{ABOUT}"
        );
        assert!(ABOUT.contains(&format!("up to {every} late")), "{ABOUT}");
    }

    #[test]
    fn the_guide_states_the_same_interval() {
        let guide = include_str!("../../../docs/command.md");
        let every = stated();
        assert!(
            guide.contains(&format!("up to {every} late")),
            "docs/command.md must say a pass shows up to {every} late"
        );
    }
}
