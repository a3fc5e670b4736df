//! The checker against small hand-written histories.

use super::{Bounds, Verdict, check};
use crate::chaos::history::{Entry, Phase, What};

fn at(ms: u64, worker: Option<u32>, what: What) -> Entry {
    Entry {
        mono_ns: ms * 1_000_000,
        wall_ms: ms,
        worker,
        lock: Some("a".into()),
        what,
    }
}

fn cycle(w: u32, start: u64, fence: u64, end: u64) -> Vec<Entry> {
    vec![
        at(start, Some(w), What::Acquire),
        at(start + 1, Some(w), What::Granted { fence }),
        at(
            start + 2,
            Some(w),
            What::Write {
                fence,
                started_ns: (start + 1) * 1_000_000,
                accepted: Some(true),
                store_fence: Some(fence),
                error: None,
            },
        ),
        at(end, Some(w), What::Release { fence }),
    ]
}

fn bounds() -> Bounds {
    Bounds { resume_ms: 10_000 }
}

fn kinds(v: &Verdict) -> Vec<&'static str> {
    v.violations.iter().map(|v| v.kind).collect()
}

#[test]
fn a_clean_history_passes() {
    let mut h = cycle(1, 0, 1, 10);
    h.extend(cycle(2, 5, 2, 20)); // requested during 1's hold, granted after it
    h[4..].iter_mut().for_each(|e| e.mono_ns += 6_000_000);
    h.push(at(
        30,
        None,
        What::StoreLog {
            log: vec![(1, 1), (2, 2)],
        },
    ));
    let v = check(&h, &bounds());
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    assert_eq!(v.grants, 2);
}

#[test]
fn availability_is_the_held_share_of_the_wanted_time() {
    // Worker 1 waits 0..1 ms and holds 1..10 ms; worker 2 waits 5..20 ms: of the 16 ms
    // someone waited, the lock was held for 5.
    let mut h = cycle(1, 0, 1, 10);
    h.push(at(5, Some(2), What::Acquire));
    h.push(at(20, Some(2), What::Granted { fence: 2 }));
    h.push(at(25, Some(2), What::Release { fence: 2 }));
    h.sort_by_key(|e| e.mono_ns);
    let v = check(&h, &bounds());
    let share = v.held_while_wanted["a"];
    assert!((share - 5.0 / 16.0).abs() < 1e-9, "{share}");
}

#[test]
fn a_fence_that_goes_back_is_found() {
    let mut h = cycle(1, 0, 5, 10);
    h.extend(cycle(2, 20, 4, 30));
    assert_eq!(kinds(&check(&h, &bounds())), ["fence order"]);
}

#[test]
fn a_silent_overlap_is_found_and_a_told_one_is_not() {
    let mut h = cycle(1, 0, 1, 50);
    h.extend(cycle(2, 10, 2, 60));
    assert_eq!(kinds(&check(&h, &bounds())), ["silent overlap"]);
    // Worker 1 was told before its release.
    h.push(at(
        49,
        Some(1),
        What::Lost {
            fence: 1,
            reason: "expired".into(),
            deadline_ns: None,
        },
    ));
    h.sort_by_key(|e| e.mono_ns);
    let v = check(&h, &bounds());
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    assert_eq!(v.honest_overlaps, 1);
}

#[test]
fn an_overlap_only_the_store_caught_is_still_an_exclusion_violation() {
    let mut h = cycle(1, 0, 1, 50);
    h.extend(cycle(2, 10, 2, 60));
    h.push(at(
        40,
        Some(1),
        What::Write {
            fence: 1,
            started_ns: 0,
            accepted: Some(false),
            store_fence: Some(2),
            error: None,
        },
    ));
    h.sort_by_key(|e| e.mono_ns);
    assert_eq!(kinds(&check(&h, &bounds())), ["exclusion"]);
}

#[test]
fn a_semaphore_allows_its_permits_and_no_more() {
    let run = at(
        0,
        None,
        What::Run {
            topology: "single".into(),
            kind: "semaphore".into(),
            permits: 2,
            workers: 3,
            locks: vec!["a".into()],
            ttl_ms: 1000,
            seed: 1,
            faults: vec![],
            mutations: vec![],
        },
    );
    let mut h = vec![run.clone()];
    h.extend(cycle(1, 1, 1, 50));
    h.extend(cycle(2, 10, 2, 60));
    h.sort_by_key(|e| e.mono_ns);
    let v = check(&h, &bounds());
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    h.extend(cycle(3, 20, 3, 70));
    h.sort_by_key(|e| e.mono_ns);
    assert_eq!(kinds(&check(&h, &bounds())), ["silent overlap"]);
}

#[test]
fn a_request_never_answered_is_found() {
    let mut h = cycle(1, 0, 1, 10);
    h.push(at(20, Some(2), What::Acquire));
    h.extend(cycle(1, 30_000, 2, 30_010));
    assert_eq!(kinds(&check(&h, &bounds())), ["waits forever"]);
}

