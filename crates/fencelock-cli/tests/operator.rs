//! End-to-end tests of the operator commands `status`, `list` and `release --force` against real
//! redis-servers.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;

#[test]
fn status_shows_a_free_and_a_held_lock() {
    let server = server();
    let url = server.url();
    let dir = scratch();

    let free = run(&["status", "--url", &url, "reports/nightly"]);
    assert_eq!(free.code, Some(0), "{}", free.explain());
    assert!(free.stdout.contains("free"), "{}", free.explain());
    let free_json = run(&["status", "--url", &url, "--json", "reports/nightly"]);
    assert_eq!(free_json.code, Some(0), "{}", free_json.explain());
    assert!(
        free_json.stdout.trim().starts_with("{\"name\":\"reports/nightly\",\"held\":false,\"holder\":null,\"remaining_ms\":null,\"fence\":null,\"last_fence\":null,"),
        "{}",
        free_json.explain()
    );

    let holder = hold(
        &url,
        "reports/nightly",
        dir.path(),
        &["--ttl", "20s"],
        Some(0),
    );
    let fence = std::fs::read_to_string(path(dir.path(), "reports_nightly.ready"))
        .expect("the holder's fence");
    let fence = fence.trim();

    let held = run(&["status", "--url", &url, "reports/nightly"]);
    assert_eq!(held.code, Some(0), "{}", held.explain());
    assert!(held.stdout.contains("held"), "{}", held.explain());
    assert!(held.stdout.contains(fence), "{}", held.explain());
    assert!(held.stdout.contains("remaining:"), "{}", held.explain());

    let json = run(&["status", "--url", &url, "--json", "reports/nightly"]);
    assert_eq!(json.code, Some(0), "{}", json.explain());
    let text = json.stdout.trim();
    assert!(text.contains("\"held\":true"), "{text}");
    assert!(text.contains(&format!("\"fence\":{fence},")), "{text}");
    assert!(text.contains(&format!("\"last_fence\":{fence},")), "{text}");
    assert!(
        text.contains(&format!("\"servers\":[\"{}\"]", server.addr())),
        "{text}"
    );
    let remaining_ms: u64 = text
        .split("\"remaining_ms\":")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .expect("remaining_ms");
    assert!(remaining_ms > 0 && remaining_ms <= 20_000, "{text}");
    let token: String = text
        .split("\"holder\":\"")
        .nth(1)
        .map(|rest| rest.chars().take_while(|c| *c != '"').collect())
        .expect("holder");
    assert_eq!(token.len(), 8, "{text}");

    holder.signal(Signal::SIGTERM);
    assert_eq!(holder.finish().code, Some(0));
    let after = run(&["status", "--url", &url, "reports/nightly"]);
    assert!(after.stdout.contains("free"), "{}", after.explain());
    assert!(
        after.stdout.contains(fence),
        "last fence: {}",
        after.explain()
    );
}

