//! The scripts answer what docs/PROTOCOL.md's tables say, run as another implementation of the
//! wire format would run them: `EVAL` of the library's own source
//! (`fencelock::script_source`) on a real server, against keys set by hand. Answers that the
//! library itself reads alike (a renewal that finds the key gone and one that finds another's
//! are each a loss) are told apart here, as the document tells them apart, and so are the
//! writes a script makes or must not make.

use crate::common;

use fencelock_testkit::RedisServer;
use redis::Value;

use common::{integer_reply as int, server};

/// Runs the script of `file` with `keys` and `args`; its reply, written out (`render`).
fn eval(redis: &RedisServer, file: &str, keys: &[&str], args: &[&str]) -> String {
    let source = fencelock::script_source(file).unwrap_or_else(|| panic!("no script {file}"));
    let count = keys.len().to_string();
    let mut command = vec!["EVAL", source, count.as_str()];
    command.extend_from_slice(keys);
    command.extend_from_slice(args);
    match redis.cmd(&command) {
        Ok(reply) => render(&reply),
        Err(e) => panic!("{file} {keys:?} {args:?}: {e}"),
    }
}

/// A reply as text: `1`, `'text'`, `nil`, `[-1, 'key', 'list']`.
fn render(value: &Value) -> String {
    match value {
        Value::Int(n) => n.to_string(),
        Value::BulkString(b) => format!("'{}'", String::from_utf8_lossy(b)),
        Value::SimpleString(s) => format!("'{s}'"),
        Value::Okay => "'OK'".to_owned(),
        Value::Nil => "nil".to_owned(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", items.join(", "))
        }
        other => format!("{other:?}"),
    }
}

fn cmd(redis: &RedisServer, args: &[&str]) -> Value {
    redis.cmd(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// A key's whole state: its type, its value (a string's, a hash's fields in order, a list's
/// items) and whether it expires.
fn state(redis: &RedisServer, key: &str) -> String {
    let kind = match cmd(redis, &["TYPE", key]) {
        Value::SimpleString(s) => s,
        Value::Okay => "ok".to_owned(),
        other => panic!("TYPE {key}: {other:?}"),
    };
    let value = match kind.as_str() {
        "none" => String::new(),
        "string" => render(&cmd(redis, &["GET", key])),
        "hash" => {
            let Value::Array(items) = cmd(redis, &["HGETALL", key]) else {
                panic!("HGETALL {key}");
            };
            let mut pairs: Vec<String> = items
                .chunks(2)
                .map(|pair| format!("{}={}", render(&pair[0]), render(&pair[1])))
                .collect();
            pairs.sort();
            pairs.join(" ")
        }
        "list" => render(&cmd(redis, &["LRANGE", key, "0", "-1"])),
        other => panic!("{key} is a {other}"),
    };
    let expires = int(redis, &["PTTL", key]) >= 0;
    format!("{kind} {value} expires={expires}")
}

/// Sets `key` anew to a hash of `fields` (name, value, ...) that expires in `ttl` ms.
fn hash(redis: &RedisServer, key: &str, fields: &[&str], ttl: &str) {
    cmd(redis, &["DEL", key]);
    let mut command = vec!["HSET", key];
    command.extend_from_slice(fields);
    cmd(redis, &command);
    cmd(redis, &["PEXPIRE", key, ttl]);
}

/// The wait a refusal `{0, ms}` tells, from the script of `file`.
fn told(redis: &RedisServer, file: &str, keys: &[&str], args: &[&str]) -> i64 {
    let reply = eval(redis, file, keys, args);
    let ms = reply
        .strip_prefix("[0, ")
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|ms| ms.parse::<i64>().ok());
    ms.unwrap_or_else(|| panic!("{file} {args:?}: not a refusal: {reply}"))
}

/// A server whose clock stands at `now_ms` until the test moves it.
fn clocked(now_ms: u64) -> fencelock_testkit::ClockedServer {
    fencelock_testkit::ClockedServer::start(now_ms)
        .unwrap_or_else(|e| panic!("cannot start a server with a clock of its own: {e}"))
}

/// How many `PUBLISH` calls the server has run (scripts' too).
fn publishes(redis: &RedisServer) -> u64 {
    let Value::BulkString(info) = cmd(redis, &["INFO", "commandstats"]) else {
        panic!("INFO commandstats");
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_publish:calls="))
        .map_or(0, |rest| {
            rest.split(',')
                .next()
                .and_then(|calls| calls.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("commandstats: {rest}"))
        })
}

/// The server's clock in milliseconds.
fn now_ms(redis: &RedisServer) -> u64 {
    let Value::Array(parts) = cmd(redis, &["TIME"]) else {
        panic!("TIME");
    };
    let part = |i: usize| match &parts[i] {
        Value::BulkString(b) => String::from_utf8_lossy(b)
            .parse::<u64>()
            .unwrap_or_else(|e| panic!("TIME: {e}")),
        other => panic!("TIME: {other:?}"),
    };
    part(0) * 1000 + part(1) / 1000
}

/// What each renewal script is asked in each case: its keys past the lock's, its arguments, and
/// how the lock key is set for "held", "another's" (the key there, not this hold's) and
/// "lapsed" (the hold's entry there, its lease over: answered as gone, and the entry removed).
struct Renewal {
    file: &'static str,
    more_keys: &'static [&'static str],
    args: &'static [&'static str],
    held: &'static [&'static str],
    another: &'static [&'static str],
    lapsed: Option<&'static [&'static str]>,
    /// Another's answer, where the script names it: -1 ("the key is there but not this
    /// holder's"), or 0 where the kind's document says "the entry is gone".
    another_answer: &'static str,
}

