//! What every kind of lock shares: one name is one kind, inspect and force-release understand
//! every kind, each kind's refusals over Redlock, and a killed holder's lock frees after its
//! lease.

use crate::common;

use std::time::{Duration, Instant};

use fencelock::{Client, Conflict, Error, LockKind};
use fencelock_testkit::{require_test_child, spawn_test_child};

use common::{NAME_ENV, TTL_ENV, URL_ENV, calls, client, dumps, fence_of, keys, request, server};

/// Takes `name` as `kind` and keeps the guard.
async fn take(client: &Client, kind: &str, name: &str) -> fencelock::LockGuard {
    match request(client, kind, name).no_wait().acquire().await {
        Ok(guard) => guard,
        Err(e) => panic!("{kind}: {e}"),
    }
}

async fn try_take(
    client: &Client,
    kind: &str,
    name: &str,
) -> fencelock::Result<Option<fencelock::LockGuard>> {
    request(client, kind, name).try_acquire().await
}

/// What a request of `kind` (as [`request`] names it) is, in a refusal.
fn lock_kind(kind: &str) -> LockKind {
    match kind {
        "lock" | "fair" => LockKind::Lock,
        "reentrant" => LockKind::Reentrant,
        "read" | "write" => LockKind::ReadWrite,
        "semaphore" => LockKind::Semaphore,
        other => panic!("unknown kind {other}"),
    }
}

/// Every key on the server with what it holds (`DUMP`).
fn everything(redis: &fencelock_testkit::RedisServer) -> Vec<(String, redis::Value)> {
    let keys = keys(redis);
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    let values = dumps(redis, &names);
    keys.into_iter().zip(values).collect()
}

#[tokio::test]
async fn one_name_is_one_kind_and_a_mixup_is_a_clear_error_that_changes_nothing() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    // Hash kinds refuse each other and the string kinds; the string kinds refuse hash kinds.
    // (A plain and a fair lock share the held key's format: they exclude each other, but the
    // plain lock ignores the fair lock's queue.)
    let families: [(&str, &[&str]); 5] = [
        ("reentrant", &["lock", "fair", "read", "write", "semaphore"]),
        ("read", &["lock", "reentrant", "semaphore"]),
        ("semaphore", &["lock", "fair", "reentrant", "write"]),
        ("lock", &["reentrant", "read", "write", "semaphore"]),
        ("fair", &["reentrant", "read", "write", "semaphore"]),
    ];
    for (held_as, others) in families {
        let name = format!("mixed-{held_as}");
        let guard = take(&a, held_as, &name).await;
        let before = everything(&redis);
        for other in others {
            // Refused at once, whether the request would wait or not: the holder of another
            // kind is not a holder to wait for.
            let trying = try_take(&b, other, &name).await.map(|_| ());
            let not_waiting = request(&b, other, &name).no_wait().acquire().await;
            let waiting = request(&b, other, &name)
                .wait_up_to(Duration::from_secs(5))
                .acquire()
                .await;
            for err in [
                trying.unwrap_err(),
                not_waiting.map(|_| ()).unwrap_err(),
                waiting.map(|_| ()).unwrap_err(),
            ] {
                let text = err.to_string();
                match err {
                    Error::Conflict {
                        conflict: Conflict::OtherKind { found, requested },
                        ..
                    } => {
                        for said in [found.to_string(), requested.to_string()] {
                            assert!(text.contains(&said), "{said:?} missing: {text}");
                        }
                        assert_eq!(
                            (found, requested),
                            (lock_kind(held_as), lock_kind(other)),
                            "{held_as} then {other}"
                        );
                    }
                    other_err => panic!("{held_as} then {other}: {other_err:?}"),
                }
                assert!(text.contains(&name) && text.contains("same kind"), "{text}");
            }
        }
        assert_eq!(
            everything(&redis),
            before,
            "{held_as}: refused requests wrote or changed something"
        );
        assert!(guard.release().await.unwrap());
    }
    // Not even for a moment: no refused request took a place in a queue (a fair lock's
    // waiters are the only ZADD).
    assert_eq!(calls(&redis, "zadd"), 0, "a refused request queued itself");
}

