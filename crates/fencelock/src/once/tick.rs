//! Ticks: which run of a scheduled job a start belongs to (see [`Tick`]).

use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

/// Which tick of a scheduled job a run belongs to: the same on every host.
///
/// A job that several workers or hosts fire at once (a cron line on three hosts, a Celery beat
/// task, a CronJob) runs once per tick when its run-once key is the job and its tick
/// ([`Once::tick`](super::Once::tick)): every start of one tick finds the others' record.
///
/// - [`Tick::planned`]: the time the scheduler planned this run for (Celery's and APScheduler's
///   scheduled time, a Kubernetes CronJob's scheduled time), the same for every worker it fires
///   and for the retries of the run.
/// - [`Tick::every`]: where the scheduler says nothing (cron, systemd timers, a loop), the
///   **Redis server's clock** floored to the period (periods counted from the Unix epoch, in
///   UTC: a day's tick begins at 00:00 UTC). Hosts whose clocks are seconds apart agree, as they
///   all read the one server's. A start up to [`early`](Tick::early) before a tick's beginning
///   (a host whose clock runs ahead, a timer that fires a little early) belongs to that tick; a
///   start more than [`late`](Tick::late) after it runs nothing
///   ([`Outcome::TooLate`](super::Outcome::TooLate)).
///
/// The record of a tick is kept for [`keep`](super::Once::keep) (default [`Tick::KEEP`], and at
/// least twice the period), then expires. "Never twice" holds within it: a start of an
/// [`every`](Tick::every) tick later than that is too late anyway; a [`planned`](Tick::planned)
/// tick fired again after its record expired would run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    how: How,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Planned(SystemTime),
    Every {
        period: Duration,
        early: Duration,
        late: Option<Duration>,
    },
}

/// The tick a start belongs to: its key's text and what it was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Placed {
    /// When the tick begins (UTC).
    pub(super) at: SystemTime,
    /// How long after the tick's beginning the run starts (zero for a planned tick, and for a
    /// start that came early).
    pub(super) late: Duration,
    /// The latest start the tick allows, if that one is past it.
    pub(super) too_late: bool,
}

impl Tick {
    /// How long a tick's record is kept by default: 7 days, far past any scheduler's retries.
    pub const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

    /// How many runs of a tick may fail before its starts give up, by default (see
    /// [`Once::attempts`](super::Once::attempts)).
    pub const ATTEMPTS: u32 = 3;

    /// How early a start may come for the tick that begins after it, by default: 5 s (at most
    /// a tenth of the period).
    pub const EARLY: Duration = Duration::from_secs(5);

    /// The tick the scheduler planned this run for (its scheduled time, the same on every
    /// worker and on the run's retries), to the millisecond.
    pub fn planned(at: SystemTime) -> Self {
        Tick {
            how: How::Planned(at),
        }
    }

    /// The period's tick by the Redis server's clock: the server's time when the run starts,
    /// floored to `period` (counted from the Unix epoch).
    pub fn every(period: Duration) -> Self {
        Tick {
            how: How::Every {
                period,
                early: Self::EARLY.min(period / 10),
                late: None,
            },
        }
    }

    /// For [`every`](Self::every): a start up to `early` before a tick begins belongs to it
    /// (default [`Tick::EARLY`], at most a tenth of the period). Must be less than half the
    /// period. Ignored for a planned tick.
    pub fn early(mut self, early: Duration) -> Self {
        if let How::Every { early: e, .. } = &mut self.how {
            *e = early;
        }
        self
    }

    /// For [`every`](Self::every): a start more than `late` after its tick began runs nothing
    /// (default: any start within the period runs its tick). Ignored for a planned tick.
    pub fn late(mut self, late: Duration) -> Self {
        if let How::Every { late: l, .. } = &mut self.how {
            *l = Some(late);
        }
        self
    }

    /// Whether the tick comes from the server's clock (it needs the time there).
    pub(super) fn needs_clock(&self) -> bool {
        matches!(self.how, How::Every { .. })
    }

    /// The shortest keep that still holds "never twice" for this tick (see [`Self::KEEP`]).
    pub(super) fn keep_at_least(&self) -> Duration {
        match self.how {
            How::Planned(_) => Duration::from_millis(1),
            How::Every { period, .. } => period.saturating_mul(2),
        }
    }

