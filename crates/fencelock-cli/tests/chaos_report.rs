//! `--report FILE.html` end to end, in a real browser: a short chaos run writes its page,
//! headless Chromium loads it (`--dump-dom`: the document as the browser built it, after its
//! scripts), and the page has a grant bar per grant of the history, a shaded span per fault,
//! and a violation mark per violation — none on a clean run, some on a run with a deliberate bug
//! (`--mutate never-lost`); `chaos-check HISTORY --report` draws the same page again.
//!
//! Chromium is required: without it the test fails, saying how to install it
//! (`scripts/ensure-chromium`). `FENCELOCK_TEST_CHROMIUM` names another binary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use common::{Finished, Running, fencelock, scratch};

/// One run at a time.
static TURN: Mutex<()> = Mutex::new(());

/// The browser: `FENCELOCK_TEST_CHROMIUM`, or `chromium` (Debian), `chromium-browser` or
/// `google-chrome` on the PATH. Missing, the test fails: it never passes without having run.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("FENCELOCK_TEST_CHROMIUM") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "FENCELOCK_TEST_CHROMIUM={} is not a file",
            path.display()
        );
        return path;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "Chromium is not installed, and the report's test needs a real browser: run \
         scripts/ensure-chromium (Debian: apt-get install -y chromium), or set \
         FENCELOCK_TEST_CHROMIUM to a Chromium or Chrome binary"
    );
}

/// The page's DOM as headless Chromium built it (a fresh profile, no network services).
fn dump_dom(page: &Path) -> String {
    let profile = scratch();
    let mut command = Command::new(chromium());
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let done = Running::start(command).finish_within(Duration::from_secs(90));
    assert_eq!(done.code, Some(0), "chromium failed\n{}", done.explain());
    assert!(
        done.stdout.contains("</html>"),
        "chromium dumped no document\n{}",
        done.explain()
    );
    done.stdout
}

fn chaos(args: &[&str], history: &Path, report: &Path) -> Finished {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let history = history.to_string_lossy().into_owned();
    let report = report.to_string_lossy().into_owned();
    let mut all = vec!["chaos", "--history", &history, "--report", &report];
    all.extend_from_slice(args);
    Running::start(fencelock(&all)).finish_within(Duration::from_secs(180))
}

/// The history's lines whose `op` is `op` (and, given, whose `phase` is `phase`).
fn lines(history: &Path, op: &str, phase: Option<&str>) -> usize {
    let text = std::fs::read_to_string(history).expect("the history");
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a history line"))
        .filter(|v| v["op"] == op && phase.is_none_or(|p| v["phase"] == p))
        .count()
}

/// The violations the checker printed: the sum of the counts on its `VIOLATIONS` line.
fn violations(stdout: &str) -> usize {
    let Some(line) = stdout.lines().find(|l| l.starts_with("VIOLATIONS")) else {
        assert!(stdout.contains("violations               0"), "{stdout}");
        return 0;
    };
    line.trim_start_matches("VIOLATIONS")
        .split(',')
        .filter_map(|kind| kind.split_whitespace().last()?.parse::<usize>().ok())
        .sum()
}

fn count(dom: &str, needle: &str) -> usize {
    dom.matches(needle).count()
}

/// What every page must show, as the browser built it: a grant bar per grant, a shaded span
/// per fault, a violation mark (and a listed violation) per violation.
fn check_page(dom: &str, history: &Path, violations: usize) {
    let grants = lines(history, "granted", None);
    let faults = lines(history, "fault", Some("start"));
    assert!(grants > 20, "too few grants to show anything: {grants}");
    assert!(faults > 0, "the run injected no fault");
    assert_eq!(count(dom, r#"class="grant""#), grants, "grant bars");
    assert_eq!(count(dom, r#"class="fault""#), faults, "shaded faults");
    assert_eq!(
        count(dom, r#"class="violation""#),
        violations,
        "violation marks"
    );
    assert_eq!(
        count(dom, r#"class="violation-item""#),
        violations,
        "listed violations"
    );
    assert_eq!(
        count(dom, r#"class="latency-point""#),
        grants + lines(history, "not_granted", None),
        "latency points"
    );
    // Self-contained: nothing to load.
    for outside in ["src=", "href=\"http", "url(", "@import"] {
        assert!(!dom.contains(outside), "the page refers to {outside}");
    }
}

#[test]
fn a_clean_run_draws_every_grant_and_fault_and_no_violation() {
    let dir = scratch();
    let history = dir.path().join("history.jsonl");
    let report = dir.path().join("report.html");
    let run = chaos(
        &[
            "--duration",
            "12s",
            "--fault-interval",
            "1500ms",
            "--faults",
            "pause-server,client-pause,latency,pause-worker,kill-worker",
        ],
        &history,
        &report,
    );
    assert_eq!(run.code, Some(0), "{}", run.explain());
    assert!(run.stdout.contains("report: "), "{}", run.explain());
    let dom = dump_dom(&report);
    check_page(&dom, &history, 0);
    assert!(dom.contains(r#"id="verdict">no violation<"#));

    // `chaos-check --report` draws the same history again.
    let again = dir.path().join("again.html");
    let file = history.to_string_lossy().into_owned();
    let out = again.to_string_lossy().into_owned();
    let check = Running::start(fencelock(&["chaos-check", &file, "--report", &out]))
        .finish_within(Duration::from_secs(30));
    assert_eq!(check.code, Some(0), "{}", check.explain());
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        std::fs::read_to_string(&report).unwrap()
    );
}

#[test]
fn a_run_with_a_deliberate_bug_marks_its_violations() {
    let dir = scratch();
    let history = dir.path().join("history.jsonl");
    let report = dir.path().join("report.html");
    // Fifteen or so paused workers: never-lost shows at nearly every pause (a 30 s run had
    // hundreds of violations), so a short run is enough here (tests/chaos.rs runs it longer).
    let run = chaos(
        &[
            "--duration",
            "12s",
            "--faults",
            "pause-worker",
            "--fault-interval",
            "700ms",
            "--mutate",
            "never-lost",
        ],
        &history,
        &report,
    );
    assert_eq!(
        run.code,
        Some(3),
        "never-lost went unnoticed\n{}",
        run.explain()
    );
    let found = violations(&run.stdout);
    assert!(found > 0, "{}", run.explain());
    let dom = dump_dom(&report);
    check_page(&dom, &history, found);
    assert!(dom.contains(r#"id="violation-0""#));
    assert!(dom.contains(r#"id="violation-item-0""#));
    assert!(
        dom.contains("data-violation="),
        "no grant bar marked as involved"
    );
}