#[tokio::test]
async fn inspect_describes_every_kind() {
    let redis = server();
    let a = client(&redis.url());
    assert_eq!(a.inspect("nothing").await.unwrap().kind, None);

    let plain = take(&a, "lock", "i-lock").await;
    let info = a.inspect("i-lock").await.unwrap();
    assert_eq!(info.kind, Some(LockKind::Lock));
    assert_eq!(
        info.holder.as_ref().and_then(|h| h.fence),
        Some(plain.fence())
    );

    let owner = a.reentrant_lock("i-re");
    let g1 = owner.acquire().await.unwrap();
    let _g2 = owner.acquire().await.unwrap();
    let info = a.inspect("i-re").await.unwrap();
    assert_eq!(info.kind, Some(LockKind::Reentrant));
    assert_eq!(info.holder.as_ref().and_then(|h| h.holds), Some(2));
    assert_eq!(info.permits, None);
    assert_eq!(info.holder.as_ref().and_then(|h| h.fence), Some(g1.fence()));
    assert!(info.holder.as_ref().and_then(|h| h.remaining).is_some());

    let rw = a.read_write_lock("i-rw");
    let w = rw.write().acquire().await.unwrap();
    let info = a.inspect("i-rw").await.unwrap();
    assert_eq!(info.kind, Some(LockKind::ReadWrite));
    assert_eq!(info.holder.as_ref().and_then(|h| h.fence), Some(w.fence()));
    w.release().await.unwrap();
    let r1 = rw.read().acquire().await.unwrap();
    let r2 = a.read_write_lock("i-rw").read().acquire().await.unwrap();
    let info = a.inspect("i-rw").await.unwrap();
    assert!(info.holder.is_none());
    assert_eq!(info.shared.len(), 2);
    assert!(info.is_held());
    drop((r1, r2));

    let p1 = a.semaphore("i-sem", 4).acquire().await.unwrap();
    let p2 = a.semaphore("i-sem", 4).acquire().await.unwrap();
    let info = a.inspect("i-sem").await.unwrap();
    assert_eq!(info.kind, Some(LockKind::Semaphore));
    assert_eq!(info.permits, Some(4));
    let prefixes: Vec<&str> = info
        .shared
        .iter()
        .map(|h| h.token_prefix.as_str())
        .collect();
    assert!(prefixes.iter().all(|p| p.len() == 8), "{prefixes:?}");
    let mut fences: Vec<Option<u64>> = info.shared.iter().map(|h| h.fence).collect();
    fences.sort();
    assert_eq!(fences, vec![Some(p1.fence()), Some(p2.fence())]);
    assert_eq!(info.last_fence, Some(p2.fence()));
}

#[tokio::test]
async fn force_release_frees_every_kind_and_the_holders_learn_it() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    for kind in ["lock", "fair", "reentrant", "write", "read", "semaphore"] {
        let name = format!("forced-{kind}");
        let guard = take(&a, kind, &name).await;
        assert!(b.force_release(&name).await.unwrap(), "{kind}");
        assert!(!b.force_release(&name).await.unwrap(), "{kind}");
        let again = try_take(&b, kind, &name).await.unwrap();
        let again = again.unwrap_or_else(|| panic!("{kind}: not free after force-release"));
        // The holder learns it at its next renewal or release.
        assert!(
            !guard.release().await.unwrap(),
            "{kind}: a force-released hold was released"
        );
        assert!(again.release().await.unwrap(), "{kind}");
    }
    // Only the fence keys (and nothing foreign) are left.
    assert!(
        keys(&redis).iter().all(|k| k.ends_with(":fence")),
        "{:?}",
        keys(&redis)
    );
}

/// Script runs on a server so far (EVALSHA, and EVAL should a script ever be sent whole).
fn script_runs(redis: &fencelock_testkit::RedisServer) -> u64 {
    calls(redis, "evalsha") + calls(redis, "eval")
}

