//! A scheduled job on the command line: `run --once KEY --every PERIOD` fired by a loop on three
//! "hosts" whose clocks are seconds apart (libfaketime) runs each tick once, by the Redis
//! server's clock; `--tick` (the scheduler's planned time) runs once per planned time and
//! tells the command its tick; a start that runs nothing exits as `--done-exit` says.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::*;

/// `faketime`, or a failure that says how to get it.
fn faketime() -> &'static str {
    let found = Command::new("faketime")
        .args(["-f", "+0s", "true"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "faketime is needed for this test: run scripts/ensure-faketime (Debian: apt-get install \
         faketime)"
    );
    "faketime"
}

/// The clock of a process run under `faketime -f OFFSET`, minus the real one, in seconds.
fn skew(offset: &str) -> i64 {
    let out = Command::new(faketime())
        .args(["-f", offset, "date", "+%s"])
        .output()
        .unwrap();
    let faked: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let real = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    faked - i64::try_from(real).unwrap()
}

#[test]
fn a_loop_on_three_hosts_with_skewed_clocks_runs_each_tick_once() {
    let faketime = faketime();
    let offsets = ["-3s", "+0s", "+3s"];
    for (offset, expected) in offsets.iter().zip([-3, 0, 3]) {
        let skew = skew(offset);
        assert!((skew - expected).abs() <= 1, "{offset}: skew {skew}");
    }
    let server = server();
    let url = server.url();
    let dir = scratch();
    let ticks = file(dir.path(), "ticks");
    // Each host fires the job every 0.3 s for 7 s: about 23 starts each, 3 or 4 per tick.
    // The real time of each run, read past libfaketime: when it ran, against its tick.
    let script =
        format!("echo \"$FENCELOCK_TICK $HOST $(env -u LD_PRELOAD date +%s%3N)\" >> \"{ticks}\"");
    let hosts: Vec<Running> = offsets
        .iter()
        .enumerate()
        .map(|(host, offset)| {
            let loop_ = "end=$(( $(date +%s) + 7 )); while [ $(date +%s) -lt $end ]; do \
                 \"$0\" run --url \"$1\" --once report --every 2s -- sh -c \"$2\" || exit $?; \
                 sleep 0.3; done";
            let mut command = Command::new(faketime);
            command
                .args(["-f", offset, "sh", "-c", loop_])
                .arg(BIN)
                .args([url.as_str(), script.as_str()])
                .env("HOST", host.to_string())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            Running::start(command)
        })
        .collect();
    for host in hosts {
        let done = host.finish_within(Duration::from_secs(60));
        assert_eq!(done.code, Some(0), "{}", done.explain());
    }
    let ran = std::fs::read_to_string(&ticks).unwrap();
    let mut per_tick: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in ran.lines() {
        let mut fields = line.split(' ');
        let (tick, host, real) = (fields.next(), fields.next(), fields.next());
        let (Some(tick), Some(host), Some(real)) = (tick, host, real) else {
            panic!("a line that is not `TICK HOST MS`: {line:?}");
        };
        per_tick.entry(tick).or_default().push(host);
        // Never before its tick (by the server's clock, which is this machine's real one), but
        // for the early start allowed (a tenth of the period); a host that took its own clock
        // for the tick's would run one 3 s early.
        let at = humantime::parse_rfc3339(tick).unwrap();
        let at = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let real: u128 = real.parse().unwrap();
        assert!(
            real + 200 + 50 >= at,
            "{line}: ran {} ms before its tick",
            at - real
        );
    }
    let twice: Vec<_> = per_tick
        .iter()
        .filter(|(_, hosts)| hosts.len() > 1)
        .collect();
    assert!(twice.is_empty(), "ticks run more than once: {twice:?}");
    // Every tick on the 2 s grid, by the server's clock, and one after the other: 7 s of
    // starts cover 3 or 4 of them (a loaded machine may start fewer).
    let grid: Vec<u64> = per_tick
        .keys()
        .map(|tick| {
            let at = humantime::parse_rfc3339(tick).unwrap();
            let ms = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_millis();
            assert_eq!(ms % 2000, 0, "{tick} is not on the grid");
            u64::try_from(ms / 2000).unwrap()
        })
        .collect();
    assert!(grid.len() >= 3, "only {} ticks ran: {ran}", grid.len());
    assert!(
        grid.windows(2).all(|w| w[1] == w[0] + 1),
        "a tick was skipped: {ran}"
    );
    // The hosts' clocks: all three ran ticks is likely, not promised; that none ran twice is.
    eprintln!("ticks and the host that ran each: {per_tick:?}");
}

