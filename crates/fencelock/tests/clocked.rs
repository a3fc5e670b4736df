//! The scripts on a server whose clock stands still where the test puts it
//! ([`ClockedServer`]): what a real clock makes a race is a plain case here. Fences keep
//! growing while the server's clock does not move (the counter equal to the clock's
//! microsecond), and a lease that ends in the very millisecond a script reads the clock is
//! over: another request gets its permit, an extension or a renewal finds it gone, a release
//! finds it lost.

use crate::common;

use std::time::Duration;

use fencelock::{Client, Error, LockGuard, LostReason};
use fencelock_testkit::ClockedServer;

use crate::inspect::{hset, token, zadd};

/// 2026-01-01 00:00:00 UTC, in milliseconds.
const START_MS: u64 = 1_767_225_600_000;
/// A lease long enough that the client's own deadline never comes into a test.
const LEASE: Duration = Duration::from_secs(60);

/// A server whose clock stands at [`START_MS`] (the `valkey-server` that
/// `FENCELOCK_CLOCKED_SERVER` names: `scripts/test` sets it).
fn clocked() -> ClockedServer {
    ClockedServer::start(START_MS)
        .unwrap_or_else(|e| panic!("cannot start a server with a clock of its own: {e}"))
}

fn client(server: &ClockedServer) -> Client {
    common::client(&server.url())
}

fn held(result: fencelock::Result<LockGuard>, what: &str) -> LockGuard {
    result.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Fences handed out one after another while the server's clock stands still: the counter
/// meets the clock's microsecond, and each fence must still be past the one before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_keep_growing_while_the_servers_clock_stands_still() {
    let server = clocked();
    let client = client(&server);
    let clock_micros = START_MS * 1000;
    // The plain lock (its own fence rule), the semaphore (the shared one), the fair lock (the
    // shared one on a grant, its release's own on a pass).
    for (kind, request) in [
        ("plain", client.lock("still-plain")),
        ("semaphore", client.semaphore("still-semaphore", 1)),
        ("fair", client.fair_lock("still-fair")),
    ] {
        let mut last = 0;
        for round in 0..3 {
            let guard = held(
                request.clone().ttl(LEASE).no_wait().acquire().await,
                &format!("{kind} round {round}"),
            );
            let fence = guard.fence();
            assert!(
                fence > last && fence >= clock_micros,
                "{kind}: round {round}'s fence {fence} is not past {last} (the clock stands at \
                 {clock_micros} µs)"
            );
            last = fence;
            assert!(held_release(guard).await, "{kind} round {round}");
        }
    }
    // The fair lock's pass: a waiter at the head gets the lock from the release, with a fence
    // past the holder's, in the same microsecond.
    let holder = held(
        client.fair_lock("still-pass").ttl(LEASE).acquire().await,
        "the fair lock's holder",
    );
    let waiter = {
        let request = client
            .fair_lock("still-pass")
            .ttl(LEASE)
            .queue_timeout(LEASE)
            .wait_up_to(LEASE);
        tokio::spawn(async move { request.acquire().await })
    };
    let queue = common::lock_subkey("still-pass", "queue");
    common::wait_for_count("waiters in the queue", 1, Duration::from_secs(10), || {
        common::members(&server, &queue).len()
    })
    .await;
    let holders_fence = holder.fence();
    assert!(held_release(holder).await, "the fair lock's holder");
    let passed = match tokio::time::timeout(Duration::from_secs(10), waiter).await {
        Ok(Ok(result)) => held(result, "the waiter passed the lock"),
        Ok(Err(e)) => panic!("the waiter's task: {e}"),
        Err(_) => panic!("the waiter was not passed the lock within 10 s"),
    };
    assert!(
        passed.fence() > holders_fence,
        "the pass's fence {} is not past the holder's {holders_fence}",
        passed.fence()
    );
    assert!(held_release(passed).await, "the waiter passed the lock");
    // The election: a term is a fence.
    let mut last = 0;
    for round in 0..3 {
        let leadership = client
            .election("still-election")
            .campaign(format!("node-{round}"))
            .ttl(LEASE)
            .no_wait()
            .await
            .unwrap_or_else(|e| panic!("campaign {round}: {e}"));
        let term = leadership.term();
        assert!(
            term > last,
            "campaign {round}'s term {term} is not past {last} (the clock stands still)"
        );
        last = term;
        assert!(
            leadership
                .resign()
                .await
                .unwrap_or_else(|e| panic!("resign {round}: {e}")),
            "campaign {round}: the resignation found the term gone"
        );
    }
}

