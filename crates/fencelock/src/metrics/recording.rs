//! Whether the library records its series at all: on unless turned off, so that whatever
//! recorder the process installs gets them. A process that installs its recorder only once
//! asked (a language package's metrics are off until its program asks for them) turns recording
//! off until then: with no recorder, the `metrics` facade still takes each series' labels and
//! key on every call, which an acquire and release cycle would pay for nothing
//! (docs/BENCHMARKS.md, "The overhead of metrics").

use std::sync::atomic::{AtomicBool, Ordering};

static RECORDING: AtomicBool = AtomicBool::new(true);

/// Turns the library's recording on or off, from now on (on unless turned off).
///
/// Off, nothing is recorded, and no series' labels or key are made. A hold granted while off is
/// not counted in `fencelock_held` for its whole life, also after recording is turned on (its
/// release does not take it out of a count it never entered); the same for a request waiting
/// in `fencelock_waiters`.
///
/// ```
/// use fencelock::metrics::{recording, set_recording};
///
/// set_recording(false);
/// assert!(!recording());
/// set_recording(true);
/// assert!(recording());
/// ```
pub fn set_recording(on: bool) {
    RECORDING.store(on, Ordering::Relaxed);
}

/// Whether the library records its series now (see [`set_recording`]).
pub fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}