/// `LIVE` in a hash field's value stands for an expiry a minute away on the server's clock.
const LIVE: &str = "LIVE";

const RENEWALS: [Renewal; 5] = [
    Renewal {
        file: "kinds/plain/extend.lua",
        more_keys: &[],
        args: &["a1b2", "30000"],
        held: &["SET", "K", "a1b2:5", "PX", "10000"],
        another: &["SET", "K", "c3d4:6", "PX", "10000"],
        lapsed: None,
        another_answer: "-1",
    },
    Renewal {
        file: "election/extend.lua",
        more_keys: &["fencelock:{renew}:leader"],
        args: &["a1b2", "30000"],
        held: &["SET", "K", "a1b2:5", "PX", "10000"],
        another: &["SET", "K", "c3d4:6", "PX", "10000"],
        lapsed: None,
        another_answer: "-1",
    },
    Renewal {
        file: "kinds/reentrant/extend.lua",
        more_keys: &[],
        args: &["a1b2", "30000"],
        held: &[
            "HSET",
            "K",
            "kind",
            "reentrant",
            "owner",
            "o1",
            "fence",
            "5",
            "h:a1b2",
            "1",
        ],
        another: &[
            "HSET",
            "K",
            "kind",
            "reentrant",
            "owner",
            "o2",
            "fence",
            "6",
            "h:c3d4",
            "1",
        ],
        lapsed: None,
        another_answer: "-1",
    },
    Renewal {
        file: "kinds/entry_extend.lua",
        more_keys: &[],
        args: &["p:a1b2", "30000"],
        held: &[
            "HSET",
            "K",
            "kind",
            "semaphore",
            "permits",
            "2",
            "p:a1b2",
            LIVE,
        ],
        another: &[
            "HSET",
            "K",
            "kind",
            "semaphore",
            "permits",
            "2",
            "p:c3d4",
            LIVE,
        ],
        lapsed: Some(&[
            "HSET",
            "K",
            "kind",
            "semaphore",
            "permits",
            "2",
            "p:a1b2",
            "1:5",
        ]),
        another_answer: "0",
    },
    Renewal {
        file: "kinds/semaphore/extend.lua",
        more_keys: &[],
        args: &["a1b2", "30000", "2"],
        held: &[
            "HSET",
            "K",
            "kind",
            "semaphore",
            "permits",
            "3",
            "p:a1b2",
            LIVE,
            "p:a1b2/2",
            LIVE,
        ],
        another: &[
            "HSET",
            "K",
            "kind",
            "semaphore",
            "permits",
            "3",
            "p:c3d4",
            LIVE,
        ],
        lapsed: Some(&[
            "HSET",
            "K",
            "kind",
            "semaphore",
            "permits",
            "3",
            "p:a1b2",
            "1:5",
            "p:a1b2/2",
            "1:5",
            "p:c3d4",
            LIVE,
        ]),
        another_answer: "0",
    },
];

