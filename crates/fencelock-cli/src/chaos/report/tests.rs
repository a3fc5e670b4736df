//! The report of a small history written by hand: one element per grant, fault, loss, refusal
//! and violation, and text escaped.

use super::page;
use crate::chaos::check::{Bounds, check};
use crate::chaos::history::{Entry, Phase, What};

fn entry(ms: u64, worker: Option<u32>, lock: Option<&str>, what: What) -> Entry {
    Entry {
        mono_ns: 1_000_000_000 + ms * 1_000_000,
        wall_ms: ms,
        worker,
        lock: lock.map(str::to_owned),
        what,
    }
}

fn run(locks: &[&str]) -> Entry {
    entry(
        0,
        None,
        None,
        What::Run {
            topology: "single".into(),
            kind: "lock".into(),
            permits: 1,
            workers: 2,
            locks: locks.iter().map(|l| (*l).to_owned()).collect(),
            ttl_ms: 1_000,
            seed: 7,
            faults: vec!["pause-worker".into()],
            mutations: vec![],
        },
    )
}

fn fault(ms: u64, phase: Phase) -> Entry {
    entry(
        ms,
        None,
        None,
        What::Fault {
            kind: "pause-worker".into(),
            target: "worker 1".into(),
            phase,
        },
    )
}

/// Worker `w` holds `lock` from `from` to `to` (ms) with `fence`.
fn hold(w: u32, lock: &str, from: u64, to: u64, fence: u64) -> Vec<Entry> {
    let at = |ms, what| entry(ms, Some(w), Some(lock), what);
    vec![
        at(from - 1, What::Acquire),
        at(from, What::Granted { fence }),
        at(to, What::Release { fence }),
        at(
            to + 1,
            What::Released {
                fence,
                held: Some(true),
                error: None,
            },
        ),
    ]
}

fn count(page: &str, needle: &str) -> usize {
    page.matches(needle).count()
}

#[test]
fn every_grant_fault_and_mark_is_drawn_once() {
    let lock = "a<b>&\"c\"";
    let mut entries = vec![run(&[lock]), fault(5, Phase::Start)];
    entries.extend(hold(1, lock, 10, 100, 1));
    entries.extend(hold(2, lock, 200, 300, 2));
    entries.push(entry(
        250,
        Some(2),
        Some(lock),
        What::Write {
            fence: 2,
            started_ns: 0,
            accepted: Some(false),
            store_fence: Some(3),
            error: None,
        },
    ));
    entries.push(entry(
        260,
        Some(2),
        Some(lock),
        What::Lost {
            fence: 2,
            reason: "lease <expired>".into(),
            deadline_ns: None,
        },
    ));
    entries.push(fault(400, Phase::End));
    let verdict = check(&entries, &Bounds { resume_ms: 15_000 });
    let page = page(&entries, &verdict);
    assert_eq!(count(&page, r#"class="grant""#), 2, "{page}");
    assert_eq!(count(&page, r#"class="fault""#), 1);
    assert_eq!(count(&page, r#"class="loss""#), 1);
    assert_eq!(count(&page, r#"class="refused""#), 1);
    assert_eq!(count(&page, r#"class="wait""#), 2);
    assert_eq!(count(&page, r#"class="latency-point""#), 2);
    assert_eq!(count(&page, r#"class="violation""#), 0);
    assert!(page.contains("a&lt;b&gt;&amp;&quot;c&quot;"));
    assert!(page.contains("lease &lt;expired&gt;"));
    assert!(!page.contains("a<b>"));
    assert!(!page.contains("http://") && !page.contains("https://"));
}

#[test]
fn an_overlap_is_marked_on_the_timeline_and_listed_with_its_lines() {
    let mut entries = vec![run(&["x"])];
    entries.extend(hold(1, "x", 10, 100, 1));
    entries.extend(hold(2, "x", 50, 150, 2));
    entries.sort_by_key(|e| e.mono_ns);
    let verdict = check(&entries, &Bounds { resume_ms: 15_000 });
    assert_eq!(verdict.violations.len(), 1, "{:?}", verdict.violations);
    let page = page(&entries, &verdict);
    assert_eq!(count(&page, r#"class="violation""#), 1);
    assert!(page.contains(r#"id="violation-0""#));
    assert!(page.contains(r#"id="violation-item-0""#));
    assert!(page.contains("silent overlap"));
    // The history lines are listed: the grant of worker 2 is line 5.
    assert!(page.contains(r#"      5  {&quot;mono_ns&quot;"#), "{page}");
    assert!(page.contains(r#"data-violation="0""#));
}