#[test]
fn a_planned_tick_runs_once_and_a_start_that_runs_nothing_exits_as_asked() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let seen = file(dir.path(), "seen");
    let script = format!("echo \"$FENCELOCK_TICK\" >> \"{seen}\"");
    let planned = |tick: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--url",
            url.as_str(),
            "--once",
            "beat",
            "--tick",
            tick,
        ];
        args.extend(extra);
        args.extend(["--", "sh", "-c", script.as_str()]);
        run(&args)
    };
    let first = planned("2026-11-29T00:00:00Z", &[]);
    assert_eq!(first.code, Some(0), "{}", first.explain());
    // The same tick again (as seconds since the epoch): nothing run, the exit status asked for.
    let again = planned("1795910400", &["--done-exit", "3"]);
    assert_eq!(again.code, Some(3), "{}", again.explain());
    assert!(
        again
            .stderr
            .contains("\"beat\" (tick 2026-11-29T00:00:00.000Z) was done before"),
        "{}",
        again.explain()
    );
    let next = planned("2026-11-29T01:00:00Z", &["--done-exit", "3"]);
    assert_eq!(next.code, Some(0), "{}", next.explain());
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        "2026-11-29T00:00:00.000Z\n2026-11-29T01:00:00.000Z\n"
    );
    let record = "fencelock:once:{beat}:beat@2026-11-29T00:00:00.000Z";
    assert!(exists(&server, record), "no record {record}");

    // Too late for its tick (by the server's clock): nothing run, nothing held.
    let late = run(&[
        "run",
        "--url",
        &url,
        "--once",
        "hourly",
        "--every",
        "1h",
        "--early",
        "1ms",
        "--late",
        "1ms",
        "--done-exit",
        "4",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(late.code, Some(4), "{}", late.explain());
    assert!(
        late.stderr.contains("later than --late allows"),
        "{}",
        late.explain()
    );
    assert!(!exists(&server, &lock_key("hourly")));
    assert_eq!(std::fs::read_to_string(&seen).unwrap().lines().count(), 2);

    // A tick whose runs fail: tried as often as --attempts allows, then given up (exit 1,
    // nothing run).
    let failing = |attempts: &str| {
        run(&[
            "run",
            "--url",
            &url,
            "--once",
            "flaky",
            "--tick",
            "1795910400",
            "--attempts",
            attempts,
            "--",
            "sh",
            "-c",
            &format!("echo failed >> \"{seen}\"; exit 5"),
        ])
    };
    for _ in 0..2 {
        let failed = failing("2");
        assert_eq!(failed.code, Some(5), "{}", failed.explain());
    }
    let gave_up = failing("2");
    assert_eq!(gave_up.code, Some(1), "{}", gave_up.explain());
    assert!(
        gave_up
            .stderr
            .contains("2 runs failed, as many as --attempts allows"),
        "{}",
        gave_up.explain()
    );
    let seen_now = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(seen_now.lines().filter(|l| *l == "failed").count(), 2);

    // A keep that would let a tick run twice, and a tick without --once: usage errors.
    let short = run(&[
        "run", "--url", &url, "--once", "hourly", "--every", "1h", "--keep", "1h", "--", "true",
    ]);
    assert_eq!(short.code, Some(2), "{}", short.explain());
    assert!(
        short.stderr.contains("keep it at least"),
        "{}",
        short.explain()
    );
    let alone = run(&["run", "--url", &url, "--every", "1h", "job", "--", "true"]);
    assert_eq!(alone.code, Some(2), "{}", alone.explain());
}

/// The value of `key` on `server`, if any.
fn get(server: &fencelock_testkit::RedisServer, key: &str) -> Option<String> {
    match server.cmd(&["GET", key]) {
        Ok(redis::Value::BulkString(v)) => Some(String::from_utf8_lossy(&v).into_owned()),
        _ => None,
    }
}

/// The hour's record of `job` that `run --once JOB --every 1h` writes (by the server's clock).
fn hour_record(server: &fencelock_testkit::RedisServer, job: &str) -> String {
    let Ok(redis::Value::Array(time)) = server.cmd(&["TIME"]) else {
        panic!("TIME");
    };
    let Some(redis::Value::BulkString(seconds)) = time.first() else {
        panic!("TIME: {time:?}");
    };
    let seconds: u64 = String::from_utf8_lossy(seconds).parse().unwrap();
    let hour = SystemTime::UNIX_EPOCH + Duration::from_secs((seconds + 5) / 3600 * 3600);
    format!(
        "fencelock:once:{{{job}}}:{job}@{}",
        humantime::format_rfc3339_millis(hour)
    )
}

/// `fencelock` SIGKILLed while its tick's command runs: the command is stopped with it, the
/// tick is not recorded and no failure is counted; the next start of the tick runs it once the
/// killed run's lease is over, and a start after that finds it done.
#[test]
fn a_tick_whose_run_is_killed_is_run_by_the_next_start() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let started = path(dir.path(), "started");
    let alive = path(dir.path(), "alive");
    let start = |script: &str| {
        fencelock(&[
            "run", "--url", &url, "--once", "hourly", "--every", "1h", "--ttl", "1s", "--", "sh",
            "-c", script,
        ])
    };
    let killed = Running::start(start(&format!(
        "echo killed >> '{}'; while :; do touch '{}'; sleep 0.1; done",
        started.display(),
        alive.display()
    )));
    wait_for_file(&alive, Duration::from_secs(20));
    killed.signal(nix::sys::signal::Signal::SIGKILL);
    let done = killed.finish_within(Duration::from_secs(10));
    assert_eq!(done.code, None, "{}", done.explain());
    // Its command went with it (the launcher stops the tree when the supervisor dies).
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_file(&alive).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!alive.exists(), "the killed run's command still runs");
    let record = hour_record(&server, "hourly");
    assert_eq!(
        get(&server, &record),
        None,
        "the killed run recorded its tick"
    );

    let next = run(&[
        "run",
        "--url",
        &url,
        "--once",
        "hourly",
        "--every",
        "1h",
        "--ttl",
        "1s",
        "--",
        "sh",
        "-c",
        &format!(
            "echo next >> '{}'; echo $FENCELOCK_FENCE",
            started.display()
        ),
    ]);
    assert_eq!(next.code, Some(0), "{}", next.explain());
    let fence = next.stdout.trim().to_owned();
    let stored = get(&server, &record).unwrap_or_else(|| panic!("no record {record}"));
    assert!(
        stored.starts_with(&format!("{fence}:")),
        "{stored} is not run {fence}'s"
    );
    let failures = record.replace(":once:", ":once-failed:");
    assert_eq!(
        get(&server, &failures),
        None,
        "a killed run counted as a failure"
    );
    let again = run(&[
        "run",
        "--url",
        &url,
        "--once",
        "hourly",
        "--every",
        "1h",
        "--",
        "sh",
        "-c",
        &format!("echo again >> '{}'", started.display()),
    ]);
    assert_eq!(again.code, Some(0), "{}", again.explain());
    assert!(
        again.stderr.contains("was done before"),
        "{}",
        again.explain()
    );
    assert_eq!(std::fs::read_to_string(&started).unwrap(), "killed\nnext\n");
}

