//! The history of a chaos run: one JSON object per line, written by the run as the workers and
//! the nemesis report, read back by the checker. Times are `CLOCK_MONOTONIC` nanoseconds (one
//! clock for every process of the machine) and wall-clock milliseconds since the epoch.

use std::io::{BufRead, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// `CLOCK_MONOTONIC`, nanoseconds.
    pub mono_ns: u64,
    /// Wall clock, milliseconds since the epoch.
    pub wall_ms: u64,
    /// The worker (absent for the nemesis and the run itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
    /// The lock name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub what: What,
}

/// What an entry records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum What {
    /// A worker asks for the lock (invocation).
    Acquire,
    /// The lock was granted with this fence (completion).
    Granted { fence: u64 },
    /// Not granted: `busy`, `timed_out` or `error` (completion).
    NotGranted {
        outcome: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A fenced write completed: accepted, refused (with the store's fence), or an error
    /// (unknown outcome). `started_ns` is its invocation.
    Write {
        fence: u64,
        started_ns: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        accepted: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        store_fence: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A read-modify-write of the unfenced counter: read `read`, wrote `read + 1`.
    Counter { read: u64 },
    /// The holder was told the lock was lost (before its release). `deadline_ns` is the lease's
    /// deadline then, on the same clock as `mono_ns`: the lease cannot have run out on the
    /// server before it (so no other worker can have been granted the lock before it, unless a
    /// server lost its data).
    Lost {
        fence: u64,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_ns: Option<u64>,
    },
    /// The holder starts its release (the end of its critical section).
    Release { fence: u64 },
    /// The release completed (`held`: whether the lock was still held), or failed.
    Released {
        fence: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        held: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A fault starts or ends.
    Fault {
        kind: String,
        target: String,
        phase: Phase,
    },
    /// The fenced store's log of accepted writes for `lock`, read at the end: (fence, worker).
    StoreLog { log: Vec<(u64, u32)> },
    /// The unfenced counter's final value for `lock`, read at the end.
    CounterFinal { value: u64 },
    /// The run's settings (the first line).
    Run {
        topology: String,
        kind: String,
        #[serde(default = "one")]
        permits: u32,
        workers: u32,
        locks: Vec<String>,
        ttl_ms: u64,
        seed: u64,
        faults: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mutations: Vec<String>,
    },
}

fn one() -> u32 {
    1
}

/// The start or the end of a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Start,
    End,
}

/// `CLOCK_MONOTONIC` now, nanoseconds.
pub fn mono_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        u64::try_from(t.tv_sec())
            .unwrap_or(0)
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::try_from(t.tv_nsec()).unwrap_or(0))
    })
}

/// `instant` on the clock of [`mono_ns`] (both are `CLOCK_MONOTONIC`).
pub fn instant_ns(instant: std::time::Instant) -> u64 {
    let (now, now_ns) = (std::time::Instant::now(), mono_ns());
    match instant.checked_duration_since(now) {
        Some(ahead) => now_ns.saturating_add(u64::try_from(ahead.as_nanos()).unwrap_or(u64::MAX)),
        None => now_ns.saturating_sub(
            u64::try_from(now.saturating_duration_since(instant).as_nanos()).unwrap_or(u64::MAX),
        ),
    }
}

/// The wall clock now, milliseconds since the epoch.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Entry {
    /// An entry stamped now.
    pub fn now(worker: Option<u32>, lock: Option<&str>, what: What) -> Self {
        Entry {
            mono_ns: mono_ns(),
            wall_ms: wall_ms(),
            worker,
            lock: lock.map(str::to_owned),
            what,
        }
    }

    /// The entry as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"op\":\"unwritable\",\"error\":\"{e}\"}}"))
    }

    /// Writes the entry and a newline.
    pub fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "{}", self.to_line())
    }
}

/// Reads a history: every line an entry. A line that is not one is an error naming its number.
pub fn read(input: impl BufRead) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry =
            serde_json::from_str(&line).map_err(|e| format!("line {}: {e}: {line}", n + 1))?;
        entries.push(entry);
    }
    Ok(entries)
}
