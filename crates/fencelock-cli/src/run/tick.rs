//! `run --once KEY` of a scheduled job: the tick a start belongs to (`--every`, by the Redis
//! server's clock, or `--tick`, the time the scheduler planned), how long its record is kept,
//! and the exit status of a start that runs nothing.

use std::time::{Duration, SystemTime};

use fencelock::once::Tick;

use crate::duration::parse_duration;

/// The flags of a run-once's tick and record.
#[derive(Debug, Clone, clap::Args)]
pub(super) struct TickArgs {
    /// With --once: run once per PERIOD, by the Redis server's clock (every host reads the one
    /// server's): the record is KEY@TICK, TICK the server's time floored to PERIOD (counted
    /// from the Unix epoch, UTC; a day begins at 00:00 UTC). For cron, systemd timers and
    /// loops; `$FENCELOCK_TICK` tells the command its tick
    #[arg(long, value_name = "PERIOD", value_parser = parse_duration, requires = "once")]
    every: Option<Duration>,

    /// With --once: the tick the scheduler planned this run for (RFC 3339, as
    /// 2026-11-29T00:00:00Z, or seconds since the Unix epoch): the record is KEY@TICK. For a
    /// Kubernetes CronJob's scheduled time, or any scheduler that says when it meant to run
    #[arg(long, value_name = "TIME", value_parser = parse_time, requires = "once", conflicts_with = "every")]
    tick: Option<SystemTime>,

    /// With --every: a start up to DURATION before a tick begins belongs to that tick (a host
    /// whose clock runs ahead). Default 5s, at most a tenth of the period; less than half of it
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "every")]
    early: Option<Duration>,

    /// With --every: a start more than DURATION after its tick began runs nothing (exit as
    /// --done-exit says). Default: any start within the period runs its tick
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "every")]
    late: Option<Duration>,

    /// With --once: keep the record DURATION after the run that did the work, then let it
    /// expire (the work may run again after that). Default: for ever; with --every or --tick,
    /// 7 days (and at least twice the period)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "once")]
    keep: Option<Duration>,

    /// With --once: how many runs of KEY (or of its tick) may fail (exit non-zero) before a
    /// start gives up and runs nothing (exit 1). Default: any number; with --every or --tick, 3.
    /// A run that succeeds clears the count
    #[arg(long, value_name = "N", requires = "once")]
    attempts: Option<u32>,

    /// With --once: the exit status when nothing was run because KEY (or its tick) was done,
    /// or the start was too late for its tick (default 0, so that cron reports no failure)
    #[arg(long, value_name = "CODE", default_value_t = 0, requires = "once")]
    pub(super) done_exit: u8,
}

impl TickArgs {
    /// The tick asked for, if any.
    pub(super) fn tick(&self) -> Option<Tick> {
        if let Some(at) = self.tick {
            return Some(Tick::planned(at));
        }
        let mut tick = Tick::every(self.every?);
        if let Some(early) = self.early {
            tick = tick.early(early);
        }
        if let Some(late) = self.late {
            tick = tick.late(late);
        }
        Some(tick)
    }

    /// How long the record is kept, if asked.
    pub(super) fn keep(&self) -> Option<Duration> {
        self.keep
    }

    /// How many runs may fail, if asked.
    pub(super) fn attempts(&self) -> Option<u32> {
        self.attempts
    }
}

/// A tick's time: RFC 3339 (`2026-11-29T00:00:00Z`, with a fraction or not) or whole seconds
/// since the Unix epoch.
fn parse_time(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds));
    }
    humantime::parse_rfc3339_weak(text).map_err(|_| {
        format!(
            "{text:?} is not a time: write it as RFC 3339 in UTC (2026-11-29T00:00:00Z) or as \
             seconds since the Unix epoch"
        )
    })
}

/// `"KEY"`, or `"KEY" (tick TIME)` with a tick: the key in the command's messages.
pub(super) fn described(key: &str, tick: Option<SystemTime>) -> String {
    match tick {
        Some(at) => format!("{key:?} (tick {})", text(at)),
        None => format!("{key:?}"),
    }
}

/// A tick as the command's `$FENCELOCK_TICK` shows it: RFC 3339 in UTC, to the millisecond.
pub(super) fn text(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planned_time_is_rfc_3339_or_seconds_since_the_epoch() {
        let midnight = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_910_400);
        assert_eq!(parse_time("2026-11-29T00:00:00Z"), Ok(midnight));
        assert_eq!(parse_time("1795910400"), Ok(midnight));
        assert_eq!(text(midnight), "2026-11-29T00:00:00.000Z");
        assert!(parse_time("tomorrow").is_err_and(|e| e.contains("RFC 3339")));
    }
}
