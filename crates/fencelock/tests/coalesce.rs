//! Group commit: acquires and releases that pile up on one client while one is on its way go to
//! Redis together, as one script call, and each caller still gets its own answer.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use fencelock::{Client, Error};
use fencelock_testkit::{FaultProxy, RedisServer};

use common::{calls, client, keys, request, server};

const TASKS: usize = 40;

/// Acquires `names` at once from one client (no waiting), each in its own task.
async fn acquire_all(
    client: &Client,
    names: Vec<String>,
) -> Vec<(String, fencelock::Result<fencelock::LockGuard>)> {
    let tasks: Vec<_> = names
        .into_iter()
        .map(|name| {
            let client = client.clone();
            tokio::spawn(async move {
                let result = client.lock(&name).no_wait().acquire().await;
                (name, result)
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(
            task.await
                .unwrap_or_else(|e| panic!("an acquire task failed: {e}")),
        );
    }
    results
}

fn reset_stats(redis: &RedisServer) {
    if let Err(e) = redis.cmd(&["CONFIG", "RESETSTAT"]) {
        panic!("CONFIG RESETSTAT: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_share_script_runs_and_each_gets_its_own_answer() {
    let redis = server();
    let client = client(&redis.url());
    // One name whose key is not a lock: its caller alone is refused.
    redis.cmd(&["RPUSH", "fencelock:{shared-7}", "x"]).unwrap();
    reset_stats(&redis);

    let names: Vec<String> = (0..TASKS).map(|i| format!("shared-{i}")).collect();
    let results = acquire_all(&client, names).await;
    let mut guards = Vec::new();
    for (name, result) in results {
        match (name.as_str(), result) {
            ("shared-7", Err(Error::WrongType { lock, .. })) => assert_eq!(lock, "shared-7"),
            ("shared-7", other) => panic!("shared-7: expected WrongType, got {other:?}"),
            (_, Ok(guard)) => {
                assert!(guard.fence() > 0);
                guards.push(guard);
            }
            (name, Err(err)) => panic!("{name}: {err}"),
        }
    }
    assert_eq!(guards.len(), TASKS - 1);
    let releases: Vec<_> = guards
        .into_iter()
        .map(|guard| tokio::spawn(guard.release()))
        .collect();
    for release in releases {
        assert!(
            release.await.unwrap().unwrap(),
            "a release found its lock gone"
        );
    }

    // Fewer script runs than calls: the calls that piled up went together.
    let operations = 2 * (TASKS as u64 - 1) + 1;
    let runs = calls(&redis, "evalsha") + calls(&redis, "eval");
    assert!(
        runs < operations,
        "{runs} script runs for {operations} acquires and releases: nothing was coalesced"
    );
    // Nothing is left but the fence keys and the foreign list.
    let left: Vec<String> = keys(&redis)
        .into_iter()
        .filter(|k| !k.ends_with(":fence"))
        .collect();
    assert_eq!(left, ["fencelock:{shared-7}"]);
}

/// A batch that the server refuses as a whole (the ACL denies one call's keys) is sent again
/// call by call: only the denied caller is refused, and it leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_acl_denies_does_not_fail_the_others_in_its_batch() {
    let redis = server();
    let mut rules = vec![
        "ACL",
        "SETUSER",
        "some",
        "reset",
        "on",
        ">pw-of-some",
        "~fencelock:{ok-*",
        "&*",
        "+@all",
    ];
    redis.cmd(&rules).unwrap();
    rules.clear();
    let url = format!("redis://some:pw-of-some@127.0.0.1:{}", redis.port());
    let client = client(&url);

    let mut names: Vec<String> = (0..TASKS).map(|i| format!("ok-{i}")).collect();
    names.insert(TASKS / 2, "denied".to_owned());
    let results = acquire_all(&client, names).await;
    let mut granted = 0;
    for (name, result) in results {
        match (name.as_str(), result) {
            ("denied", Err(Error::PermissionDenied { lock, .. })) => assert_eq!(lock, "denied"),
            ("denied", other) => panic!("denied: expected PermissionDenied, got {other:?}"),
            (_, Ok(guard)) => {
                granted += 1;
                assert!(guard.release().await.unwrap());
            }
            (name, Err(err)) => panic!("{name}: {err}"),
        }
    }
    assert_eq!(granted, TASKS);
    assert!(
        keys(&redis).iter().all(|k| !k.contains("denied")),
        "{:?}",
        keys(&redis)
    );
}

/// Ten callers that give up after `patience`, behind two acquires that a proxy slows down by
/// `latency` each way (as many calls as a connection sends before the next waits): the ten
/// wait, and go out together as a batch when the first two come back, at twice `latency`. Each
/// caller acquires `<prefix><i>` with a lease of a minute. Returns (the server, the proxy, which
/// lives as long as the client needs it, the client, and the first two's guards) once every
/// caller gave up (none may be answered).
async fn callers_that_give_up_behind_two(
    latency: Duration,
    prefix: &'static str,
    patience: Duration,
) -> (RedisServer, FaultProxy, Client, Vec<fencelock::LockGuard>) {
    let redis = server();
    let proxy = FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("starting the proxy: {e}"));
    let slow = Client::builder(&proxy.url())
        .command_timeout(Duration::from_secs(5))
        .build()
        .unwrap_or_else(|e| panic!("building the client: {e}"));
    // Warm the connection and the scripts, then slow every chunk down.
    common::warm_up(&slow).await;
    proxy.set_latency(latency);
    let first: Vec<_> = ["ahead-a", "ahead-b"]
        .into_iter()
        .map(|name| {
            let slow = slow.clone();
            tokio::spawn(async move { slow.lock(name).no_wait().acquire().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let callers: Vec<_> = (0..10)
        .map(|i| {
            let slow = slow.clone();
            tokio::spawn(async move {
                let request = slow
                    .lock(format!("{prefix}{i}"))
                    .ttl(Duration::from_secs(60))
                    .no_wait()
                    .acquire();
                tokio::time::timeout(patience, request).await
            })
        })
        .collect();
    for task in callers {
        let answered = task
            .await
            .unwrap_or_else(|e| panic!("a caller failed: {e}"));
        assert!(answered.is_err(), "an acquire was answered");
    }
    let mut guards = Vec::new();
    for first in first {
        guards.push(match first.await {
            Ok(Ok(guard)) => guard,
            Ok(Err(e)) => panic!("an acquire ahead failed: {e}"),
            Err(e) => panic!("an acquire ahead panicked: {e}"),
        });
    }
    (redis, proxy, slow, guards)
}

/// Releases the two ahead.
async fn release(guards: Vec<fencelock::LockGuard>) {
    for guard in guards {
        assert!(matches!(guard.release().await, Ok(true)), "released");
    }
}

/// Callers that go away while their calls wait behind a slow one: calls not yet sent are never
/// sent (their fence keys never appear); nothing is left held either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_go_away_while_queued_leave_nothing_behind() {
    // Gone after 60 ms, long before the two ahead come back at ~200 ms.
    let (redis, _proxy, slow, ahead) = callers_that_give_up_behind_two(
        Duration::from_millis(100),
        "gone-",
        Duration::from_millis(60),
    )
    .await;
    release(ahead).await;
    assert!(slow.wait_idle(Duration::from_secs(5)).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let gone: Vec<String> = keys(&redis)
        .into_iter()
        .filter(|k| k.contains("gone-"))
        .collect();
    assert!(
        gone.is_empty(),
        "queued calls ran after their callers left: {gone:?}"
    );
}

/// Callers that go away while their calls are on their way in a batch: the calls ran (their fence
/// keys are there), and what they were granted is given back (no lock key is left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_in_a_batch_whose_callers_went_away_are_given_back() {
    // The batch goes out at ~400 ms and comes back at ~800 ms; its callers leave at ~620 ms.
    let (redis, _proxy, _slow, ahead) = callers_that_give_up_behind_two(
        Duration::from_millis(200),
        "left-",
        Duration::from_millis(600),
    )
    .await;
    release(ahead).await;
    // The give-backs go out when the batch comes back, and take ~400 ms.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let keys = keys(&redis);
        let left = |k: &&String| k.contains("left-");
        let fences = keys.iter().filter(left).filter(|k| k.ends_with(":fence"));
        assert_eq!(fences.count(), 10, "the batch did not run: {keys:?}");
        let held = keys.iter().filter(left).filter(|k| !k.ends_with(":fence"));
        if held.count() == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "grants nobody took are still held: {keys:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `wait_idle` waits for those give-backs: once it returns, no grant of a caller that left is
/// still held. (Asked at once, when the callers left and their batch is still on its way.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_idle_waits_for_the_give_back_of_grants_whose_callers_went_away() {
    // As above: the batch comes back at ~800 ms, after its callers left at ~620 ms.
    let (redis, _proxy, slow, ahead) = callers_that_give_up_behind_two(
        Duration::from_millis(200),
        "idle-",
        Duration::from_millis(600),
    )
    .await;
    assert!(slow.wait_idle(Duration::from_secs(10)).await, "not idle");
    let keys = keys(&redis);
    let idle = |k: &&String| k.contains("idle-");
    assert_eq!(
        keys.iter()
            .filter(idle)
            .filter(|k| k.ends_with(":fence"))
            .count(),
        10,
        "the batch did not run: {keys:?}"
    );
    let held: Vec<&String> = keys
        .iter()
        .filter(idle)
        .filter(|k| !k.ends_with(":fence"))
        .collect();
    assert!(held.is_empty(), "idle with grants still held: {held:?}");
    release(ahead).await;
}

/// Every kind's acquire and release scripts have a batch form that runs: many of each at once on
/// one client, all granted with their own fences, all released, nothing left held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_runs_in_batches() {
    let redis = server();
    let client = client(&redis.url());
    for kind in ["lock", "fair", "reentrant", "read", "write", "semaphore"] {
        reset_stats(&redis);
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    // The permits of one semaphore: its fences must differ within a batch too.
                    let (name, request) = if kind == "semaphore" {
                        let name = "permits".to_owned();
                        let request = client.semaphore(&name, TASKS as u32);
                        (name, request)
                    } else {
                        let name = format!("{kind}-{i}");
                        let request = request(&client, kind, &name);
                        (name, request)
                    };
                    let guard = request.no_wait().acquire().await;
                    match guard {
                        Ok(guard) => (guard.fence(), guard.release().await),
                        Err(err) => panic!("{kind} {name}: {err}"),
                    }
                })
            })
            .collect();
        let mut fences = BTreeSet::new();
        for task in tasks {
            let (fence, released) = task.await.unwrap();
            assert!(released.unwrap(), "{kind}: a release found its hold gone");
            // Fences are per lock: only the one semaphore's permits can be compared.
            assert!(
                kind != "semaphore" || fences.insert(fence),
                "permit fence {fence} twice"
            );
        }
        let runs = calls(&redis, "evalsha") + calls(&redis, "eval");
        assert!(
            runs < 2 * TASKS as u64,
            "{kind}: {runs} script runs for {} acquires and releases",
            2 * TASKS
        );
    }
    let held: Vec<String> = keys(&redis)
        .into_iter()
        .filter(|k| !k.ends_with(":fence"))
        .collect();
    assert!(held.is_empty(), "left held: {held:?}");
}

/// Takes `names` from `client` one after another, each with a lease of `ttl` kept alive by the
/// watchdog.
async fn hold_all(client: &Client, names: &[String], ttl: Duration) -> Vec<fencelock::LockGuard> {
    let mut guards = Vec::new();
    for name in names {
        match client.lock(name).ttl(ttl).no_wait().acquire().await {
            Ok(guard) => guards.push(guard),
            Err(err) => panic!("{name}: {err}"),
        }
    }
    guards
}

fn pttl(redis: &RedisServer, name: &str) -> i64 {
    common::integer_reply(redis, &["PTTL", &common::lock_key(name)])
}

/// The watchdog renews the locks that fall due together in runs of the extend script's batch
/// form, and reads each lock's answer out of its run's: a lock whose key went away and one
/// that another owner took are lost, the others in the same runs stay held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_go_in_batch_runs_and_each_lock_gets_its_own_answer() {
    const KEPT: usize = 150;
    let ttl = Duration::from_millis(900);
    let redis = server();
    let client = client(&redis.url());
    let mut names: Vec<String> = (0..KEPT).map(|i| format!("kept-{i}")).collect();
    names.insert(40, "gone".to_owned());
    names.insert(100, "taken".to_owned());
    let guards = hold_all(&client, &names, ttl).await;
    redis.cmd(&["DEL", &common::lock_key("gone")]).unwrap();
    redis
        .cmd(&[
            "SET",
            &common::lock_key("taken"),
            "someone-else:7",
            "PX",
            "60000",
        ])
        .unwrap();
    reset_stats(&redis);
    // Four rounds of renewals at least (one every third of the lease).
    tokio::time::sleep(ttl * 2).await;

    let renewals = calls(&redis, "pexpire");
    let runs = calls(&redis, "evalsha") + calls(&redis, "eval");
    assert!(
        renewals >= 3 * KEPT as u64,
        "{renewals} renewals of {KEPT} locks in two leases"
    );
    assert!(
        runs * 10 < renewals,
        "{runs} script runs for {renewals} renewals: they did not go in batches"
    );
    for (name, guard) in names.iter().zip(guards) {
        let lost = name == "gone" || name == "taken";
        assert_eq!(guard.is_held(), !lost, "{name}");
        if lost {
            continue;
        }
        assert!(pttl(&redis, name) > 0, "{name}: not renewed");
        assert!(guard.release().await.unwrap(), "{name}: released nothing");
    }
    assert_eq!(
        redis.cmd(&["GET", &common::lock_key("taken")]).unwrap(),
        redis::Value::BulkString(b"someone-else:7".to_vec()),
        "the other owner's lock was touched"
    );
}

