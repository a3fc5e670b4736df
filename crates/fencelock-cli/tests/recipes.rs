//! End-to-end tests of the recipes on the command line: `run --once`, `run A B C`,
//! `run --permits N --take K`, `elect` answering `release --ask`; and a command never outlives a
//! SIGKILLed `run` or `elect`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

#[test]
fn once_runs_the_command_exactly_once_across_concurrent_runs_and_again_after_a_failure() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let count = file(dir.path(), "count");
    // Each run appends a line when its command runs; the command takes a while, so that the
    // other runs wait for the lock meanwhile.
    let script = format!("echo ran >> \"{count}\"; sleep 0.3");
    let runs: Vec<Running> = (0..8)
        .map(|_| {
            Running::start(fencelock(&[
                "run", "--url", &url, "--once", "v42", "migrate", "--", "sh", "-c", &script,
            ]))
        })
        .collect();
    for run in runs {
        let done = run.finish();
        assert_eq!(done.code, Some(0), "{}", done.explain());
    }
    let ran = std::fs::read_to_string(&count).unwrap();
    assert_eq!(
        ran.lines().count(),
        1,
        "the command ran {} times",
        ran.lines().count()
    );
    // Later runs find the record at once.
    let later = run(&[
        "run", "--url", &url, "--once", "v42", "migrate", "--", "false",
    ]);
    assert_eq!(later.code, Some(0), "{}", later.explain());
    assert!(
        later.stderr.contains("was done before"),
        "{}",
        later.explain()
    );

    // A failing run records nothing: the next one runs.
    let failed = run(&[
        "run", "--url", &url, "--once", "v43", "migrate", "--", "false",
    ]);
    assert_eq!(failed.code, Some(1), "{}", failed.explain());
    let again = run(&[
        "run", "--url", &url, "--once", "v43", "migrate", "--", "sh", "-c", &script,
    ]);
    assert_eq!(again.code, Some(0), "{}", again.explain());
    assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 2);
    let record = "fencelock:once:{migrate}:v43";
    assert!(exists(&server, record), "no record {record}");
}

/// `fencelock run --once KEY [NAME]` and the library's `client.once(KEY)` (`.lock(NAME)`) are
/// one record: with the lock's name left out it is the key in both. What one did, the other
/// finds done: the library's work is not called, the command runs nothing.
#[test]
fn once_from_the_command_and_from_the_library_is_one_record() {
    use fencelock::once::Outcome;

    let server = server();
    let url = server.url();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = runtime
        .block_on(async { fencelock::Client::open(&url) })
        .unwrap();
    let library = |key: &str, lock: Option<&str>| {
        let once = match lock {
            Some(lock) => client.once(key).lock(lock),
            None => client.once(key),
        };
        runtime
            .block_on(once.run(|_fence| async { Ok::<_, std::io::Error>(()) }))
            .unwrap()
    };
    let command = |key: &str, lock: Option<&str>, script: &str| {
        let mut args = vec!["run", "--url", url.as_str(), "--once", key];
        args.extend(lock);
        args.extend(["--", "sh", "-c", script]);
        run(&args)
    };

    for (key, lock) in [
        ("migrations/0042", None),
        ("migrations/0043", Some("migrate")),
    ] {
        // The command first: it runs under the lock named as the key unless given one.
        let first = command(key, lock, "echo \"$FENCELOCK_NAME\"");
        assert_eq!(first.code, Some(0), "{}", first.explain());
        assert_eq!(
            first.stdout.trim(),
            lock.unwrap_or(key),
            "{}",
            first.explain()
        );
        let record = format!("fencelock:once:{{{}}}:{key}", lock.unwrap_or(key));
        assert!(exists(&server, &record), "no record {record}");
        let outcome = library(key, lock);
        assert!(
            matches!(outcome, Outcome::AlreadyDone(_)),
            "the library did {key} (lock {lock:?}) again after the command: {outcome:?}"
        );
    }

    for (key, lock) in [
        ("migrations/0044", None),
        ("migrations/0045", Some("migrate")),
    ] {
        // The library first: the command finds the record and runs nothing.
        let outcome = library(key, lock);
        assert!(matches!(outcome, Outcome::Ran(())), "{outcome:?}");
        let later = command(key, lock, "echo ran");
        assert_eq!(later.code, Some(0), "{}", later.explain());
        assert_eq!(later.stdout, "", "the command ran: {}", later.explain());
        assert!(
            later.stderr.contains("was done before"),
            "{}",
            later.explain()
        );
    }
}

