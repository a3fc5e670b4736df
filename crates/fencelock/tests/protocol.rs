//! docs/PROTOCOL.md's examples are what the scripts really write: each kind of lock is taken
//! through the library on a real server, every key under the prefix is read back (type, expiry,
//! value, hash fields, sorted-set members), and the keys must be exactly the example's, of the
//! same types, with values of the shapes its placeholders name; a release's message must be
//! the payload the example shows. Every example of the document is checked here.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;

use fencelock::fenced::Writes;
use fencelock::{Client, LockGuard, LockRequest};
use fencelock_testkit::RedisServer;
use futures_util::StreamExt;

use common::server;

/// Every example this file checks, by the name after `example:` in the document.
const CHECKED: [&str; 17] = [
    "lock",
    "lock-waited",
    "lock-passed",
    "lock-released",
    "fair-waited",
    "fair-passed",
    "reentrant",
    "reentrant-released",
    "rw-read",
    "rw-write",
    "semaphore",
    "semaphore-released",
    "fenced",
    "lock-labelled",
    "lock-labelled-released",
    "election",
    "election-resigned",
];

/// Long enough that nothing lapses on a loaded machine while a test looks.
const LONG: Duration = Duration::from_secs(60);

/// One key as the document shows it or as the server holds it.
#[derive(Debug, Clone)]
struct Key {
    name: String,
    /// `string`, `hash` or `zset`.
    kind: String,
    /// `expires` (a positive TTL) or `never`.
    expiry: String,
    /// A string's value.
    value: Option<String>,
    /// A hash's fields and values, a sorted set's members and scores.
    entries: Vec<(String, String)>,
}

/// One example block: the message its last step published, if any, and every key.
#[derive(Debug, Default)]
struct Example {
    publish: Option<(String, String)>,
    keys: Vec<Key>,
}

/// The document's text.
fn document() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/PROTOCOL.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every example block of the document, by name: a fenced block whose first line is
/// `example: NAME`.
fn examples() -> BTreeMap<String, Example> {
    let text = document();
    let mut examples = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("```") {
            continue;
        }
        let block: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        let Some(name) = block.first().and_then(|l| l.strip_prefix("example:")) else {
            continue;
        };
        let name = name.trim().to_owned();
        let example = parse_example(&name, &block[1..]);
        assert!(
            examples.insert(name.clone(), example).is_none(),
            "two examples named {name}"
        );
    }
    examples
}

fn parse_example(name: &str, lines: &[&str]) -> Example {
    let mut example = Example::default();
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with(char::is_whitespace) {
            let Some(key) = example.keys.last_mut() else {
                panic!("{name}: an indented line before any key: {line:?}");
            };
            match words.as_slice() {
                [field, value] => key.entries.push(((*field).to_owned(), (*value).to_owned())),
                _ => panic!("{name}: not `FIELD VALUE`: {line:?}"),
            }
            continue;
        }
        match words.as_slice() {
            ["publish", channel, payload] => {
                assert!(example.publish.is_none(), "{name}: two messages");
                example.publish = Some(((*channel).to_owned(), (*payload).to_owned()));
            }
            [key, kind, expiry, rest @ ..] => {
                assert!(
                    matches!(*expiry, "expires" | "never"),
                    "{name}: expiry {expiry:?} is neither `expires` nor `never`"
                );
                let value = match (*kind, rest) {
                    ("string", [value]) => Some((*value).to_owned()),
                    ("hash" | "zset", []) => None,
                    _ => panic!("{name}: not `KEY TYPE EXPIRY [VALUE]`: {line:?}"),
                };
                example.keys.push(Key {
                    name: (*key).to_owned(),
                    kind: (*kind).to_owned(),
                    expiry: (*expiry).to_owned(),
                    value,
                    entries: Vec::new(),
                });
            }
            _ => panic!("{name}: not a key, a field or a message: {line:?}"),
        }
    }
    example
}

