//! W1 (uncontended latency) and W2 (uncontended throughput): what each measured of one
//! contender.

use serde::{Deserialize, Serialize};

/// What W1 (uncontended latency) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W1Measured {
    /// Median over the repetitions of cycles per second.
    pub cycles_per_s: f64,
    /// Median over the repetitions of the per-cycle p50, in µs.
    pub p50_us: Option<f64>,
    /// Median over the repetitions of the per-cycle p99, in µs.
    pub p99_us: Option<f64>,
    /// How many repetitions.
    pub repetitions: usize,
    /// Cycles over all repetitions.
    pub cycles: u64,
    /// Redis commands (`total_commands_processed`) per cycle.
    pub commands_per_cycle: Option<f64>,
    /// Socket reads of the server (`total_reads_processed`) per cycle: round trips per cycle.
    pub reads_per_cycle: Option<f64>,
    /// This process's CPU time per cycle, µs.
    pub client_cpu_us_per_cycle: Option<f64>,
    /// The Redis server's CPU time per cycle, µs.
    pub server_cpu_us_per_cycle: Option<f64>,
    /// Calls per cycle of each Redis command (commands run inside scripts included).
    #[serde(default)]
    pub command_mix_per_cycle: std::collections::BTreeMap<String, f64>,
    /// Server time (`usec` of `INFO commandstats`) per cycle, by command. A script's time
    /// includes the commands it runs.
    #[serde(default)]
    pub command_usec_per_cycle: std::collections::BTreeMap<String, f64>,
}

/// What W2 (uncontended throughput) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W2Measured {
    /// Concurrent tasks.
    pub tasks: usize,
    /// Cycles per second, all tasks together.
    pub cycles_per_s: f64,
    /// Cycles in total.
    pub cycles: u64,
    /// The slowest task's cycles.
    pub min_task_cycles: u64,
    /// The fastest task's cycles.
    pub max_task_cycles: u64,
    /// This process's CPU time per cycle, µs.
    pub client_cpu_us_per_cycle: Option<f64>,
    /// The Redis server's CPU time per cycle, µs.
    pub server_cpu_us_per_cycle: Option<f64>,
    /// Script runs (`EVALSHA` and `EVAL` calls) per cycle: 2 for a lock that runs a script per
    /// acquire and per release, less when calls are coalesced (2 / this is the mean number of
    /// calls per script run).
    #[serde(default)]
    pub script_runs_per_cycle: Option<f64>,
    /// The server's socket reads per cycle (`total_reads_processed`): an upper bound of the
    /// request batches it saw.
    #[serde(default)]
    pub reads_per_cycle: Option<f64>,
}
