//! Reads the history of a `fencelock chaos` run (one JSON object per line; its format is
//! `fencelock chaos`'s, docs/chaos.md) as a [`Trace`].

use std::io::BufRead;

use serde_json::Value;

use super::{Event, Loss, Seen, Trace, What, WriteOutcome};

/// Reads a chaos history. Lines of operations the model does not have (the unfenced counter,
/// faults that lose nothing) are left out, and so is a last line cut short (no newline: the
/// run was killed while writing it). A history without the store's logs (written last) is
/// [`Trace::cut`].
///
/// # Errors
///
/// A line that cannot be read, or is not a history entry (named by its number).
pub fn read_chaos_history(mut input: impl BufRead) -> Result<Trace, String> {
    let mut trace = Trace {
        permits: 1,
        events: Vec::new(),
        cut: true,
    };
    let mut sentinel = false;
    let mut raw = Vec::new();
    for number in 1.. {
        raw.clear();
        let read = input
            .read_until(b'\n', &mut raw)
            .map_err(|e| format!("line {number}: {e}"))?;
        if read == 0 {
            break;
        }
        let whole = raw.ends_with(b"\n");
        let line = String::from_utf8_lossy(&raw);
        if line.trim().is_empty() {
            continue;
        }
        let entry: Value = match serde_json::from_str(&line) {
            Ok(entry) => entry,
            // The last line of a run killed while writing it: what came before stands.
            Err(_) if !whole => {
                trace.cut = true;
                break;
            }
            Err(e) => return Err(format!("line {number}: {e}")),
        };
        let field = |name: &str| entry.get(name).and_then(Value::as_u64);
        let at_ns = field("mono_ns").ok_or(format!("line {number}: no mono_ns"))?;
        let op = entry.get("op").and_then(Value::as_str).unwrap_or_default();
        let text = |name: &str| entry.get(name).and_then(Value::as_str).unwrap_or_default();
        let worker = field("worker").and_then(|w| u32::try_from(w).ok());
        let lock = text("lock").to_owned();
        let fence = field("fence").unwrap_or(0);
        let seen = match op {
            "run" => {
                let permits = field("permits").unwrap_or(1);
                trace.permits = u32::try_from(permits).unwrap_or(u32::MAX);
                sentinel = text("topology") == "sentinel";
                None
            }
            "acquire" => Some(Seen::Request),
            // (A chaos worker takes one permit.)
            "granted" => Some(Seen::Granted { fence, permits: 1 }),
            "not_granted" => Some(Seen::NotGranted),
            "write" => {
                let outcome = match entry.get("accepted").and_then(Value::as_bool) {
                    Some(true) => WriteOutcome::Accepted,
                    Some(false) => WriteOutcome::Refused {
                        store: field("store_fence").unwrap_or(0),
                    },
                    None => WriteOutcome::Unknown,
                };
                let started_ns = field("started_ns").unwrap_or(at_ns);
                Some(Seen::Write {
                    fence,
                    started_ns,
                    outcome,
                })
            }
            "lost" => Some(Seen::Told {
                fence,
                deadline_ns: field("deadline_ns"),
            }),
            "release" => Some(Seen::Release { fence }),
            "released" => {
                let held = entry.get("held").and_then(Value::as_bool);
                Some(Seen::Released { fence, held })
            }
            "fault" => {
                let start = text("phase") == "start";
                let loss = match text("kind") {
                    "kill-server" if start => Some(Loss::Restart),
                    "failover" if sentinel && start => Some(Loss::FailoverStart),
                    "failover" if sentinel => Some(Loss::FailoverEnd),
                    "kill-worker" if start => {
                        let killed = text("target")
                            .strip_prefix("worker ")
                            .and_then(|w| w.parse::<u32>().ok());
                        if let Some(worker) = killed {
                            trace.events.push(Event {
                                line: number,
                                at_ns,
                                what: What::Worker {
                                    worker,
                                    lock: String::new(),
                                    seen: Seen::Killed,
                                },
                            });
                        }
                        None
                    }
                    _ => None,
                };
                if let Some(loss) = loss {
                    trace.events.push(Event {
                        line: number,
                        at_ns,
                        what: What::Fault(loss),
                    });
                }
                None
            }
            "store_log" => {
                let log = entry
                    .get("log")
                    .and_then(Value::as_array)
                    .map(|pairs| {
                        pairs
                            .iter()
                            .filter_map(|p| {
                                let fence = p.get(0)?.as_u64()?;
                                let worker = u32::try_from(p.get(1)?.as_u64()?).ok()?;
                                Some((fence, worker))
                            })
                            .collect()
                    })
                    .ok_or(format!("line {number}: a store log that is not a list"))?;
                trace.cut = false;
                trace.events.push(Event {
                    line: number,
                    at_ns,
                    what: What::StoreLog {
                        lock: lock.clone(),
                        log,
                    },
                });
                None
            }
            _ => None,
        };
        if let (Some(seen), Some(worker)) = (seen, worker) {
            trace.events.push(Event {
                line: number,
                at_ns,
                what: What::Worker { worker, lock, seen },
            });
        }
    }
    Ok(trace)
}
