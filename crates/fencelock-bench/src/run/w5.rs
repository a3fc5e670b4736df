//! W5's run: the contenders in turns, each turn in this process or in a fresh child process,
//! the turns merged into one row per contender.

use std::time::Duration;

use crate::error::{BenchError, Result};
use crate::locker::Library;
use crate::options::BenchOptions;
use crate::report::{W5Measured, W5Row};
use crate::workloads;

/// W5 for every single-server contender but raw-fenced (its renewal is raw's, row for row):
/// the measured rows in `libraries`' order, then redlock's (it cannot renew) as not applicable.
pub(super) async fn run_w5(opts: &BenchOptions, libraries: &[Library]) -> Vec<W5Row> {
    let failed = W5Measured {
        locks: opts.w5_locks,
        ..W5Measured::default()
    };
    let mut measured = Vec::new();
    let mut not_applicable = Vec::new();
    for &lib in libraries {
        match lib {
            Library::RawFenced => {}
            Library::Redlock => not_applicable.push(W5Row::failed(
                lib,
                failed.clone(),
                "redlock has no automatic renewal (and no extend): not applicable",
            )),
            _ => measured.push(lib),
        }
    }
    // The contenders take turns (W5_TURNS each, each turn a W5_TURNS-th of the hold), as in W1.
    let mut turn_opts = opts.clone();
    turn_opts.w5_hold = opts.w5_hold / W5_TURNS;
    let mut runs: Vec<(Library, Result<Vec<W5Row>>)> = measured
        .into_iter()
        .map(|lib| (lib, Ok(Vec::new())))
        .collect();
    workloads::take_turns(
        &mut runs,
        W5_TURNS as usize,
        async |lib, rows: &mut Vec<W5Row>, _| {
            let row = match &turn_opts.w5_child {
                Some(exe) => w5_in_child(exe, lib, &turn_opts).await,
                None => {
                    workloads::w5(lib, turn_opts.w5_ttl, turn_opts.w5_locks, turn_opts.w5_hold)
                        .await
                }
            }?;
            rows.push(row);
            Ok(())
        },
    )
    .await;
    let merged = workloads::finish_all(runs, |rows| async move { merge_w5(rows) }).await;
    let mut rows = super::or_failed(merged, &failed);
    rows.extend(not_applicable);
    rows
}

/// How many turns W5 takes per contender (see [`run_w5`]).
const W5_TURNS: u32 = 4;

/// One contender's W5 turns as one row: rates and CPU weighted by each turn's length, the
/// fewest locks still held, the most bytes per lock and `NOSCRIPT` replies of a turn.
fn merge_w5(rows: Vec<W5Row>) -> Result<W5Row> {
    let mut merged = rows
        .first()
        .cloned()
        .ok_or_else(|| BenchError::Bench("W5: no turn ran".into()))?;
    let seconds: f64 = rows.iter().map(|r| r.seconds).sum();
    let weighted = |value: fn(&W5Row) -> f64| {
        if seconds > 0.0 {
            rows.iter().map(|r| value(r) * r.seconds).sum::<f64>() / seconds
        } else {
            0.0
        }
    };
    merged.seconds = seconds;
    merged.renewal_commands_per_s = weighted(|r| r.renewal_commands_per_s);
    merged.renewals_per_s = weighted(|r| r.renewals_per_s);
    merged.total_commands_per_s = weighted(|r| r.total_commands_per_s);
    merged.reads_per_s = weighted(|r| r.reads_per_s);
    merged.client_cpu_percent = weighted(|r| r.client_cpu_percent);
    // All turns' CPU over all their renewals (both weighted by the same lengths).
    merged.client_cpu_us_per_renewal =
        workloads::cpu_us_per_renewal(merged.client_cpu_percent, merged.renewals_per_s);
    merged.bytes_per_lock = rows.iter().map(|r| r.bytes_per_lock).fold(0.0, f64::max);
    merged.still_held = rows.iter().map(|r| r.still_held).min().unwrap_or(0);
    merged.held_in_redis = rows.iter().map(|r| r.held_in_redis).min().unwrap_or(0);
    merged.noscript_replies = rows.iter().map(|r| r.noscript_replies).max().unwrap_or(0);
    Ok(merged)
}

/// W5 for one contender, in this process, for a parent that runs W5 in child processes (see
/// [`BenchOptions::w5_child`]). Print the row with `serde_json::to_string` as one line.
pub async fn run_w5_child(
    library: Library,
    ttl: Duration,
    locks: usize,
    hold: Duration,
) -> Result<W5Row> {
    workloads::w5(library, ttl, locks, hold).await
}

async fn w5_in_child(exe: &std::path::Path, lib: Library, opts: &BenchOptions) -> Result<W5Row> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("--w5-child")
        .arg(lib.name())
        .arg("--w5-locks")
        .arg(opts.w5_locks.to_string())
        .arg("--w5-seconds")
        .arg(opts.w5_hold.as_secs_f64().to_string())
        .arg("--w5-ttl-ms")
        .arg(opts.w5_ttl.as_millis().to_string())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let limit = opts.w5_hold + opts.w5_ttl * 2 + Duration::from_secs(120);
    let context = format!("W5 child process for {lib} ({})", exe.display());
    let output = tokio::time::timeout(limit, cmd.output())
        .await
        .map_err(|_| BenchError::Bench(format!("{context}: no result within {limit:?}")))?
        .map_err(|e| BenchError::io(context.clone(), e))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(BenchError::Bench(format!(
            "{context} failed ({}); its messages are on stderr",
            output.status
        )));
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| BenchError::Bench(format!("{context} printed no result")))?;
    serde_json::from_str(line).map_err(|e| BenchError::Json { context, source: e })
}
