//! The command's metrics: `run` and `elect` with `--metrics-file` (the file node_exporter's
//! textfile collector reads: written at the start, while it runs and at the end, each series
//! labelled with the lock), and `watch --prometheus` (the locks as watch sees them, served over
//! HTTP, through a Redis outage). The names are those of docs/observability.md's tables.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

use common::*;

/// The first column (in backticks) of the table under `heading` in docs/observability.md.
fn documented(heading: &str) -> Vec<String> {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/observability.md"
    ))
    .expect("docs/observability.md");
    let section = docs
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("no section {heading:?} in docs/observability.md"));
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect()
}

/// The value of the sample `name{labels}` in Prometheus text (labels in any order).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
            let found: Vec<&str> = rest
                .trim_end_matches('}')
                .split(',')
                .filter(|l| !l.is_empty())
                .collect();
            let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            (n == name
                && found.len() == wanted.len()
                && wanted.iter().all(|w| found.contains(&w.as_str())))
            .then(|| value.parse().ok())?
        })
}

/// The names with a `# TYPE` line.
fn typed(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next().map(str::to_owned))
        .collect()
}

/// `GET /metrics` (or `path`) from `addr`: the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

#[test]
fn a_run_writes_its_metrics_for_the_textfile_collector_at_its_start_and_its_end() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let prom = path(dir.path(), "nightly.prom");
    let prom_text = prom.to_str().unwrap();
    // Written when the run starts, before the lock is held.
    let ready = file(dir.path(), "ready");
    let script = format!("touch {ready}; sleep 0.5");
    let running = Running::start(fencelock(&[
        "run",
        "--url",
        &url,
        "--metrics-file",
        prom_text,
        "nightly",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    wait_for_file(&path(dir.path(), "ready"), LIMIT);
    assert!(prom.exists(), "no metrics file while the run runs");
    let finished = running.finish();
    assert_eq!(finished.code, Some(0), "{}", finished.explain());
    let text = std::fs::read_to_string(&prom).unwrap();
    let lock = |kind: &'static str, extra: &[(&'static str, &'static str)]| {
        let mut labels = vec![("kind", kind)];
        labels.extend_from_slice(extra);
        labels.push(("lock", "nightly"));
        labels
    };
    assert_eq!(
        sample(
            &text,
            "fencelock_acquisitions_total",
            &lock("lock", &[("outcome", "granted")])
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "fencelock_held", &lock("lock", &[])),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "fencelock_hold_seconds_count", &lock("lock", &[])),
        Some(1.0)
    );
    let held = sample(&text, "fencelock_hold_seconds_sum", &lock("lock", &[])).unwrap();
    assert!((0.5..30.0).contains(&held), "held {held}s:\n{text}");
    // Readable by the collector's own user; only documented names.
    let mode = std::fs::metadata(&prom).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
    let names = documented("The instruments");
    for name in typed(&text) {
        assert!(
            names.contains(&name),
            "{name} is not in docs/observability.md"
        );
    }
    // No temporary file left beside it.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

#[test]
fn a_lost_run_an_election_and_a_run_once_are_in_their_files() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    // A run whose lock is deleted under it: exit 74, the loss counted.
    let lost = path(dir.path(), "lost.prom");
    let running = hold(
        &url,
        "lost",
        dir.path(),
        &["--ttl", "1s", "--metrics-file", lost.to_str().unwrap()],
        Some(0),
    );
    server.cmd(&["DEL", &lock_key("lost")]).unwrap();
    let finished = running.finish();
    assert_eq!(finished.code, Some(74), "{}", finished.explain());
    let text = std::fs::read_to_string(&lost).unwrap();
    assert_eq!(
        sample(
            &text,
            "fencelock_losses_total",
            &[("kind", "lock"), ("reason", "not_owner"), ("lock", "lost")]
        ),
        Some(1.0),
        "{text}"
    );
    let failed = sample(
        &text,
        "fencelock_renewals_total",
        &[("outcome", "failed"), ("lock", "lost")],
    );
    assert!(failed.is_some_and(|n| n >= 1.0), "{text}");

    // An election won.
    let elected = path(dir.path(), "elect.prom");
    let finished = run(&[
        "elect",
        "--url",
        &url,
        "--value",
        "a",
        "--metrics-file",
        elected.to_str().unwrap(),
        "leader",
        "--",
        "true",
    ]);
    assert_eq!(finished.code, Some(0), "{}", finished.explain());
    let text = std::fs::read_to_string(&elected).unwrap();
    assert_eq!(
        sample(
            &text,
            "fencelock_terms_total",
            &[("event", "won"), ("lock", "leader")]
        ),
        Some(1.0),
        "{text}"
    );

    // A run-once: ran, then already done.
    let once = path(dir.path(), "once.prom");
    for outcome in ["ran", "already_done"] {
        let finished = run(&[
            "run",
            "--url",
            &url,
            "--once",
            "migrate",
            "--metrics-file",
            once.to_str().unwrap(),
            "--",
            "true",
        ]);
        assert_eq!(finished.code, Some(0), "{}", finished.explain());
        let text = std::fs::read_to_string(&once).unwrap();
        assert_eq!(
            sample(
                &text,
                "fencelock_once_total",
                &[("outcome", outcome), ("lock", "migrate")]
            ),
            Some(1.0),
            "{text}"
        );
    }

    // A file that cannot be written: a usage error, nothing run.
    let ran = path(dir.path(), "ran");
    let finished = run(&[
        "run",
        "--url",
        &url,
        "--metrics-file",
        "/nonexistent/dir/x.prom",
        "job",
        "--",
        "touch",
        ran.to_str().unwrap(),
    ]);
    assert_eq!(finished.code, Some(2), "{}", finished.explain());
    assert!(
        finished
            .stderr
            .contains("--metrics-file /nonexistent/dir/x.prom"),
        "{}",
        finished.explain()
    );
    assert!(!ran.exists());
}

