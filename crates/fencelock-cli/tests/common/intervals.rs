//! The interval harness: concurrent `fencelock run`s whose commands record when they ran,
//! measured inside their hold (holds that did not overlap cannot show overlapping intervals),
//! and what their environment said.

use std::time::Duration;

use super::{Running, fencelock, file, scratch};

/// One command's run under the lock, as it recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    /// `FENCELOCK_FENCE`.
    pub fence: u64,
    /// `FENCELOCK_PERMITS`, or `-` when unset.
    pub permits: String,
    /// Nanoseconds since the epoch, at the command's start and end.
    pub start: u128,
    pub end: u128,
}

/// Runs `count` `fencelock run ARGS -- sh -c …` at once, each command holding for `hold`
/// (a `sleep` argument, such as `0.05`), and waits for all of them to exit 0 (within 60 s
/// each). Returns their intervals in the order they were recorded, and the raw record (for
/// messages).
pub fn run_concurrently(count: usize, args: &[&str], hold: &str) -> (Vec<Interval>, String) {
    let dir = scratch();
    let log = file(dir.path(), "intervals");
    let script = format!(
        "s=$(date +%s%N); sleep {hold}; e=$(date +%s%N); \
         echo \"$FENCELOCK_FENCE ${{FENCELOCK_PERMITS:--}} $s $e\" >> \"{log}\""
    );
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--", "sh", "-c", &script]);
    let runs: Vec<Running> = (0..count)
        .map(|_| Running::start(fencelock(&all)))
        .collect();
    for run in runs {
        let done = run.finish_within(Duration::from_secs(60));
        assert_eq!(done.code, Some(0), "{}", done.explain());
    }
    let text = std::fs::read_to_string(&log).expect("the commands' log");
    let intervals = text
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), 4, "{text}");
            Interval {
                fence: fields[0].parse().expect("a fence"),
                permits: fields[1].to_owned(),
                start: fields[2].parse().expect("a start time"),
                end: fields[3].parse().expect("an end time"),
            }
        })
        .collect();
    (intervals, text)
}

/// The largest number of the intervals that overlap at one instant (one that ends when another
/// starts does not overlap it).
pub fn max_overlap(intervals: &[Interval]) -> usize {
    // At equal times a leave counts before an enter (-1 sorts before +1).
    let mut events: Vec<(u128, i32)> = intervals
        .iter()
        .flat_map(|i| [(i.start, 1), (i.end, -1)])
        .collect();
    events.sort_unstable();
    let (mut now, mut max) = (0_i32, 0_i32);
    for (_, step) in events {
        now += step;
        max = max.max(now);
    }
    usize::try_from(max).unwrap()
}