#[test]
fn an_overlap_after_the_server_lost_its_data_is_counted_apart() {
    let mut h = cycle(1, 0, 1, 50);
    h.push(at(
        5,
        None,
        What::Fault {
            kind: "kill-server".into(),
            target: "redis".into(),
            phase: Phase::Start,
        },
    ));
    h.extend(cycle(2, 10, 2, 60));
    h.sort_by_key(|e| e.mono_ns);
    let v = check(&h, &bounds());
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    assert_eq!(v.data_loss_overlaps, 1);
}

/// Two untold holders, the second granted during a failover, in a run over `topology`.
fn overlap_in_a_failover(topology: &str) -> Verdict {
    let mut h = vec![at(
        0,
        None,
        What::Run {
            topology: topology.into(),
            kind: "lock".into(),
            permits: 1,
            workers: 2,
            locks: vec!["a".into()],
            ttl_ms: 1_000,
            seed: 1,
            faults: vec!["failover".into()],
            mutations: Vec::new(),
        },
    )];
    h.extend(cycle(1, 0, 1, 50));
    for (ms, phase) in [(5, Phase::Start), (30, Phase::End)] {
        h.push(at(
            ms,
            None,
            What::Fault {
                kind: "failover".into(),
                target: "the master".into(),
                phase,
            },
        ));
    }
    h.extend(cycle(2, 10, 2, 60));
    h.sort_by_key(|e| e.mono_ns);
    check(&h, &bounds())
}

#[test]
fn an_overlap_in_a_sentinel_failover_is_counted_apart_but_not_in_a_cluster_one() {
    let v = overlap_in_a_failover("sentinel");
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    assert_eq!(v.failover_overlaps, 1);
    // CLUSTER FAILOVER waits for the replica: a lost grant there is a bug.
    let v = overlap_in_a_failover("cluster");
    assert_eq!(kinds(&v), ["silent overlap"]);
    assert_eq!(v.failover_overlaps, 0);
}

#[test]
fn store_violations_are_found() {
    let mut h = cycle(1, 0, 2, 10);
    h.extend(cycle(2, 20, 3, 30));
    // The store's log went back, lost worker 2's write, and refused a newer fence.
    h.push(at(
        40,
        None,
        What::StoreLog {
            log: vec![(2, 1), (1, 9)],
        },
    ));
    h.push(at(
        41,
        Some(3),
        What::Write {
            fence: 7,
            started_ns: 0,
            accepted: Some(false),
            store_fence: Some(3),
            error: None,
        },
    ));
    let mut found = kinds(&check(&h, &bounds()));
    found.sort_unstable();
    assert_eq!(
        found,
        ["acknowledged write lost", "store order", "store refusal"]
    );
}

#[test]
fn no_grant_long_after_a_fault_is_a_liveness_violation() {
    let mut h = cycle(1, 0, 1, 10);
    h.push(at(
        20,
        None,
        What::Fault {
            kind: "pause-server".into(),
            target: "redis".into(),
            phase: Phase::Start,
        },
    ));
    h.push(at(
        30,
        None,
        What::Fault {
            kind: "pause-server".into(),
            target: "redis".into(),
            phase: Phase::End,
        },
    ));
    h.push(at(20_000, Some(2), What::Acquire));
    h.push(at(20_031, Some(2), What::Granted { fence: 2 }));
    let v = check(&h, &bounds());
    assert_eq!(kinds(&v), ["liveness"]);
    assert_eq!(v.worst_resume_ms, Some((20_001, "pause-server".into())));
}

/// A worker's lines can reach the run's history after the nemesis's: worker 1 released at
/// 10 ms and worker 2 was granted at 12 ms, but worker 1's release was still in its pipe when
/// the nemesis killed it (its line at 15 ms is written first).
#[test]
fn lines_that_reach_the_history_late_are_read_in_the_order_they_happened() {
    let kill = || {
        at(
            15,
            None,
            What::Fault {
                kind: "kill-worker".into(),
                target: "worker 1".into(),
                phase: Phase::Start,
            },
        )
    };
    let mut worker_1 = cycle(1, 0, 1, 10);
    let release = worker_1.pop().expect("a release");
    let mut h = worker_1;
    h.extend(cycle(2, 11, 2, 40));
    // The kill, then worker 2's grant (read late too), then worker 1's release.
    let grant_2 = h
        .iter()
        .position(|e| matches!(e.what, What::Granted { fence: 2 }));
    h.insert(grant_2.expect("worker 2's grant"), kill());
    h.push(release);
    let v = check(&h, &bounds());
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    assert_eq!(v.honest_overlaps, 0);
    // Killed while it held the lock, with worker 2 granted before the kill: that is an overlap.
    let mut h = cycle(1, 0, 1, 10);
    h.pop();
    h.extend(cycle(2, 11, 2, 40));
    h.push(kill());
    assert_eq!(kinds(&check(&h, &bounds())), ["silent overlap"]);
}
