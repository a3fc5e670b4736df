//! End-to-end tests of `fencelock elect` and `fencelock leader`: the real binary against a real
//! redis-server. Five candidates campaign; the leader is SIGKILLed, then another SIGSTOPped past
//! its lease: a new leader comes within the lease and a margin each time, terms grow, the
//! stopped one is told (exit 74) when continued, and no two candidates ever believe they lead
//! at once unless one was told.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The candidates' lease.
const TTL: Duration = Duration::from_millis(1000);
/// How much later than the lease a new leader may come (the waiters wake when the lease would
/// have run out; a loaded machine adds its delay).
const MARGIN: Duration = Duration::from_millis(1500);

#[test]
fn elect_runs_the_command_with_its_term_resigns_and_leader_shows_it() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let seen = file(dir.path(), "seen");
    let script = format!(
        "echo \"$FENCELOCK_TERM $FENCELOCK_FENCE\"; fencelock_leader=$({BIN} leader --url {url} --json ops); \
         echo \"$fencelock_leader\" > \"{seen}\"; exit 3"
    );
    let done = run(&[
        "elect", "--url", &url, "--value", "host-a", "ops", "--", "sh", "-c", &script,
    ]);
    assert_eq!(done.code, Some(3), "{}", done.explain());
    let (term, fence) = done.stdout.trim().split_once(' ').expect("term and fence");
    assert_eq!(term, fence, "FENCELOCK_TERM is FENCELOCK_FENCE");
    let term: u64 = term.parse().expect("a term");
    let shown: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(shown["event"], "leader");
    assert_eq!(shown["value"], "host-a");
    assert_eq!(shown["term"], term);
    // It resigned: nobody leads.
    let after = run(&["leader", "--url", &url, "ops"]);
    assert_eq!(
        (after.code, after.stdout.trim()),
        (Some(0), "vacant"),
        "{}",
        after.explain()
    );
    let refused = run(&[
        "elect",
        "--url",
        &url,
        "--url",
        "redis://127.0.0.1:1",
        "--value",
        "v",
        "ops",
        "--",
        "true",
    ]);
    assert_eq!(refused.code, Some(2), "{}", refused.explain());
    assert!(
        refused.stderr.contains("election \"ops\""),
        "{}",
        refused.explain()
    );
}

/// One line of the candidates' log: `start TERM PID NS VALUE` or `stop TERM PID NS`.
#[derive(Debug, Clone)]
struct Line {
    start: bool,
    term: u64,
    pid: i32,
    at_ns: u128,
    value: String,
}

