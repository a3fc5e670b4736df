//! Chaos histories checked against the model (`fencelock_model::trace`): a clean run's history
//! is explained, and each violation planted in it is rejected at the event planted. The runs
//! themselves are `chaos.rs`'s.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::path::Path;

use fencelock_model::trace::{self, Explained, Unexplained};
use serde_json::{Value, json};

/// The history's lines, parsed.
fn lines(history: &Path) -> Vec<Value> {
    std::fs::read_to_string(history)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check(lines: &[Value]) -> Result<Explained, Unexplained> {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let trace = trace::read_chaos_history(text.as_bytes()).unwrap();
    trace::check(&trace)
}

/// The model explains the history at `history`; answers what it placed.
pub fn explained(history: &Path) -> Explained {
    let explained = check(&lines(history))
        .unwrap_or_else(|e| panic!("the model does not explain {}: {e}", history.display()));
    assert!(explained.operations > 100, "{explained:?}");
    explained
}

/// The model does not explain the history at `history`; answers the first event it names.
pub fn rejected(history: &Path) -> Unexplained {
    match check(&lines(history)) {
        Ok(explained) => panic!(
            "the model explains {}, which has a violation ({explained:?})",
            history.display()
        ),
        Err(e) => e,
    }
}

fn op(line: &Value) -> &str {
    line["op"].as_str().unwrap_or_default()
}

fn is(line: &Value, what: &str, lock: &str) -> bool {
    op(line) == what && line["lock"] == lock
}

/// A grant (index) whose section has no `lost` before its release, with no fault of any kind
/// before it, and whose lock is next granted to another worker; with its release's index.
fn quiet_section(lines: &[Value]) -> (usize, usize) {
    let first_fault = lines
        .iter()
        .position(|l| op(l) == "fault")
        .unwrap_or(lines.len());
    for g in 1..first_fault {
        if op(&lines[g]) != "granted" {
            continue;
        }
        let (worker, fence) = (&lines[g]["worker"], &lines[g]["fence"]);
        let mine = |l: &Value| l["worker"] == *worker && l["fence"] == *fence;
        let Some(r) =
            (g + 1..first_fault).find(|i| op(&lines[*i]) == "release" && mine(&lines[*i]))
        else {
            continue;
        };
        let told = (g..r).any(|i| op(&lines[i]) == "lost" && mine(&lines[i]));
        let next = (r..lines.len()).find(|i| {
            is(
                &lines[*i],
                "granted",
                lines[g]["lock"].as_str().unwrap_or_default(),
            )
        });
        if !told && next.is_some_and(|n| lines[n]["worker"] != *worker) {
            return (g, r);
        }
    }
    panic!("no grant released before the first fault, untold")
}

/// A holder told it lost its lease (a `lost` line with the lease's deadline) after another
/// worker was granted its lock within its critical section: the index of that grant.
pub fn told_holder_overtaken(lines: &[Value]) -> Option<usize> {
    (0..lines.len()).find_map(|lost| {
        let told = &lines[lost];
        if op(told) != "lost" || told["deadline_ns"].as_u64().is_none() {
            return None;
        }
        let lock = told["lock"].as_str().unwrap_or_default();
        let mine = |l: &Value| l["worker"] == told["worker"] && l["fence"] == told["fence"];
        let granted = (0..lost)
            .rev()
            .find(|i| is(&lines[*i], "granted", lock) && mine(&lines[*i]))?;
        (granted..lost)
            .find(|i| is(&lines[*i], "granted", lock) && lines[*i]["worker"] != told["worker"])
    })
}

/// In `history`, a told holder overtaken (`told_holder_overtaken`) with its deadline moved just
/// past the grant that overtook it is rejected at that grant: a holder must know it lost the
/// lock before anyone else can have it.
pub fn a_deadline_past_the_next_grant_is_rejected(history: &Path) {
    let mut lines = lines(history);
    let next = told_holder_overtaken(&lines).expect("a told holder overtaken");
    let lost = (next..lines.len())
        .find(|i| op(&lines[*i]) == "lost")
        .expect("its lost line");
    let late = lines[next]["mono_ns"].as_u64().unwrap() + 1;
    lines[lost]["deadline_ns"] = late.into();
    let e = check(&lines).expect_err("a deadline past the next grant");
    assert_eq!(e.line, next + 1, "{e}");
    assert!(e.why.contains("told it was lost but not yet past"), "{e}");
}

/// Plants violations in the clean history at `history`, one at a time, and checks that each is
/// rejected at the event planted.
pub fn plants_are_rejected(history: &Path) {
    let clean = lines(history);
    let (g, r) = quiet_section(&clean);
    let holder = clean[g].clone();
    let lock = holder["lock"].as_str().unwrap().to_owned();
    let at = holder["mono_ns"].as_u64().unwrap();

    // A second holder granted within the section (a fence above it, nothing else changed).
    let mut two = clean.clone();
    let intruder = |op: &str, dt: u64, fence: Option<u64>| {
        let mut l = json!({"mono_ns": at + dt, "wall_ms": 0, "worker": 99, "lock": lock, "op": op});
        if let Some(f) = fence {
            l["fence"] = f.into();
        }
        l
    };
    let fence = holder["fence"].as_u64().unwrap();
    two.insert(g + 1, intruder("acquire", 1, None));
    two.insert(g + 2, intruder("granted", 2, Some(fence + 1)));
    let e = check(&two).expect_err("a second holder within a section");
    assert_eq!(e.line, g + 3, "{e}");
    assert!(
        e.why.contains("worker 99") && e.why.contains("held it"),
        "{e}"
    );

    // A grant whose fence is not above the one before it (the next grant of the lock takes
    // the section's fence).
    let mut back = clean.clone();
    let next = (r..back.len())
        .find(|i| is(&back[*i], "granted", &lock))
        .expect("a later grant");
    back[next]["fence"] = fence.into();
    let e = check(&back).expect_err("a fence repeated");
    assert_eq!(e.line, next + 1, "{e}");
    assert!(e.why.contains("not above"), "{e}");

    // The section's release never happened: the next grant to another worker is unexplained.
    let mut kept = clean.clone();
    let released = (r..kept.len())
        .find(|i| op(&kept[*i]) == "released" && kept[*i]["worker"] == holder["worker"])
        .expect("its release's end");
    kept.remove(released);
    kept.remove(r);
    let other = (r..kept.len())
        .find(|i| is(&kept[*i], "granted", &lock) && kept[*i]["worker"] != holder["worker"])
        .expect("a grant to another worker");
    let e = check(&kept).expect_err("a hold never released");
    assert_eq!(e.line, other + 1, "{e}");

    // The store's log with two accepted writes of different fences in the wrong order.
    let mut swapped = clean;
    let log = swapped
        .iter()
        .position(|l| is(l, "store_log", &lock))
        .expect("the store's log");
    let entries = swapped[log]["log"].as_array_mut().unwrap();
    let k = (1..entries.len())
        .find(|k| entries[*k][0] != entries[*k - 1][0])
        .expect("two fences in the log");
    entries.swap(k - 1, k);
    let e = check(&swapped).expect_err("the store's log out of order");
    assert!(e.why.contains("the store's log has fence"), "{e}");
}