/// Every renewal script answers 1 extended, 0 gone (or, for a hold kept in a hash, its entry
/// gone or its lease over, which removes the entry), -1 the key there but not this holder's (a
/// key of another type too), and writes nothing unless it answers 1.
#[test]
fn every_renewal_tells_extended_gone_and_anothers_apart_and_writes_only_when_extended() {
    let redis = server();
    let key = "fencelock:{renew}";
    for renewal in &RENEWALS {
        let file = renewal.file;
        let keys: Vec<&str> = std::iter::once(key)
            .chain(renewal.more_keys.iter().copied())
            .collect();
        let live = format!("{}:5", now_ms(&redis) + 60_000);
        let set = |command: &[&str]| {
            cmd(&redis, &["DEL", key]);
            let command: Vec<&str> = command
                .iter()
                .map(|a| match *a {
                    "K" => key,
                    LIVE => live.as_str(),
                    a => a,
                })
                .collect();
            cmd(&redis, &command);
            if command[0] == "HSET" {
                cmd(&redis, &["PEXPIRE", key, "10000"]);
            }
        };
        let untouched = |answer: &str, what: &str| {
            let before: Vec<String> = keys.iter().map(|k| state(&redis, k)).collect();
            let ttl = int(&redis, &["PTTL", key]);
            assert_eq!(
                eval(&redis, file, &keys, renewal.args),
                answer,
                "{file}: {what}"
            );
            let after: Vec<String> = keys.iter().map(|k| state(&redis, k)).collect();
            assert_eq!(after, before, "{file}: {what}: a key changed");
            assert!(
                int(&redis, &["PTTL", key]) <= ttl,
                "{file}: {what}: re-armed"
            );
        };

        // Held: re-armed to the lease asked (30 s, where it had 10).
        set(renewal.held);
        if let Some(record) = renewal.more_keys.first() {
            cmd(
                &redis,
                &["HSET", record, "term", "5", "since", "1", "value", "v"],
            );
            cmd(&redis, &["PEXPIRE", record, "11000"]);
        }
        assert_eq!(eval(&redis, file, &keys, renewal.args), "1", "{file}: held");
        assert!(
            int(&redis, &["PTTL", key]) > 20_000,
            "{file}: held, not re-armed"
        );
        if let Some(record) = renewal.more_keys.first() {
            assert!(
                int(&redis, &["PTTL", record]) > 30_000,
                "{file}: held, its record not kept a second past the lease"
            );
        }
        if renewal.held[0] == "HSET" && renewal.file != "kinds/reentrant/extend.lua" {
            let permits: &[&str] = if renewal.file == "kinds/semaphore/extend.lua" {
                &["p:a1b2", "p:a1b2/2"]
            } else {
                &["p:a1b2"]
            };
            for field in permits {
                let Value::BulkString(value) = cmd(&redis, &["HGET", key, field]) else {
                    panic!("{file}: held: {field} gone");
                };
                let value = String::from_utf8_lossy(&value).into_owned();
                let expiry: u64 = value.split(':').next().unwrap().parse().unwrap();
                assert!(
                    expiry > now_ms(&redis) + 20_000 && value.ends_with(":5"),
                    "{file}: held: {field} = {value}, not re-armed for 30 s with its fence"
                );
            }
        }

        // Another's.
        set(renewal.another);
        untouched(renewal.another_answer, "another holder's");

        // A key of another type.
        cmd(&redis, &["DEL", key]);
        cmd(&redis, &["RPUSH", key, "a1b2:5"]);
        untouched("-1", "a list");

        // Gone.
        cmd(&redis, &["DEL", key]);
        untouched("0", "gone");

        // The hold's lease over: gone, and its entries removed (the others kept).
        if let Some(lapsed) = renewal.lapsed {
            set(lapsed);
            assert_eq!(
                eval(&redis, file, &keys, renewal.args),
                "0",
                "{file}: lapsed"
            );
            let fields = cmd(&redis, &["HKEYS", key]);
            let fields = render(&fields);
            assert!(
                !fields.contains("'p:a1b2"),
                "{file}: lapsed entries left: {fields}"
            );
            assert!(
                fields.contains("'kind'") && fields.contains("'permits'"),
                "{file}: lapsed: {fields}"
            );
        }
        cmd(&redis, &["DEL", key]);
    }
}

/// Run-once's count of a failed run (`once/fail.lua`, after `fenced/check.lua`): counted with
/// the run's fence, `{1, fence, failures}`; a count's key of another type is named by its type
/// and a string that is not a count as such, `{-1, key, found}`, and then nothing is written
/// (not the fence either); a stale fence is `{0, accepted}`.
#[test]
fn a_failed_runs_count_names_what_it_finds_and_writes_nothing_but_a_count() {
    let redis = server();
    let (fence_key, count) = ("fencelock:fenced:{job}", "fencelock:once-failed:{job}:k");
    let file = "once/fail.lua";
    cmd(&redis, &["SET", fence_key, "100"]);
    let before = state(&redis, fence_key);

    cmd(&redis, &["RPUSH", count, "x"]);
    assert_eq!(
        eval(&redis, file, &[fence_key, count], &["200", "0"]),
        format!("[-1, '{count}', 'list']")
    );
    assert_eq!(
        state(&redis, fence_key),
        before,
        "the fence key after a list"
    );
    assert_eq!(state(&redis, count), "list ['x'] expires=false");

    cmd(&redis, &["DEL", count]);
    cmd(&redis, &["SET", count, "many"]);
    assert_eq!(
        eval(&redis, file, &[fence_key, count], &["200", "0"]),
        format!("[-1, '{count}', 'a string that is not a count']")
    );
    assert_eq!(
        state(&redis, fence_key),
        before,
        "the fence key after a non-count"
    );
    assert_eq!(state(&redis, count), "string 'many' expires=false");

    cmd(&redis, &["DEL", count]);
    assert_eq!(
        eval(&redis, file, &[fence_key, count], &["200", "60000"]),
        "[1, '200', 1]"
    );
    assert_eq!(state(&redis, fence_key), "string '200' expires=false");
    assert_eq!(state(&redis, count), "string '1' expires=true");
    assert_eq!(
        eval(&redis, file, &[fence_key, count], &["150", "60000"]),
        "[0, '200']"
    );
    assert_eq!(state(&redis, count), "string '1' expires=true");
}

