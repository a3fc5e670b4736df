//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use fencelock::Client;
use fencelock_testkit::RedisServer;

/// A fresh server for one test.
pub fn server() -> RedisServer {
    match RedisServer::start() {
        Ok(server) => server,
        Err(e) => panic!("cannot start redis-server: {e}"),
    }
}

/// One acquire and release of lock `warm`: the client is connected and the scripts loaded.
pub async fn warm_up(client: &Client) {
    match client.lock("warm").acquire().await {
        Ok(guard) => {
            if let Err(e) = guard.release().await {
                panic!("warm-up release: {e}");
            }
        }
        Err(e) => panic!("warm-up acquire: {e}"),
    }
}

/// A client with a short command timeout, so that fault tests stay quick.
pub fn client(url: &str) -> Client {
    match Client::builder(url)
        .command_timeout(Duration::from_millis(500))
        .build()
    {
        Ok(client) => client,
        Err(e) => panic!("cannot build client: {e}"),
    }
}

/// The key of lock `name` under the default prefix (`fencelock:{NAME}`), and with `suffix`
/// (`fence`, `queue`, `alive`, ...) the key next to it. Assertions about the stored layout spell
/// the keys out literally instead, so that they check the documented format.
pub fn lock_key(name: &str) -> String {
    format!("fencelock:{{{name}}}")
}

/// See [`lock_key`].
pub fn lock_subkey(name: &str, suffix: &str) -> String {
    format!("{}:{suffix}", lock_key(name))
}

/// `n` independent servers for a Redlock set, and their URLs.
pub fn redlock_servers(n: usize) -> (Vec<RedisServer>, Vec<String>) {
    let servers: Vec<RedisServer> = (0..n).map(|_| server()).collect();
    let urls = servers.iter().map(RedisServer::url).collect();
    (servers, urls)
}

/// A Redlock client over `urls` with short time limits, so that fault tests stay quick.
pub fn redlock_client(urls: &[String], instance_timeout: Duration) -> Client {
    match Client::redlock(urls)
        .instance_timeout(instance_timeout)
        .command_timeout(Duration::from_millis(500).max(instance_timeout))
        .build()
    {
        Ok(client) => client,
        Err(e) => panic!("cannot build a Redlock client: {e}"),
    }
}

// The environment a test passes to the child process it spawns (see `spawn_test_child`).

/// The server URL (comma-separated URLs for Redlock).
pub const URL_ENV: &str = "FENCELOCK_TEST_URL";
/// The lease, in milliseconds.
pub const TTL_ENV: &str = "FENCELOCK_TEST_TTL_MS";
/// The name of the lock.
pub const NAME_ENV: &str = "FENCELOCK_TEST_NAME";

/// A variable the parent set for this child; a missing or bad one fails the child loudly.
pub fn child_var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|e| panic!("child role: {name}: {e}"))
}

/// A value (a number, say) the parent set for this child.
pub fn child_value<T: std::str::FromStr<Err: std::fmt::Display>>(name: &str) -> T {
    let text = child_var(name);
    match text.parse() {
        Ok(value) => value,
        Err(e) => panic!("child role: {name}={text:?}: {e}"),
    }
}

/// A duration in milliseconds the parent set for this child.
pub fn child_millis(name: &str) -> Duration {
    Duration::from_millis(child_value(name))
}

/// `duration` as the parent passes it to a child (whole milliseconds; see [`child_millis`]).
pub fn millis_var(duration: Duration) -> String {
    duration.as_millis().to_string()
}

/// Every key on the server, sorted.
pub fn keys(server: &RedisServer) -> Vec<String> {
    let mut keys = server.keys().unwrap_or_else(|e| panic!("SCAN failed: {e}"));
    keys.sort();
    keys
}

/// The child-process holder role: acquire `name`, print `ACQUIRED <fence>`, wait (at most 30 s)
/// until the lock is lost and print `LOST <reason>`, then print `RELEASED <was it still held>`.
/// `make_client` runs inside the child's runtime (the client's background tasks live there).
pub fn hold_and_report(make_client: impl FnOnce() -> Client, name: &str, ttl: Duration) {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => panic!("cannot start a runtime: {e}"),
    };
    runtime.block_on(async {
        let client = make_client();
        let guard = match client.lock(name).ttl(ttl).acquire().await {
            Ok(guard) => guard,
            Err(e) => panic!("child could not acquire: {e}"),
        };
        println!("ACQUIRED {}", guard.fence());
        match tokio::time::timeout(Duration::from_secs(30), guard.lost()).await {
            Ok(reason) => println!("LOST {reason}"),
            Err(_) => println!("STILL-HELD"),
        }
        match guard.release().await {
            Ok(held) => println!("RELEASED {held}"),
            Err(e) => println!("RELEASE-FAILED {e}"),
        }
    });
}

