//! What fencelock reports about its locks, with the cargo feature `metrics`: counters, gauges
//! and histograms through the [`metrics`](https://docs.rs/metrics) facade, so that they appear
//! in whatever exporter the application installs (Prometheus, StatsD, OpenTelemetry, ...), or
//! in fencelock's own in-memory [`Registry`] for a program without one.
//!
//! Every instrument is in [`INSTRUMENTS`], the one list the `fencelock` command and the Python
//! and Node.js packages export too (docs/observability.md has the table):
//!
//! | name | type | labels |
//! |---|---|---|
//! | `fencelock_acquisitions_total` | counter | `kind`, `outcome` (`granted`, `busy`, `timed_out`, `failed`) |
//! | `fencelock_wait_seconds` | histogram | `kind`: from the request to its outcome |
//! | `fencelock_hold_seconds` | histogram | `kind`: from the grant to the release or loss |
//! | `fencelock_held` | gauge | `kind`: locks held by this process now (a lost one no longer counts, from the moment its loss is known) |
//! | `fencelock_waiters` | gauge | `kind`: requests of this process waiting now |
//! | `fencelock_losses_total` | counter | `kind`, `reason` (`not_owner`, `expired`, `max_hold_reached`: [`LostReason::code`](crate::LostReason::code)) |
//! | `fencelock_renewals_total` | counter | `outcome` (`ok`, `failed`) |
//! | `fencelock_passes_total` | counter | `kind`, `outcome` (`taken`, `missed`) |
//! | `fencelock_fenced_writes_total` | counter | `outcome` (`accepted`, `refused`) |
//! | `fencelock_once_total` | counter | `outcome` (`ran`, `failed`, `already_done`, `too_late`, `gave_up`) |
//! | `fencelock_terms_total` | counter | `event` (`won`, `lost`, `observed`) |
//!
//! [`set_recording`] turns all of it off (and on again): a process that installs its recorder
//! only later then pays nothing for it meanwhile.
//!
//! The lock's name is a label (`lock`) only if [`set_lock_labels`] asks for it: by every name,
//! or mapped to fewer labels. For a fenced write, the label is the resource's; for a run-once,
//! the job's (without its tick); for a term, the election's.
//!
//! ```no_run
//! use fencelock::metrics::{LockLabels, Registry, set_lock_labels};
//!
//! # async fn example(client: fencelock::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::new();
//! registry.install()?;
//! set_lock_labels(LockLabels::patterns([("account:*", "account")]));
//! let guard = client.lock("account:42").acquire().await?;
//! guard.release().await?;
//! // fencelock_acquisitions_total{kind="lock",outcome="granted",lock="account"} 1
//! print!("{}", registry.render());
//! # Ok(())
//! # }
//! ```

mod instruments;
mod labels;
mod recording;
mod registry;
mod render;

pub use instruments::{
    ACQUISITIONS, BUCKETS, FENCED_WRITES, HELD, HOLD, INSTRUMENTS, Instrument, InstrumentKind,
    LOSSES, ONCE, PASSES, RENEWALS, TERMS, WAIT, WAITERS, instrument,
};
pub(crate) use labels::lock_label;
pub use labels::{LockLabels, OTHER, set_lock_labels};
pub use recording::{recording, set_recording};
pub use registry::{InstallError, KEPT_OBSERVATIONS, Observation, Registry, Series, Value};
pub use render::render;
