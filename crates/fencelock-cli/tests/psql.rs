//! The guide's shell job (docs/command.md) that passes `$FENCELOCK_FENCE` to `psql`
//! (`docs/examples/daily-report.sh`), against a real PostgreSQL and a real Redis: a holder
//! frozen past its lease with its job (SIGSTOP to `fencelock`, whose launcher then stops the
//! job too, as a paused VM stops both), whose job runs again first, after a newer holder has
//! written: its transaction is rolled back and the table keeps only the newer write.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::proc::stopped;
use common::{LIMIT, Running, fencelock, path, run, scratch, server, wait_for_file, wait_until};
use fencelock_testkit::PostgresServer;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/daily-report.sh")
}

fn postgres() -> PostgresServer {
    PostgresServer::start().unwrap_or_else(|err| {
        panic!(
            "cannot start PostgreSQL ({err}); install it (Debian: apt-get install postgresql, \
             or run scripts/ensure-postgres)"
        )
    })
}

/// Sets the `PG*` variables psql needs to reach `pg` (trust authentication: no password).
fn pg_env(command: &mut Command, pg: &PostgresServer) {
    let bin = pg.program("psql");
    let bin_dir = bin.parent().expect("psql's directory");
    let path = std::env::var("PATH").unwrap_or_default();
    command
        .env("PATH", format!("{}:{path}", bin_dir.display()))
        .env("PGHOST", "127.0.0.1")
        .env("PGPORT", pg.port().to_string())
        .env("PGUSER", "postgres")
        .env("PGDATABASE", "postgres");
}

fn psql(pg: &PostgresServer, sql: &str) -> String {
    let mut command = Command::new(pg.program("psql"));
    pg_env(&mut command, pg);
    let out = command
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql -c {sql:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn the_guide_shows_the_job_as_it_is() {
    let readme = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/command.md"),
    )
    .expect("docs/command.md");
    let script = std::fs::read_to_string(script()).expect("the example script");
    let body = script
        .split_once("set -eu\n")
        .map(|(_, body)| body)
        .expect("the script's body");
    assert!(
        readme.contains(body),
        "docs/command.md does not show docs/examples/daily-report.sh as it is"
    );
}

#[test]
fn a_frozen_holders_late_psql_transaction_is_rolled_back() {
    let redis = server();
    let url = redis.url();
    let pg = postgres();
    psql(
        &pg,
        "CREATE TABLE fences (resource text PRIMARY KEY, fence bigint NOT NULL); \
         CREATE TABLE reports (day date NOT NULL, fence bigint NOT NULL);",
    );
    let dir = scratch();
    let started = path(dir.path(), "started");
    let go = path(dir.path(), "go");
    let done = path(dir.path(), "done");
    let job = script();

    // The first holder: takes the lock (1 s lease), says so, and waits for `go` before it runs
    // the report, recording psql's exit status. (Each file appears whole, by a rename: the test
    // reads it as soon as it exists, and once read `started` empty, between the shell creating
    // it and writing the fence.)
    let shell = path(dir.path(), "shell");
    let first_job = format!(
        "echo $$ > '{p}.tmp'; mv '{p}.tmp' '{p}'; \
         echo \"$FENCELOCK_FENCE\" > '{s}.tmp'; mv '{s}.tmp' '{s}'; while [ ! -e '{g}' ]; do sleep 0.02; done; \
         '{j}'; code=$?; echo $code > '{d}.tmp'; mv '{d}.tmp' '{d}'; exit $code",
        p = shell.display(),
        s = started.display(),
        g = go.display(),
        j = job.display(),
        d = done.display(),
    );
    let mut command = fencelock(&[
        "run",
        "--url",
        &url,
        "--ttl",
        "1s",
        "reports/daily",
        "--",
        "sh",
        "-c",
        &first_job,
    ]);
    pg_env(&mut command, &pg);
    let first = Running::start(command);
    wait_for_file(&started, LIMIT);
    let first_fence: u64 = std::fs::read_to_string(&started)
        .expect("the first fence")
        .trim()
        .parse()
        .expect("a fence");

    let shell: Pid = Pid::from_raw(
        std::fs::read_to_string(&shell)
            .expect("the job's pid")
            .trim()
            .parse()
            .expect("a pid"),
    );
    let group = Pid::from_raw(
        common::proc::group(shell)
            .expect("the job's group")
            .parse()
            .expect("a group"),
    );

    // Freeze the first holder's fencelock (its renewals stop) past its lease: its launcher
    // stops the job too.
    first.signal(Signal::SIGSTOP);
    wait_until(LIMIT, "the job is stopped with its fencelock", || {
        stopped(shell)
    });
    std::thread::sleep(Duration::from_millis(1_800));

    // The second holder takes the lock and writes its report.
    let mut command = fencelock(&[
        "run",
        "--url",
        &url,
        "--ttl",
        "5s",
        "--wait",
        "10s",
        "reports/daily",
        "--",
    ]);
    command.arg(&job);
    pg_env(&mut command, &pg);
    let second = Running::start(command).finish_within(LIMIT);
    assert_eq!(second.code, Some(0), "{}", second.explain());

    // The first holder's job runs again first, with its stale fence (its fencelock still
    // frozen), as a job whose machine resumed can before its supervisor looks.
    std::fs::write(&go, "").expect("go");
    killpg(group, Signal::SIGCONT).expect("continue the job");
    wait_for_file(&done, LIMIT);
    let code = std::fs::read_to_string(&done).expect("exit status");
    first.signal(Signal::SIGCONT);
    let first = first.finish_within(LIMIT);
    assert_eq!(
        code.trim(),
        "3",
        "psql should stop (exit 3) on the stale fence\n{}",
        first.explain()
    );
    assert_ne!(first.code, Some(0), "{}", first.explain());

    let second_fence: u64 = psql(
        &pg,
        "SELECT fence FROM fences WHERE resource = 'reports/daily'",
    )
    .parse()
    .expect("the accepted fence");
    assert!(second_fence > first_fence, "{second_fence} > {first_fence}");
    let rows = psql(&pg, "SELECT fence FROM reports ORDER BY fence");
    assert_eq!(
        rows,
        second_fence.to_string(),
        "only the newer holder's report may be in the table"
    );
    // The lock is free again.
    let status = run(&["status", "--url", &url, "reports/daily", "--json"]);
    assert!(
        status.stdout.contains("\"held\":false"),
        "{}",
        status.explain()
    );
}