/// The fence in a child's `ACQUIRED <fence>` line.
pub fn fence_of(line: &str) -> u64 {
    match line.split_whitespace().nth(1).map(str::parse) {
        Some(Ok(fence)) => fence,
        _ => panic!("no fence in {line:?}"),
    }
}

/// The integer reply of one command (`ZCARD`, `HLEN`, `PTTL`, ...), run on a fresh connection.
pub fn integer_reply(server: &RedisServer, args: &[&str]) -> i64 {
    match server.cmd(args) {
        Ok(redis::Value::Int(n)) => n,
        other => panic!("{args:?}: expected an integer, got {other:?}"),
    }
}

/// A hash's fields and values (empty if the key is missing), for "nothing changed" checks.
pub fn hash_fields(server: &RedisServer, key: &str) -> std::collections::BTreeMap<String, String> {
    let value = match server.cmd(&["HGETALL", key]) {
        Ok(value) => value,
        Err(e) => panic!("HGETALL {key} failed: {e}"),
    };
    match redis::from_redis_value(value) {
        Ok(fields) => fields,
        Err(e) => panic!("HGETALL {key}: unexpected reply: {e}"),
    }
}

/// The fields of a hash whose names start with `prefix` (for instance the holds `h:`, the
/// readers `r:` or the waiting writers `i:` of a lock).
pub fn fields_starting(server: &RedisServer, key: &str, prefix: &str) -> Vec<String> {
    hash_fields(server, key)
        .into_keys()
        .filter(|field| field.starts_with(prefix))
        .collect()
}