/// Whether `text` has the shape of `pattern`: its placeholders `<token>` (32 lowercase hex
/// digits), `<fence>` and `<ms>` (decimal integers without a leading zero) in place, everything
/// else literal.
fn matches(pattern: &str, text: &str) -> bool {
    let Some(open) = pattern.find('<') else {
        return pattern == text;
    };
    let Some(len) = pattern[open..].find('>') else {
        return pattern == text;
    };
    let (literal, placeholder, rest) = (
        &pattern[..open],
        &pattern[open..=open + len],
        &pattern[open + len + 1..],
    );
    let Some(text) = text.strip_prefix(literal) else {
        return false;
    };
    let taken = match placeholder {
        "<token>" => {
            let hex = text
                .bytes()
                .take_while(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                .count();
            (hex >= 32).then_some(32)
        }
        "<fence>" | "<ms>" => {
            let digits = text.bytes().take_while(u8::is_ascii_digit).count();
            (digits > 0 && !text.starts_with('0')).then_some(digits)
        }
        other => panic!("unknown placeholder {other} in {pattern:?}"),
    };
    taken.is_some_and(|n| matches(rest, &text[n..]))
}

/// Whether the stored entries are the documented ones: one to one, each of its pattern's shape.
fn entries_match(documented: &[(String, String)], stored: &[(String, String)]) -> bool {
    let Some(((field, value), others)) = documented.split_first() else {
        return stored.is_empty();
    };
    (0..stored.len()).any(|i| {
        let (f, v) = &stored[i];
        if !(matches(field, f) && matches(value, v)) {
            return false;
        }
        let mut rest = stored.to_vec();
        rest.remove(i);
        entries_match(others, &rest)
    })
}

fn text(value: redis::Value, what: &str) -> String {
    redis::from_redis_value(value).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn pairs(value: redis::Value, what: &str) -> Vec<(String, String)> {
    let flat: Vec<String> =
        redis::from_redis_value(value).unwrap_or_else(|e| panic!("{what}: {e}"));
    flat.chunks(2)
        .map(|pair| match pair {
            [a, b] => (a.clone(), b.clone()),
            _ => panic!("{what}: an odd reply {flat:?}"),
        })
        .collect()
}

fn cmd(redis: &RedisServer, args: &[&str]) -> redis::Value {
    redis
        .cmd(args)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

/// Every key under `fencelock:` with what it holds.
fn stored(redis: &RedisServer) -> Vec<Key> {
    common::keys(redis)
        .into_iter()
        .filter(|key| key.starts_with("fencelock:"))
        .map(|name| {
            let kind = text(cmd(redis, &["TYPE", &name]), "TYPE");
            let expiry = match cmd(redis, &["PTTL", &name]) {
                redis::Value::Int(-1) => "never",
                redis::Value::Int(ms) if ms > 0 => "expires",
                other => panic!("PTTL {name}: {other:?}"),
            };
            let (value, entries) = match kind.as_str() {
                "string" => (Some(text(cmd(redis, &["GET", &name]), "GET")), Vec::new()),
                "hash" => (None, pairs(cmd(redis, &["HGETALL", &name]), "HGETALL")),
                "zset" => (
                    None,
                    pairs(
                        cmd(redis, &["ZRANGE", &name, "0", "-1", "WITHSCORES"]),
                        "ZRANGE",
                    ),
                ),
                other => panic!("{name} is a {other}"),
            };
            // A label's key ends with its hold token.
            let name = name
                .split_once(":label:")
                .map(|(lock, _)| format!("{lock}:label:<token>"))
                .unwrap_or(name);
            Key {
                name,
                kind,
                expiry: expiry.to_owned(),
                value,
                entries,
            }
        })
        .collect()
}

/// Asserts that the server holds exactly the keys of example `name`, and that `message` (what
/// the last step published, if the example shows one) is the documented one, on the documented
/// channel.
fn assert_example(redis: &RedisServer, name: &str, message: Option<&Message>) {
    let examples = examples();
    let example = examples
        .get(name)
        .unwrap_or_else(|| panic!("docs/PROTOCOL.md has no example {name}"));
    let keys = stored(redis);
    let documented: Vec<&str> = example.keys.iter().map(|k| k.name.as_str()).collect();
    let mut names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    let mut expected = documented.clone();
    names.sort_unstable();
    expected.sort_unstable();
    assert_eq!(names, expected, "{name}: the keys under the prefix");
    for doc in &example.keys {
        let Some(key) = keys.iter().find(|k| k.name == doc.name) else {
            continue;
        };
        let shaped = key.kind == doc.kind
            && key.expiry == doc.expiry
            && match (&doc.value, &key.value) {
                (Some(pattern), Some(value)) => matches(pattern, value),
                (None, None) => true,
                _ => false,
            }
            && entries_match(&doc.entries, &key.entries);
        assert!(shaped, "{name}: {} is\n{key:#?}\nnot\n{doc:#?}", doc.name);
    }
    match (&example.publish, message) {
        (None, None) => {}
        (Some((channel, pattern)), Some(heard)) => {
            // An election announces on a channel of its own; every lock publishes releases
            // (on the lock's channel, or on a waiter's own, which begins with it).
            let suffix = if name.starts_with("election") {
                "announce"
            } else {
                "released"
            };
            let lock_channel = format!("fencelock:{{{}}}:{suffix}", lock_name(&example.keys));
            assert!(
                channel == &lock_channel || channel.starts_with(&format!("{lock_channel}:")),
                "{name}: the documented channel {channel:?} is not the lock's"
            );
            assert!(
                matches(channel, &heard.channel),
                "{name}: published on {:?}, not {channel:?}",
                heard.channel
            );
            let payload = &heard.payload;
            assert!(
                matches(pattern, payload),
                "{name}: the message {payload:?} is not {pattern:?}"
            );
        }
        (documented, heard) => {
            panic!(
                "{name}: the document shows the message {documented:?}, the test heard {heard:?}"
            )
        }
    }
}

/// The lock's name in an example's keys (`fencelock:{NAME}...`).
fn lock_name(keys: &[Key]) -> String {
    keys.iter()
        .find_map(|k| {
            let rest = k.name.strip_prefix("fencelock:{")?;
            Some(rest.split('}').next()?.to_owned())
        })
        .unwrap_or_else(|| panic!("no lock key in {keys:?}"))
}

/// A subscription of its own to a lock's release channels (a plain connection, not the
/// library's).
struct Released(redis::aio::PubSub);

/// A message heard: its channel and its payload.
#[derive(Debug)]
struct Message {
    channel: String,
    payload: String,
}

impl Released {
    /// The lock's channel and every waiter's own (`<channel>:<token>`), by a pattern.
    async fn subscribe(redis: &RedisServer, name: &str) -> Self {
        let mut pubsub = Self::connect(redis).await;
        let pattern = format!("fencelock:{{{name}}}:released*");
        pubsub
            .psubscribe(&pattern)
            .await
            .unwrap_or_else(|e| panic!("PSUBSCRIBE {pattern}: {e}"));
        Released(pubsub)
    }

    async fn on(redis: &RedisServer, channel: &str) -> Self {
        let mut pubsub = Self::connect(redis).await;
        pubsub
            .subscribe(channel)
            .await
            .unwrap_or_else(|e| panic!("SUBSCRIBE {channel}: {e}"));
        Released(pubsub)
    }

    async fn connect(redis: &RedisServer) -> redis::aio::PubSub {
        let client = redis::Client::open(redis.url()).unwrap_or_else(|e| panic!("{e}"));
        client
            .get_async_pubsub()
            .await
            .unwrap_or_else(|e| panic!("pub/sub connection: {e}"))
    }

    /// The next message.
    async fn next(&mut self) -> Message {
        let message = tokio::time::timeout(LONG, self.0.on_message().next())
            .await
            .unwrap_or_else(|_| panic!("no release message within {LONG:?}"))
            .unwrap_or_else(|| panic!("the subscription ended"));
        Message {
            channel: message.get_channel_name().to_owned(),
            payload: message
                .get_payload()
                .unwrap_or_else(|e| panic!("payload: {e}")),
        }
    }
}

fn client(redis: &RedisServer) -> Client {
    Client::builder(&redis.url())
        .build()
        .unwrap_or_else(|e| panic!("cannot build a client: {e}"))
}

/// A request with a long lease and a long place in line, so that nothing lapses while the test
/// looks.
fn patient(request: LockRequest) -> LockRequest {
    request.ttl(LONG).queue_timeout(LONG).wait_up_to(LONG)
}

async fn take(request: LockRequest) -> LockGuard {
    patient(request)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("acquire: {e}"))
}

/// Waits until `ready` says the server is in the state the next step needs.
async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    common::wait_for_count(what, true, LONG, &mut ready).await;
}

fn cardinality(redis: &RedisServer, key: &str) -> i64 {
    common::integer_reply(redis, &["ZCARD", key])
}

fn has_field_starting(redis: &RedisServer, key: &str, prefix: &str) -> bool {
    !common::fields_starting(redis, key, prefix).is_empty()
}

/// The token and fence of a passed lock's message `to:<token>:<fence>:<ms>:<ends>`, after
/// checking that the claim ends no later than the place would have lapsed, and at most the
/// claim (1000 ms) after `released_at` (the server's ms just before the release).
fn passed(payload: &str, released_at: u64) -> (String, u64) {
    let parts: Vec<&str> = payload.split(':').collect();
    let number = |part: &str| -> u64 { part.parse().unwrap_or_else(|e| panic!("{payload}: {e}")) };
    match parts.as_slice() {
        ["to", token, fence, lapses, ends] => {
            let (lapses, ends) = (number(lapses), number(ends));
            assert!(ends <= lapses, "{payload}: the claim outlasts the place");
            assert!(
                ends <= released_at + 1000 + 50,
                "{payload}: a claim longer than 1000 ms after {released_at}"
            );
            ((*token).to_owned(), number(fence))
        }
        _ => panic!("not a pass: {payload}"),
    }
}

fn get(redis: &RedisServer, key: &str) -> String {
    text(cmd(redis, &["GET", key]), "GET")
}

#[test]
fn every_example_of_the_document_is_checked() {
    let documented: Vec<String> = examples().into_keys().collect();
    let mut checked: Vec<String> = CHECKED.iter().map(|s| (*s).to_owned()).collect();
    checked.sort_unstable();
    assert_eq!(documented, checked);
    let text = document();
    assert!(text.contains("**Protocol version 1.**"), "the version line");
}

#[test]
fn placeholders_match_values_of_their_shape_only() {
    let token = "0123456789abcdef0123456789abcdef";
    assert!(matches(
        "<token>:<fence>",
        &format!("{token}:1764000000123456")
    ));
    assert!(matches("<token>:<fence>+", &format!("{token}:17+")));
    assert!(!matches("<token>:<fence>", &format!("{token}:17+")));
    assert!(!matches("<token>:<fence>+", &format!("{token}:17")));
    assert!(!matches("<token>", &token.to_uppercase()));
    assert!(!matches("<token>", &token[1..]));
    assert!(!matches("<token>", &format!("{token}0")));
    assert!(!matches("<fence>", "017"));
    assert!(!matches("<ms>", ""));
    assert!(matches(
        "to:<token>:<fence>:<ms>:<ms>",
        &format!("to:{token}:5:6:7")
    ));
    assert!(matches("1", "1") && !matches("1", "2"));
    let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };
    assert!(entries_match(
        &pairs(&[("kind", "rw"), ("r:<token>", "<ms>:<token>")]),
        &pairs(&[
            (&format!("r:{token}"), &format!("5:{token}")),
            ("kind", "rw")
        ]),
    ));
    assert!(!entries_match(
        &pairs(&[("kind", "rw")]),
        &pairs(&[("kind", "rw"), ("extra", "1")]),
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_lock_writes_what_the_document_shows() {
    let redis = server();
    let (a, b, c) = (client(&redis), client(&redis), client(&redis));

    let held = take(a.lock("jobs")).await;
    assert_example(&redis, "lock", None);
    assert_eq!(
        get(&redis, "fencelock:{jobs}:fence"),
        held.fence().to_string()
    );

    // Another client waits: its first try marks the value, its waiting try takes a place.
    let waiter = tokio::spawn(patient(b.lock("jobs")).acquire());
    until("a place in line", || {
        cardinality(&redis, "fencelock:{jobs}:waiters") == 1
    })
    .await;
    assert_example(&redis, "lock-waited", None);

    let mut released = Released::subscribe(&redis, "jobs").await;
    let released_at = common::server_ms(&redis);
    assert!(held.release().await.unwrap());
    let message = released.next().await;
    let next = waiter.await.unwrap().unwrap();
    assert_example(&redis, "lock-passed", Some(&message));
    // The message names the new holder and its fence, as the lock's value does.
    let (token, fence) = passed(&message.payload, released_at);
    assert_eq!(fence, next.fence());
    assert_eq!(get(&redis, "fencelock:{jobs}"), format!("{token}:{fence}"));
    // On the channel of the waiter it was passed to.
    assert_eq!(
        message.channel,
        format!("fencelock:{{jobs}}:released:{token}")
    );

    // A try that does not wait marks the value too; with nobody in line, the release wakes one.
    assert!(c.lock("jobs").try_acquire().await.unwrap().is_none());
    assert!(get(&redis, "fencelock:{jobs}").ends_with('+'));
    assert!(next.release().await.unwrap());
    let message = released.next().await;
    assert_example(&redis, "lock-released", Some(&message));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fair_lock_writes_what_the_document_shows() {
    let redis = server();
    let (a, b) = (client(&redis), client(&redis));
    let held = take(a.fair_lock("reports")).await;
    let before = common::server_ms(&redis);
    let waiter = tokio::spawn(patient(b.fair_lock("reports")).acquire());
    until("a place in the queue", || {
        cardinality(&redis, "fencelock:{reports}:alive") == 1
    })
    .await;
    assert_example(&redis, "fair-waited", None);
    // The ticket, `max(last + 1, server ms)`, of the first in the queue: when it arrived.
    let ticket = match cmd(
        &redis,
        &[
            "ZRANGE",
            "fencelock:{reports}:queue",
            "0",
            "0",
            "WITHSCORES",
        ],
    ) {
        redis::Value::Array(reply) if reply.len() == 2 => text(reply[1].clone(), "ZRANGE")
            .parse::<u64>()
            .unwrap_or_else(|e| panic!("the ticket: {e}")),
        other => panic!("ZRANGE: {other:?}"),
    };
    assert!(
        (before..=common::server_ms(&redis)).contains(&ticket),
        "ticket {ticket}, not the arrival's server ms (after {before})"
    );

    let mut released = Released::subscribe(&redis, "reports").await;
    let released_at = common::server_ms(&redis);
    assert!(held.release().await.unwrap());
    let message = released.next().await;
    let next = waiter.await.unwrap().unwrap();
    assert_example(&redis, "fair-passed", Some(&message));
    let (token, fence) = passed(&message.payload, released_at);
    assert_eq!(fence, next.fence());
    assert_eq!(
        message.channel,
        format!("fencelock:{{reports}}:released:{token}")
    );
    assert_eq!(
        get(&redis, "fencelock:{reports}"),
        format!("{token}:{fence}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reentrant_lock_writes_what_the_document_shows() {
    let redis = server();
    let a = client(&redis);
    let lock = a.reentrant_lock("accounts");
    let outer = take(lock.request()).await;
    let inner = take(lock.request()).await;
    assert_eq!(outer.fence(), inner.fence());
    assert_example(&redis, "reentrant", None);

    let mut released = Released::subscribe(&redis, "accounts").await;
    assert!(inner.release().await.unwrap());
    assert!(outer.release().await.unwrap());
    let message = released.next().await;
    assert_example(&redis, "reentrant-released", Some(&message));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_write_lock_writes_what_the_document_shows() {
    let redis = server();
    let (a, b, c) = (client(&redis), client(&redis), client(&redis));
    let reading = take(a.read_write_lock("config").read()).await;
    let writer = tokio::spawn(patient(b.read_write_lock("config").write()).acquire());
    until("a waiting writer", || {
        has_field_starting(&redis, "fencelock:{config}", "i:")
    })
    .await;
    assert_example(&redis, "rw-read", None);

    let mut released = Released::subscribe(&redis, "config").await;
    assert!(reading.release().await.unwrap());
    let message = released.next().await;
    let writing = writer.await.unwrap().unwrap();
    let reader = tokio::spawn(patient(c.read_write_lock("config").read()).acquire());
    until("a waiting reader", || {
        has_field_starting(&redis, "fencelock:{config}", "q:")
    })
    .await;
    assert_example(&redis, "rw-write", Some(&message));
    assert!(writing.release().await.unwrap());
    let read = reader.await.unwrap().unwrap();
    // A reader's fence is the last write's.
    assert_eq!(read.fence(), writing_fence(&redis));
}

/// The fence key of lock `config`.
fn writing_fence(redis: &RedisServer) -> u64 {
    let fence = get(redis, "fencelock:{config}:fence");
    fence.parse().unwrap_or_else(|e| panic!("{fence}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_semaphore_writes_what_the_document_shows() {
    let redis = server();
    let (a, b) = (client(&redis), client(&redis));
    let first = take(a.semaphore("workers", 3)).await;
    let second = take(b.semaphore("workers", 3)).await;
    assert!(second.fence() > first.fence());
    assert_example(&redis, "semaphore", None);

    let mut released = Released::subscribe(&redis, "workers").await;
    assert!(first.release().await.unwrap());
    let message = released.next().await;
    assert_example(&redis, "semaphore-released", Some(&message));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_store_writes_what_the_document_shows() {
    let redis = server();
    let a = client(&redis);
    let store = a.fenced_store("ledger").unwrap();
    let guard = take(a.lock("ledger")).await;
    let writes = Writes::new().set("ledger:{ledger}", "balance=100");
    assert_eq!(
        store.apply(guard.fence(), &writes).await.unwrap(),
        guard.fence()
    );
    assert_example(&redis, "fenced", None);
    assert_eq!(
        get(&redis, "fencelock:fenced:{ledger}"),
        guard.fence().to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labelled_hold_writes_what_the_document_shows() {
    let redis = server();
    let a = client(&redis);
    let guard = take(a.lock("builds").label("ci-runner-4:812")).await;
    assert_example(&redis, "lock-labelled", None);
    assert!(guard.release().await.unwrap());
    assert_example(&redis, "lock-labelled-released", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_writes_what_the_document_shows() {
    let redis = server();
    let election = client(&redis).election("scheduler");
    let mut announced = Released::on(&redis, "fencelock:{scheduler}:announce").await;
    let leadership = election.campaign("node-a").ttl(LONG).await.unwrap();
    assert_example(&redis, "election", Some(&announced.next().await));
    let term = leadership.term();
    assert!(leadership.resign().await.unwrap());
    let message = announced.next().await;
    assert_eq!(message.payload, format!("resigned:{term}"));
    assert_example(&redis, "election-resigned", Some(&message));
}

/// The notes for implementers, where the answer is in the code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notes_for_implementers_hold() {
    let text = document();
    let redis = server();
    let a = client(&redis);

    // A try that does not wait is granted unmarked, even with a live place in line.
    assert!(text.contains("is granted unmarked even when live"));
    let lapses = (common::server_ms(&redis) + 60_000).to_string();
    cmd(
        &redis,
        &[
            "ZADD",
            "fencelock:{notes}:waiters",
            &lapses,
            "0123456789abcdef0123456789abcdef",
        ],
    );
    let guard = a
        .lock("notes")
        .no_wait()
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let value = get(&redis, "fencelock:{notes}");
    assert!(!value.ends_with('+'), "marked: {value}");
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));

    // A held key without expiry: `{0, -1}`, left as it is.
    assert!(text.contains("reported as `{0, -1}` and left as it is"));
    let forever = "0123456789abcdef0123456789abcdef:17";
    cmd(&redis, &["SET", "fencelock:{forever}", forever]);
    let refused = a
        .lock("forever")
        .no_wait()
        .acquire()
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(&refused, fencelock::Error::WrongType { found, .. } if found.contains("no expiry")),
        "{refused:?}"
    );
    assert_eq!(get(&redis, "fencelock:{forever}"), forever);
    assert_eq!(
        common::integer_reply(&redis, &["PTTL", "fencelock:{forever}"]),
        -1
    );

    // Names: C0, DEL and C1 are control characters.
    assert!(text.contains("C0 (U+0000 to\n  U+001F), DEL (U+007F) and C1 (U+0080 to U+009F)"));
    for name in ["a\u{1}b", "a\u{7f}b", "a\u{85}b"] {
        let refused = a
            .lock(name)
            .no_wait()
            .acquire()
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(refused, fencelock::Error::InvalidArgument { .. }),
            "{name:?}: {refused:?}"
        );
    }

    // Fences of 16 digits are written as digits, never as `1.7e+15`.
    assert!(text.contains("`tostring` of a number above 10^14 gives `1.7e+15`"));
    cmd(
        &redis,
        &["SET", "fencelock:{digits}:fence", "8000000000000000"],
    );
    let guard = take(a.lock("digits")).await;
    assert_eq!(guard.fence(), 8_000_000_000_000_001);
    assert_eq!(get(&redis, "fencelock:{digits}:fence"), "8000000000000001");
    assert!(get(&redis, "fencelock:{digits}").ends_with(":8000000000000001"));
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
}