async fn held_release(guard: LockGuard) -> bool {
    let name = guard.name().to_owned();
    guard
        .release()
        .await
        .unwrap_or_else(|e| panic!("release of {name}: {e}"))
}

/// A permit, a read-write lock's hold or a fair lock's lease whose end is the very
/// millisecond the server's clock stands at is over: the next request gets in (a millisecond
/// earlier it is refused), an extension by hand finds it gone, a release finds it lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_that_ends_this_very_millisecond_is_over() {
    let mut server = clocked();
    let client = client(&server);
    let semaphore = |name: &str| client.semaphore(name, 1).ttl(LEASE).auto_renew(false);
    let writer = |name: &str| {
        client
            .read_write_lock(name)
            .write()
            .ttl(LEASE)
            .auto_renew(false)
    };
    let fair = |name: &str| client.fair_lock(name).ttl(LEASE).auto_renew(false);

    // Released at its end: lost (a semaphore's permit, a writer's hold).
    let permit = held(
        semaphore("end-release").no_wait().acquire().await,
        "a permit",
    );
    let write = held(
        writer("end-release-rw").no_wait().acquire().await,
        "a write",
    );
    advance(&mut server, LEASE);
    assert!(
        !held_release(permit).await,
        "a permit released at its very end was still held"
    );
    assert!(
        !held_release(write).await,
        "a write released at its very end was still held"
    );

    // Extended by hand at its end: gone (a hold of one permit, re-armed as any entry of a hash;
    // a hold of two, re-armed by the semaphore's own script).
    let one = held(
        semaphore("end-extend").no_wait().acquire().await,
        "a permit",
    );
    let two = held(
        client
            .semaphore("end-extend-2", 3)
            .take(2)
            .ttl(LEASE)
            .auto_renew(false)
            .no_wait()
            .acquire()
            .await,
        "two permits",
    );
    advance(&mut server, LEASE);
    for (what, guard) in [("a permit", &one), ("two permits", &two)] {
        let extended = guard.extend(LEASE).await;
        assert!(
            matches!(
                extended,
                Err(Error::NotHeld {
                    reason: LostReason::NotOwner,
                    ..
                })
            ),
            "{what} extended at the very end: {extended:?}"
        );
    }

    // The next request: refused a millisecond before the end, let in at it.
    let permit = held(semaphore("end-next").no_wait().acquire().await, "a permit");
    let write = held(writer("end-next-rw").no_wait().acquire().await, "a write");
    let lease = held(
        fair("end-next-fair").no_wait().acquire().await,
        "a fair lock",
    );
    advance(&mut server, LEASE - Duration::from_millis(1));
    assert!(
        tried(semaphore("end-next")).await.is_none(),
        "a permit was let in a millisecond before the holder's end"
    );
    assert!(
        tried(writer("end-next-rw")).await.is_none(),
        "a write was let in a millisecond before the holder's end"
    );
    advance(&mut server, Duration::from_millis(1));
    assert!(
        tried(semaphore("end-next")).await.is_some(),
        "a permit that ends this very millisecond kept the next request out"
    );
    assert!(
        tried(writer("end-next-rw")).await.is_some(),
        "a write that ends this very millisecond kept the next writer out"
    );
    // The fair lock's key is still there (`PTTL` 0, not yet expired): a lease like any other,
    // the request is refused, not told of a key without expiry.
    let fair_try = fair("end-next-fair").no_wait().try_acquire().await;
    assert!(
        matches!(fair_try, Ok(None)),
        "a try on a fair lock whose lease ends this very millisecond: {fair_try:?}"
    );
    for guard in [permit, write, lease] {
        drop(guard);
    }
}