#[test]
fn status_and_list_show_a_semaphores_permits() {
    let server = server();
    let url = server.url();
    let dir_a = scratch();
    let dir_b = scratch();
    let a = hold(&url, "licences", dir_a.path(), &["--permits", "3"], Some(0));
    let b = hold(&url, "licences", dir_b.path(), &["--permits", "3"], Some(0));
    let fences: Vec<String> = [&dir_a, &dir_b]
        .iter()
        .map(|d| {
            std::fs::read_to_string(path(d.path(), "licences.ready"))
                .expect("a holder's fence")
                .trim()
                .to_owned()
        })
        .collect();

    let status = run(&["status", "--url", &url, "licences"]);
    assert_eq!(status.code, Some(0), "{}", status.explain());
    assert!(
        status.stdout.contains("held (semaphore of 3)"),
        "{}",
        status.explain()
    );
    assert_eq!(
        status.stdout.matches("permit:").count(),
        2,
        "{}",
        status.explain()
    );
    for fence in &fences {
        assert!(
            status.stdout.contains(fence.as_str()),
            "{}",
            status.explain()
        );
    }

    let json = run(&["status", "--url", &url, "--json", "licences"]);
    let text = json.stdout.trim();
    assert!(text.contains("\"held\":true"), "{text}");
    assert!(
        text.contains("\"kind\":\"semaphore\",\"permits\":3,"),
        "{text}"
    );
    assert_eq!(text.matches("\"holder\":\"").count(), 2, "{text}");

    let list = run(&["list", "--url", &url]);
    assert_eq!(list.code, Some(0), "{}", list.explain());
    let row = list
        .stdout
        .lines()
        .find(|l| l.starts_with("licences "))
        .unwrap_or_else(|| panic!("{}", list.explain()));
    assert!(
        row.contains("semaphore of 3") && row.contains("2 shared"),
        "{row}"
    );

    for holder in [a, b] {
        holder.signal(Signal::SIGTERM);
        assert_eq!(holder.finish().code, Some(0));
    }
    let after = run(&["status", "--url", &url, "licences"]);
    assert!(after.stdout.contains("free"), "{}", after.explain());
}

#[test]
fn status_errors_name_the_lock_or_the_server() {
    let unreachable = run(&["status", "--url", "redis://127.0.0.1:1", "x"]);
    assert_eq!(unreachable.code, Some(69), "{}", unreachable.explain());
    assert!(unreachable.stderr.contains("127.0.0.1:1"));
    let server = server();
    let empty = run(&["status", "--url", &server.url(), ""]);
    assert_eq!(empty.code, Some(2), "{}", empty.explain());
    // Keys in the lock's place that are not a fencelock lock: a string and a hash.
    server.cmd(&["SET", "fencelock:{foreign}", "x"]).unwrap();
    server
        .cmd(&["HSET", "fencelock:{hashed}", "a", "b"])
        .unwrap();
    for name in ["foreign", "hashed"] {
        let done = run(&["status", "--url", &server.url(), name]);
        assert_eq!(done.code, Some(69), "{name}: {}", done.explain());
        assert!(done.stderr.contains(name), "{}", done.explain());
        assert!(done.stderr.contains("left untouched"), "{}", done.explain());
    }
}

#[test]
fn list_shows_held_locks_matching_a_pattern() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let a = hold(&url, "jobs-a", dir.path(), &[], Some(0));
    let b = hold(&url, "jobs-b", dir.path(), &[], Some(0));
    let other = hold(&url, "other", dir.path(), &[], Some(0));
    // A released lock leaves only its fence key behind: not listed.
    assert_eq!(
        run(&["run", "--url", &url, "gone", "--", "true"]).code,
        Some(0)
    );

    let all = run(&["list", "--url", &url]);
    assert_eq!(all.code, Some(0), "{}", all.explain());
    let lines: Vec<&str> = all.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", all.explain());
    assert!(lines[0].starts_with("NAME") && lines[0].contains("FENCE"));
    assert!(lines[1].starts_with("jobs-a "), "{}", all.explain());
    assert!(lines[2].starts_with("jobs-b "), "{}", all.explain());
    assert!(lines[3].starts_with("other "), "{}", all.explain());

    let jobs = run(&["list", "--url", &url, "jobs-*"]);
    assert_eq!(jobs.stdout.lines().count(), 3, "{}", jobs.explain());
    assert!(!jobs.stdout.contains("other"), "{}", jobs.explain());

    let json = run(&["list", "--url", &url, "--json", "o*"]);
    assert_eq!(json.code, Some(0), "{}", json.explain());
    let text = json.stdout.trim();
    assert!(text.starts_with("{\"servers\":["), "{text}");
    assert!(text.contains("\"pattern\":\"o*\""), "{text}");
    assert!(
        text.contains("\"locks\":[{\"name\":\"other\",\"held\":true,"),
        "{text}"
    );
    assert!(!text.contains("jobs-a"), "{text}");

    let none = run(&["list", "--url", &url, "--json", "nothing*"]);
    assert!(none.stdout.contains("\"locks\":[]"), "{}", none.explain());
    let none = run(&["list", "--url", &url, "nothing*"]);
    assert!(none.stdout.contains("no held locks"), "{}", none.explain());

    for holder in [a, b, other] {
        holder.signal(Signal::SIGTERM);
        assert_eq!(holder.finish().code, Some(0));
    }
    let after = run(&["list", "--url", &url]);
    assert!(
        after.stdout.contains("no held locks"),
        "{}",
        after.explain()
    );
}