    /// Checks the settings; `name` is the lock's, for the error.
    pub(super) fn validate(&self, name: &str) -> Result<()> {
        let (period, early) = match self.how {
            How::Planned(at) => {
                // A key's tick is written as RFC 3339, whose years have four digits.
                let after = SystemTime::UNIX_EPOCH + Duration::from_secs(LAST_SECOND + 1);
                if at >= after {
                    return Err(Error::invalid(
                        name,
                        format!("the planned tick {at:?} is after the year 9999"),
                    ));
                }
                return Ok(());
            }
            How::Every { period, early, .. } => (period, early),
        };
        if period < Duration::from_millis(1) || period.as_millis() > u128::from(u64::MAX) {
            return Err(Error::invalid(
                name,
                format!("the tick's period {period:?} is not between 1 ms and u64::MAX ms"),
            ));
        }
        if early.saturating_mul(2) >= period {
            return Err(Error::invalid(
                name,
                format!(
                    "the tick's early start {early:?} is not less than half its period {period:?}"
                ),
            ));
        }
        Ok(())
    }

    /// The tick a run starting at `now` (the server's clock; ignored for a planned tick)
    /// belongs to. Call [`validate`](Self::validate) first.
    pub(super) fn place(&self, now: SystemTime) -> Placed {
        match self.how {
            How::Planned(at) => Placed {
                at: millis_floor(at),
                late: Duration::ZERO,
                too_late: false,
            },
            How::Every {
                period,
                early,
                late,
            } => {
                let since = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .saturating_add(early);
                let period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
                let since_ms = u64::try_from(since.as_millis()).unwrap_or(u64::MAX);
                let at_ms = since_ms - since_ms % period_ms;
                let at = SystemTime::UNIX_EPOCH + Duration::from_millis(at_ms);
                let behind = now.duration_since(at).unwrap_or_default();
                Placed {
                    at,
                    late: behind,
                    too_late: late.is_some_and(|late| behind > late),
                }
            }
        }
    }
}

/// 9999-12-31T23:59:59Z: the last second RFC 3339 can write.
const LAST_SECOND: u64 = 253_402_300_799;

/// `t` to the millisecond (a record's key has no finer time).
fn millis_floor(t: SystemTime) -> SystemTime {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => {
            SystemTime::UNIX_EPOCH
                + Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        }
        Err(_) => SystemTime::UNIX_EPOCH,
    }
}

/// A tick's text in a run-once key: its beginning in UTC, RFC 3339 to the millisecond
/// (`2026-11-29T00:00:00.000Z`).
pub(super) fn text(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn a_start_belongs_to_the_period_it_falls_in_or_the_next_one_if_it_comes_early() {
        let day = Duration::from_secs(86_400);
        let tick = Tick::every(day);
        tick.validate("nightly").unwrap_or_else(|e| panic!("{e}"));
        // 2026-11-29T00:00:00Z and two seconds before and after it.
        let midnight = 1_795_910_400_000;
        assert_eq!(text(at(midnight)), "2026-11-29T00:00:00.000Z");
        for start in [
            midnight - 2_000,
            midnight,
            midnight + 2_000,
            midnight + 3_600_000,
        ] {
            let placed = tick.place(at(start));
            assert_eq!(placed.at, at(midnight), "start {start}");
            assert!(!placed.too_late);
        }
        // More than the early start before: the day before.
        assert_eq!(
            tick.place(at(midnight - 6_000)).at,
            at(midnight - 86_400_000)
        );
        // A late window.
        let tick = tick.late(Duration::from_secs(3_600));
        assert!(!tick.place(at(midnight + 3_600_000)).too_late);
        assert!(tick.place(at(midnight + 3_600_001)).too_late);
        assert_eq!(
            tick.place(at(midnight + 3_600_001)).late,
            Duration::from_millis(3_600_001)
        );
    }

    #[test]
    fn a_planned_tick_is_the_time_planned_to_the_millisecond() {
        let planned = Tick::planned(at(1_795_910_400_123) + Duration::from_micros(999));
        let placed = planned.place(at(0));
        assert_eq!(placed.at, at(1_795_910_400_123));
        assert_eq!(text(placed.at), "2026-11-29T00:00:00.123Z");
        assert!(!placed.too_late);
    }

    #[test]
    fn settings_that_cannot_hold_are_refused() {
        assert!(Tick::every(Duration::ZERO).validate("job").is_err());
        let last = at(LAST_SECOND * 1000 + 999);
        assert!(Tick::planned(last).validate("job").is_ok());
        assert_eq!(text(last), "9999-12-31T23:59:59.999Z");
        assert!(
            Tick::planned(at((LAST_SECOND + 1) * 1000))
                .validate("job")
                .is_err()
        );
        assert!(
            Tick::every(Duration::from_secs(10))
                .early(Duration::from_secs(5))
                .validate("job")
                .is_err()
        );
        assert!(
            Tick::every(Duration::from_secs(10))
                .early(Duration::from_secs(4))
                .validate("job")
                .is_ok()
        );
        // A short period's default early start is a tenth of it.
        let placed = Tick::every(Duration::from_secs(10)).place(at(9_000));
        assert_eq!(placed.at, at(10_000));
        assert_eq!(
            Tick::every(Duration::from_secs(10)).place(at(8_999)).at,
            at(0)
        );
    }
}
