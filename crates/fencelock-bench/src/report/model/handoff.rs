//! W3 (contended handoff, and W9: W3 at several numbers of workers): what it measured of one
//! contender.

use serde::{Deserialize, Serialize};

/// What W3 (contended handoff) measured of one contender.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct W3Measured {
    /// Workers on the one key.
    pub workers: usize,
    /// Acquisitions per second (granted within the measured window).
    pub acquisitions_per_s: f64,
    /// Acquisitions granted within the window.
    pub acquisitions: u64,
    /// Handoffs measured (a release while someone waited, then a grant to another worker).
    pub handoffs: usize,
    /// Handoff latency p50 (instant before the release call → the next grant), µs.
    pub handoff_p50_us: Option<f64>,
    /// Handoff latency p99, µs.
    pub handoff_p99_us: Option<f64>,
    /// The share of the time someone waited in which nobody was in the critical section (the
    /// lock free, being released or handed over), %.
    #[serde(default)]
    pub free_while_waiting_percent: Option<f64>,
    /// A granted acquire call, from the call to the grant: p50, µs.
    #[serde(default)]
    pub wait_p50_us: Option<f64>,
    /// The same, p99, µs.
    #[serde(default)]
    pub wait_p99_us: Option<f64>,
    /// Grants that went back to the worker that had just released while others waited.
    #[serde(default)]
    pub self_reacquisitions: u64,
    /// The measured time in the critical section, µs.
    pub mean_hold_us: Option<f64>,
    /// Fewest grants of one worker.
    pub min_grants: u64,
    /// Most grants of one worker.
    pub max_grants: u64,
    /// Acquisitions that found another holder inside the critical section.
    pub violations: u64,
    /// Updates lost by the read-then-write counter.
    pub lost_updates: u64,
    /// The server's CPU (user + system) per grant, µs: the whole run, from the first worker's
    /// first try to the last release, over every grant in it.
    #[serde(default)]
    pub server_us_per_grant: Option<f64>,
    /// The server's CPU per handoff (a grant to another worker while someone waited), µs,
    /// counted as the CPU per grant is: what a lock costs per grant that moves the work on,
    /// where a grant taken back by the worker that just released costs little and waits for
    /// nothing.
    #[serde(default)]
    pub server_us_per_handoff: Option<f64>,
    /// Server commands per grant (`total_commands_processed`, commands run inside scripts
    /// included), counted as the CPU is.
    #[serde(default)]
    pub commands_per_grant: Option<f64>,
    /// The server's client connections in the middle of the window (`connected_clients`, the
    /// benchmark's own one included).
    #[serde(default)]
    pub connections: Option<u64>,
    /// The handoff's floor on the same server, p50, µs: from just before a client sends a bare
    /// `PUBLISH` to the moment another client, subscribed, has the message (W3 only).
    #[serde(default)]
    pub handoff_floor_p50_us: Option<f64>,
}