#[test]
fn list_over_several_servers_shows_locks_held_on_a_majority() {
    let s1 = server();
    let (s2, s3) = (server(), server());
    let urls = [s1.url(), s2.url(), s3.url()];
    let dir = scratch();
    let mut args = vec!["run"];
    for url in &urls {
        args.extend_from_slice(&["--url", url]);
    }
    let script = format!(
        "touch \"{}\"; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done",
        file(dir.path(), "ready")
    );
    args.extend_from_slice(&["majority", "--", "sh", "-c", &script]);
    let holder = Running::start(fencelock(&args));
    wait_for_file(&path(dir.path(), "ready"), LIMIT);
    // Held on one server only: not a Redlock hold.
    s1.cmd(&[
        "SET",
        "fencelock:{minority}",
        "0123456789abcdef:5",
        "PX",
        "20000",
    ])
    .unwrap();

    let mut list = vec!["list"];
    for url in &urls {
        list.extend_from_slice(&["--url", url]);
    }
    let done = run(&list);
    assert_eq!(done.code, Some(0), "{}", done.explain());
    assert!(done.stdout.contains("majority"), "{}", done.explain());
    assert!(!done.stdout.contains("minority"), "{}", done.explain());

    // With one server gone, a majority still answers.
    drop(s3);
    let done = run(&list);
    assert_eq!(done.code, Some(0), "{}", done.explain());
    assert!(done.stdout.contains("majority"), "{}", done.explain());
    assert!(done.stderr.contains("warning"), "{}", done.explain());

    holder.signal(Signal::SIGTERM);
    let _ = holder.finish();
}

#[test]
fn release_needs_force_and_force_stops_the_holders_command() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let holder = hold(&url, "stuck", dir.path(), &["--ttl", "600ms"], Some(0));

    let refused = run(&["release", "--url", &url, "stuck"]);
    assert_eq!(refused.code, Some(2), "{}", refused.explain());
    assert!(
        refused.stderr.contains("--force") && refused.stderr.contains("operator"),
        "{}",
        refused.explain()
    );
    assert!(exists(&server, &lock_key("stuck")), "still held");

    let released = run(&["release", "--url", &url, "--force", "stuck"]);
    assert_eq!(released.code, Some(0), "{}", released.explain());
    assert!(
        released.stdout.contains("released") && released.stdout.contains("held by"),
        "{}",
        released.explain()
    );
    let done = holder.finish_within(Duration::from_secs(10));
    assert_eq!(done.code, Some(74), "{}", done.explain());
    let marker = std::fs::read_to_string(path(dir.path(), "stuck.term")).expect("TERM marker");
    assert_eq!(marker.trim(), "term");

    let again = run(&["release", "--url", &url, "--force", "stuck"]);
    assert_eq!(again.code, Some(0), "{}", again.explain());
    assert!(again.stdout.contains("not held"), "{}", again.explain());
    let unreachable = run(&["release", "--url", "redis://127.0.0.1:1", "--force", "x"]);
    assert_eq!(unreachable.code, Some(69), "{}", unreachable.explain());
}