/// A renewal by the watchdog in the very millisecond the lease ends finds it gone: the guard
/// is told, by the server (not by its own deadline, a lease away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_in_the_very_millisecond_of_the_end_finds_the_permit_gone() {
    let mut server = clocked();
    let client = client(&server);
    let lease = Duration::from_secs(9);
    let permit = held(
        client
            .semaphore("end-renewal", 1)
            .ttl(lease)
            .acquire()
            .await,
        "a permit",
    );
    // Every renewal from now on reads the clock at the lease's end.
    advance(&mut server, lease);
    let lost = tokio::time::timeout(Duration::from_millis(7_500), permit.lost()).await;
    assert!(
        matches!(lost, Ok(LostReason::NotOwner)),
        "a permit renewed at its very end: {lost:?} (the renewal re-armed it, or the guard's \
         own deadline told first)"
    );
}

fn advance(server: &mut ClockedServer, by: Duration) {
    server
        .advance(by)
        .unwrap_or_else(|e| panic!("cannot move the server's clock: {e}"));
}

async fn tried(request: fencelock::LockRequest) -> Option<LockGuard> {
    request
        .no_wait()
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("a try: {e}"))
}

/// The operator's view at the very millisecond of a lapse or an arrival: a permit that ends
/// now, and a fair lock's place whose liveness lapses now, are not shown; one with a
/// millisecond left is; a waiter that arrived now has waited no time (not an unknown time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_at_the_very_millisecond_of_a_lapse_or_an_arrival() {
    let server = clocked();
    let client = client(&server);
    let now = server.now_ms();

    let name = "view-sem";
    let holder = held(
        client
            .semaphore(name, 3)
            .ttl(LEASE)
            .auto_renew(false)
            .acquire()
            .await,
        "a permit",
    );
    let key = common::lock_key(name);
    hset(
        &server,
        &key,
        &format!("p:{}", token('a')),
        &format!("{now}:7"),
    );
    hset(
        &server,
        &key,
        &format!("p:{}", token('b')),
        &format!("{}:8", now + 1),
    );
    hset(
        &server,
        &key,
        &format!("w:{}", token('c')),
        &format!("{}:1:{now}", now + 20_000),
    );
    let info = client.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    let holders: Vec<&str> = info
        .shared
        .iter()
        .map(|h| h.token_prefix.as_str())
        .collect();
    assert!(
        !holders.contains(&"aaaaaaaa") && holders.contains(&"bbbbbbbb"),
        "a permit that ends now shown, or one with a millisecond left not: {holders:?}"
    );
    assert_eq!(
        waited(&info),
        vec![("cccccccc", Some(Duration::ZERO))],
        "a semaphore's waiter that arrived this very millisecond"
    );
    drop(holder);

    let name = "view-fair";
    let holder = held(
        client
            .fair_lock(name)
            .ttl(LEASE)
            .auto_renew(false)
            .acquire()
            .await,
        "a fair lock",
    );
    let (queue, alive) = (
        common::lock_subkey(name, "queue"),
        common::lock_subkey(name, "alive"),
    );
    // Arrived now, live; arrived before, its liveness lapsing now.
    zadd(&server, &queue, now, &token('d'));
    zadd(&server, &alive, now + 20_000, &token('d'));
    zadd(&server, &queue, now - 1_000, &token('e'));
    zadd(&server, &alive, now, &token('e'));
    let info = client.inspect(name).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        waited(&info),
        vec![("dddddddd", Some(Duration::ZERO))],
        "a fair lock's queue with a place lapsing this very millisecond and a waiter arrived in it"
    );
    drop(holder);
}

/// Each waiter `inspect` shows, as (the start of its token, the time it waited).
fn waited(info: &fencelock::admin::LockInfo) -> Vec<(&str, Option<Duration>)> {
    info.waiters
        .iter()
        .map(|w| (w.token_prefix.as_str(), w.waited))
        .collect()
}