/// A resignation (`election/step_down.lua`) announces `resigned:<term>`, and wakes the waiting
/// campaigns (`one` on the release channel) only when one waited: the value marked `+`.
#[test]
fn a_resignation_wakes_the_campaigns_only_when_one_waited() {
    let redis = server();
    let (key, record) = ("fencelock:{vote}", "fencelock:{vote}:leader");
    let publishes = || publishes(&redis);
    for (value, woken) in [("a1b2:7", 0), ("a1b2:7+", 1)] {
        cmd(&redis, &["SET", key, value, "PX", "10000"]);
        cmd(
            &redis,
            &["HSET", record, "term", "7", "since", "1", "value", "v"],
        );
        let before = publishes();
        assert_eq!(
            eval(
                &redis,
                "election/step_down.lua",
                &[key, record],
                &["a1b2:7"]
            ),
            "1",
            "{value}"
        );
        assert_eq!(publishes() - before, 1 + woken, "publishes for {value}");
        assert_eq!(state(&redis, key), "none  expires=false", "{value}");
        assert_eq!(state(&redis, record), "none  expires=false", "{value}");
    }
    // Not the holder: nothing.
    cmd(&redis, &["SET", key, "c3d4:8+", "PX", "10000"]);
    let before = publishes();
    assert_eq!(
        eval(
            &redis,
            "election/step_down.lua",
            &[key, record],
            &["a1b2:7"]
        ),
        "0"
    );
    assert_eq!(publishes(), before);
    assert_eq!(state(&redis, key), "string 'c3d4:8+' expires=true");
}

/// The plain lock's release (`kinds/plain/release.lua`, one server: the grant's whole value)
/// answers 1 released or passed on and 0 not held (nothing touched); it publishes nothing when
/// nobody waited, `one` on the lock's channel when the value is marked and nobody is in line,
/// and passes the lock to the first live place in line, telling it (on its own channel, then,
/// with nobody listening there, on the lock's).
#[test]
fn a_plain_release_answers_released_or_not_held_and_wakes_only_who_waited() {
    let redis = server();
    let (key, line) = ("fencelock:{give}", "fencelock:{give}:waiters");
    let file = "kinds/plain/release.lua";
    let release = || {
        let before = publishes(&redis);
        let answer = eval(&redis, file, &[key], &["a1b2:5"]);
        (answer, publishes(&redis) - before)
    };

    cmd(&redis, &["SET", key, "a1b2:5", "PX", "10000"]);
    assert_eq!(release(), ("1".to_owned(), 0), "nobody waited");
    assert_eq!(state(&redis, key), "none  expires=false");

    cmd(&redis, &["SET", key, "a1b2:5+", "PX", "10000"]);
    assert_eq!(release(), ("1".to_owned(), 1), "marked, nobody in line");
    assert_eq!(state(&redis, key), "none  expires=false");

    cmd(&redis, &["SET", key, "a1b2:5+", "PX", "10000"]);
    let lapses = (now_ms(&redis) + 60_000).to_string();
    cmd(&redis, &["ZADD", line, &lapses, "e5f6"]);
    assert_eq!(
        release(),
        ("1".to_owned(), 2),
        "one in line, not listening on its own channel"
    );
    let passed = state(&redis, key);
    assert!(
        passed.starts_with("string 'e5f6:")
            && !passed.contains('+')
            && passed.ends_with("expires=true"),
        "passed on: {passed}"
    );
    assert!(int(&redis, &["PTTL", key]) <= 1000, "the pass's claim");

    cmd(&redis, &["SET", key, "c3d4:6+", "PX", "10000"]);
    let before = state(&redis, key);
    assert_eq!(release(), ("0".to_owned(), 0), "another's");
    assert_eq!(state(&redis, key), before);
}

/// A plain lock's acquisition (`kinds/plain/acquire.lua`) and a campaign
/// (`election/campaign.lua`) mark their grant `+` when other requests of the same client wait
/// (`1` in the argument PROTOCOL.md names), a fresh grant and a holder's confirmation alike, so
/// that the release wakes them; they leave the value as it is otherwise, and a confirmation
/// re-arms the lease and answers the fence the grant had.
#[test]
fn a_grant_is_marked_when_other_requests_of_its_client_wait_and_only_then() {
    let redis = server();
    let (key, fence_key, record) = (
        "fencelock:{mark}",
        "fencelock:{mark}:fence",
        "fencelock:{mark}:leader",
    );
    for file in ["kinds/plain/acquire.lua", "election/campaign.lua"] {
        let take = |mark: &str| {
            let reply = match file {
                "kinds/plain/acquire.lua" => eval(&redis, file, &[key], &["a1b2", "30000", mark]),
                _ => eval(
                    &redis,
                    file,
                    &[key, fence_key, record],
                    &["a1b2", "30000", "v", mark],
                ),
            };
            let fence = reply.trim_matches('\'').to_owned();
            assert!(
                fence.parse::<u64>().is_ok(),
                "{file} ({mark:?}): not a grant: {reply}"
            );
            fence
        };
        let value = || match cmd(&redis, &["GET", key]) {
            Value::BulkString(v) => String::from_utf8_lossy(&v).into_owned(),
            other => panic!("{file}: the lock's value: {other:?}"),
        };
        for (grant_mark, confirm_mark) in [("1", ""), ("", "1"), ("1", "1")] {
            cmd(&redis, &["DEL", key, record]);
            let fence = take(grant_mark);
            let marked = grant_mark == "1";
            let suffix = if marked { "+" } else { "" };
            assert_eq!(
                value(),
                format!("a1b2:{fence}{suffix}"),
                "{file}: the grant"
            );
            cmd(&redis, &["PEXPIRE", key, "5000"]);
            assert_eq!(
                take(confirm_mark),
                fence,
                "{file}: the confirmation's fence"
            );
            assert_eq!(
                value(),
                format!("a1b2:{fence}+"),
                "{file}: after a grant {} and a confirmation {}",
                if marked { "marked" } else { "unmarked" },
                if confirm_mark == "1" {
                    "asked to mark"
                } else {
                    "not"
                }
            );
            assert!(
                int(&redis, &["PTTL", key]) > 20_000,
                "{file}: the confirmation did not re-arm the lease"
            );
        }
        // Never marked: the value stays as the grant wrote it.
        cmd(&redis, &["DEL", key, record]);
        let fence = take("");
        assert_eq!(take(""), fence, "{file}: the confirmation's fence");
        assert_eq!(value(), format!("a1b2:{fence}"), "{file}: never marked");
        cmd(&redis, &["DEL", key, record]);
    }
}

