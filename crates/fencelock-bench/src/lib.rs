//! # fencelock-bench — how fencelock compares with the physical limit and with its peers
//!
//! Runs eight workloads against redis-server instances it starts itself (on free ports, through
//! `fencelock-testkit`), for each contender:
//!
//! - **fencelock** — this project's library with its default options (only the lease is set);
//! - **raw** — no library: `SET k tok NX PX` plus a compare-and-delete script by `EVALSHA` over
//!   one multiplexed connection, the physical limit of two round trips per cycle;
//! - **raw-fenced** — no library, but fenced: `SET NX PX` and an `INCR` of a fence key in one
//!   script, the least any fenced Redis lock can do (W1–W3);
//! - **rslock** and **redlock** — the peer crates (feature `peers`, on by default);
//! - **node-redlock** — the `redlock` npm package, run by `node` in a child process (W4 only,
//!   when `node` and its packages are there).
//!
//! Workloads: W1 uncontended latency, W2 uncontended throughput, W3 contended handoff, W4 Redlock
//! over five instances (healthy, then one stopped), W5 keeping many locks alive, W6 the lock
//! family (fencelock only: its reentrant, read-write, semaphore and fair locks next to its plain
//! lock, uncontended and contended, with invariant counters), W7 deployments (TLS, a replica with
//! `WAIT`, Redis Cluster; fencelock and raw) and W8 fenced writes (a plain `SET`, a raw fenced
//! script, fencelock's fenced store). See `docs/BENCHMARKS.md` for what each measures and how to
//! read the numbers.
//!
//! ```no_run
//! # async fn example() -> Result<(), fencelock_bench::BenchError> {
//! let report = fencelock_bench::run(fencelock_bench::BenchOptions::smoke()).await?;
//! println!("{}", report.to_markdown());
//! std::fs::write("bench.json", report.to_json()?).ok();
//! # Ok(()) }
//! ```
//!
//! `run` needs a multi-threaded Tokio runtime (redlock runs on the blocking pool).
mod deployments;
mod error;
mod family;
mod fenced_writes;
mod locker;
mod node_redlock;
mod options;
mod redlock_w4;
mod report;
mod run;
mod stats;
mod system;
mod workloads;

pub use error::{BenchError, Result};
pub use locker::Library;
pub use options::{BenchOptions, Workload};
pub use redlock_w4::FencelockRedlockFactory;
pub use report::{
    LibraryRow, Machine, Report, TargetCheck, W1Measured, W1Row, W2Measured, W2Row, W3Measured,
    W3Row, W4Measured, W4Phase, W4Row, W5Measured, W5Row, W6Contended, W6Report, W6Uncontended,
    W7Row, W8Row,
};
pub use run::{run, run_w5_child};