/// A plain lock's release reads its line of waiters at the clock's millisecond: a place that
/// lapses in that very millisecond is over (the release takes it out, passes nothing, and wakes
/// one waiter of each client instead); a place with a millisecond left is passed the lock, for
/// a claim that ends when that place would have lapsed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_place_in_line_that_lapses_this_very_millisecond_is_passed_nothing() {
    let server = clocked();
    let client = client(&server);
    let now = server.now_ms();
    // The holder's value marked as waited for (as a waiter's try marks it), and one place.
    let waited_for = |name: &str, lapses: u64, waiter: char| {
        let key = common::lock_key(name);
        let value =
            common::string_at(&server, &key).unwrap_or_else(|| panic!("{name} is not held"));
        server
            .cmd(&["SET", &key, &format!("{value}+"), "KEEPTTL"])
            .unwrap_or_else(|e| panic!("SET {key}: {e}"));
        zadd(
            &server,
            &common::lock_subkey(name, "waiters"),
            lapses,
            &token(waiter),
        );
    };

    let name = "line-lapses-now";
    let holder = plain_holder(&client, name).await;
    waited_for(name, now, 'a');
    assert!(held_release(holder).await, "the release of {name}");
    assert_eq!(
        common::string_at(&server, &common::lock_key(name)),
        None,
        "the lock was passed to a place that lapses this very millisecond"
    );
    assert_eq!(
        common::integer_reply(&server, &["EXISTS", &common::lock_subkey(name, "waiters")]),
        0,
        "the place that lapsed is still in line"
    );

    let name = "line-lapses-next";
    let holder = plain_holder(&client, name).await;
    let fence = holder.fence();
    waited_for(name, now + 1, 'b');
    assert!(held_release(holder).await, "the release of {name}");
    let key = common::lock_key(name);
    let passed = common::string_at(&server, &key);
    assert_eq!(
        passed,
        Some(format!("{}:{}", token('b'), fence + 1)),
        "a place with a millisecond left was not passed the lock, with the next fence"
    );
    assert_eq!(
        common::integer_reply(&server, &["PTTL", &key]),
        1,
        "the claim of a place that lapses in a millisecond ends with it"
    );

    // A lapsed place first, then two live ones: the lock goes to the first live one, marked as
    // waited for (the other is still in line), and the message names the one behind it.
    let name = "line-lapsed-first";
    let holder = plain_holder(&client, name).await;
    let fence = holder.fence();
    waited_for(name, now, 'c');
    let line = common::lock_subkey(name, "waiters");
    zadd(&server, &line, now + 10_000, &token('d'));
    zadd(&server, &line, now + 20_000, &token('e'));
    let mut heard = common::release_messages(&server, name).await;
    assert!(held_release(holder).await, "the release of {name}");
    assert_eq!(
        common::string_at(&server, &common::lock_key(name)),
        Some(format!("{}:{}+", token('d'), fence + 1)),
        "the lock was not passed to the first live place, marked as waited for"
    );
    let (channel, message) = common::next_message(&mut heard, "the pass").await;
    assert!(
        channel.ends_with(&token('d')) && message.ends_with(&format!(":{}", token('e'))),
        "the pass's message on {channel} does not name the place behind: {message}"
    );
}

/// A plain lock in the very millisecond its lease ends (`PTTL` 0, the key not yet expired) is
/// still held: a waiting request is refused, takes its place in line and marks the holder's
/// value as waited for, like any other; once the clock moves on, it takes the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_lock_in_its_last_millisecond_is_waited_for_like_any_other() {
    let mut server = clocked();
    let client = client(&server);
    let name = "last-millisecond";
    let (key, line) = (common::lock_key(name), common::lock_subkey(name, "waiters"));
    let holder = plain_holder(&client, name).await;
    advance(&mut server, LEASE);
    assert_eq!(common::integer_reply(&server, &["PTTL", &key]), 0);
    let waiter = {
        let request = client.lock(name).ttl(LEASE).wait_up_to(LEASE);
        tokio::spawn(async move { request.acquire().await })
    };
    in_line(
        &server,
        &line,
        1,
        "a request for a lock in its last millisecond",
    )
    .await;
    let value = common::string_at(&server, &key);
    assert!(
        value.as_deref().is_some_and(|v| v.ends_with('+')),
        "the holder's value in its last millisecond was not marked as waited for: {value:?}"
    );
    advance(&mut server, Duration::from_millis(1));
    let granted = tokio::time::timeout(Duration::from_secs(10), waiter).await;
    let guard = match granted {
        Ok(Ok(result)) => held(result, "the waiter"),
        Ok(Err(e)) => panic!("the waiter's task: {e}"),
        Err(_) => panic!("the waiter did not get the lock once the holder's lease was over"),
    };
    assert!(guard.fence() > holder.fence());
    drop(holder);
    assert!(held_release(guard).await);
}

