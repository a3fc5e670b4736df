//! `fencelock status NAME` and `fencelock list [PATTERN]`: what Redis says about locks, read
//! without changing anything.
//!
//! Both ask the library ([`fencelock::Client::inspect`], [`fencelock::Client::list`]), which
//! knows the key layout and the quorum rule; this module only prints.

use crate::error::{exit, exit_help};
use serde_json::{Value, json};

use crate::error::CliError;

mod render;

use crate::output::{print_line, print_text};
use crate::servers::ServerArgs;
pub(crate) use render::{holder_text, lock_fields, remaining, waiter_text};
use render::{kind_label, once_json, optional, shell_quote, table};

pub const STATUS_ABOUT: &str = "\
Show whether a lock is held, by whom, for how long, and its fences.

Prints the state (free or held, and the kind of lock: lock, reentrant lock, read-write lock, \
semaphore), the first 8 hex digits of the holder's owner token (enough to tell holders apart, \
too little to impersonate one), the holder's label where its hold has one (who holds it, in the \
holder's words: `fencelock run` and `elect` label theirs HOST:PID, or --label), what is left of the holder's lease, the holder's fence and the \
last fence handed out for the name; for a read-write lock the writer or each reader, for a \
semaphore each permit held; then who waits, in line order: a lock's line of waiters (in the \
order a release passes the lock on, which changes as waiters refresh their places), a fair \
lock's queue (arrival order), a read-write lock's waiting readers and writers (arrival order), \
each with its place, its token's first 8 hex digits and how long it has waited where that is \
known (a semaphore's and a reentrant lock's waiters keep no place in Redis and are not seen). Then \
the run-once records kept under NAME (`fencelock run --once KEY NAME`): each KEY done, with its \
fence, when it was recorded, and the `redis-cli DEL` that clears it so that the work runs again. \
Over several --url (Redlock), a holder or a waiter counts when it is found on a majority of the \
servers. Nothing is changed.";

/// The help after the options.
pub fn status_after_help() -> String {
    exit_help(
        &[
            exit::SUCCESS.saying("the lock is free or held (read the output, or `held` in --json)"),
            exit::USAGE,
            exit::REDIS.saying(
                "Redis unreachable, no quorum (Redlock), Redis refused, TLS failed, or a key of \
                 the lock is not a lock",
            ),
            exit::OTHER,
        ],
        "\
JSON (--json), one object with these fields, in this order:
  name          string
  held          bool
  holder        string (first 8 hex digits of the owner token), null when free
  remaining_ms  number (the holder's remaining lease), null when free or without expiry
  fence         number (the holder's fence), null when free
  last_fence    number (the last fence handed out for the name), null if none is known
  kind          \"lock\", \"reentrant\", \"read-write\" or \"semaphore\"; null when free
  permits       number (a semaphore's N), else null
  shared        [{holder, label, remaining_ms, fence, permits}] (readers, or semaphore
                permits)
  waiting       number (how many wait: the length of waiters)
  waiters       [{place, waiter, waited_ms, side}] in line order: place 1, 2, ... (null: no
                order), waiter the first 8 hex digits of its token, waited_ms null when not
                known (a lock's line keeps no arrival time), side \"reader\" or \"writer\"
                (read-write lock) else null
  label         string (the holder's label: `fencelock run` and `elect` label theirs HOST:PID
                or --label), null when free or unlabelled
  servers       [string] (host:port)
  prefix        string
  once          [{key, fence, recorded_ms, record}] the run-once records under NAME, by key:
                recorded_ms when it was recorded (ms since the Unix epoch), record the Redis
                key (delete it to have the work done again)

Examples:
  fencelock status nightly-report
  fencelock status --json nightly-report | jq .held",
    )
}

pub const LIST_ABOUT: &str = "\
List the locks that are held, with their holder, remaining lease, fence and label.

Finds lock keys (PREFIX:{NAME}) with SCAN, never KEYS, on every server, keeps the names that \
match PATTERN, and shows each lock that is held (over several --url: held by one owner on a \
majority). Nothing is changed.";

/// The help after the options.
pub fn list_after_help() -> String {
    let before = "\
PATTERN is a Redis glob on the lock name: * any characters, ? one character, [abc] one of
them, \\ escapes the next character. Default: *.

";
    format!(
        "{before}{}",
        exit_help(
            &[
                exit::SUCCESS.saying("success, also when no lock is held"),
                exit::USAGE,
                exit::REDIS.saying(
                    "Redis unreachable (over Redlock: fewer than a majority answered), refused, or \
                 TLS failed",
                ),
                exit::OTHER,
            ],
            "\
JSON (--json), one object: {\"servers\": [string], \"prefix\": string, \"pattern\": string,
\"locks\": [lock, ...]}, each lock with the fields of `fencelock status --json` from `name` to
`label`, sorted by name.

Examples:
  fencelock list
  fencelock list 'reports/*'
  fencelock list --json | jq -r '.locks[].name'",
        )
    )
}

/// Arguments of `fencelock status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,

    /// The lock's name
    #[arg(value_name = "NAME")]
    name: String,
}

/// Arguments of `fencelock list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// Print one JSON object instead of a table
    #[arg(long)]
    json: bool,

    /// Only locks whose name matches this glob
    #[arg(value_name = "PATTERN", default_value = "*")]
    pattern: String,
}

/// Runs `fencelock status`.
pub async fn status(args: StatusArgs) -> Result<(), CliError> {
    let servers = args.servers.resolve()?;
    let client = servers.client()?;
    let info = client.inspect(&args.name).await?;
    // The run-once records are an addition to the lock's state: without them (an ACL user that
    // may not SCAN) the rest is still worth showing.
    let once = match client.once_records(&args.name).await {
        Ok(records) => records,
        Err(err) => {
            eprintln!("fencelock: warning: cannot read the run-once records: {err}");
            Vec::new()
        }
    };
    if args.json {
        let mut fields = lock_fields(&info);
        fields.insert("servers".into(), json!(servers.addrs));
        fields.insert("prefix".into(), json!(servers.prefix));
        fields.insert("once".into(), once_json(&once));
        print_line(&Value::Object(fields).to_string())?;
        return Ok(());
    }
    let last_fence = info
        .last_fence
        .map_or_else(|| "none yet".to_owned(), |f| f.to_string());
    let mut lines = Vec::new();
    match &info.kind {
        Some(_) if info.is_held() => lines.push(format!(
            "lock {:?}: held ({})",
            info.name,
            kind_label(&info)
        )),
        _ => lines.push(format!("lock {:?}: free", info.name)),
    }
    if let Some(holder) = &info.holder {
        let role = match info.kind {
            Some(fencelock::LockKind::ReadWrite) => "writer:    ",
            _ => "holder:    ",
        };
        lines.push(format!("  {role} {}", holder.token_prefix));
        if let Some(label) = &holder.label {
            lines.push(format!("  label:      {label}"));
        }
        lines.push(format!("  remaining:  {}", remaining(holder.remaining)));
        lines.push(format!("  fence:      {}", optional(holder.fence)));
    }
    for holder in &info.shared {
        let role = match info.kind {
            Some(fencelock::LockKind::Semaphore) => "permit:    ",
            _ => "reader:    ",
        };
        let several = match holder.permits {
            Some(n) if n > 1 => format!("{n} permits, "),
            _ => String::new(),
        };
        let label = holder
            .label
            .as_ref()
            .map_or_else(String::new, |label| format!(", label {label}"));
        lines.push(format!(
            "  {role} {} ({several}remaining {}, fence {}{label})",
            holder.token_prefix,
            remaining(holder.remaining),
            optional(holder.fence)
        ));
    }
    if info.waiting > 0 {
        lines.push(format!("  waiting:    {}", info.waiting));
    }
    for waiter in &info.waiters {
        lines.push(format!("    {}", waiter_text(waiter)));
    }
    lines.push(format!("  last fence: {last_fence}"));
    for record in &once {
        lines.push(format!(
            "  done once:  {} (fence {}, recorded {})",
            record.key,
            record.fence,
            humantime::format_rfc3339_millis(record.at)
        ));
        lines.push(format!(
            "              to run it again: redis-cli DEL {}",
            shell_quote(&record.record)
        ));
    }
    lines.push(format!(
        "  servers:    {} (key prefix {:?})",
        servers.describe(),
        servers.prefix
    ));
    print_line(&lines.join("\n"))?;
    Ok(())
}

/// Runs `fencelock list`.
pub async fn list(args: ListArgs) -> Result<(), CliError> {
    let servers = args.servers.resolve()?;
    let client = servers.client()?;
    let listing = client.list(&args.pattern).await?;
    for skipped in &listing.skipped {
        eprintln!("fencelock: skipping: {skipped}");
    }
    for server in &listing.unanswered {
        eprintln!("fencelock: warning: {server}; listing from the servers that answered");
    }
    let held = listing.locks;
    if args.json {
        let locks: Vec<Value> = held
            .iter()
            .map(|info| Value::Object(lock_fields(info)))
            .collect();
        let listing = json!({
            "servers": servers.addrs,
            "prefix": servers.prefix,
            "pattern": args.pattern,
            "locks": locks,
        });
        print_line(&listing.to_string())?;
        return Ok(());
    }
    if held.is_empty() {
        print_line(&format!(
            "no held locks matching {:?} on {} (key prefix {:?})",
            args.pattern,
            servers.describe(),
            servers.prefix
        ))?;
        return Ok(());
    }
    let mut rows = vec![[
        "NAME".to_owned(),
        "KIND".to_owned(),
        "HOLDER".to_owned(),
        "REMAINING".to_owned(),
        "FENCE".to_owned(),
        "LABEL".to_owned(),
    ]];
    for info in &held {
        let kind = if info.kind.is_some() {
            kind_label(info)
        } else {
            String::new()
        };
        match &info.holder {
            Some(holder) => rows.push([
                info.name.clone(),
                kind,
                holder.token_prefix.clone(),
                remaining(holder.remaining),
                optional(holder.fence),
                holder.label.clone().unwrap_or_default(),
            ]),
            None => {
                // Shared holders: how many, the soonest lease to run out, the largest fence.
                let soonest = info.shared.iter().filter_map(|h| h.remaining).min();
                let largest = info.shared.iter().filter_map(|h| h.fence).max();
                let mut labels: Vec<&str> = info
                    .shared
                    .iter()
                    .filter_map(|h| h.label.as_deref())
                    .collect();
                labels.sort_unstable();
                labels.dedup();
                rows.push([
                    info.name.clone(),
                    kind,
                    format!("{} shared", info.shared.len()),
                    remaining(soonest),
                    optional(largest),
                    labels.join(", "),
                ]);
            }
        }
    }
    print_text(&table(&rows))?;
    Ok(())
}