/// A semaphore's refused request (`kinds/semaphore/acquire.lua`) is told how long to wait: until
/// the soonest permit's lease ends, or, with the permits free but kept for a request that waits
/// longer, its own place's duration (at least a second), and a waiting request takes its place
/// with its arrival.
#[test]
fn a_refused_semaphore_request_is_told_the_soonest_end_or_its_places_duration() {
    let redis = server();
    let (key, fence_key) = ("fencelock:{permits}", "fencelock:{permits}:fence");
    let file = "kinds/semaphore/acquire.lua";
    let told = |args: &[&str]| told(&redis, file, &[key, fence_key], args);
    let now = now_ms(&redis);
    let (soon, late) = (format!("{}:5", now + 10_000), format!("{}:6", now + 20_000));
    for (first, second) in [(&soon, &late), (&late, &soon)] {
        let fields = [
            "kind",
            "semaphore",
            "permits",
            "2",
            "p:x1",
            first,
            "p:x2",
            second,
        ];
        hash(&redis, key, &fields, "30000");
        let ms = told(&["a1b2", "30000", "2"]);
        assert!(
            (8_000..=10_000).contains(&ms),
            "told {ms} ms, not the soonest lease's end"
        );
    }
    // Both permits free, kept for a request that waits longer (it wants both).
    for (place, expected) in [("5000", 5000), ("500", 1000)] {
        let ahead = format!("{}:2:{}", now + 60_000, now - 100);
        let fields = ["kind", "semaphore", "permits", "2", "w:y1", &ahead];
        hash(&redis, key, &fields, "60000");
        let wants = format!("1:{place}");
        assert_eq!(
            told(&["a1b2", "30000", "2", &wants]),
            expected,
            "place {place}"
        );
        let Value::BulkString(mine) = cmd(&redis, &["HGET", key, "w:a1b2"]) else {
            panic!("place {place}: no waiting entry");
        };
        let mine = String::from_utf8_lossy(&mine).into_owned();
        let parts: Vec<&str> = mine.split(':').collect();
        let expiry: u64 = parts[0].parse().unwrap_or(0);
        let arrival: u64 = parts.get(2).and_then(|a| a.parse().ok()).unwrap_or(0);
        let lasts: u64 = place.parse().unwrap_or(0);
        assert!(
            parts.len() == 3 && parts[1] == "1" && arrival >= now && expiry == arrival + lasts,
            "place {place}: the waiting entry {mine}"
        );
    }
    cmd(&redis, &["DEL", key, fence_key]);
}

/// A semaphore holder's retry (a lost reply) in the very millisecond its permit's lease ends
/// (`kinds/semaphore/acquire.lua`, on a server whose clock stands still) is no confirmation: the
/// permit is over, and the retry is a new grant, with a new fence.
#[test]
fn a_semaphore_holders_retry_in_the_millisecond_its_permit_ends_is_a_new_grant() {
    let now = 1_800_000_000_000_u64;
    let server = clocked(now);
    let redis: &RedisServer = &server;
    let (key, fence_key) = ("fencelock:{ending}", "fencelock:{ending}:fence");
    let file = "kinds/semaphore/acquire.lua";
    for (expiry, confirmed) in [(now + 1, true), (now, false)] {
        let permit = format!("{expiry}:5");
        let fields = ["kind", "semaphore", "permits", "1", "p:a1b2", &permit];
        hash(redis, key, &fields, "30000");
        cmd(redis, &["SET", fence_key, "5"]);
        let reply = eval(redis, file, &[key, fence_key], &["a1b2", "30000", "1"]);
        let fence = if confirmed {
            "5".to_owned()
        } else {
            format!("{}", now * 1000)
        };
        assert_eq!(
            reply.trim_matches('\''),
            fence,
            "a retry with {} ms of the permit left",
            expiry - now
        );
        let held = render(&cmd(redis, &["HGET", key, "p:a1b2"]));
        assert_eq!(held, format!("'{}:{fence}'", now + 30_000));
    }
}