#[tokio::test]
async fn semaphores_and_fair_locks_are_refused_over_redlock_before_anything_is_sent() {
    let (servers, urls) = common::redlock_servers(3);
    let redlock = common::redlock_client(&urls, Duration::from_millis(500));
    for (kind, name, named) in [
        ("semaphore", "licences", "semaphore"),
        ("fair", "queue", "fair lock"),
    ] {
        let waiting = request(&redlock, kind, name).acquire().await.unwrap_err();
        let trying = request(&redlock, kind, name)
            .try_acquire()
            .await
            .unwrap_err();
        for err in [waiting, trying] {
            let text = err.to_string();
            assert!(
                matches!(&err, Error::Unsupported { lock, .. } if lock == name),
                "{kind}: {err:?}"
            );
            assert!(text.contains("Redlock") && text.contains(named), "{text}");
        }
    }
    for s in &servers {
        assert_eq!(script_runs(s), 0, "a refused request reached {}", s.url());
        assert!(keys(s).is_empty(), "a key was written on {}", s.url());
    }
    // The kinds that are safe over a quorum work. A reentrant hold keeps its fence over every
    // re-entry, although each instance hands out its own fences; a new hold gets a larger one.
    let re = redlock.reentrant_lock("r");
    let mut last = 0;
    for _ in 0..20 {
        let g1 = re.acquire().await.unwrap();
        let g2 = re.acquire().await.unwrap();
        let g3 = re.clone().acquire().await.unwrap();
        assert!(g1.fence() > last);
        assert_eq!((g1.fence(), g1.fence()), (g2.fence(), g3.fence()));
        last = g1.fence();
        for guard in [g3, g2, g1] {
            assert!(guard.release().await.unwrap());
        }
    }
    // The count above would have seen a request (these reached every instance).
    for s in &servers {
        assert!(script_runs(s) > 0, "no script run counted on {}", s.url());
        assert!(
            keys(s)
                .iter()
                .all(|k| !k.contains("licences") && !k.contains("queue")),
            "{:?}",
            keys(s)
        );
    }
}