/// `fencelock` stopped (SIGSTOP) past its lease while its tick's command runs: the next start
/// runs the tick and records it; continued, the stopped run finds its lock lost, stops, and
/// cannot record over the newer run (exit 74).
#[test]
fn a_run_stopped_past_its_lease_cannot_record_its_tick_over_the_next_one() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let started = path(dir.path(), "started");
    let record = hour_record(&server, "paused");
    let stopped = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--once",
        "paused",
        "--every",
        "1h",
        "--ttl",
        "1s",
        "--",
        "sh",
        "-c",
        &format!("echo stopped >> '{}'; sleep 2", started.display()),
    ]));
    wait_for_file(&started, Duration::from_secs(20));
    stopped.signal(nix::sys::signal::Signal::SIGSTOP);
    let next = run(&[
        "run",
        "--url",
        &url,
        "--once",
        "paused",
        "--every",
        "1h",
        "--ttl",
        "1s",
        "--",
        "sh",
        "-c",
        &format!(
            "echo next >> '{}'; echo $FENCELOCK_FENCE",
            started.display()
        ),
    ]);
    assert_eq!(next.code, Some(0), "{}", next.explain());
    let fence = next.stdout.trim().to_owned();
    std::thread::sleep(Duration::from_millis(2500));
    stopped.signal(nix::sys::signal::Signal::SIGCONT);
    let late = stopped.finish_within(Duration::from_secs(20));
    assert_eq!(late.code, Some(74), "{}", late.explain());
    let stored = get(&server, &record).unwrap_or_else(|| panic!("no record {record}"));
    assert!(
        stored.starts_with(&format!("{fence}:")),
        "{stored} is not run {fence}'s"
    );
}