/// How many times `command` ran on the server (`INFO commandstats`; commands run by scripts
/// count too).
pub fn calls(server: &RedisServer, command: &str) -> u64 {
    let info = match server.cmd(&["INFO", "commandstats"]) {
        Ok(redis::Value::BulkString(info)) => String::from_utf8_lossy(&info).into_owned(),
        other => panic!("INFO commandstats: {other:?}"),
    };
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Waits (at most `limit`) until `count()` is `expected`, polling every 10 ms; panics naming
/// `what` and the last count otherwise.
pub async fn wait_for_count<T: PartialEq + std::fmt::Debug>(
    what: &str,
    expected: T,
    limit: Duration,
    mut count: impl FnMut() -> T,
) {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let now = count();
        if now == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{what}: {now:?}, not {expected:?}, after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What each of `keys` holds, serialized by `DUMP` (nil for a missing key): taken before and
/// after, it shows that nothing touched keys that fencelock did not put there.
pub fn dumps(server: &RedisServer, keys: &[&str]) -> Vec<redis::Value> {
    keys.iter()
        .map(|key| match server.cmd(&["DUMP", key]) {
            Ok(value) => value,
            Err(e) => panic!("DUMP {key}: {e}"),
        })
        .collect()
}

/// A request for `name` as `kind` (a semaphore has 3 permits).
pub fn request(client: &Client, kind: &str, name: &str) -> fencelock::LockRequest {
    match kind {
        "lock" => client.lock(name),
        "fair" => client.fair_lock(name),
        "reentrant" => client.reentrant_lock(name).request(),
        "read" => client.read_write_lock(name).read(),
        "write" => client.read_write_lock(name).write(),
        "semaphore" => client.semaphore(name, 3),
        other => panic!("unknown kind {other}"),
    }
}

/// A fenced resource for failover tests: a Lua-guarded value in the lock's slot that accepts a
/// write only with a fence at least as large as every fence it accepted.
pub fn fenced_write(node: &RedisServer, name: &str, fence: u64, value: &str) -> bool {
    let script = "local last = tonumber(redis.call('get', KEYS[1]) or '0') \
                  if tonumber(ARGV[1]) < last then return 0 end \
                  redis.call('set', KEYS[1], ARGV[1]) redis.call('set', KEYS[2], ARGV[2]) return 1";
    let fence_key = format!("resource:{{{name}}}:fence");
    let value_key = format!("resource:{{{name}}}:value");
    match node.cmd(&[
        "EVAL",
        script,
        "2",
        &fence_key,
        &value_key,
        &fence.to_string(),
        value,
    ]) {
        Ok(redis::Value::Int(n)) => n == 1,
        other => panic!("fenced write: {other:?}"),
    }
}

/// A replication-timeout setting that makes a master drop a stopped replica within a second,
/// so that a grant made afterwards never reaches it.
pub fn drop_stopped_replicas_quickly(master: &RedisServer) {
    if let Err(e) = master.cmd(&["CONFIG", "SET", "repl-timeout", "1"]) {
        panic!("CONFIG SET repl-timeout: {e}");
    }
}

pub fn connected_replicas(master: &RedisServer) -> u64 {
    match master.cmd(&["INFO", "replication"]) {
        Ok(redis::Value::BulkString(info)) => String::from_utf8_lossy(&info)
            .lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0),
        other => panic!("INFO replication: {other:?}"),
    }
}

/// Two holders of `name` in turn: the first stalls past its lease (no renewal, as a paused
/// process would), the second takes the lock once that lease ran out.
pub async fn stalled_then_replaced(
    first: &Client,
    second: &Client,
    name: &str,
) -> (fencelock::LockGuard, fencelock::LockGuard) {
    let ttl = Duration::from_millis(300);
    let stalled = first
        .lock(name)
        .ttl(ttl)
        .auto_renew(false)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(ttl * 2).await;
    let next = second
        .lock(name)
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the expired lock was not free"));
    (stalled, next)
}

/// The arguments (after the keys) of each script call in a `MONITOR` line: one list for an
/// `EVALSHA`, one per call for a batch (`script/batch.lua`: the number of calls, keys per call
/// and arguments per call, then each call's arguments), none for any other line (a command a
/// script ran, say).
pub fn script_calls(line: &str) -> Vec<Vec<String>> {
    let words: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
    let number = |i: usize| words.get(i).and_then(|w| w.parse::<usize>().ok());
    if !words
        .first()
        .is_some_and(|w| w.eq_ignore_ascii_case("evalsha"))
    {
        return Vec::new();
    }
    let Some(keys) = number(2) else {
        return Vec::new();
    };
    let args = words.get(3 + keys..).unwrap_or_default();
    let batch = match (number(3 + keys), number(4 + keys), number(5 + keys)) {
        (Some(calls), Some(per_call_keys), Some(per_call))
            if calls * per_call_keys == keys && args.len() == 3 + calls * per_call =>
        {
            Some(per_call)
        }
        _ => None,
    };
    let owned = |args: &[&str]| args.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    match batch {
        Some(per_call) if per_call > 0 => args[3..].chunks(per_call).map(owned).collect(),
        _ => vec![owned(args)],
    }
}

/// The server's clock (`TIME`) in milliseconds.
pub fn server_ms(redis: &RedisServer) -> u64 {
    match redis.cmd(&["TIME"]) {
        Ok(redis::Value::Array(parts)) if parts.len() == 2 => {
            let part = |i: usize| -> u64 {
                redis::from_redis_value::<u64>(parts[i].clone())
                    .unwrap_or_else(|e| panic!("TIME: {e}"))
            };
            part(0) * 1000 + part(1) / 1000
        }
        other => panic!("TIME: {other:?}"),
    }
}

/// Every line `MONITOR` shows on `redis` from now on.
pub async fn monitor(
    redis: &fencelock_testkit::RedisServer,
) -> std::pin::Pin<Box<dyn futures_util::Stream<Item = String> + Send>> {
    let monitor = match redis::Client::open(redis.url()) {
        Ok(client) => client.get_async_monitor().await,
        Err(e) => Err(e),
    };
    match monitor {
        Ok(monitor) => Box::pin(monitor.into_on_message::<String>()),
        Err(e) => panic!("MONITOR: {e}"),
    }
}

/// The connections of clients on `server` (`CLIENT LIST`), one line each: every one but the
/// connection that asks, a replica's or its master's link (flags `S`, `M`), and a sentinel's
/// (which names its own). The library's connections are there: it names none.
pub fn client_connections(server: &RedisServer) -> Vec<String> {
    let text = match server.cmd(&["CLIENT", "LIST"]) {
        Ok(redis::Value::BulkString(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(redis::Value::VerbatimString { text, .. }) => text,
        other => panic!("CLIENT LIST on {}: {other:?}", server.port()),
    };
    text.lines()
        .filter(|line| {
            let field = |key: &str| line.split(' ').find_map(|f| f.strip_prefix(key));
            field("cmd=") != Some("client|list")
                && field("name=").unwrap_or("").is_empty()
                && !field("flags=").is_some_and(|f| f.contains('S') || f.contains('M'))
        })
        .map(str::to_owned)
        .collect()
}

/// Waits (at most `limit`) until no server of `servers` lists a client's connection
/// ([`client_connections`]); the connections still listed at the limit otherwise.
pub async fn connections_left(servers: &[&RedisServer], limit: Duration) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let left: Vec<String> = servers
            .iter()
            .flat_map(|server| {
                client_connections(server)
                    .into_iter()
                    .map(|line| format!("{}: {line}", server.port()))
            })
            .collect();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (at most 5 s) until some server of `servers` has a subscriber on `channel` (sharded
/// or not); panics otherwise.
pub async fn wait_for_subscriber(servers: &[&RedisServer], channel: &str) {
    let count =
        |server: &RedisServer, command: &str| match server.cmd(&["PUBSUB", command, channel]) {
            Ok(redis::Value::Array(reply)) => match reply.get(1) {
                Some(redis::Value::Int(n)) => *n,
                _ => 0,
            },
            _ => 0,
        };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !servers
        .iter()
        .any(|s| count(s, "NUMSUB") + count(s, "SHARDNUMSUB") > 0)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "nobody subscribed {channel}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Closes `client` (whose servers, or the servers it reaches, are `servers`, where it has at
/// least `at_least` connections once it holds lock `name` and waits for it): every connection
/// of the client goes at once, though a guard and a waiting request made from it still exist;
/// the waiter, the guard and every later call fail with `Error::Closed` naming their lock,
/// and connect nothing again.
pub async fn close_drops_every_connection(
    client: Client,
    servers: &[&RedisServer],
    name: &str,
    at_least: usize,
) {
    let guard = match client.lock(name).acquire().await {
        Ok(guard) => guard,
        Err(e) => panic!("acquire {name}: {e}"),
    };
    let waiter = tokio::spawn(
        client
            .lock(name)
            .wait_up_to(Duration::from_secs(60))
            .acquire(),
    );
    wait_for_subscriber(servers, &format!("{}:released", lock_key(name))).await;
    let before: usize = servers.iter().map(|s| client_connections(s).len()).sum();
    assert!(
        before >= at_least,
        "{before} connections before the close, {at_least} expected at least"
    );

    let clone = client.clone();
    client.close().await;
    assert!(clone.is_closed());
    let left = connections_left(servers, Duration::from_secs(3)).await;
    assert!(
        left.is_empty(),
        "connections left after the close: {left:#?}"
    );

    match tokio::time::timeout(Duration::from_secs(2), waiter).await {
        Ok(Ok(result)) => closed(result, name),
        other => panic!("the waiter did not end at once: {other:?}"),
    }
    let started = std::time::Instant::now();
    closed(guard.extend(Duration::from_secs(30)).await, name);
    closed(clone.lock("after").acquire().await, "after");
    closed(client.try_lock("after").await, "after");
    closed(client.inspect(name).await, name);
    closed(guard.release().await, name);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "the calls after the close took {:?}",
        started.elapsed()
    );
    // Closing again does nothing more; nothing was connected again.
    client.close().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let left = connections_left(servers, Duration::ZERO).await;
    assert!(left.is_empty(), "connections after the calls: {left:#?}");
}

/// Asserts that `result` is `Error::Closed` naming `lock`.
pub fn closed<T: std::fmt::Debug>(result: fencelock::Result<T>, lock: &str) {
    match result {
        Err(fencelock::Error::Closed { lock: named }) if named == lock => {}
        other => panic!("Closed naming {lock:?} expected, got {other:?}"),
    }
}

/// A client of `proxy` that waits up to 10 s for a reply: a reply is lost to a cut of the
/// proxy's connections, not to a timeout (see [`reply_lost`]).
pub fn patient_client(proxy: &fencelock_testkit::FaultProxy) -> Client {
    match Client::builder(&proxy.url())
        .command_timeout(Duration::from_secs(10))
        .build()
    {
        Ok(client) => client,
        Err(e) => panic!("{e}"),
    }
}

/// Runs `call` (through a [`patient_client`] of `proxy`, its script already loaded) with
/// replies two seconds late; once `ran` shows that the server ran it, and `meanwhile` (started
/// only then: an `async` block) is done,
/// every connection of the proxy is cut: the reply is lost and the library tries again with the
/// same token. Answers what the call answered in the end, and what `meanwhile` did.
pub async fn reply_lost<T: Send + 'static, M>(
    proxy: &fencelock_testkit::FaultProxy,
    call: impl Future<Output = T> + Send + 'static,
    ran: impl FnMut() -> bool,
    meanwhile: impl Future<Output = M>,
) -> (T, M) {
    proxy.set_latency(Duration::from_secs(2));
    let call = tokio::spawn(call);
    wait_for_count(
        "the call run on the server",
        true,
        Duration::from_secs(10),
        ran,
    )
    .await;
    let done = meanwhile.await;
    proxy.set_latency(Duration::ZERO);
    proxy.cut_all();
    match tokio::time::timeout(Duration::from_secs(20), call).await {
        Ok(Ok(answer)) => (answer, done),
        Ok(Err(e)) => panic!("the call: {e}"),
        Err(_) => panic!("the call hung after its reply was lost"),
    }
}

/// The members of the sorted set `key`, lowest score first.
pub fn members(redis: &RedisServer, key: &str) -> Vec<String> {
    match redis.cmd(&["ZRANGE", key, "0", "-1"]) {
        Ok(redis::Value::Array(items)) => items
            .into_iter()
            .map(|item| {
                redis::from_redis_value::<String>(item).unwrap_or_else(|e| panic!("{key}: {e}"))
            })
            .collect(),
        other => panic!("ZRANGE {key}: {other:?}"),
    }
}

/// The string at `key` (`None`: no such key).
pub fn string_at(redis: &RedisServer, key: &str) -> Option<String> {
    match redis.cmd(&["GET", key]) {
        Ok(value) => redis::from_redis_value(value).unwrap_or_else(|e| panic!("GET {key}: {e}")),
        Err(e) => panic!("GET {key}: {e}"),
    }
}

/// The messages published on lock `name`'s release channels (its own, and each waiter's), from
/// now on.
pub async fn release_messages(
    redis: &RedisServer,
    name: &str,
) -> impl futures_util::Stream<Item = redis::Msg> + Unpin + use<> {
    let listener = redis::Client::open(redis.url()).unwrap_or_else(|e| panic!("{e}"));
    let mut pubsub = listener
        .get_async_pubsub()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    pubsub
        .psubscribe(format!("fencelock:{{{name}}}:released*"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    pubsub.into_on_message()
}

/// The next message of `heard` (its channel and payload), within 5 s of `after`.
pub async fn next_message(
    heard: &mut (impl futures_util::Stream<Item = redis::Msg> + Unpin),
    after: &str,
) -> (String, String) {
    use futures_util::StreamExt;
    let message = tokio::time::timeout(Duration::from_secs(5), heard.next())
        .await
        .unwrap_or_else(|_| panic!("nothing was published after {after}"))
        .unwrap_or_else(|| panic!("the subscription ended"));
    let payload: String = message.get_payload().unwrap_or_else(|e| panic!("{e}"));
    (message.get_channel_name().to_owned(), payload)
}

/// Checks that `heard` hears nothing for 300 ms after `after`.
pub async fn no_message(
    heard: &mut (impl futures_util::Stream<Item = redis::Msg> + Unpin),
    after: &str,
) {
    use futures_util::StreamExt;
    if let Ok(message) = tokio::time::timeout(Duration::from_millis(300), heard.next()).await {
        panic!("{after}, and {message:?} was published");
    }
}

/// From now on, the server's slow log keeps every command (a threshold of 0), with its
/// arguments.
pub fn log_every_command(redis: &RedisServer) {
    for args in [
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"][..],
        &["CONFIG", "SET", "slowlog-max-len", "100000"],
        &["SLOWLOG", "RESET"],
    ] {
        if let Err(e) = redis.cmd(args) {
            panic!("{args:?}: {e}");
        }
    }
}