#[test]
fn once_over_several_servers_is_refused_in_one_readable_line() {
    let (a, b) = (server(), server());
    let (url_a, url_b) = (a.url(), b.url());
    let dir = scratch();
    let marker = file(dir.path(), "ran");
    let touch = format!("touch \"{marker}\"");
    let refused = run(&[
        "run", "--url", &url_a, "--url", &url_b, "--once", "v42", "--", "sh", "-c", &touch,
    ]);
    assert_eq!(refused.code, Some(2), "{}", refused.explain());
    assert!(
        refused
            .stderr
            .contains("on one server; nothing was sent and nothing was run"),
        "{}",
        refused.explain()
    );
    assert!(!refused.stderr.contains("  "), "{}", refused.explain());
    assert!(!path(dir.path(), "ran").exists(), "the command ran");
}

#[test]
fn several_names_are_held_together_with_their_fences_in_the_environment() {
    let server = server();
    let url = server.url();
    // An outer fencelock's name and fence (a nested run) are not passed on either.
    let mut several = fencelock(&[
        "run",
        "--url",
        &url,
        "acct/2",
        "acct/1",
        "--",
        "sh",
        "-c",
        "echo \"$FENCELOCK_NAMES $FENCELOCK_FENCES ${FENCELOCK_NAME-unset} ${FENCELOCK_FENCE-unset}\"",
    ]);
    several
        .env("FENCELOCK_NAME", "outer")
        .env("FENCELOCK_FENCE", "1");
    let done = Running::start(several).finish();
    assert_eq!(done.code, Some(0), "{}", done.explain());
    let seen: Vec<&str> = done.stdout.split_whitespace().collect();
    let [names, fences, name, fence] = seen[..] else {
        panic!("four words expected: {}", done.explain());
    };
    assert_eq!(names, "acct/2,acct/1");
    let fences: Vec<u64> = fences.split(',').map(|f| f.parse().unwrap()).collect();
    assert_eq!(fences.len(), 2);
    // A fence belongs to one name: neither is set (not even empty) with several names.
    assert_eq!((name, fence), ("unset", "unset"), "{}", done.explain());
    // Each fence is its name's: the last one handed out for that name.
    for (lock, fence) in [("acct/2", fences[0]), ("acct/1", fences[1])] {
        let key = format!("{}:fence", lock_key(lock));
        let stored = match server.cmd(&["GET", &key]).expect("GET") {
            redis::Value::BulkString(bytes) => String::from_utf8(bytes).unwrap(),
            other => panic!("GET {key} answered {other:?}"),
        };
        assert_eq!(stored.parse::<u64>().unwrap(), fence, "{lock}");
    }
    // With one name all four are set, the lists of one.
    let one = run(&[
        "run",
        "--url",
        &url,
        "acct/1",
        "--",
        "sh",
        "-c",
        "echo \"${FENCELOCK_NAME-unset} ${FENCELOCK_FENCE-unset} $FENCELOCK_NAMES $FENCELOCK_FENCES\"",
    ]);
    assert_eq!(one.code, Some(0), "{}", one.explain());
    let seen: Vec<&str> = one.stdout.split_whitespace().collect();
    let [name, fence, names, listed] = seen[..] else {
        panic!("four words expected: {}", one.explain());
    };
    assert_eq!((name, names), ("acct/1", "acct/1"));
    assert_eq!(fence, listed);
    assert!(
        fence.parse::<u64>().unwrap() > fences[1],
        "{}",
        one.explain()
    );
    assert!(!exists(&server, &lock_key("acct/1")) && !exists(&server, &lock_key("acct/2")));

    // One of them held elsewhere: with --no-wait nothing runs and nothing is left held.
    let dir = scratch();
    let _holder = hold(&url, "acct/1", dir.path(), &[], Some(0));
    let busy = run(&[
        "run",
        "--url",
        &url,
        "--no-wait",
        "acct/1",
        "acct/2",
        "--",
        "true",
    ]);
    assert_eq!(busy.code, Some(73), "{}", busy.explain());
    assert!(
        !exists(&server, &lock_key("acct/2")),
        "acct/2 was left held"
    );
}

