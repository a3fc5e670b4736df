//! The run: the machine's description, then each selected workload in turn, its rows (or the
//! error of a contender that failed) into the report.

mod w5;

use crate::error::Result;
use crate::locker::Library;
use crate::options::{BenchOptions, Workload};
use crate::report::{
    LibraryRow, Machine, Report, W1Measured, W1Row, W2Measured, W2Row, W3Measured, W3Row,
    W4Measured, W4Row, W6Report,
};
use crate::{deployments, family, fenced_writes, redlock_w4, system, workloads};

pub use w5::run_w5_child;

/// Runs the selected workloads for the selected contenders and returns the report.
///
/// A contender that fails in one workload gets an error in that row; the run goes on. Errors
/// are returned only when the benchmark itself cannot run (no `redis-server`, bad options).
pub async fn run(opts: BenchOptions) -> Result<Report> {
    opts.validate()?;
    let mut report = Report {
        machine: machine().await?,
        smoke: opts.smoke,
        parameters: opts.parameters(),
        w1: Vec::new(),
        w2: Vec::new(),
        w3: Vec::new(),
        w4: Vec::new(),
        w5: Vec::new(),
        w6: W6Report::default(),
        w7: Vec::new(),
        w8: Vec::new(),
        w9: Vec::new(),
        targets: Vec::new(),
        notes: Vec::new(),
    };
    if !cfg!(feature = "peers") {
        report
            .notes
            .push("rslock and redlock are not built in (feature `peers` off)".into());
    }
    let has = |w: Workload| opts.workloads.contains(&w);
    // node-redlock runs in W4 only.
    let single_server: Vec<Library> = opts
        .libraries
        .iter()
        .copied()
        .filter(|lib| lib.single_server())
        .collect();
    if has(Workload::W1) {
        report.w1 = run_w1(&opts, &single_server).await;
    }
    if has(Workload::W2) {
        report.w2 = run_w2(&opts, &single_server).await;
    }
    if has(Workload::W3) {
        report.w3 = run_w3(&opts, &single_server).await;
    }
    if has(Workload::W4) {
        report.w4 = run_w4(&opts).await;
    }
    if has(Workload::W5) {
        report.w5 = w5::run_w5(&opts, &single_server).await;
        if opts.w5_child.is_none() {
            report.notes.push("W5 ran in this process: bytes per lock of a later contender can read low (the allocator reuses memory an earlier one freed)".into());
        }
    }
    if has(Workload::W6) {
        run_w6(&opts, &mut report).await;
    }
    if has(Workload::W7) {
        report.w7 = deployments::w7(
            opts.ttl,
            opts.w7_tasks,
            opts.w7_repetitions,
            opts.w7_duration,
        )
        .await;
    }
    if has(Workload::W9) {
        for &workers in &opts.w9_workers {
            report
                .w9
                .extend(run_w3_with(&opts, &single_server, workers).await);
        }
    }
    if has(Workload::W8) {
        report.w8 = fenced_writes::w8(opts.w7_tasks, opts.w7_repetitions, opts.w7_duration).await;
    }
    report.machine.load_after = system::load_average();
    report.finish();
    Ok(report)
}

/// Where the benchmark runs: cores, CPU, the Redis version (of a server started for the
/// purpose), the load before the run.
async fn machine() -> Result<Machine> {
    let load_before = system::load_average();
    let mut probe = workloads::Bed::start().await?;
    let redis_version = system::redis_version(&mut probe.admin).await?;
    drop(probe);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(Machine {
        cores,
        cpu_model: system::cpu_model(),
        redis_version,
        load_before,
        load_after: None,
        sharing: format!(
            "client and server share {cores} core{} (redis-server runs on the same machine, over 127.0.0.1)",
            if cores == 1 { "" } else { "s" }
        ),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// Each contender's row, or for one that failed, a row with its error and `failed` (what the
/// workload was: tasks, workers, …) for measurements.
fn or_failed<M: Clone>(
    rows: Vec<(Library, Result<LibraryRow<M>>)>,
    failed: &M,
) -> Vec<LibraryRow<M>> {
    rows.into_iter()
        .map(|(lib, row)| row.unwrap_or_else(|e| LibraryRow::failed(lib, failed.clone(), e)))
        .collect()
}

async fn run_w1(opts: &BenchOptions, libraries: &[Library]) -> Vec<W1Row> {
    let rows = workloads::w1(
        libraries,
        opts.ttl,
        opts.w1_repetitions,
        opts.w1_duration,
        opts.max_cycles,
    )
    .await;
    or_failed(rows, &W1Measured::default())
}

async fn run_w2(opts: &BenchOptions, libraries: &[Library]) -> Vec<W2Row> {
    let rows = workloads::w2(
        libraries,
        opts.ttl,
        opts.w2_tasks,
        opts.w2_duration,
        opts.max_cycles,
    )
    .await;
    let failed = W2Measured {
        tasks: opts.w2_tasks,
        ..W2Measured::default()
    };
    or_failed(rows, &failed)
}

async fn run_w3(opts: &BenchOptions, libraries: &[Library]) -> Vec<W3Row> {
    run_w3_with(opts, libraries, opts.w3_workers).await
}

/// W3 with `workers` workers, each library in turn.
async fn run_w3_with(opts: &BenchOptions, libraries: &[Library], workers: usize) -> Vec<W3Row> {
    let mut rows = Vec::with_capacity(libraries.len());
    for &lib in libraries {
        let row = workloads::w3(
            lib,
            opts.ttl,
            workers,
            opts.w3_hold,
            opts.w3_duration,
            opts.max_cycles,
        )
        .await
        .unwrap_or_else(|e| {
            let measured = W3Measured {
                workers,
                ..W3Measured::default()
            };
            W3Row::failed(lib, measured, e)
        });
        rows.push(row);
    }
    rows
}

async fn run_w4(opts: &BenchOptions) -> Vec<W4Row> {
    let params = redlock_w4::W4Params {
        ttl: opts.ttl,
        instances: opts.w4_instances,
        phase: opts.w4_phase,
        per_instance_timeout: opts.w4_instance_timeout,
        cycle_limit: opts.w4_cycle_limit,
        max_cycles: opts.max_cycles,
    };
    let rows = redlock_w4::w4(&opts.libraries, &params, &opts.fencelock_redlock).await;
    let failed = W4Measured {
        instances: opts.w4_instances,
        ..W4Measured::default()
    };
    or_failed(rows, &failed)
}

async fn run_w6(opts: &BenchOptions, report: &mut Report) {
    if !opts.libraries.contains(&Library::Fencelock) {
        report
            .notes
            .push("W6 measures fencelock's lock kinds; it ran only with fencelock selected".into());
        return;
    }
    let params = family::W6Params {
        ttl: opts.ttl,
        repetitions: opts.w6_repetitions,
        repetition: opts.w6_duration,
        rounds: opts.w6_rounds,
        round: opts.w6_round,
        hold: opts.w6_hold,
        max_cycles: opts.max_cycles,
    };
    report.w6 = family::w6(&params).await.unwrap_or_else(|e| W6Report {
        error: Some(e.to_string()),
        ..W6Report::default()
    });
}