/// Keys of a lock that hold something fencelock did not put there: every kind refuses them at
/// once (no waiting for a "holder" that is not one) with `WrongType` naming the lock, the key
/// and what it holds, and writes nothing and changes nothing. Inspect and force-release refuse
/// them the same way.
#[tokio::test]
async fn every_kind_refuses_foreign_keys_at_once_and_leaves_them_untouched() {
    let redis = server();
    let a = client(&redis.url());
    // (case, the command that plants it (KEY stands for the key), which key, what is found)
    let cases: [(&str, &[&str], &str, &str); 6] = [
        ("listed", &["RPUSH", "KEY", "x", "y"], "", "a list"),
        ("hashed", &["HSET", "KEY", "f", "v"], "", "a hash"),
        ("texted", &["SET", "KEY", "hello"], "", "TEXT"),
        // Shaped as a plain lock's value, `<token>:<fence>`, but with no expiry: no holder's
        // lease, so not marked as waited for, and nobody takes a place behind it.
        (
            "leaselike",
            &["SET", "KEY", "0123456789abcdef0123456789abcdef:17"],
            "",
            "TEXT",
        ),
        ("setfence", &["SADD", "KEY", "x"], "fence", "a set"),
        (
            "textfence",
            &["SET", "KEY", "hello"],
            "fence",
            "not a number",
        ),
    ];
    let kinds = ["lock", "fair", "reentrant", "read", "write", "semaphore"];
    for (case, plant, suffix, found) in cases {
        for kind in kinds {
            // (To the kinds kept in a hash, a lease-shaped string is a plain lock's: the name
            // is another kind's, a conflict and not a foreign key.)
            if case == "leaselike" && !matches!(kind, "lock" | "fair") {
                continue;
            }
            let name = format!("{case}-{kind}");
            let key = if suffix.is_empty() {
                common::lock_key(&name)
            } else {
                common::lock_subkey(&name, suffix)
            };
            let command: Vec<&str> = plant
                .iter()
                .map(|arg| if *arg == "KEY" { key.as_str() } else { arg })
                .collect();
            redis.cmd(&command).unwrap();
            let before = dumps(&redis, &[&key]);
            // A request that does not wait gives nothing back after a refusal (a waiting one
            // gives back its place, which would hide a write the script left): the script
            // itself must leave everything as it was.
            let err = request(&a, kind, &name).no_wait().acquire().await;
            assert!(
                matches!(err, Err(Error::WrongType { .. })),
                "{kind} on {case} without waiting: {err:?}"
            );
            assert_eq!(dumps(&redis, &[&key]), before, "{kind} changed {key}");
            assert_eq!(
                keys(&redis),
                std::slice::from_ref(&key),
                "{kind} wrote beside {key} (without waiting)"
            );
            let started = std::time::Instant::now();
            let err = request(&a, kind, &name)
                .wait_up_to(Duration::from_secs(5))
                .acquire()
                .await
                .unwrap_err();
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{kind} waited on {case}"
            );
            // A string at the lock key without an expiry is nobody's lease to a plain or fair
            // lock (their format); to the kinds kept in a hash it is not a lock at all.
            let found = match (found, kind) {
                ("TEXT", "lock" | "fair") => "a key with no expiry",
                ("TEXT", _) => "not a fencelock lock",
                (found, _) => found,
            };
            match &err {
                Error::WrongType {
                    lock,
                    key: k,
                    found: f,
                } => {
                    assert_eq!((lock, k), (&name, &key), "{kind} on {case}");
                    assert!(f.contains(found), "{kind} on {case}: found {f:?}");
                }
                other => panic!("{kind} on {case}: expected WrongType, got {other:?}"),
            }
            assert_eq!(dumps(&redis, &[&key]), before, "{kind} changed {key}");
            assert_eq!(
                keys(&redis),
                std::slice::from_ref(&key),
                "{kind} wrote beside {key}"
            );
            // (The operator's view shows a lease-shaped key without expiry as a holder with no
            // expiry, for the operator to see and to force-release: not refused there.)
            if suffix.is_empty() && case != "leaselike" {
                let err = a.inspect(&name).await.unwrap_err();
                assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
                let err = a.force_release(&name).await.unwrap_err();
                assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
                assert_eq!(
                    dumps(&redis, &[&key]),
                    before,
                    "force-release changed {key}"
                );
            }
            redis.cmd(&["DEL", &key]).unwrap();
            // Not even for a moment: no request took a place in a queue (a fair lock's
            // waiters are the only ZADD; fair.rs checks that this count sees one).
            assert_eq!(calls(&redis, "zadd"), 0, "{kind} on {case} queued itself");
        }
    }
    assert!(keys(&redis).is_empty(), "something was written");
}

// ---------------------------------------------------------------------------------------------
// Holders that die: the test binary re-runs itself as a child that holds a lock.

/// The kind the child holds (as [`request`] names it).
const KIND_ENV: &str = "FENCELOCK_TEST_KIND";

/// Child role: take `NAME` as `KIND` with a lease of `TTL` (renewed), a reentrant lock twice (a
/// nested re-entry, one fence), report `ACQUIRED <fence>`, and hold it until killed.
#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_kind_holder() {
    require_test_child();
    let url = common::child_var(URL_ENV);
    let ttl = common::child_millis(TTL_ENV);
    let kind = common::child_var(KIND_ENV);
    let name = common::child_var(NAME_ENV);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = client(&url);
        let (outer, inner) = if kind == "reentrant" {
            let lock = client.reentrant_lock(name.as_str());
            let outer = lock.request().ttl(ttl).acquire().await.unwrap();
            let inner = lock.request().ttl(ttl).no_wait().acquire().await.unwrap();
            assert_eq!(inner.fence(), outer.fence());
            (outer, Some(inner))
        } else {
            let outer = request(&client, &kind, &name).ttl(ttl).acquire().await;
            (outer.unwrap(), None)
        };
        println!("ACQUIRED {}", outer.fence());
        tokio::time::sleep(Duration::from_secs(30)).await;
        println!(
            "STILL-ALIVE {}",
            outer.is_held() && inner.is_none_or(|g| g.is_held())
        );
    });
}

