//! `fencelock leader NAME [--watch] [--json]`: the leader of an election (the library's
//! `Election::leader`), or, with `--watch`, every change of it (`Election::observe`).

use crate::error::{exit, exit_help};
use std::time::{SystemTime, UNIX_EPOCH};

use fencelock::election::{Leader, Observation};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::error::CliError;
use crate::output::print_line;
use crate::servers::ServerArgs;

pub const LONG_ABOUT: &str = "\
Show the leader of an election: its value, its term and since when it leads (the server's clock).

With --watch, print a line for the current leader, then one per change as it is announced (a \
new leader, a value it proclaimed, a resignation), in term order, until interrupted. When the \
subscription to the announcements is lost (the connection dropped), a `gap` line says that \
changes may have been missed, and the then-current leader follows once it is back. A leader \
whose lease ran out without resigning is announced by nobody: its successor's line follows \
when there is one.";

/// The help after the options.
pub fn after_help() -> String {
    exit_help(
        &[
            exit::SUCCESS
                .saying("success: a leader or nobody (with --watch: ended by Ctrl-C or SIGTERM)"),
            exit::USAGE.saying("usage error: an invalid election name or Redis URL"),
            exit::REDIS,
            exit::OTHER,
        ],
        "\
Output: `leader VALUE (term T, since TIME)`, `vacant` (nobody leads) or, with --watch, `gap`.
JSON (--json): one object per line: {\"election\": string, \"event\": \"leader\" | \"vacant\" | \
\"gap\", and for a leader \"value\": string, \"term\": number, \"since_ms\": number}.

Examples:
  fencelock leader scheduler
  fencelock leader --watch --json scheduler | jq -c '{event, term}'",
    )
}

/// Arguments of `fencelock leader`.
#[derive(Debug, clap::Args)]
pub struct LeaderArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// Follow the election: a line per change, until interrupted
    #[arg(long)]
    watch: bool,

    /// One JSON object per line
    #[arg(long)]
    json: bool,

    /// The election's name
    #[arg(value_name = "NAME")]
    name: String,
}

/// Runs `fencelock leader`.
pub async fn leader(args: LeaderArgs) -> Result<(), CliError> {
    let servers = args.servers.resolve()?;
    let client = servers.client()?;
    let election = client.election(args.name.clone());
    if !args.watch {
        let seen = match election.leader().await? {
            Some(leader) => Observation::Leader(leader),
            None => Observation::Vacant,
        };
        print(&args, &seen)?;
        return Ok(());
    }
    let mut observer = election.observe().await?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| CliError::io("cannot watch for SIGTERM", e))?;
    loop {
        tokio::select! {
            seen = observer.next() => match seen {
                Some(seen) => print(&args, &seen)?,
                None => return Ok(()),
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
        }
    }
}

fn print(args: &LeaderArgs, seen: &Observation) -> Result<(), CliError> {
    if args.json {
        print_line(&json_of(&args.name, seen).to_string())
    } else {
        print_line(&line(seen))
    }
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn line(seen: &Observation) -> String {
    match seen {
        Observation::Leader(Leader {
            value, term, since, ..
        }) => format!(
            "leader {value} (term {term}, since {})",
            humantime::format_rfc3339_millis(*since)
        ),
        Observation::Gap => {
            "gap (the subscription was lost; changes may have been missed)".to_owned()
        }
        other => other.code().to_owned(),
    }
}

fn json_of(name: &str, seen: &Observation) -> Value {
    let event = seen.code();
    match seen {
        Observation::Leader(leader) => json!({
            "election": name,
            "event": event,
            "value": leader.value,
            "term": leader.term,
            "since_ms": millis(leader.since),
        }),
        _ => json!({"election": name, "event": event}),
    }
}