#[test]
fn a_forced_release_wakes_a_waiter_at_once() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    // The holder's lease (6s) outlasts the test's patience for the waiter: the waiter can only
    // get the lock this fast through the forced release, which wakes it.
    let holder = hold(&url, "handover", dir.path(), &["--ttl", "6s"], Some(0));
    let waiter = Running::start(fencelock(&[
        "run", "--url", &url, "--wait", "20s", "handover", "--", "true",
    ]));
    wait_until(LIMIT, "the waiter waits", || {
        waiters(&server, "handover") >= 1
    });
    let released_at = Instant::now();
    let released = run(&["release", "--url", &url, "--force", "handover"]);
    assert_eq!(released.code, Some(0), "{}", released.explain());
    let done = waiter.finish_within(Duration::from_secs(20));
    assert_eq!(done.code, Some(0), "{}", done.explain());
    assert!(
        released_at.elapsed() < Duration::from_secs(2),
        "the waiter was not woken: {:?}",
        released_at.elapsed()
    );
    // The old holder notices at its next renewal (2s) and stops its command.
    let old = holder.finish_within(Duration::from_secs(15));
    assert_eq!(old.code, Some(74), "{}", old.explain());
}

/// The tokens in lock `name`'s line of waiters, in the order a release passes the lock on.
fn line_of(server: &fencelock_testkit::RedisServer, name: &str) -> Vec<String> {
    let line = format!("fencelock:{{{name}}}:waiters");
    let reply = server
        .cmd(&["ZRANGE", &line, "0", "-1"])
        .unwrap_or_else(|e| panic!("ZRANGE {line}: {e}"));
    redis::from_redis_value(reply).unwrap_or_else(|e| panic!("{line}: {e}"))
}

#[test]
fn status_shows_a_locks_line_of_waiters_in_order() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let holder = hold(&url, "queued", dir.path(), &["--ttl", "20s"], Some(0));
    let mut waiters = Vec::new();
    for i in 0..2 {
        waiters.push(Running::start(fencelock(&[
            "run", "--url", &url, "--wait", "30s", "queued", "--", "true",
        ])));
        wait_until(LIMIT, "a place in line", || {
            line_of(&server, "queued").len() == i + 1
        });
    }
    // A waiter refreshes its place every few seconds, which moves it to the back of the line:
    // the status is compared with a line that stayed the same around it.
    let (line, json, text) = loop {
        let before = line_of(&server, "queued");
        let json = run(&["status", "--url", &url, "--json", "queued"]);
        let text = run(&["status", "--url", &url, "queued"]);
        if line_of(&server, "queued") == before {
            break (before, json, text);
        }
    };
    assert_eq!(json.code, Some(0), "{}", json.explain());
    let status: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(status["waiting"], 2, "{status}");
    let shown = status["waiters"].as_array().expect("a waiters array");
    assert_eq!(shown.len(), 2, "{status}");
    for (i, (waiter, token)) in shown.iter().zip(&line).enumerate() {
        assert_eq!(waiter["place"], i + 1, "{status}");
        assert_eq!(waiter["waiter"], token[..8], "{status}");
        // A lock's line records no arrival; only a read-write lock's waiters have a side.
        assert!(waiter["waited_ms"].is_null(), "{status}");
        assert!(waiter["side"].is_null(), "{status}");
    }
    assert!(
        text.stdout.contains("  waiting:    2\n"),
        "{}",
        text.explain()
    );
    for (i, token) in line.iter().enumerate() {
        let shown = format!("    {}. {}\n", i + 1, &token[..8]);
        assert!(text.stdout.contains(&shown), "{}", text.explain());
    }

    holder.signal(Signal::SIGTERM);
    assert_eq!(holder.finish().code, Some(0));
    for waiter in waiters {
        let done = waiter.finish_within(Duration::from_secs(20));
        assert_eq!(done.code, Some(0), "{}", done.explain());
    }
}