/// A renewal run the server refuses as a whole (the ACL no longer lets the client touch one
/// lock's keys) is sent again lock by lock: only that lock is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_run_the_acl_refuses_is_sent_again_lock_by_lock() {
    let ttl = Duration::from_millis(900);
    let redis = server();
    let user = |keys: &str| {
        redis
            .cmd(&[
                "ACL",
                "SETUSER",
                "renewer",
                "reset",
                "on",
                ">pw-of-renewer",
                keys,
                "&*",
                "+@all",
            ])
            .unwrap_or_else(|e| panic!("ACL SETUSER: {e}"));
    };
    user("~fencelock:{*");
    let client = client(&format!(
        "redis://renewer:pw-of-renewer@127.0.0.1:{}",
        redis.port()
    ));
    let mut names: Vec<String> = (0..20).map(|i| format!("ok-{i}")).collect();
    names.insert(10, "revoked".to_owned());
    let guards = hold_all(&client, &names, ttl).await;
    // (`reset` leaves the connections of the user open; its rules apply at once.)
    user("~fencelock:{ok-*");
    tokio::time::sleep(ttl * 2).await;

    for (name, guard) in names.iter().zip(guards) {
        if name == "revoked" {
            assert!(!guard.is_held(), "revoked: still held by the client's view");
            continue;
        }
        assert!(guard.is_held(), "{name}: lost with the revoked lock's run");
        assert!(pttl(&redis, name) > 0, "{name}: not renewed");
        assert!(guard.release().await.unwrap(), "{name}: released nothing");
    }
}