#[test]
fn watch_serves_the_locks_it_sees_and_keeps_serving_through_an_outage() {
    let mut server = server();
    let url = server.url();
    let dir = scratch();
    let mut command = fencelock(&[
        "watch",
        "--url",
        &url,
        "--prometheus",
        "127.0.0.1:0",
        "served",
        "idle",
    ]);
    command.stdout(std::process::Stdio::null());
    let err = path(dir.path(), "watch.err");
    command.stderr(std::fs::File::create(&err).unwrap());
    let watch = Running::start(command);
    let mut addr = String::new();
    wait_until(LIMIT, "watch says where it serves", || {
        let said = std::fs::read_to_string(&err).unwrap_or_default();
        // Whole once `/metrics` follows it: stderr is unbuffered, and the line may come in
        // pieces (a loaded machine read `127.0.0.1:4` of a longer port).
        match said
            .split("http://")
            .nth(1)
            .and_then(|r| r.split_once("/metrics"))
            .map(|(a, _)| a)
        {
            Some(a) => {
                addr = a.to_owned();
                true
            }
            None => false,
        }
    });
    let holder = hold(&url, "served", dir.path(), &[], Some(0));
    let fence: f64 = std::fs::read_to_string(path(dir.path(), "served.ready"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let waiter = Running::start(fencelock(&["run", "--url", &url, "served", "--", "true"]));
    let mut text = String::new();
    wait_until(LIMIT, "held with a waiter, served", || {
        text = get(&addr, "/metrics").1;
        sample(&text, "fencelock_lock_held", &[("lock", "served")]) == Some(1.0)
            && sample(&text, "fencelock_lock_waiters", &[("lock", "served")]) == Some(1.0)
    });
    assert_eq!(
        sample(&text, "fencelock_lock_fence", &[("lock", "served")]),
        Some(fence),
        "{text}"
    );
    let left = sample(
        &text,
        "fencelock_lock_lease_remaining_seconds",
        &[("lock", "served")],
    )
    .unwrap();
    assert!(left > 0.0 && left <= 30.0, "{text}");
    assert_eq!(
        sample(&text, "fencelock_lock_held", &[("lock", "idle")]),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "fencelock_watch_up", &[]),
        Some(1.0),
        "{text}"
    );
    let mut names = typed(&text);
    names.sort();
    let mut expected = documented("`fencelock watch --prometheus`");
    expected.sort();
    assert_eq!(
        names, expected,
        "what watch serves and docs/observability.md's table"
    );
    assert!(get(&addr, "/other").0.contains("404"));
    holder.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = holder.finish();
    let _ = waiter.finish();

    // Redis gone: watch goes on, and says it cannot read.
    server.kill().unwrap();
    wait_until(LIMIT, "up 0 while Redis is down", || {
        sample(&get(&addr, "/metrics").1, "fencelock_watch_up", &[]) == Some(0.0)
    });
    watch.signal(nix::sys::signal::Signal::SIGTERM);
    let finished = watch.finish();
    assert_eq!(finished.code, Some(0), "{}", finished.explain());
}

#[test]
fn the_dashboard_asks_only_for_documented_series() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/fencelock.json"
    );
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard")).expect("JSON");
    let names = documented("The instruments");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 6, "{panels:#?}");
    for panel in panels {
        let expr = panel["targets"][0]["expr"].as_str().expect("an expression");
        let used: Vec<&str> = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("fencelock_"))
            .collect();
        assert!(!used.is_empty(), "{expr}");
        for name in used {
            let name = name.strip_suffix("_bucket").unwrap_or(name);
            assert!(
                names.iter().any(|n| n == name),
                "{name} ({expr}) is not documented"
            );
        }
    }
}

#[test]
fn the_table_is_the_cores_list_of_instruments() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/observability.md"
    ))
    .expect("docs/observability.md");
    let section = docs
        .split("\n## ")
        .find(|s| s.starts_with("The instruments"))
        .expect("the section");
    let rows: Vec<Vec<String>> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.split('|').map(|c| c.trim().to_owned()).collect())
        .collect();
    let core: Vec<Vec<String>> = fencelock::metrics::INSTRUMENTS
        .iter()
        .map(|i| {
            vec![
                format!("`{}`", i.name),
                i.kind.as_str().to_owned(),
                if i.unit.is_empty() {
                    "-".to_owned()
                } else {
                    i.unit.to_owned()
                },
                i.labels.join(", "),
            ]
        })
        .collect();
    let documented: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.get(1..5).map(<[String]>::to_vec).unwrap_or_default())
        .collect();
    assert_eq!(
        documented, core,
        "docs/observability.md's table and INSTRUMENTS"
    );
}

/// `fencelock run` SIGKILLed while its command runs: the file it wrote at the start is there,
/// whole (written to a temporary file and renamed: never half a file where the collector
/// reads), and no `*.prom` but it.
#[test]
fn a_run_killed_midway_leaves_its_last_whole_metrics_file() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let prom = path(dir.path(), "killed.prom");
    let running = hold(
        &url,
        "killed",
        dir.path(),
        &["--metrics-file", prom.to_str().unwrap()],
        Some(0),
    );
    running.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = running.finish();
    let text = std::fs::read_to_string(&prom).expect("the file written at the start");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        assert!(value.parse::<f64>().is_ok(), "{line:?} in\n{text}");
    }
    let proms: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".prom"))
        .collect();
    assert_eq!(proms, vec!["killed.prom".to_owned()]);
}