#[test]
fn take_holds_k_permits_of_the_semaphore() {
    let server = server();
    let url = server.url();
    let done = run(&[
        "run",
        "--url",
        &url,
        "--permits",
        "5",
        "--take",
        "3",
        "licences",
        "--",
        "sh",
        "-c",
        "echo \"$FENCELOCK_PERMITS $FENCELOCK_TAKEN\"",
    ]);
    assert_eq!(done.code, Some(0), "{}", done.explain());
    assert_eq!(done.stdout.trim(), "5 3");
    let too_many = run(&[
        "run",
        "--url",
        &url,
        "--permits",
        "2",
        "--take",
        "3",
        "licences",
        "--",
        "true",
    ]);
    assert_eq!(too_many.code, Some(2), "{}", too_many.explain());
}

/// The process group of the command, as it wrote it to `file` (its `/proc/self/stat` pgrp).
fn group_of(file: &std::path::Path) -> Pid {
    wait_for_file(file, LIMIT);
    let text = std::fs::read_to_string(file).unwrap();
    Pid::from_raw(text.trim().parse().unwrap())
}

/// Whether a process of `group` still runs: one that is not a zombie (the killed ones are
/// reparented to an init that may take its time to reap them).
fn group_alive(group: Pid) -> bool {
    if killpg(group, None).is_err() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp ...`: the fields after the command's closing parenthesis.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        matches!(fields.as_slice(), [state, _, pgrp, ..] if *state != "Z" && pgrp.parse() == Ok(group.as_raw()))
    })
}

/// A command that writes its process group to `file` and then runs two more processes in it
/// (one in the background); with `deaf`, it ignores SIGTERM.
fn long_command(file: &str, deaf: bool) -> String {
    let trap = if deaf { "trap '' TERM; " } else { "" };
    format!(
        "{trap}cut -d' ' -f5 /proc/$$/stat > \"{file}.tmp\"; mv \"{file}.tmp\" \"{file}\"; \
         sleep 600 & sleep 600; wait"
    )
}

#[test]
fn no_command_outlives_a_sigkilled_run_or_elect() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    for (what, deaf) in [
        ("run", false),
        ("run", true),
        ("elect", false),
        ("elect", true),
    ] {
        let marker = file(dir.path(), &format!("{what}-{deaf}"));
        let script = long_command(&marker, deaf);
        let name = format!("supervised-{what}-{deaf}");
        let mut args = vec![what, "--url", url.as_str()];
        if what == "elect" {
            args.extend_from_slice(&["--value", "node"]);
        }
        args.extend_from_slice(&[name.as_str(), "--", "sh", "-c", script.as_str()]);
        let supervisor = Running::start(fencelock(&args));
        let group = group_of(&path(dir.path(), &format!("{what}-{deaf}")));
        assert!(group_alive(group));
        supervisor.signal(Signal::SIGKILL);
        let killed = Instant::now();
        while group_alive(group) {
            assert!(
                killed.elapsed() < Duration::from_secs(1),
                "{what} (the command {}): its process group {group} outlived it by a second",
                if deaf { "ignoring SIGTERM" } else { "as it is" }
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(supervisor);
    }
}

#[test]
fn elect_passes_a_release_request_on_and_resigns_when_its_command_ends() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let ready = file(dir.path(), "ready");
    let asked = file(dir.path(), "asked");
    let script = format!(
        "trap 'echo asked > \"{asked}\"; exit 0' USR1; touch \"{ready}\"; \
         i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"
    );
    let leader = Running::start(fencelock(&[
        "elect",
        "--url",
        &url,
        "--value",
        "node-a",
        "--on-request",
        "USR1",
        "primary",
        "--",
        "sh",
        "-c",
        &script,
    ]));
    wait_for_file(&path(dir.path(), "ready"), LIMIT);
    let ask = run(&["release", "--url", &url, "--ask", "primary"]);
    assert_eq!(ask.code, Some(0), "{}", ask.explain());
    let done = leader.finish();
    assert_eq!(done.code, Some(0), "{}", done.explain());
    assert!(
        path(dir.path(), "asked").exists(),
        "the command was not asked"
    );
    let after = run(&["leader", "--url", &url, "primary"]);
    assert_eq!(after.stdout.trim(), "vacant", "{}", after.explain());
}

/// `status NAME` shows the run-once records kept under NAME, with their fences and the command
/// that clears one; `--json` too.
#[test]
fn status_shows_the_run_once_records_under_a_name() {
    let server = server();
    let url = server.url();
    for key in ["migrations/0042", "migrations/0043"] {
        let done = run(&[
            "run",
            "--url",
            &url,
            "--once",
            key,
            "migrate",
            "--",
            "sh",
            "-c",
            "echo \"$FENCELOCK_FENCE\"",
        ]);
        assert_eq!(done.code, Some(0), "{}", done.explain());
    }
    // A run whose command fails records nothing (its `:started` mark is no record).
    let failed = run(&[
        "run",
        "--url",
        &url,
        "--once",
        "migrations/0044",
        "migrate",
        "--",
        "false",
    ]);
    assert_eq!(failed.code, Some(1), "{}", failed.explain());
    let record = |key: &str| format!("fencelock:once:{{migrate}}:{key}");
    let fence_of = |key: &str| -> String {
        let value: String =
            redis::from_redis_value(server.cmd(&["GET", &record(key)]).unwrap()).unwrap();
        value.split(':').next().unwrap().to_owned()
    };

    let text = run(&["status", "--url", &url, "migrate"]);
    assert_eq!(text.code, Some(0), "{}", text.explain());
    assert!(text.stdout.contains("free"), "{}", text.explain());
    for key in ["migrations/0042", "migrations/0043"] {
        let shown = format!("  done once:  {key} (fence {}, recorded ", fence_of(key));
        assert!(text.stdout.contains(&shown), "{shown}\n{}", text.explain());
        let clear = format!("to run it again: redis-cli DEL '{}'\n", record(key));
        assert!(text.stdout.contains(&clear), "{clear}\n{}", text.explain());
    }
    assert!(
        !text.stdout.contains("migrations/0044"),
        "{}",
        text.explain()
    );
    assert!(text.stderr.is_empty(), "{}", text.explain());

    let json = run(&["status", "--url", &url, "--json", "migrate"]);
    assert_eq!(json.code, Some(0), "{}", json.explain());
    let status: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    let once = status["once"].as_array().expect("a once array");
    assert_eq!(once.len(), 2, "{status}");
    assert_eq!(once[0]["key"], "migrations/0042", "{status}");
    assert_eq!(once[0]["record"], record("migrations/0042"), "{status}");
    assert_eq!(
        once[0]["fence"].to_string(),
        fence_of("migrations/0042"),
        "{status}"
    );
    assert!(
        once[1]["recorded_ms"].as_u64().unwrap() > 1_600_000_000_000,
        "{status}"
    );

    // Cleared as the status says, the work runs again.
    server.cmd(&["DEL", &record("migrations/0042")]).unwrap();
    let after = run(&["status", "--url", &url, "--json", "migrate"]);
    let status: serde_json::Value = serde_json::from_str(after.stdout.trim()).unwrap();
    assert_eq!(status["once"].as_array().map(Vec::len), Some(1), "{status}");
}

/// `--once` over Redlock is refused in one sentence, without a run of spaces in it.

#[test]
fn a_lock_delay_with_several_names_or_once_is_refused_and_nothing_runs() {
    let redis = server();
    let url = redis.url();
    let dir = scratch();
    let marker = file(dir.path(), "ran");
    let touch = format!("touch \"{marker}\"");
    for names in [&["a", "b"][..], &["--once", "v7"][..]] {
        let mut line = vec!["run", "--url", &url, "--lock-delay", "5s"];
        line.extend_from_slice(names);
        line.extend_from_slice(&["--", "sh", "-c", &touch]);
        let refused = run(&line);
        assert_eq!(refused.code, Some(2), "{}", refused.explain());
        assert!(
            refused.stderr.contains("--lock-delay applies to one name"),
            "{}",
            refused.explain()
        );
        assert!(!path(dir.path(), "ran").exists(), "the command ran");
    }
}

/// A run-once whose command succeeded but whose record cannot be written (here the server
/// refuses writes: `min-replicas-to-write` with no replica) exits 75, not 0, and says the next
/// run will do the work again; nothing is recorded.
#[test]
fn once_whose_record_cannot_be_written_exits_75_and_says_so() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let started = file(dir.path(), "started");
    let go = file(dir.path(), "go");
    let script = format!("touch \"{started}\"; while [ ! -e \"{go}\" ]; do sleep 0.01; done");
    let running = Running::start(fencelock(&[
        "run", "--url", &url, "--once", "v7", "report", "--", "sh", "-c", &script,
    ]));
    wait_for_file(std::path::Path::new(&started), LIMIT);
    server
        .cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"])
        .expect("CONFIG SET");
    std::fs::write(&go, "").unwrap();
    let done = running.finish();
    server
        .cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"])
        .expect("CONFIG SET");
    assert_eq!(done.code, Some(75), "{}", done.explain());
    assert!(
        done.stderr.contains("succeeded")
            && done.stderr.contains("next run will do the work again"),
        "{}",
        done.explain()
    );
    assert!(!exists(&server, "fencelock:once:{report}:v7"), "recorded");
}
