//! The smoke mode for fencelock and the raw baseline on W1–W3 and a small W5, and for
//! fencelock's lock family (W6): everything runs and the output is sane. No timing assertions:
//! the machine may be busy.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::time::Duration;

use fencelock_bench::{BenchOptions, Library, W6Report, Workload};

/// These tests start their own redis-server: without one they cannot run, and must not pass.
fn require_redis_server() {
    assert!(
        fencelock_testkit::redis_server_available(),
        "redis-server not found (in /usr/bin or PATH): these tests need it; install it \
         (Debian/Ubuntu: `apt-get install redis-server`)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_run_of_fencelock_and_raw() {
    require_redis_server();
    let opts = BenchOptions {
        libraries: vec![Library::Fencelock, Library::Raw, Library::RawFenced],
        workloads: vec![Workload::W1, Workload::W2, Workload::W3, Workload::W5],
        w5_locks: 200,
        w5_hold: Duration::from_millis(1500),
        ..BenchOptions::smoke()
    };
    let report = fencelock_bench::run(opts).await.unwrap();

    for row in &report.w1 {
        assert!(row.error.is_none(), "W1 {}: {:?}", row.library, row.error);
        assert!(row.cycles > 0 && row.cycles_per_s > 0.0, "W1 {row:?}");
        let p50 = row.p50_us.unwrap();
        assert!(p50 > 0.0 && p50 <= row.p99_us.unwrap(), "W1 {row:?}");
        // Two round trips per cycle for both (acquire, release).
        let reads = row.reads_per_cycle.unwrap();
        assert!((1.5..3.0).contains(&reads), "W1 {row:?}");
    }
    for row in &report.w2 {
        assert!(row.error.is_none(), "W2 {}: {:?}", row.library, row.error);
        assert!(row.cycles > 0 && row.min_task_cycles > 0, "W2 {row:?}");
    }
    for row in &report.w3 {
        assert!(row.error.is_none(), "W3 {}: {:?}", row.library, row.error);
        assert!(row.acquisitions > 0, "W3 {row:?}");
        assert_eq!(row.violations, 0, "W3 {row:?}");
        assert_eq!(row.lost_updates, 0, "W3 {row:?}");
        assert!(row.max_grants >= row.min_grants, "W3 {row:?}");
        let free = row.free_while_waiting_percent.unwrap();
        assert!((0.0..=100.0).contains(&free), "W3 {row:?}");
        assert!(
            row.wait_p50_us.unwrap() <= row.wait_p99_us.unwrap(),
            "W3 {row:?}"
        );
        assert!(row.self_reacquisitions <= row.acquisitions, "W3 {row:?}");
    }
    for row in &report.w5 {
        assert!(row.error.is_none(), "W5 {}: {:?}", row.library, row.error);
        assert_eq!(row.still_held, row.locks, "W5 {row:?}");
    }
    let mut w1_libs: Vec<&str> = report.w1.iter().map(|r| r.library.as_str()).collect();
    w1_libs.sort_unstable();
    assert_eq!(w1_libs, ["fencelock", "raw", "raw-fenced"]);
    assert_eq!(report.w3.len(), 3);
    // raw-fenced renews as raw does: no W5 row of its own.
    assert_eq!(report.w5.len(), 2);
    assert!(report.w4.is_empty());
    let raw = report.w1.iter().find(|r| r.library == "raw").unwrap();
    assert_eq!(raw.ratio_to_raw, Some(1.0));

    // The outputs render and round-trip.
    let md = report.to_markdown();
    for heading in [
        "### W1",
        "### W2",
        "### W3",
        "### W5",
        "client and server share",
    ] {
        assert!(md.contains(heading), "{heading} missing from\n{md}");
    }
    let json = report.to_json().unwrap();
    let back = fencelock_bench::Report::from_json(&json).unwrap();
    assert_eq!(back.w3.len(), report.w3.len());
    assert!(report.to_svg().starts_with("<svg"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_run_of_the_lock_family() {
    require_redis_server();
    let opts = BenchOptions {
        libraries: vec![Library::Fencelock],
        workloads: vec![Workload::W6],
        ..BenchOptions::smoke()
    };
    let report = fencelock_bench::run(opts).await.unwrap();
    let w6 = &report.w6;
    assert!(w6.error.is_none(), "W6: {:?}", w6.error);

    assert_sane_uncontended(w6);
    assert_sane_contended(w6);
    let fair = w6.contended.iter().find(|r| r.kind == "fair").unwrap();
    assert!(fair.near_ties.is_some(), "W6 {fair:?}");
    for target in ["W6: every kind keeps its invariant", "W6: the fair lock"] {
        let check = report
            .targets
            .iter()
            .find(|t| t.target.starts_with(target))
            .unwrap_or_else(|| panic!("{target} missing from {:?}", report.targets));
        assert!(check.met.is_some(), "{check:?}");
    }
    assert!(report.w1.is_empty() && report.w3.is_empty());

    let md = report.to_markdown();
    for heading in [
        "### W6 — the lock family, uncontended",
        "### W6 — the lock family, contended",
        "| fair |",
        "| scripts per grant |",
        "| fair | 16 workers on 2 clients |",
    ] {
        assert!(md.contains(heading), "{heading} missing from\n{md}");
    }
    let back = fencelock_bench::Report::from_json(&report.to_json().unwrap()).unwrap();
    assert_eq!(back.w6.contended.len(), w6.contended.len());
    assert_eq!(back.w6.uncontended.len(), w6.uncontended.len());
}

/// W6 uncontended: every kind ran, with sane counts, round trips and ratios.
fn assert_sane_uncontended(w6: &W6Report) {
    let kinds: Vec<&str> = w6.uncontended.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "plain",
            "reentrant",
            "reentrant: re-entry only",
            "read",
            "write",
            "semaphore (N=4)",
            "fair"
        ]
    );
    for row in &w6.uncontended {
        assert!(row.error.is_none(), "W6 {}: {:?}", row.kind, row.error);
        assert!(row.cycles > 0 && row.cycles_per_s > 0.0, "W6 {row:?}");
        assert_eq!(row.failed_checks, 0, "W6 {row:?}");
        let p50 = row.p50_us.unwrap();
        assert!(p50 > 0.0 && p50 <= row.p99_us.unwrap(), "W6 {row:?}");
        // One round trip per acquire and per release: 4 for the reentrant cycle (acquire,
        // re-enter, 2 releases), 2 for every other.
        let reads = row.reads_per_cycle.unwrap();
        let expected = if row.kind == "reentrant" {
            3.0..6.0
        } else {
            1.5..3.0
        };
        assert!(expected.contains(&reads), "W6 {row:?}");
        assert!(
            row.command_mix_per_cycle.contains_key("evalsha"),
            "W6 {row:?}"
        );
        assert!(row.ratio_to_plain.is_some(), "W6 {row:?}");
    }
    assert_eq!(w6.uncontended[0].ratio_to_plain, Some(1.0));
}

/// W6 contended: every kind and crowd ran, keeping its invariants.
fn assert_sane_contended(w6: &W6Report) {
    let kinds: Vec<&str> = w6.contended.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "plain",
            "reentrant (each grant re-entered once)",
            "write (writers only)",
            "fair",
            "semaphore (N=2)",
            "read-write: the writer",
            "read-write: readers",
            "plain",
            "fair"
        ]
    );
    let contenders: Vec<&str> = w6.contended.iter().map(|r| r.contenders.as_str()).collect();
    assert_eq!(contenders[0], "4 workers on 2 clients");
    assert_eq!(contenders[3], "4 workers on 2 clients");
    assert_eq!(contenders[7..], ["16 workers on 2 clients"; 2]);
    for row in &w6.contended {
        assert!(row.error.is_none(), "W6 {}: {:?}", row.kind, row.error);
        assert!(row.acquisitions > 0, "W6 {row:?}");
        assert!(row.max_grants >= row.min_grants, "W6 {row:?}");
        // The invariants: never two exclusive holders, never more than N permits, never a
        // writer with readers or a reader with a writer; fences as promised.
        assert_eq!(row.violations, 0, "W6 {row:?}");
        assert_eq!(row.fence_errors, 0, "W6 {row:?}");
        // Every grant in the window ran its acquire script in the window.
        let scripts = row.scripts_per_grant.unwrap();
        assert!(scripts >= 1.0, "W6 {row:?}");
        // Order is counted where it is defined (not asserted: it depends on timing).
        assert_eq!(
            row.out_of_order.is_some(),
            !row.kind.starts_with("read-write"),
            "W6 {row:?}"
        );
    }
    assert_eq!(w6.contended[0].ratio_to_plain, Some(1.0));
    // The 16-worker rows compare to the 16-worker plain lock.
    assert_eq!(w6.contended[7].ratio_to_plain, Some(1.0));
}