/// A refused read or write request (`kinds/rwlock/read.lua`, `write.lua`) is told how long
/// until what is in its way can lapse: the soonest reader's lease, the writer's, or the soonest
/// place of the waiters of the other side that came before it; a request that waits records its
/// own place, with its arrival after theirs.
#[test]
fn a_refused_read_or_write_is_told_the_soonest_lapse_in_its_way() {
    let redis = server();
    let (key, fence_key) = ("fencelock:{rw}", "fencelock:{rw}:fence");
    let told = |file: &str, args: &[&str]| told(&redis, file, &[key, fence_key], args);
    let now = now_ms(&redis);
    let (soon, late) = (now + 10_000, now + 20_000);
    let set = |fields: &[(&str, String)]| {
        let mut all = vec!["kind", "rw"];
        for (field, value) in fields {
            all.push(field);
            all.push(value);
        }
        hash(&redis, key, &all, "60000");
    };
    let write = ["h1", "30000", "o1", "0"];
    let read = ["h1", "30000", "o1", "0"];
    let near = |ms: i64, what: &str| {
        assert!((8_000..=10_000).contains(&ms), "{what}: told {ms} ms");
    };
    for (a, b) in [(soon, late), (late, soon)] {
        // Two readers in a writer's way.
        set(&[("r:x1", format!("{a}:a0")), ("r:x2", format!("{b}:b0"))]);
        near(
            told("kinds/rwlock/write.lua", &write),
            "a write behind two readers",
        );
        // Two readers waiting, who came first, in a writer's way (nobody holds).
        set(&[
            ("q:x1", format!("{a}:{}", now - 200)),
            ("q:x2", format!("{b}:{}", now - 100)),
        ]);
        near(
            told("kinds/rwlock/write.lua", &write),
            "a write behind two waiting readers",
        );
        // Two writers waiting, who came first, in a reader's way.
        set(&[
            ("i:x1", format!("{a}:{}", now - 200)),
            ("i:x2", format!("{b}:{}", now - 100)),
        ]);
        near(
            told("kinds/rwlock/read.lua", &read),
            "a read behind two waiting writers",
        );
    }
    // A writer in a reader's way.
    set(&[("w:x1", format!("{soon}:a0:7"))]);
    near(
        told("kinds/rwlock/read.lua", &read),
        "a read behind a writer",
    );
    // A reader that waits records its place: a lapse and an arrival after the waiter before it.
    // (An arrival ahead of the clock: the one after it is then told apart from `now`.)
    let arrived = now + 60_000;
    set(&[
        ("w:x1", format!("{soon}:a0:7")),
        ("q:x2", format!("{late}:{arrived}")),
    ]);
    told("kinds/rwlock/read.lua", &["h1", "30000", "o1", "5000"]);
    let Value::BulkString(mine) = cmd(&redis, &["HGET", key, "q:h1"]) else {
        panic!("no waiting entry");
    };
    let mine = String::from_utf8_lossy(&mine).into_owned();
    let (expiry, arrival) = mine.split_once(':').unwrap_or(("", ""));
    let (expiry, arrival): (u64, u64) = (expiry.parse().unwrap_or(0), arrival.parse().unwrap_or(0));
    assert!(
        arrival == arrived + 1 && expiry >= now + 5000 && expiry <= now_ms(&redis) + 5000,
        "the waiting entry {mine} (arrivals: the other's {arrived})"
    );
    cmd(&redis, &["DEL", key, fence_key]);
}

/// Asking the holders of a lock to let go (`revoke/ask.lua`) records the last fence for as long
/// as the hold may last, and wakes them; a lock in its lease's last millisecond (`PTTL` 0, on a
/// server whose clock stands still) is asked nothing, as a free lock is: the answer is 0, and
/// nothing is recorded or published.
#[test]
fn a_lock_in_its_last_millisecond_is_asked_nothing_as_a_free_lock_is() {
    let now = 1_800_000_000_000_u64;
    let mut server = clocked(now);
    let (key, fence_key, asked) = (
        "fencelock:{ask}",
        "fencelock:{ask}:fence",
        "fencelock:{ask}:revoke",
    );
    let file = "revoke/ask.lua";
    let redis: &RedisServer = &server;
    cmd(redis, &["SET", key, "a1b2:5", "PX", "1"]);
    cmd(redis, &["SET", fence_key, "5"]);
    let before = publishes(redis);
    assert_eq!(eval(redis, file, &[key, fence_key, asked], &["c"]), "1");
    assert_eq!(publishes(redis) - before, 1);
    assert_eq!(state(redis, asked), "string '5' expires=true");
    assert_eq!(int(redis, &["PTTL", asked]), 1);
    cmd(redis, &["DEL", asked]);
    server
        .advance(std::time::Duration::from_millis(1))
        .unwrap_or_else(|e| panic!("cannot move the server's clock: {e}"));
    let redis: &RedisServer = &server;
    assert_eq!(int(redis, &["PTTL", key]), 0);
    let before = publishes(redis);
    assert_eq!(eval(redis, file, &[key, fence_key, asked], &["c"]), "0");
    assert_eq!(
        publishes(redis),
        before,
        "published for a lock in its last millisecond"
    );
    assert_eq!(state(redis, asked), "none  expires=false");
    cmd(redis, &["DEL", key]);
    assert_eq!(eval(redis, file, &[key, fence_key, asked], &["c"]), "0");
    assert_eq!(state(redis, asked), "none  expires=false");
}