/// A holder process of `held_as` is killed: `asked_as` (a kind the holder excludes) waits, and
/// gets the lock with a larger fence once the dead holder's lease ran out, not before and not
/// much after.
async fn a_killed_holder_frees_the_lock_after_its_lease(
    url: String,
    held_as: &str,
    asked_as: &str,
) {
    let name = format!("crashed-{held_as}");
    let ttl = Duration::from_secs(1);
    let ttl_ms = common::millis_var(ttl);
    let mut child = spawn_test_child(
        "kinds::child_kind_holder",
        &[
            (URL_ENV, url.as_str()),
            (TTL_ENV, &ttl_ms),
            (KIND_ENV, held_as),
            (NAME_ENV, &name),
        ],
    )
    .unwrap_or_else(|e| panic!("{held_as}: cannot spawn the holder: {e}"));
    let line = child
        .wait_for_line("ACQUIRED", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{held_as}: {e}"));
    let fence = fence_of(&line);
    let a = client(&url);
    if held_as == "reentrant" {
        let info = a
            .inspect(&name)
            .await
            .unwrap_or_else(|e| panic!("{held_as}: {e}"));
        assert_eq!(
            info.holder.and_then(|h| h.holds),
            Some(2),
            "the nested holds"
        );
    }
    assert!(
        try_take(&a, asked_as, &name)
            .await
            .unwrap_or_else(|e| panic!("{held_as}: {e}"))
            .is_none(),
        "{asked_as} got in while {held_as} was held"
    );
    child.kill().unwrap_or_else(|e| panic!("{held_as}: {e}"));
    let killed_at = Instant::now();
    let guard = request(&a, asked_as, &name)
        .wait_up_to(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{held_as}: {e}"));
    let waited = killed_at.elapsed();
    assert!(
        guard.fence() > fence,
        "{held_as}: the next holder needs a larger fence"
    );
    // The dead holder's lease ran out on its own: it was renewed at most a third of a lease
    // before the kill, so at least two thirds of a lease were left.
    assert!(
        waited >= ttl / 2 && waited < ttl + Duration::from_secs(1),
        "{held_as}: {waited:?}"
    );
    // Nothing of the dead holder is left (a reentrant owner's holds go together).
    let info = a
        .inspect(&name)
        .await
        .unwrap_or_else(|e| panic!("{held_as}: {e}"));
    assert!(info.shared.is_empty(), "{held_as}: {info:?}");
    let holder = info
        .holder
        .unwrap_or_else(|| panic!("{held_as}: no holder"));
    assert_eq!(holder.fence, Some(guard.fence()), "{held_as}");
    if asked_as == "reentrant" {
        assert_eq!(holder.holds, Some(1), "the dead owner's holds are gone");
    }
    assert!(
        guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("{held_as}: {e}")),
        "{held_as}"
    );
}

/// Every kind a holder process can leave behind (a semaphore's permit: semaphore.rs, with the
/// other permits held on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_of_any_kind_frees_the_lock_after_its_lease() {
    let redis = server();
    let rows = [
        ("lock", "lock"),
        ("fair", "fair"),
        ("reentrant", "reentrant"),
        ("write", "write"),
        ("read", "write"),
    ];
    let mut runs = tokio::task::JoinSet::new();
    for (held_as, asked_as) in rows {
        runs.spawn(a_killed_holder_frees_the_lock_after_its_lease(
            redis.url(),
            held_as,
            asked_as,
        ));
    }
    while let Some(run) = runs.join_next().await {
        if let Err(e) = run {
            std::panic::resume_unwind(e.into_panic());
        }
    }
    assert!(
        keys(&redis).iter().all(|k| k.ends_with(":fence")),
        "{:?}",
        keys(&redis)
    );
}