/// W4 for fencelock and the raw baseline: fencelock's row is measured over its own Redlock
/// client (`Client::redlock`), through the stopped instance too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_run_of_redlock() {
    require_redis_server();
    let opts = BenchOptions {
        libraries: vec![Library::Fencelock, Library::Raw],
        workloads: vec![Workload::W4],
        ..BenchOptions::smoke()
    };
    let report = fencelock_bench::run(opts).await.unwrap();
    let libs: Vec<&str> = report.w4.iter().map(|r| r.library.as_str()).collect();
    assert_eq!(libs, ["fencelock", "raw"]);
    for row in &report.w4 {
        assert!(row.error.is_none(), "W4 {}: {:?}", row.library, row.error);
        assert_eq!(row.instances, 5, "W4 {row:?}");
        for phase in [&row.healthy, &row.one_stopped] {
            assert!(phase.cycles > 0 && !phase.stalled, "W4 {row:?}");
        }
        assert!(row.ratio_to_raw.is_some(), "W4 {row:?}");
    }
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    let md = report.to_markdown();
    assert!(md.contains("### W4"), "W4 missing from\n{md}");
    assert!(!md.contains("### Notes"), "{md}");
}

/// A report written before W6 existed still reads (W6 empty).
#[test]
fn reports_without_w6_still_read() {
    let opts = BenchOptions::smoke();
    assert!(opts.workloads.contains(&Workload::W6));
    let json = r#"{"machine":{"cores":2,"cpu_model":null,"redis_version":"7","load_before":null,
        "load_after":null,"sharing":"","os":""},"smoke":true,"parameters":[],"w1":[],"w2":[],
        "w3":[],"w4":[],"w5":[],"targets":[],"notes":[]}"#;
    let report = fencelock_bench::Report::from_json(json).unwrap();
    assert!(report.w6.is_empty());
    assert!(!report.to_markdown().contains("### W6"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_run_of_fenced_writes() {
    require_redis_server();
    let opts = BenchOptions {
        libraries: vec![Library::Fencelock],
        workloads: vec![Workload::W8],
        ..BenchOptions::smoke()
    };
    let report = fencelock_bench::run(opts).await.unwrap();
    let writers: Vec<&str> = report.w8.iter().map(|r| r.writer.as_str()).collect();
    assert_eq!(writers.len(), 3, "{writers:?}");
    for row in &report.w8 {
        assert!(row.error.is_none(), "W8 {}: {:?}", row.writer, row.error);
        assert!(
            row.sequential_per_s.unwrap() > 0.0 && row.concurrent_per_s.unwrap() > 0.0,
            "W8 {row:?}"
        );
    }
    assert_eq!(report.w8[0].sequential_ratio_to_set, Some(1.0));
    let md = report.to_markdown();
    assert!(
        md.contains("### W8") && md.contains("FencedStore::apply"),
        "{md}"
    );
    let back = fencelock_bench::Report::from_json(&report.to_json().unwrap()).unwrap();
    assert_eq!(back.w8.len(), 3);
}