/// The operator's view (`admin/inspect.lua`) lists a semaphore's waiting requests in the order
/// the semaphore grants them: by arrival, and of two that arrived in the same millisecond the
/// smaller token first.
#[test]
fn the_operators_view_lists_waiters_of_one_millisecond_by_token() {
    let redis = server();
    let key = "fencelock:{view}";
    let keys = [
        key,
        "fencelock:{view}:fence",
        "fencelock:{view}:queue",
        "fencelock:{view}:alive",
        "fencelock:{view}:waiters",
    ];
    let now = now_ms(&redis);
    let lapses = now + 60_000;
    let arrived = now - 1000;
    let (early, tie) = (
        format!("{lapses}:1:{}", arrived - 1),
        format!("{lapses}:1:{arrived}"),
    );
    for order in [["w:c3", "w:b2", "w:a1"], ["w:a1", "w:b2", "w:c3"]] {
        let mut fields = vec!["kind", "semaphore", "permits", "1"];
        for field in order {
            fields.push(field);
            fields.push(if field == "w:c3" { &early } else { &tie });
        }
        let held = format!("{lapses}:9");
        fields.extend(["p:d4", held.as_str()]);
        hash(&redis, key, &fields, "60000");
        let reply = eval(&redis, "admin/inspect.lua", &keys, &[]);
        let waiters: Vec<&str> = reply
            .split(", ")
            .filter(|part| part.starts_with("'wait'"))
            .collect();
        assert_eq!(waiters.len(), 3, "{reply}");
        let order: Vec<usize> = ["'c3'", "'a1'", "'b2'"]
            .iter()
            .map(|token| reply.find(token).unwrap_or(usize::MAX))
            .collect();
        assert!(
            order[0] < order[1] && order[1] < order[2],
            "not by arrival, then token: {reply}"
        );
    }
    cmd(&redis, &["DEL", key]);
}

/// A release over Redlock (`kinds/plain/release.lua` with the owner's fence) writes that fence
/// back as a floor: the fence key is raised to it when it is missing or lower, left when it is
/// higher, and left alone when it is not a number (nothing of another's is overwritten).
#[test]
fn a_release_over_redlock_raises_the_fence_key_to_its_fence_and_never_lowers_it() {
    let redis = server();
    let (key, fence_key) = ("fencelock:{floor}", "fencelock:{floor}:fence");
    let file = "kinds/plain/release.lua";
    let cases: [(Option<&str>, &str); 4] = [
        (None, "string '9000' expires=false"),
        (Some("8999"), "string '9000' expires=false"),
        (Some("9001"), "string '9001' expires=false"),
        (Some("many"), "string 'many' expires=false"),
    ];
    for (before, after) in cases {
        cmd(&redis, &["DEL", fence_key]);
        if let Some(before) = before {
            cmd(&redis, &["SET", fence_key, before]);
        }
        cmd(&redis, &["SET", key, "a1b2:9000", "PX", "10000"]);
        assert_eq!(
            eval(&redis, file, &[key], &["a1b2", "9000"]),
            "1",
            "{before:?}"
        );
        assert_eq!(state(&redis, key), "none  expires=false", "{before:?}");
        assert_eq!(
            state(&redis, fence_key),
            after,
            "the fence key was {before:?}"
        );
    }
    // A fence key of another type: left as it is.
    cmd(&redis, &["DEL", fence_key]);
    cmd(&redis, &["RPUSH", fence_key, "x"]);
    cmd(&redis, &["SET", key, "a1b2:9000", "PX", "10000"]);
    assert_eq!(eval(&redis, file, &[key], &["a1b2", "9000"]), "1");
    assert_eq!(state(&redis, fence_key), "list ['x'] expires=false");
    // No fence to write back (a grant given back unseen): nothing written.
    cmd(&redis, &["DEL", fence_key]);
    cmd(&redis, &["SET", key, "a1b2:9000", "PX", "10000"]);
    assert_eq!(eval(&redis, file, &[key], &["a1b2", ""]), "1");
    assert_eq!(state(&redis, fence_key), "none  expires=false");
}