/// `fencelock list | head -1`: the reader goes away after a line, and `list` ends quietly with
/// status 0 (no panic, no "Broken pipe"), as other Unix tools do.
#[test]
fn list_into_a_pipe_closed_early_ends_quietly() {
    use std::io::{BufRead, BufReader, Read};

    let server = server();
    let url = server.url();
    // Far more than a pipe's buffer (64 KiB) of table: the write meets the closed pipe.
    let locks = 2000;
    let made = server
        .cmd(&[
            "EVAL",
            "for i = 1, tonumber(ARGV[1]) do \
               redis.call('SET', 'fencelock:{reports/' .. string.rep('x', 60) .. '/' .. i .. '}', \
                 'deadbeefdeadbeefdeadbeefdeadbeef:' .. i, 'PX', 600000) \
             end \
             return 1",
            "0",
            &locks.to_string(),
        ])
        .expect("make the locks");
    assert_eq!(made, redis::Value::Int(1));

    let mut child = fencelock(&["list", "--url", &url])
        .spawn()
        .expect("start fencelock list");
    let mut stderr = child.stderr.take().expect("stderr");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut first = String::new();
    {
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        stdout.read_line(&mut first).expect("read the first line");
        // The reader goes away here, as `head -1` does.
    }
    assert!(first.starts_with("NAME"), "{first}");
    let give_up = Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for fencelock") {
            break status;
        }
        if Instant::now() >= give_up {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fencelock list did not end within {LIMIT:?} after its reader left");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = stderr.join().unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{status:?}, stderr:\n{stderr}");
    assert!(stderr.is_empty(), "nothing on stderr, got:\n{stderr}");
}

/// A usage error, clap's or fencelock's own, ends with status 2 and a line starting with
/// `fencelock:` on stderr; `--help` and `--version` still print and exit 0.
#[test]
fn usage_errors_say_fencelock_and_what_is_expected() {
    let fencelock_line = |done: &Finished| done.stderr.lines().any(|l| l.starts_with("fencelock:"));
    let bad_ttl = run(&["run", "--ttl", "nonsense", "x", "--", "true"]);
    assert_eq!(bad_ttl.code, Some(2), "{}", bad_ttl.explain());
    assert!(fencelock_line(&bad_ttl), "{}", bad_ttl.explain());
    assert!(
        bad_ttl.stderr.contains("not a duration")
            && bad_ttl.stderr.contains("fencelock run --help"),
        "{}",
        bad_ttl.explain()
    );
    for args in [&["staus", "x"][..], &["list", "--bogus"], &[]] {
        let done = run(args);
        assert_eq!(done.code, Some(2), "{args:?}: {}", done.explain());
        assert!(fencelock_line(&done), "{args:?}: {}", done.explain());
    }
    for args in [&["--help"][..], &["--version"], &["status", "--help"]] {
        let done = run(args);
        assert_eq!(done.code, Some(0), "{args:?}: {}", done.explain());
        assert!(
            !done.stdout.is_empty() && done.stderr.is_empty(),
            "{}",
            done.explain()
        );
    }

    // A URL without its scheme says what a Redis URL looks like; a password stays hidden.
    let bare = run(&["status", "--url", "127.0.0.1:6379", "x"]);
    assert_eq!(bare.code, Some(2), "{}", bare.explain());
    assert!(
        bare.stderr.contains("\"127.0.0.1:6379\"")
            && bare
                .stderr
                .contains("expected redis://HOST:PORT (or rediss://, unix://)")
            && !bare.stderr.contains("InvalidClientConfig"),
        "{}",
        bare.explain()
    );
    let mut command = fencelock(&["status", "x"]);
    command.env("FENCELOCK_URL", "app:s3cret@cache.internal:6379");
    let secret = Running::start(command).finish();
    assert_eq!(secret.code, Some(2), "{}", secret.explain());
    assert!(
        secret.stderr.contains("expected redis://") && !secret.stderr.contains("s3cret"),
        "{}",
        secret.explain()
    );
}