/// A plain lock's line of waiters lives as long as its longest place: a waiter whose place
/// lasts 2 s, arriving behind one whose place lasts a minute, does not shorten it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_locks_line_lives_as_long_as_its_longest_place() {
    let server = clocked();
    let client = client(&server);
    let name = "longest-place";
    let line = common::lock_subkey(name, "waiters");
    let holder = plain_holder(&client, name).await;
    let mut waiters = Vec::new();
    for (places, place_lasts) in [(1, LEASE), (2, Duration::from_secs(2))] {
        let request = client
            .lock(name)
            .ttl(LEASE)
            .queue_timeout(place_lasts)
            .wait_up_to(LEASE);
        waiters.push(tokio::spawn(async move { request.acquire().await }));
        in_line(&server, &line, places, &format!("waiter {places}")).await;
    }
    // The short place's waiter refreshes it every two thirds of a second.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let lasts = common::integer_reply(&server, &["PTTL", &line]);
    assert_eq!(
        u128::try_from(lasts).ok(),
        Some(LEASE.as_millis()),
        "the line's expiry is not its longest place's"
    );
    for waiter in waiters {
        waiter.abort();
    }
    drop(holder);
}

/// Two requests for a semaphore's permit that arrived in the same millisecond are served in
/// the order of their tokens, the smaller first: a request behind a waiter that arrived with it
/// and has the smaller token is refused when a permit comes free; ahead of one with the larger
/// token, it takes the permit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_that_arrived_in_the_same_millisecond_go_in_the_order_of_their_tokens() {
    let server = clocked();
    let client = client(&server);
    let now = server.now_ms();
    for (planted, served) in [('0', false), ('f', true)] {
        let name = format!("same-arrival-{planted}");
        let key = common::lock_key(&name);
        let semaphore = || client.semaphore(&name, 1).ttl(LEASE).auto_renew(false);
        let holder = held(semaphore().no_wait().acquire().await, "the holder");
        // A waiter that arrived now, its place good for a minute.
        hset(
            &server,
            &key,
            &format!("w:{}", token(planted)),
            &format!("{}:1:{now}", now + 60_000),
        );
        // The request arrives in the same millisecond (the clock stands still), and is in
        // line (its place taken) before the permit comes free.
        let waiter = {
            let request = semaphore()
                .queue_timeout(Duration::from_secs(3))
                .wait_up_to(Duration::from_secs(4));
            tokio::spawn(async move { request.acquire().await })
        };
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        while common::fields_starting(&server, &key, "w:").len() < 2 {
            assert!(
                tokio::time::Instant::now() < until,
                "{name}: the request took no place"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(held_release(holder).await, "the release of {name}");
        let result = match waiter.await {
            Ok(result) => result,
            Err(e) => panic!("{name}: the waiter's task: {e}"),
        };
        match (served, result) {
            (true, Ok(_)) | (false, Err(Error::TimedOut { .. })) => {}
            (_, other) => panic!(
                "{name}: a request that arrived with a waiter whose token is {} than its own: \
                 {other:?}",
                if served { "larger" } else { "smaller" }
            ),
        }
    }
}

/// A plain lock `name` held for [`LEASE`], not renewed.
async fn plain_holder(client: &Client, name: &str) -> LockGuard {
    let request = client.lock(name).ttl(LEASE).auto_renew(false).no_wait();
    held(request.acquire().await, &format!("the holder of {name}"))
}

/// Waits (at most 10 s) until the plain lock's line `line` has `places` places.
async fn in_line(server: &ClockedServer, line: &str, places: i64, who: &str) {
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while common::integer_reply(server, &["ZCARD", line]) < places {
        assert!(
            tokio::time::Instant::now() < until,
            "{who} took no place in line"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The scripts a server ran so far (`EVALSHA` and `EVAL`).
fn scripts_run(server: &ClockedServer) -> u64 {
    common::calls(server, "evalsha") + common::calls(server, "eval")
}

/// A fair lock `name` held for [`LEASE`], not renewed.
async fn fair_holder(client: &Client, name: &str) -> LockGuard {
    let request = client
        .fair_lock(name)
        .ttl(LEASE)
        .auto_renew(false)
        .no_wait();
    held(request.acquire().await, &format!("the holder of {name}"))
}

/// A request for the fair lock `name` that waits (20 s at most) with a place that lasts 30 s,
/// its lease not renewed.
fn fair_waiter(
    client: &Client,
    name: &str,
) -> tokio::task::JoinHandle<fencelock::Result<LockGuard>> {
    let request = client
        .fair_lock(name)
        .ttl(LEASE)
        .auto_renew(false)
        .queue_timeout(Duration::from_secs(30))
        .wait_up_to(Duration::from_secs(20));
    tokio::spawn(async move { request.acquire().await })
}

/// Waits (at most 10 s) until the fair lock `name`'s queue has `places` places.
async fn queued(server: &ClockedServer, name: &str, places: i64, who: &str) {
    in_line(server, &common::lock_subkey(name, "queue"), places, who).await;
}

/// A fair lock's waiter does not poll: each refusal tells it how long to sleep, and it sleeps
/// that long (or a third of its place, sooner) unless a release wakes it. Behind a dead head
/// on a free lock it is told when the head's place lapses; at the head behind a holder, when
/// the lease ends. The clock stands still, so nothing changes meanwhile: a waiter told 1 ms
/// (or nothing) would try hundreds of times a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_sleeps_until_the_place_or_lease_ahead_of_it_can_end() {
    let mut server = clocked();
    let client = client(&server);
    let now = server.now_ms();
    // How many scripts the server runs in a second and a half of real time.
    let tries = |server: &ClockedServer| {
        let before = scripts_run(server);
        std::thread::sleep(Duration::from_millis(1500));
        scripts_run(server) - before
    };

    // A free lock behind a dead head whose place lapses in 2 s of the server's time.
    let name = "fair-dead-head";
    let dead = token('d');
    zadd(
        &server,
        &common::lock_subkey(name, "queue"),
        now - 10,
        &dead,
    );
    zadd(
        &server,
        &common::lock_subkey(name, "alive"),
        now + 2_000,
        &dead,
    );
    let behind = fair_waiter(&client, name);
    queued(&server, name, 2, "the waiter behind the dead head").await;
    let tried = tokio::task::block_in_place(|| tries(&server));
    assert!(
        tried <= 3,
        "behind a dead head whose place lapses in 2 s, the waiter tried {tried} times in 1.5 s"
    );
    advance(&mut server, Duration::from_millis(2_000));
    let guard = match behind.await {
        Ok(result) => held(result, "the waiter once the dead head's place lapsed"),
        Err(e) => panic!("the waiter's task: {e}"),
    };
    assert!(held_release(guard).await, "the release of {name}");

    // At the head of the queue behind a holder whose lease has a minute left: it sleeps a
    // third of its place (10 s) at most, and the release wakes it.
    let name = "fair-held";
    let holder = fair_holder(&client, name).await;
    let head = fair_waiter(&client, name);
    queued(&server, name, 1, "the waiter behind the holder").await;
    let tried = tokio::task::block_in_place(|| tries(&server));
    assert!(
        tried <= 2,
        "at the head behind a lease with a minute left, the waiter tried {tried} times in 1.5 s"
    );
    assert!(held_release(holder).await, "the release of {name}");
    match head.await {
        Ok(result) => drop(held(result, "the head once the holder released")),
        Err(e) => panic!("the head's task: {e}"),
    }
}

/// Requests for a fair lock that arrive in the same millisecond (the clock stands still) take
/// tickets one apart, in the order they came: the first the clock's millisecond, each next one
/// the ticket before it plus one. A ticket equal to the one before would leave their order to
/// their tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_requests_that_arrive_in_the_same_millisecond_keep_their_order() {
    let server = clocked();
    let client = client(&server);
    let now = server.now_ms();
    let name = "fair-same-ms";
    let holder = fair_holder(&client, name).await;
    let mut waiters = Vec::new();
    for i in 1..=3 {
        waiters.push(fair_waiter(&client, name));
        queued(&server, name, i, &format!("waiter {i}")).await;
    }
    let queue = common::lock_subkey(name, "queue");
    let tickets: Vec<u64> = match server.cmd(&["ZRANGE", &queue, "0", "-1", "WITHSCORES"]) {
        Ok(redis::Value::Array(items)) => items
            .chunks(2)
            .map(|pair| match pair.get(1) {
                Some(redis::Value::BulkString(s)) => {
                    String::from_utf8_lossy(s).parse().unwrap_or(0)
                }
                Some(redis::Value::Double(d)) => *d as u64,
                other => panic!("a ticket: {other:?}"),
            })
            .collect(),
        other => panic!("ZRANGE {queue}: {other:?}"),
    };
    assert_eq!(
        tickets,
        [now, now + 1, now + 2],
        "the tickets of three arrivals"
    );

    // And the lock goes to them in that order.
    let mut release = holder;
    for (i, waiter) in waiters.into_iter().enumerate() {
        assert!(held_release(release).await, "a release of {name}");
        release = match waiter.await {
            Ok(result) => held(result, &format!("waiter {}", i + 1)),
            Err(e) => panic!("waiter {}'s task: {e}", i + 1),
        };
    }
    assert!(held_release(release).await, "the last release of {name}");
}

/// A fair lock's release passes the lock to the first place that lapses after the very
/// millisecond of the release: a place ahead of the waiter that lapses in that millisecond is
/// passed nothing (and taken out), and the live waiter behind it gets the lock at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_release_passes_nothing_to_a_place_that_lapses_this_very_millisecond() {
    let server = clocked();
    let client = client(&server);
    let now = server.now_ms();
    let name = "fair-lapses-now";
    let holder = fair_holder(&client, name).await;
    let waiter = fair_waiter(&client, name);
    queued(&server, name, 1, "the waiter").await;
    // Ahead of the waiter, a place that lapses in this very millisecond.
    let lapsing = token('l');
    let queue = common::lock_subkey(name, "queue");
    zadd(&server, &queue, now - 10, &lapsing);
    zadd(&server, &common::lock_subkey(name, "alive"), now, &lapsing);
    assert!(held_release(holder).await, "the release of {name}");
    let guard = match waiter.await {
        Ok(result) => held(result, "the waiter behind the lapsing place"),
        Err(e) => panic!("the waiter's task: {e}"),
    };
    assert_eq!(
        common::integer_reply(&server, &["ZCARD", &queue]),
        0,
        "the lapsed place is taken out"
    );
    assert!(held_release(guard).await, "the waiter's release");
}

/// An election's term in its last millisecond (`PTTL` 0) is still the leader's: a proclaim
/// then writes the leader's record, which lapses a second after the lease (also a record the
/// proclaim writes anew), and a rival's campaign is refused and marks the term as waited for,
/// as any held lock is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elections_term_in_its_last_millisecond_is_still_the_leaders() {
    let mut server = clocked();
    let client = client(&server);
    let name = "last-term";
    let (key, record) = (common::lock_key(name), common::lock_subkey(name, "leader"));
    let mut leadership = client
        .election(name)
        .campaign("first")
        .ttl(LEASE)
        .no_wait()
        .await
        .unwrap_or_else(|e| panic!("the campaign: {e}"));
    advance(&mut server, LEASE);
    assert_eq!(common::integer_reply(&server, &["PTTL", &key]), 0);
    // The record gone (evicted, say: it is a key with an expiry): the proclaim writes it anew,
    // and it lapses a second after the term's lease, as always, not never.
    assert_eq!(common::integer_reply(&server, &["DEL", &record]), 1);
    leadership
        .proclaim("last")
        .await
        .unwrap_or_else(|e| panic!("a proclaim in the term's last millisecond: {e}"));
    let fields = common::hash_fields(&server, &record);
    assert_eq!(
        fields.get("value").map(String::as_str),
        Some("last"),
        "the leader's record after a proclaim in the term's last millisecond: {fields:?}"
    );
    assert_eq!(
        common::integer_reply(&server, &["PTTL", &record]),
        1000,
        "the record a proclaim in the term's last millisecond wrote anew: its expiry"
    );
    let rival = client
        .election(name)
        .campaign("rival")
        .ttl(LEASE)
        .no_wait()
        .await;
    assert!(
        matches!(rival, Err(Error::Busy { .. })),
        "a rival's campaign in the term's last millisecond: {:?}",
        rival.map(|l| l.term())
    );
    let value = common::string_at(&server, &key);
    assert!(
        value.as_deref().is_some_and(|v| v.ends_with('+')),
        "the term in its last millisecond was not marked as waited for: {value:?}"
    );
}
