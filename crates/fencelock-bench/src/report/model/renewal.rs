//! W5 (keeping many locks alive): what it measured of one contender.

use serde::{Deserialize, Serialize};

/// What W5 (keeping many locks alive) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W5Measured {
    /// Locks held.
    pub locks: usize,
    /// The measured window, seconds.
    pub seconds: f64,
    /// Scripts (`EVALSHA` + `EVAL`) per second: the renewal script runs (fencelock renews a
    /// batch of locks in one run).
    pub renewal_commands_per_s: f64,
    /// Renewals per second: `PEXPIRE` and `SET` calls, from scripts too (fencelock and raw renew
    /// a lock with a `PEXPIRE`, rslock with a `SET PX`; nothing else in the window makes
    /// either).
    #[serde(default)]
    pub renewals_per_s: f64,
    /// All commands per second (`total_commands_processed`).
    pub total_commands_per_s: f64,
    /// Server socket reads per second (`total_reads_processed`): an upper bound of round trips.
    pub reads_per_s: f64,
    /// This process's CPU (user + system) over the window, in % of one core.
    pub client_cpu_percent: f64,
    /// This process's CPU per renewal, µs: what the goal compares (a window holds a whole number
    /// of renewal rounds, a few more or fewer of them than its length suggests; per renewal,
    /// that does not matter). 0 when nothing was renewed.
    #[serde(default)]
    pub client_cpu_us_per_renewal: f64,
    /// Resident memory added by taking the locks, per lock.
    pub bytes_per_lock: f64,
    /// Locks the contender still considered held at the end of the window.
    pub still_held: usize,
    /// Lock keys that still existed in Redis at the end of the window.
    #[serde(default)]
    pub held_in_redis: usize,
    /// `NOSCRIPT` replies to `EVALSHA` while the locks were taken and first renewed.
    #[serde(default)]
    pub noscript_replies: u64,
}