#[test]
fn status_and_list_show_the_label_of_a_run_by_default_its_host_and_pid() {
    let server = server();
    let url = server.url();
    let dir = scratch();
    let labelled = hold(
        &url,
        "jobs/labelled",
        dir.path(),
        &["--label", "job-7"],
        Some(0),
    );
    let unnamed = hold(&url, "jobs/default", dir.path(), &[], Some(0));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let default = format!("{}:{}", host.trim(), unnamed.pid());

    let status = run(&["status", "--url", &url, "jobs/labelled"]);
    assert_eq!(status.code, Some(0), "{}", status.explain());
    assert!(
        status.stdout.contains("  label:      job-7\n"),
        "{}",
        status.explain()
    );
    let json = run(&["status", "--url", &url, "--json", "jobs/labelled"]);
    assert!(
        json.stdout.contains("\"label\":\"job-7\""),
        "{}",
        json.explain()
    );
    let status = run(&["status", "--url", &url, "jobs/default"]);
    assert!(
        status
            .stdout
            .contains(&format!("  label:      {default}\n")),
        "{}",
        status.explain()
    );

    let list = run(&["list", "--url", &url]);
    assert_eq!(list.code, Some(0), "{}", list.explain());
    assert!(list.stdout.contains("LABEL"), "{}", list.explain());
    for (name, label) in [
        ("jobs/labelled", "job-7"),
        ("jobs/default", default.as_str()),
    ] {
        let row = list
            .stdout
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {}", list.explain()));
        assert!(row.ends_with(label), "{row}");
    }
    let list = run(&["list", "--url", &url, "--json"]);
    assert!(
        list.stdout.contains(&format!("\"label\":\"{default}\"")),
        "{}",
        list.explain()
    );

    for holder in [labelled, unnamed] {
        holder.signal(Signal::SIGTERM);
        assert_eq!(holder.finish().code, Some(0));
    }
    let keys = server.keys().unwrap();
    assert!(
        keys.iter().all(|k| !k.contains(":label:")),
        "the labels went with the releases: {keys:?}"
    );
    let after = run(&["status", "--url", &url, "--json", "jobs/labelled"]);
    assert!(
        after.stdout.contains("\"label\":null"),
        "{}",
        after.explain()
    );
}

#[test]
fn a_label_too_long_is_refused_before_anything_runs() {
    let server = server();
    let url = server.url();
    let long = "x".repeat(129);
    let refused = run(&[
        "run", "--url", &url, "--label", &long, "jobs/x", "--", "true",
    ]);
    assert_eq!(refused.code, Some(2), "{}", refused.explain());
    assert!(refused.stderr.contains("label"), "{}", refused.explain());
}

/// `--log-format json` (with `-v`): every line on stderr is one JSON object, and the grant's
/// carries the lock's name and the fence the command got.
#[test]
fn the_log_is_json_lines_with_the_locks_fields() {
    let server = server();
    let url = server.url();
    let done = run(&[
        "-v",
        "--log-format",
        "json",
        "run",
        "--url",
        &url,
        "logged",
        "--",
        "sh",
        "-c",
        "echo \"$FENCELOCK_FENCE\"",
    ]);
    assert_eq!(done.code, Some(0), "{}", done.explain());
    let fence: u64 = done.stdout.trim().parse().unwrap();
    let lines: Vec<serde_json::Value> = done
        .stderr
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let granted = lines.iter().find(|line| {
        line["fields"]["message"] == "lock acquired" && line["fields"]["lock"] == "logged"
    });
    let granted = granted.unwrap_or_else(|| panic!("no grant in {lines:#?}"));
    assert_eq!(granted["fields"]["fence"], fence);
    assert_eq!(granted["level"], "DEBUG");
    // Text stays the default.
    let text = run(&["-v", "run", "--url", &url, "logged", "--", "true"]);
    assert!(
        text.stderr
            .lines()
            .any(|l| serde_json::from_str::<serde_json::Value>(l).is_err()),
        "{}",
        text.explain()
    );
}