/// A renewal of a lock kept in a hash (`kinds/reentrant/extend.lua`, `kinds/entry_extend.lua`)
/// lengthens the key's expiry to the lease asked and never shortens it: other holds' leases live
/// in the same key.
#[test]
fn a_renewal_never_shortens_a_shared_keys_expiry() {
    let redis = server();
    let key = "fencelock:{shared}";
    let now = now_ms(&redis);
    let live = format!("{}:5", now + 60_000);
    let cases: [(&str, Vec<&str>, [&str; 2]); 2] = [
        (
            "kinds/reentrant/extend.lua",
            vec![
                "kind",
                "reentrant",
                "owner",
                "o1",
                "fence",
                "5",
                "h:a1b2",
                "1",
                "h:c3d4",
                "1",
            ],
            ["a1b2", "30000"],
        ),
        (
            "kinds/entry_extend.lua",
            vec![
                "kind",
                "semaphore",
                "permits",
                "2",
                "p:a1b2",
                &live,
                "p:c3d4",
                &live,
            ],
            ["p:a1b2", "30000"],
        ),
    ];
    for (file, fields, args) in cases {
        for (ttl, longer) in [("60000", false), ("10000", true)] {
            hash(&redis, key, &fields, ttl);
            assert_eq!(eval(&redis, file, &[key], &args), "1", "{file}, {ttl}");
            let pttl = int(&redis, &["PTTL", key]);
            if longer {
                assert!(
                    (20_000..=30_000).contains(&pttl),
                    "{file}: {ttl} ms left, now {pttl}"
                );
            } else {
                assert!(pttl > 50_000, "{file}: shortened from {ttl} ms to {pttl}");
            }
        }
    }
    cmd(&redis, &["DEL", key]);
}

/// A lock key that holds something no fencelock lock writes (`kind_of` in script/prelude.lua)
/// is named by what it is, `{-1, key, found}`, by the operator's view and, for a key of another
/// type, by an acquisition (a string is a holder's value to it, `{0, -1}`: held, without expiry),
/// and left as it is: a hash without `kind` is a `hash`.
#[test]
fn a_lock_key_that_is_no_lock_is_named_by_what_it_is() {
    let redis = server();
    let key = "fencelock:{foreign}";
    let keys = [
        key,
        "fencelock:{foreign}:fence",
        "fencelock:{foreign}:queue",
        "fencelock:{foreign}:alive",
        "fencelock:{foreign}:waiters",
    ];
    let cases: [(&[&str], &str); 3] = [
        (&["HSET", key, "owner", "someone"], "hash"),
        (
            &["SET", key, "not a lock"],
            "a string that is not a fencelock lock",
        ),
        (&["SADD", key, "x"], "set"),
    ];
    for (write, found) in cases {
        cmd(&redis, &["DEL", key]);
        cmd(&redis, write);
        let before = state_of_any(&redis, key);
        let named = format!("[-1, '{key}', '{found}']");
        let acquired = if write[0] == "SET" {
            "[0, -1]"
        } else {
            named.as_str()
        };
        assert_eq!(
            eval(
                &redis,
                "kinds/plain/acquire.lua",
                &[key],
                &["a1b2", "30000"]
            ),
            acquired,
            "an acquisition"
        );
        assert_eq!(
            eval(&redis, "admin/inspect.lua", &keys, &[]),
            named,
            "the view"
        );
        assert_eq!(state_of_any(&redis, key), before, "{found}: changed");
    }
    cmd(&redis, &["DEL", key]);
}

/// A key's type and its dump (any type).
fn state_of_any(redis: &RedisServer, key: &str) -> String {
    format!(
        "{} {}",
        render(&cmd(redis, &["TYPE", key])),
        render(&cmd(redis, &["DUMP", key]))
    )
}

/// A fence key that holds something else (`last_fence` in script/prelude.lua) is named by what
/// it is, `{-1, fence key, found}`, by every kind that reads it before its grant, and nothing is
/// written.
#[test]
fn a_fence_key_that_is_no_fence_is_named_by_what_it_is() {
    let redis = server();
    let (key, fence_key) = ("fencelock:{nofence}", "fencelock:{nofence}:fence");
    let grants: [(&str, &[&str]); 3] = [
        ("kinds/semaphore/acquire.lua", &["a1b2", "30000", "2"]),
        (
            "kinds/reentrant/acquire.lua",
            &["a1b2", "30000", "o1", "10"],
        ),
        ("kinds/rwlock/write.lua", &["a1b2", "30000", "o1", "0"]),
    ];
    let fences: [(&[&str], &str); 2] = [
        (&["RPUSH", fence_key, "1"], "list"),
        (&["SET", fence_key, "many"], "a string that is not a number"),
    ];
    for (file, args) in grants {
        for (write, found) in fences {
            cmd(&redis, &["DEL", key, fence_key]);
            cmd(&redis, write);
            let before = state_of_any(&redis, fence_key);
            assert_eq!(
                eval(&redis, file, &[key, fence_key], args),
                format!("[-1, '{fence_key}', '{found}']"),
                "{file}"
            );
            assert_eq!(state_of_any(&redis, fence_key), before, "{file}: {found}");
            assert_eq!(state(&redis, key), "none  expires=false", "{file}: {found}");
        }
    }
    cmd(&redis, &["DEL", key, fence_key]);
}