fn read_log(path: &Path) -> Vec<Line> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let (kind, rest) = parts.split_first()?;
            Some(Line {
                start: *kind == "start",
                term: rest.first()?.parse().ok()?,
                pid: rest.get(1)?.parse().ok()?,
                at_ns: rest.get(2)?.parse().ok()?,
                value: rest.get(3).map_or_else(String::new, |v| (*v).to_owned()),
            })
        })
        .collect()
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Waits for a leader whose term is above `above`; its start line.
fn next_leader(log: &Path, above: u64) -> Line {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(line) = read_log(log)
            .into_iter()
            .find(|l| l.start && l.term > above)
        {
            return line;
        }
        assert!(Instant::now() < until, "no leader above term {above}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn candidate(url: &str, log: &str, i: usize) -> Running {
    let value = format!("cand-{i}");
    let script = format!(
        "trap 'echo \"stop $FENCELOCK_TERM $$ $(date +%s%N)\" >> \"{log}\"; exit 0' TERM; \
         echo \"start $FENCELOCK_TERM $$ $(date +%s%N) {value}\" >> \"{log}\"; \
         while :; do sleep 0.02; done"
    );
    let ttl = format!("{}ms", TTL.as_millis());
    Running::start(fencelock(&[
        "elect",
        "--url",
        url,
        "--ttl",
        &ttl,
        "--kill-after",
        "2s",
        "--value",
        &value,
        "crew",
        "--",
        "sh",
        "-c",
        &script,
    ]))
}

/// Freezes or thaws (or kills) a candidate and its command's process group, as a machine that
/// stops or dies would.
fn signal_all(runner: &Running, group: i32, signal: Signal) {
    runner.signal(signal);
    let _ = killpg(Pid::from_raw(group), signal);
}

#[test]
fn five_candidates_survive_a_killed_and_a_stopped_leader_without_double_leadership() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let log = file(dir.path(), "leaders.log");
    let log_path = path(dir.path(), "leaders.log");
    let mut watch = Some(Running::start(fencelock(&[
        "leader", "--url", &url, "--watch", "--json", "crew",
    ])));
    let mut candidates: Vec<Option<Running>> =
        (0..5).map(|i| Some(candidate(&url, &log, i))).collect();
    let index = |line: &Line| -> usize { line.value.trim_start_matches("cand-").parse().unwrap() };

    // SIGKILL the first leader (fencelock and its command): a new one within the lease.
    let first = next_leader(&log_path, 0);
    let killed_at = now_ns();
    let killed = candidates[index(&first)].take().unwrap();
    signal_all(&killed, first.pid, Signal::SIGKILL);
    let second = next_leader(&log_path, first.term);
    let after_kill = Duration::from_nanos((second.at_ns - killed_at) as u64);

    // SIGSTOP the second past its lease: another leads; continued, the stopped one is told.
    let stopped_at = now_ns();
    let stopped = candidates[index(&second)].take().unwrap();
    signal_all(&stopped, second.pid, Signal::SIGSTOP);
    let third = next_leader(&log_path, second.term);
    let after_stop = Duration::from_nanos((third.at_ns - stopped_at) as u64);
    std::thread::sleep(Duration::from_millis(300));
    signal_all(&stopped, second.pid, Signal::SIGCONT);
    let told = stopped.finish_within(Duration::from_secs(15));
    assert_eq!(
        told.code,
        Some(74),
        "the stopped leader must be told: {}",
        told.explain()
    );

    // The third leader ends its command (SIGTERM, forwarded): it resigns, a fourth leads.
    let third_runner = candidates[index(&third)].take().unwrap();
    third_runner.signal(Signal::SIGTERM);
    let resigned = third_runner.finish();
    assert_eq!(resigned.code, Some(0), "{}", resigned.explain());
    let fourth = next_leader(&log_path, third.term);
    let end_ns = now_ns();
    for runner in candidates.iter_mut().filter_map(Option::take) {
        runner.signal(Signal::SIGTERM);
        let _ = runner.finish();
    }
    let watch = watch.take().unwrap();
    watch.signal(Signal::SIGTERM);
    let watched = watch.finish();

    let lines = read_log(&log_path);
    let doubles = double_leaderships(&lines, first.term, killed_at, second.term, end_ns);
    println!(
        "time to a new leader after SIGKILL: {after_kill:?}; after SIGSTOP: {after_stop:?} \
         (lease {TTL:?}); double leaderships: {doubles}; terms: {} {} {} {}",
        first.term, second.term, third.term, fourth.term
    );
    assert_eq!(doubles, 0, "{lines:#?}");
    assert!(after_kill <= TTL + MARGIN, "after SIGKILL: {after_kill:?}");
    assert!(after_stop <= TTL + MARGIN, "after SIGSTOP: {after_stop:?}");
    let starts: Vec<u64> = lines.iter().filter(|l| l.start).map(|l| l.term).collect();
    assert!(
        starts.windows(2).all(|w| w[0] < w[1]),
        "terms in start order: {starts:?}"
    );
    // The watcher saw every leader, in term order.
    let watched_terms: Vec<u64> = watched
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "leader")
        .filter_map(|v| v["term"].as_u64())
        .collect();
    assert!(
        watched_terms.windows(2).all(|w| w[0] <= w[1]),
        "{}",
        watched.stdout
    );
    for term in &starts {
        assert!(
            watched_terms.contains(term),
            "term {term} not watched: {}",
            watched.stdout
        );
    }
}

/// Pairs of leaders whose beliefs overlap in time, leaving out the stopped leader's (which was
/// told: exit 74, checked by the caller). A leader believes from its start line to its stop
/// line; the SIGKILLed one until it was killed; one still running until the end.
fn double_leaderships(
    lines: &[Line],
    killed_term: u64,
    killed_at: u128,
    told_term: u64,
    end: u128,
) -> usize {
    let mut spans: BTreeMap<u64, (u128, u128)> = BTreeMap::new();
    for line in lines.iter().filter(|l| l.start) {
        spans.insert(line.term, (line.at_ns, end));
    }
    for line in lines.iter().filter(|l| !l.start) {
        if let Some(span) = spans.get_mut(&line.term) {
            span.1 = line.at_ns;
        }
    }
    if let Some(span) = spans.get_mut(&killed_term) {
        span.1 = killed_at;
    }
    let spans: Vec<(u64, (u128, u128))> = spans.into_iter().collect();
    let mut doubles = 0;
    for (i, (term_a, (start_a, end_a))) in spans.iter().enumerate() {
        for (term_b, (start_b, end_b)) in &spans[i + 1..] {
            let overlap = start_a < end_b && start_b < end_a;
            let told = *term_a == told_term || *term_b == told_term;
            if overlap && !told {
                doubles += 1;
            }
        }
    }
    doubles
}
