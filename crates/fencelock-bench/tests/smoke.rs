//! The smoke mode for fencelock and the raw baseline on W1–W3 and a small W5: everything runs
//! and the output is sane. No timing assertions: the machine may be busy.

use std::time::Duration;

use fencelock_bench::{BenchOptions, Library, Workload};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_run_of_fencelock_and_raw() {
    if !fencelock_testkit::redis_server_available() {
        eprintln!("skipped: no redis-server (install Debian's redis-server package)");
        return;
    }
    let opts = BenchOptions {
        libraries: vec![Library::Fencelock, Library::Raw],
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
    }
    for row in &report.w5 {
        assert!(row.error.is_none(), "W5 {}: {:?}", row.library, row.error);
        assert_eq!(row.still_held, row.locks, "W5 {row:?}");
    }
    let mut w1_libs: Vec<&str> = report.w1.iter().map(|r| r.library.as_str()).collect();
    w1_libs.sort_unstable();
    assert_eq!(w1_libs, ["fencelock", "raw"]);
    assert_eq!(report.w3.len(), 2);
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
