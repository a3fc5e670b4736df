//! The read-write lock against real redis-server processes.

use crate::common;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fencelock::{Client, Conflict, Error, LockGuard, LostReason, ReadWriteLock};
use fencelock_testkit::{ChildGuard, RedisServer, require_test_child, spawn_test_child};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use common::{
    URL_ENV, client, fence_of, fields_starting, hash_fields, keys, server, wait_for_count,
};

/// The lock key of `name`.
fn lock_key(name: &str) -> String {
    common::lock_key(name)
}

/// The entries of the read-write lock `name` with this role (`r:` readers, `w:` the writer,
/// `i:` waiting writers, `q:` waiting readers).
fn entries(redis: &RedisServer, name: &str, role: &str) -> usize {
    fields_starting(redis, &lock_key(name), role).len()
}

/// Waits (at most 5 s) until the read-write lock `name` has `count` entries with this role.
async fn wait_for_entries(redis: &RedisServer, name: &str, role: &str, count: usize) {
    let what = format!("{role} entries of {name}");
    wait_for_count(&what, count, Duration::from_secs(5), || {
        entries(redis, name, role)
    })
    .await;
}

/// Takes the read lock, waiting at most 5 s (a writer's failed request gives its waiting entry
/// back in the background, so a reader right after it may have to wait a moment).
async fn read(lock: &ReadWriteLock) -> LockGuard {
    match lock
        .read()
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
    {
        Ok(guard) => guard,
        Err(e) => panic!("read lock not granted: {e}"),
    }
}

/// A task that takes the lock (read or write) and reports when it got it.
fn spawn_acquire(
    request: fencelock::LockRequest,
) -> JoinHandle<(Instant, fencelock::Result<LockGuard>)> {
    tokio::spawn(async move {
        let guard = request.acquire().await;
        (Instant::now(), guard)
    })
}

/// Lets a waiter subscribe and settle into its wait.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_readers_hold_at_once_and_a_writer_waits_for_every_one() {
    let redis = server();
    let clients = [client(&redis.url()), client(&redis.url())];
    let readers: Vec<ReadWriteLock> = (0..5)
        .map(|i| clients[i % 2].read_write_lock("shared"))
        .collect();
    let mut guards = Vec::new();
    for reader in &readers {
        // No waiting: readers never wait for readers.
        guards.push(reader.read().no_wait().acquire().await.unwrap());
    }
    assert_eq!(entries(&redis, "shared", "r:"), 5);
    assert!(guards.iter().all(|g| g.is_held() && g.fence() == 0));

    let writer = clients[0].read_write_lock("shared");
    let waiting = spawn_acquire(writer.write().wait_up_to(Duration::from_secs(10)));
    settle().await;
    assert_eq!(
        entries(&redis, "shared", "i:"),
        1,
        "the writer records that it waits"
    );
    while let Some(guard) = guards.pop() {
        assert!(
            !waiting.is_finished(),
            "the writer got in with readers inside"
        );
        assert!(guard.release().await.unwrap());
        if !guards.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let released_at = Instant::now();
    let (granted_at, written) = waiting.await.unwrap();
    let written = written.unwrap();
    assert!(
        granted_at - released_at < Duration::from_secs(1),
        "the writer was not woken by the last reader's release: {:?}",
        granted_at - released_at
    );
    assert!(written.fence() > 0);
    assert_eq!(entries(&redis, "shared", "i:"), 0);
    assert_eq!(entries(&redis, "shared", "r:"), 0);
    assert!(written.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{shared}:fence"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_wait_while_a_writer_holds_and_all_go_when_it_releases() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let writer = a.read_write_lock("exclusive");
    let written = writer.write().acquire().await.unwrap();
    let other_writer = b.read_write_lock("exclusive");
    assert!(other_writer.write().try_acquire().await.unwrap().is_none());
    let waiting: Vec<_> = (0..3)
        .map(|i| {
            let lock = [&a, &b][i % 2].read_write_lock("exclusive");
            spawn_acquire(lock.read().wait_up_to(Duration::from_secs(10)))
        })
        .collect();
    settle().await;
    assert!(waiting.iter().all(|w| !w.is_finished()));
    assert_eq!(entries(&redis, "exclusive", "r:"), 0);
    let released_at = Instant::now();
    let fence = written.fence();
    assert!(written.release().await.unwrap());
    let mut readers = Vec::new();
    for waiter in waiting {
        let (granted_at, guard) = waiter.await.unwrap();
        assert!(granted_at - released_at < Duration::from_secs(1));
        let guard = guard.unwrap();
        assert_eq!(guard.fence(), fence, "a reader sees the last write");
        readers.push(guard);
    }
    // All three hold at once.
    assert_eq!(entries(&redis, "exclusive", "r:"), 3);
    for guard in readers {
        assert!(guard.release().await.unwrap());
    }
}

/// What the tasks of the contention test see inside the lock.
#[derive(Default)]
struct Inside {
    readers: usize,
    writers: usize,
    last_write_fence: u64,
    max_readers: usize,
    writes: usize,
}

/// The shared view; a task that failed an assertion while holding it does not hide the failure
/// behind a poisoned mutex in the others.
fn view(inside: &Mutex<Inside>) -> MutexGuard<'_, Inside> {
    inside.lock().unwrap_or_else(PoisonError::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_exclude_each_other_under_contention() {
    let redis = server();
    let clients: Vec<Client> = (0..3).map(|_| client(&redis.url())).collect();
    let inside = Arc::new(Mutex::new(Inside::default()));
    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let lock = clients[usize::try_from(task).unwrap() % 3].read_write_lock("contended");
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            // A small deterministic generator per task: a third of the cycles write.
            let mut state = task.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut next = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            for _ in 0..12 {
                let hold = Duration::from_millis(1 + next() % 4);
                if next() % 3 == 0 {
                    let guard = lock
                        .write()
                        .ttl(Duration::from_secs(5))
                        .wait_up_to(Duration::from_secs(30))
                        .acquire()
                        .await
                        .unwrap();
                    {
                        let mut seen = view(&inside);
                        assert_eq!(seen.readers, 0, "a writer got in with readers inside");
                        assert_eq!(seen.writers, 0, "two writers inside");
                        assert!(
                            guard.fence() > seen.last_write_fence,
                            "write fence not larger"
                        );
                        seen.writers = 1;
                        seen.last_write_fence = guard.fence();
                        seen.writes += 1;
                    }
                    tokio::time::sleep(hold).await;
                    view(&inside).writers = 0;
                    assert!(guard.release().await.unwrap(), "a write lock was lost");
                } else {
                    let guard = lock
                        .read()
                        .ttl(Duration::from_secs(5))
                        .wait_up_to(Duration::from_secs(30))
                        .acquire()
                        .await
                        .unwrap();
                    {
                        let mut seen = view(&inside);
                        assert_eq!(seen.writers, 0, "a reader got in with a writer inside");
                        assert_eq!(guard.fence(), seen.last_write_fence, "reader's fence");
                        seen.readers += 1;
                        seen.max_readers = seen.max_readers.max(seen.readers);
                    }
                    tokio::time::sleep(hold).await;
                    view(&inside).readers -= 1;
                    assert!(guard.release().await.unwrap(), "a read lock was lost");
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let seen = view(&inside);
    // The run did exercise both sides (not a performance check: the generator is fixed).
    assert!(seen.writes > 0, "no writes");
    assert!(seen.max_readers > 1, "readers never overlapped");
    drop(seen);
    assert_eq!(keys(&redis), vec!["fencelock:{contended}:fence"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_overlapping_readers_does_not_starve_a_writer() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let inside = Arc::new(Mutex::new(Inside::default()));
    let reader_hold = Duration::from_millis(300);
    // A new reader (a new owner) every 50 ms, each holding 300 ms: readers overlap all the
    // time, so without writer preference there is never a moment without one.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let launcher = {
        let (a, b, inside, stop) = (a.clone(), b.clone(), inside.clone(), stop.clone());
        tokio::spawn(async move {
            let mut readers = Vec::new();
            let mut i = 0usize;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let lock = [&a, &b][i % 2].read_write_lock("stream");
                let inside = inside.clone();
                readers.push(tokio::spawn(async move {
                    let asked = Instant::now();
                    let guard = lock
                        .read()
                        .ttl(Duration::from_secs(2))
                        .wait_up_to(Duration::from_secs(10))
                        .acquire()
                        .await
                        .unwrap();
                    let granted = Instant::now();
                    {
                        let mut seen = view(&inside);
                        assert_eq!(seen.writers, 0, "a reader got in with a writer inside");
                        seen.readers += 1;
                    }
                    tokio::time::sleep(reader_hold).await;
                    view(&inside).readers -= 1;
                    assert!(guard.release().await.unwrap());
                    (asked, granted)
                }));
                i += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let mut times = Vec::new();
            for reader in readers {
                times.push(reader.await.unwrap());
            }
            times
        })
    };
    // Let the stream get going.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(view(&inside).readers > 0);
    let writer = a.read_write_lock("stream");
    let asked = Instant::now();
    let written = writer
        .write()
        .ttl(Duration::from_secs(2))
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the writer was starved by the stream of readers");
    let granted = Instant::now();
    {
        let mut seen = view(&inside);
        assert_eq!(seen.readers, 0, "the writer got in with readers inside");
        seen.writers = 1;
    }
    // Generous: the readers inside when it asked hold 300 ms each.
    assert!(
        granted - asked < Duration::from_secs(2),
        "the writer waited {:?}",
        granted - asked
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    view(&inside).writers = 0;
    let released = Instant::now();
    assert!(written.release().await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let times = launcher.await.unwrap();
    // Readers that asked once the writer's waiting entry was surely there (its first round
    // trip) went in after it.
    let behind: Vec<_> = times
        .iter()
        .filter(|(reader_asked, _)| *reader_asked > asked + Duration::from_millis(100))
        .filter(|(reader_asked, _)| *reader_asked < granted)
        .collect();
    assert!(
        !behind.is_empty(),
        "no reader asked while the writer waited"
    );
    for (_, reader_granted) in behind {
        assert!(
            *reader_granted >= released,
            "a reader that came after the waiting writer went before it"
        );
    }
    // And the stream went on after the writer.
    assert!(times.iter().any(|(_, g)| *g > released));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_arriving_after_a_waiting_writer_waits_behind_it() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let first_reader = a.read_write_lock("queue");
    let writer = b.read_write_lock("queue");
    let late_reader = a.read_write_lock("queue");
    let reading = first_reader.read().acquire().await.unwrap();
    let waiting_writer = spawn_acquire(writer.write().wait_up_to(Duration::from_secs(10)));
    settle().await;
    assert_eq!(entries(&redis, "queue", "i:"), 1);
    // The late reader does not get in, although only a reader holds the lock.
    assert!(late_reader.read().try_acquire().await.unwrap().is_none());
    let waiting_reader = spawn_acquire(late_reader.read().wait_up_to(Duration::from_secs(10)));
    settle().await;
    assert!(!waiting_reader.is_finished());
    // The first reader's owner may still read again (a nested read must not deadlock).
    let nested = first_reader.read().no_wait().acquire().await.unwrap();
    assert!(nested.release().await.unwrap());
    assert!(reading.release().await.unwrap());
    let (_, written) = waiting_writer.await.unwrap();
    let written = written.unwrap();
    settle().await;
    assert!(
        !waiting_reader.is_finished(),
        "the late reader went in under the writer"
    );
    let fence = written.fence();
    let released_at = Instant::now();
    assert!(written.release().await.unwrap());
    let (granted_at, late) = waiting_reader.await.unwrap();
    let late = late.unwrap();
    assert!(granted_at - released_at < Duration::from_secs(1));
    assert_eq!(late.fence(), fence);
    assert!(late.release().await.unwrap());
}

/// The server's clock in milliseconds.
fn server_ms(redis: &RedisServer) -> u64 {
    match redis.cmd(&["TIME"]) {
        Ok(redis::Value::Array(parts)) => match parts.as_slice() {
            [redis::Value::BulkString(s), redis::Value::BulkString(us)] => {
                let s: u64 = String::from_utf8_lossy(s).parse().unwrap_or(0);
                let us: u64 = String::from_utf8_lossy(us).parse().unwrap_or(0);
                s * 1000 + us / 1000
            }
            other => panic!("TIME: {other:?}"),
        },
        other => panic!("TIME: {other:?}"),
    }
}

#[tokio::test]
async fn a_newcomer_arrives_after_every_waiter_already_there_even_in_the_same_millisecond() {
    let redis = server();
    let a = client(&redis.url());
    // A reader waits whose arrival is as late as (or later than) the server clock can tell
    // apart from the newcomer's: here a minute ahead, the extreme of a same-millisecond tie.
    let now = server_ms(&redis);
    let entry = format!("{}:{}", now + 5_000, now + 60_000);
    redis
        .cmd(&["HSET", &lock_key("tie"), "kind", "rw", "q:0123abcd", &entry])
        .unwrap();
    redis.cmd(&["PEXPIRE", &lock_key("tie"), "5000"]).unwrap();
    // The writer comes after it, so it waits; taking the lock would jump the queue.
    let writer = a.read_write_lock("tie");
    let jumped = writer.write().try_acquire().await.unwrap();
    assert!(
        jumped.is_none(),
        "the writer went before a reader that was waiting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_take_turns_by_arrival() {
    let redis = server();
    let (a, b, c) = (
        client(&redis.url()),
        client(&redis.url()),
        client(&redis.url()),
    );
    let first_writer = a.read_write_lock("phases");
    let reader = b.read_write_lock("phases");
    let writer = c.read_write_lock("phases");
    let writing = first_writer.write().acquire().await.unwrap();

    // A request that does not wait records nothing.
    assert!(reader.read().try_acquire().await.unwrap().is_none());
    assert_eq!(entries(&redis, "phases", "q:"), 0);
    // A reader waits for the writer, then a writer comes after it.
    let waiting_reader = spawn_acquire(reader.read().wait_up_to(Duration::from_secs(5)));
    wait_for_entries(&redis, "phases", "q:", 1).await;
    let waiting_writer = spawn_acquire(writer.write().wait_up_to(Duration::from_secs(10)));
    wait_for_entries(&redis, "phases", "i:", 1).await;
    assert_eq!(a.inspect("phases").await.unwrap().waiting, 2);

    // The reader came first, so it goes first.
    assert!(writing.release().await.unwrap());
    let (_, reading) = waiting_reader.await.unwrap();
    let reading = reading.expect("the reader waiting before the writer did not go first");
    settle().await;
    assert!(
        !waiting_writer.is_finished(),
        "a writer got in with a reader"
    );
    assert!(reading.release().await.unwrap());
    let (_, written) = waiting_writer.await.unwrap();
    let written = written.unwrap();

    assert!(written.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{phases}:fence"]);
}

#[tokio::test]
async fn write_fences_grow_and_a_reader_sees_the_last_writers_fence() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let one = a.read_write_lock("fenced");
    let two = b.read_write_lock("fenced");
    let before_any_write = one.read().acquire().await.unwrap();
    assert_eq!(before_any_write.fence(), 0);
    assert!(before_any_write.release().await.unwrap());
    let mut last = 0;
    for round in 0..4 {
        let writer = [&one, &two][round % 2];
        let reader = [&one, &two][(round + 1) % 2];
        let written = writer.write().no_wait().acquire().await.unwrap();
        let fence = written.fence();
        assert!(fence > last, "write fences must grow: {fence} after {last}");
        last = fence;
        assert!(written.release().await.unwrap());
        let reading = read(reader).await;
        let again = read(writer).await;
        assert_eq!(reading.fence(), fence);
        assert_eq!(again.fence(), fence);
        assert!(reading.release().await.unwrap());
        assert!(again.release().await.unwrap());
    }
    // Also across a flush: the fence key is gone, and fences still grow.
    redis.flushall().unwrap();
    let written = one.write().acquire().await.unwrap();
    assert!(written.fence() > last);
    assert!(written.release().await.unwrap());
}

#[tokio::test]
async fn upgrade_is_refused_promptly_and_changes_nothing() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let owner = a.read_write_lock("upgrade");
    let other = b.read_write_lock("upgrade");
    let reading = owner.read().acquire().await.unwrap();
    let others_reading = read(&other).await;
    let before = hash_fields(&redis, &lock_key("upgrade"));
    for request in [owner.write(), owner.clone().write()] {
        // Waiting as long as it takes: a refusal, not a wait for itself.
        let result = tokio::time::timeout(Duration::from_secs(3), request.acquire())
            .await
            .expect("the upgrade hung");
        match result {
            Err(Error::Conflict {
                conflict: Conflict::Upgrade,
                lock,
            }) => assert_eq!(lock, "upgrade"),
            other => panic!("expected Conflict::Upgrade, got {other:?}"),
        }
        assert_eq!(hash_fields(&redis, &lock_key("upgrade")), before);
    }
    // No waiting entry was left: another owner still reads at once.
    let third = a.read_write_lock("upgrade");
    let more = third.read().no_wait().acquire().await.unwrap();
    assert!(more.release().await.unwrap());
    // Once the read lock is given back, the owner can write (after the other reader).
    assert!(reading.release().await.unwrap());
    assert!(others_reading.release().await.unwrap());
    let written = owner.write().no_wait().acquire().await.unwrap();
    assert!(written.release().await.unwrap());
}

#[tokio::test]
async fn a_writer_may_downgrade_but_not_re_enter() {
    let redis = server();
    let a = client(&redis.url());
    let b = client(&redis.url());
    let owner = a.read_write_lock("downgrade");
    let other = b.read_write_lock("downgrade");
    let written = owner.write().acquire().await.unwrap();
    // Write re-entry: refused at once, nothing changed.
    let before = hash_fields(&redis, &lock_key("downgrade"));
    let result = tokio::time::timeout(Duration::from_secs(3), owner.clone().write().acquire())
        .await
        .expect("the write re-entry hung");
    assert!(
        matches!(
            result,
            Err(Error::Conflict {
                conflict: Conflict::WriteReentry,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(hash_fields(&redis, &lock_key("downgrade")), before);
    // Downgrade: the writer's owner reads at once and sees its own write.
    let reading = owner.read().no_wait().acquire().await.unwrap();
    assert_eq!(reading.fence(), written.fence());
    // Another owner can neither read nor write while the write lock is held.
    assert!(other.read().try_acquire().await.unwrap().is_none());
    assert!(other.write().try_acquire().await.unwrap().is_none());
    assert!(written.release().await.unwrap());
    // Now only a read is held: another owner reads, and a third cannot write.
    let others_reading = read(&other).await;
    let third = b.read_write_lock("downgrade");
    assert!(third.write().try_acquire().await.unwrap().is_none());
    let err = owner.write().no_wait().acquire().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Conflict {
                conflict: Conflict::Upgrade,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(reading.release().await.unwrap());
    assert!(others_reading.release().await.unwrap());
    let theirs = third
        .write()
        .wait_up_to(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    assert!(theirs.release().await.unwrap());
}

#[tokio::test]
async fn a_readers_lost_signal_fires_when_its_entry_is_deleted() {
    let redis = server();
    let a = client(&redis.url());
    let lock = a.read_write_lock("lost");
    let ttl = Duration::from_millis(600);
    let reading = lock.read().ttl(ttl).acquire().await.unwrap();
    let lost = reading.lost();
    assert!(!lost.is_lost());
    assert!(a.force_release("lost").await.unwrap());
    let reason = tokio::time::timeout(ttl, lost.wait())
        .await
        .expect("lost signal did not fire");
    assert_eq!(reason, LostReason::NotOwner);
    assert!(!reading.is_held());
    assert!(!reading.release().await.unwrap());

    // One reader's entry deleted behind its back: only that reader is lost.
    let kept = lock.read().ttl(ttl).acquire().await.unwrap();
    let dropped = lock.read().ttl(ttl).acquire().await.unwrap();
    let readers = fields_starting(&redis, &lock_key("lost"), "r:");
    assert_eq!(readers.len(), 2);
    // Which field is whose is not visible; delete one and see that exactly one guard notices.
    redis
        .cmd(&["HDEL", &lock_key("lost"), &readers[0]])
        .unwrap();
    let first = tokio::select! {
        reason = kept.lost() => reason,
        reason = dropped.lost() => reason,
        () = tokio::time::sleep(ttl) => panic!("no lost signal fired"),
    };
    assert_eq!(first, LostReason::NotOwner);
    tokio::time::sleep(ttl).await;
    assert_eq!(
        [kept.is_held(), dropped.is_held()]
            .iter()
            .filter(|held| **held)
            .count(),
        1,
        "exactly the reader whose entry was deleted is lost"
    );
    let results = [
        kept.release().await.unwrap(),
        dropped.release().await.unwrap(),
    ];
    assert_eq!(results.iter().filter(|r| **r).count(), 1);
    assert!(
        keys(&redis).is_empty(),
        "no write, no fence key: {:?}",
        keys(&redis)
    );
}

/// Bad names and a too short queue timeout are refused before anything is sent. (Another kind
/// under the name, and keys of another type: the table tests in kinds.rs, for every kind.)
#[tokio::test]
async fn bad_arguments_are_refused_before_anything_is_sent() {
    let redis = server();
    let a = client(&redis.url());
    for name in ["", "a{b}", "tab\there"] {
        let lock = a.read_write_lock(name);
        for request in [lock.read(), lock.write()] {
            let err = request.no_wait().acquire().await.unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        }
    }
    let err = a
        .read_write_lock("short")
        .write()
        .queue_timeout(Duration::from_millis(5))
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(keys(&redis).is_empty(), "a refused request wrote something");
}

/// Three independent servers, each a Redlock instance.
fn redlock_servers() -> (Vec<RedisServer>, Vec<String>) {
    common::redlock_servers(3)
}

/// A write request that is expected to fail, with a short queue timeout: over Redlock a failed
/// write request can leave waiting entries behind (see
/// `a_failed_write_request_over_redlock_leaves_no_waiting_entry_behind`), and these lapse fast.
fn doomed_write(lock: &ReadWriteLock) -> fencelock::LockRequest {
    lock.write().queue_timeout(Duration::from_millis(100))
}

#[tokio::test]
async fn a_read_write_lock_works_over_redlock() {
    let (_servers, urls) = redlock_servers();
    let a = Client::redlock(&urls).build().unwrap();
    let b = Client::redlock(&urls).build().unwrap();
    let one = a.read_write_lock("red");
    let two = b.read_write_lock("red");
    let three = b.read_write_lock("red");
    let mut last = 0;
    let mut seen_by_readers = 0;
    for _ in 0..5 {
        let written = one
            .write()
            .ttl(Duration::from_secs(2))
            .acquire()
            .await
            .unwrap();
        assert!(written.fence() > last, "write fences must grow");
        assert!(
            written.fence() > seen_by_readers,
            "a write must carry a larger fence than the readers before it saw"
        );
        last = written.fence();
        assert!(two.read().try_acquire().await.unwrap().is_none());
        assert!(doomed_write(&two).try_acquire().await.unwrap().is_none());
        assert!(written.release().await.unwrap());
        // Two readers at once, and no writer meanwhile. Over Redlock a reader's fence is the
        // largest fence key of its majority: at least the last write's fence, and it may be
        // larger (an instance that granted after the majority had decided counted a fence that
        // nobody was given), but always below the next write's.
        let r2 = read(&two).await;
        let r3 = read(&three).await;
        for fence in [r2.fence(), r3.fence()] {
            assert!(
                fence >= last,
                "a reader's fence {fence} is below the last write's {last}"
            );
            seen_by_readers = seen_by_readers.max(fence);
        }
        assert!(doomed_write(&one).try_acquire().await.unwrap().is_none());
        assert!(r2.release().await.unwrap());
        assert!(r3.release().await.unwrap());
    }
    // A writer waiting for a reader gets in when the reader goes.
    let reading = read(&two).await;
    let waiting = spawn_acquire(
        one.write()
            .queue_timeout(Duration::from_millis(300))
            .wait_up_to(Duration::from_secs(5)),
    );
    settle().await;
    assert!(!waiting.is_finished(), "the writer got in with a reader");
    assert!(reading.release().await.unwrap());
    let (_, written) = waiting.await.unwrap();
    let written = written.unwrap();
    assert!(written.fence() > last);
    assert!(written.release().await.unwrap());
}

#[tokio::test]
async fn over_redlock_a_conflict_on_a_minority_lagging_behind_is_no_conflict() {
    // A release returns once a majority confirmed it; on the last instance it may still be on
    // its way. There, the writer's old entry says "this owner already writes".
    let (servers, urls) = redlock_servers();
    let a = Client::redlock(&urls).build().unwrap();
    let b = Client::redlock(&urls).build().unwrap();
    let writer = a.read_write_lock("lag");
    let written = writer
        .write()
        .ttl(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    // The acquire returns at a majority: wait until the first instance has the writer too.
    let mut before = hash_fields(&servers[0], &lock_key("lag"));
    let since = Instant::now();
    while before.is_empty() && since.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        before = hash_fields(&servers[0], &lock_key("lag"));
    }
    assert!(
        !before.is_empty(),
        "the first instance never got the writer"
    );
    assert!(written.release().await.unwrap());
    // Replay the lagging instance: the writer's entry is back there alone.
    let mut hset = vec!["HSET".to_owned(), lock_key("lag")];
    for (field, value) in &before {
        hset.push(field.clone());
        hset.push(value.clone());
    }
    let hset: Vec<&str> = hset.iter().map(String::as_str).collect();
    servers[0].cmd(&hset).unwrap();
    servers[0]
        .cmd(&["PEXPIRE", &lock_key("lag"), "5000"])
        .unwrap();
    // A reader of another owner holds the lock on the other two.
    let reader = b.read_write_lock("lag");
    let reading = reader.read().no_wait().acquire().await.unwrap();
    // The writer asks again: busy (the reader holds a majority), not "you already write".
    let again = writer.write().try_acquire().await;
    assert!(matches!(again, Ok(None)), "{again:?}");
    assert!(reading.release().await.unwrap());
    // Where a majority says so, the conflict is reported.
    let holding = writer.write().acquire().await.unwrap();
    let err = writer.write().try_acquire().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Conflict {
                conflict: Conflict::WriteReentry,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(holding.release().await.unwrap());
}

/// Regression test: over Redlock, a write round that was decided by a majority of refusals
/// before the last instance answered switched to a new hold token, and the waiting entries that
/// the old token left on the refusing instances were never taken back. They kept new readers out
/// for a whole queue timeout (5 s by default) after a failed `try_acquire`, and after a waiting
/// writer got the lock and released it.
#[tokio::test]
async fn a_failed_write_request_over_redlock_leaves_no_waiting_entry_behind() {
    let (servers, urls) = redlock_servers();
    let a = Client::redlock(&urls).build().unwrap();
    let b = Client::redlock(&urls).build().unwrap();
    let reader = a.read_write_lock("leak");
    let writer = b.read_write_lock("leak");
    for _ in 0..5 {
        let reading = read(&reader).await;
        // Default queue timeout (5 s).
        assert!(writer.write().try_acquire().await.unwrap().is_none());
        // A writer that waits, gets the lock when the reader goes, and releases it.
        let waiting = spawn_acquire(writer.write().wait_up_to(Duration::from_secs(5)));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(reading.release().await.unwrap());
        let (_, written) = waiting.await.unwrap();
        assert!(written.unwrap().release().await.unwrap());
        // Nobody waits for the write lock any more: a reader gets in at once.
        let started = Instant::now();
        let again = reader
            .read()
            .wait_up_to(Duration::from_secs(2))
            .acquire()
            .await;
        let stale: Vec<Vec<String>> = servers
            .iter()
            .map(|s| fields_starting(s, &lock_key("leak"), "i:"))
            .collect();
        let again = again.unwrap_or_else(|e| {
            panic!("a reader was kept out by writers that gave up or left: {e}; {stale:?}")
        });
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(again.release().await.unwrap());
    }
}

// ---------------------------------------------------------------------------------------------
// Processes that die holding or waiting: the test binary re-runs itself as a child.

const MS_ENV: &str = "FENCELOCK_TEST_MS";
const SIDE_ENV: &str = "FENCELOCK_TEST_SIDE";

fn child_setup() -> (String, Duration, tokio::runtime::Runtime) {
    let ms = common::child_millis(MS_ENV);
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => (common::child_var(URL_ENV), ms, runtime),
        Err(e) => panic!("cannot start a runtime: {e}"),
    }
}

/// Child role: take a read lock on `rw-crash` with a lease of `MS` (renewed), report, and hold
/// it until killed.
#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_reader() {
    require_test_child();
    let (url, ttl, runtime) = child_setup();
    runtime.block_on(async {
        let client = client(&url);
        let lock = client.read_write_lock("rw-crash");
        let guard = lock.read().ttl(ttl).acquire().await.unwrap();
        println!("ACQUIRED {}", guard.fence());
        tokio::time::sleep(Duration::from_secs(30)).await;
        println!("STILL-ALIVE {}", guard.is_held());
    });
}

/// Starts a `child_waiter` that asks for the `side` (`read` or `write`) lock on `rw-waiter` with
/// this queue timeout, and returns once it waits, its waiting entry recorded.
fn spawn_waiter(redis: &RedisServer, side: &str, queue_timeout: Duration) -> ChildGuard {
    let ms = common::millis_var(queue_timeout);
    let envs = [
        (URL_ENV, redis.url()),
        (MS_ENV, ms),
        (SIDE_ENV, side.to_owned()),
    ];
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut child = match spawn_test_child("rwlock::child_waiter", &envs) {
        Ok(child) => child,
        Err(e) => panic!("cannot start a waiting {side}er: {e}"),
    };
    if let Err(e) = child.wait_for_line("WAITING", Duration::from_secs(20)) {
        panic!("the {side}er child did not start waiting: {e}");
    }
    let role = if side == "read" { "q:" } else { "i:" };
    assert_eq!(
        entries(redis, "rw-waiter", role),
        1,
        "the {side}er's waiting entry"
    );
    child
}

/// Waits for the request `waiting`, held back by the waiting entry of a process killed at
/// `killed_at`: it must not get in while that entry can still be alive (the dead process
/// refreshed it at most a third of `queue_timeout` before the kill), and must get in soon after
/// it lapsed.
async fn granted_once_the_dead_entry_lapsed(
    waiting: JoinHandle<(Instant, fencelock::Result<LockGuard>)>,
    killed_at: Instant,
    queue_timeout: Duration,
) -> LockGuard {
    tokio::time::sleep_until(killed_at + queue_timeout / 2).await;
    assert!(
        !waiting.is_finished(),
        "granted before the dead waiter's entry lapsed"
    );
    let (granted_at, guard) = match waiting.await {
        Ok((at, Ok(guard))) => (at, guard),
        Ok((_, Err(e))) => panic!("the dead waiter's entry blocked the lock for good: {e}"),
        Err(e) => panic!("the waiting request failed: {e}"),
    };
    let waited = granted_at - killed_at;
    assert!(
        waited < queue_timeout + Duration::from_millis(500),
        "granted {waited:?} after the kill"
    );
    guard
}

/// Child role: ask for the `SIDE` (`read` or `write`) lock on `rw-waiter` with a queue timeout
/// of `MS`, say `WAITING` once it has waited a while, and keep waiting; once granted, say
/// `ACQUIRED <fence>`, release, and say `RELEASED`.
#[test]
#[ignore = "child role: run by spawn_test_child"]
fn child_waiter() {
    require_test_child();
    let (url, queue_timeout, runtime) = child_setup();
    let side = common::child_var(SIDE_ENV);
    runtime.block_on(async {
        let client = client(&url);
        let lock = client.read_write_lock("rw-waiter");
        let request = match side.as_str() {
            "read" => lock.read(),
            "write" => lock.write(),
            other => panic!("{SIDE_ENV}: {other:?}"),
        };
        let acquiring = request
            .queue_timeout(queue_timeout)
            .wait_up_to(Duration::from_secs(30))
            .acquire();
        tokio::pin!(acquiring);
        tokio::select! {
            result = &mut acquiring => panic!("the {side}er did not wait: {result:?}"),
            () = tokio::time::sleep(Duration::from_millis(150)) => println!("WAITING"),
        }
        let guard = acquiring.await.unwrap();
        println!("ACQUIRED {}", guard.fence());
        assert!(guard.release().await.unwrap());
        println!("RELEASED");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_reader_blocks_a_writer_for_at_most_its_own_lease() {
    let redis = server();
    let ttl = Duration::from_millis(1500);
    let a = client(&redis.url());
    let live = a.read_write_lock("rw-crash");
    // The live reader's renewals keep the key alive all along; only the dead reader's own
    // entry can run out.
    let live_reading = live.read().ttl(ttl).acquire().await.unwrap();
    let mut child = spawn_test_child(
        "rwlock::child_reader",
        &[(URL_ENV, &redis.url()), (MS_ENV, &common::millis_var(ttl))],
    )
    .unwrap();
    let line = child
        .wait_for_line("ACQUIRED", Duration::from_secs(20))
        .unwrap();
    assert_eq!(fence_of(&line), 0, "no write yet: a reader's fence is 0");
    assert_eq!(entries(&redis, "rw-crash", "r:"), 2);
    child.kill().unwrap();
    let killed_at = Instant::now();
    let writer = a.read_write_lock("rw-crash");
    let waiting = spawn_acquire(writer.write().wait_up_to(Duration::from_secs(4)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "the writer got in with two readers");
    assert!(live_reading.release().await.unwrap());
    // The dead reader was renewed at most a third of a lease before the kill, so its entry is
    // still there for at least two thirds of a lease (1 s) after it.
    tokio::time::sleep_until(killed_at + Duration::from_millis(600)).await;
    assert!(
        !waiting.is_finished(),
        "the writer got in while the dead reader's lease ran"
    );
    let (granted_at, written) = waiting.await.unwrap();
    let written = written.expect("the dead reader blocked the writer for good");
    let waited = granted_at - killed_at;
    assert!(waited < ttl + Duration::from_millis(500), "{waited:?}");
    assert_eq!(entries(&redis, "rw-crash", "r:"), 0);
    assert!(written.release().await.unwrap());
}

/// A request of `side` (`read` or `write`) on `lock`.
fn side_of(lock: &ReadWriteLock, side: &str) -> fencelock::LockRequest {
    if side == "read" {
        lock.read()
    } else {
        lock.write()
    }
}

/// A process killed while it waits on one side: its waiting entry holds back the requests of
/// the other side that came after it (new readers behind a waiting writer, writers behind a
/// waiting reader) until it lapses, one queue timeout after its last refresh, and not for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_killed_while_waiting_stops_blocking_the_other_side_after_its_queue_timeout() {
    let redis = server();
    let queue_timeout = Duration::from_millis(900);
    let a = client(&redis.url());
    // (the side that dies waiting, its waiting entry; the other side, its waiting entry)
    let rows = [("write", "i:", "read", "q:"), ("read", "q:", "write", "i:")];
    for (dead, dead_role, other, other_role) in rows {
        // The other side holds, so that the child waits.
        let lock = a.read_write_lock("rw-waiter");
        let holding = side_of(&lock, other).acquire().await.unwrap();
        let mut child = spawn_waiter(&redis, dead, queue_timeout);
        // A request of the other side that comes after the (soon dead) waiter waits behind it.
        let late = a.read_write_lock("rw-waiter");
        let waiting = spawn_acquire(side_of(&late, other).wait_up_to(Duration::from_secs(5)));
        wait_for_entries(&redis, "rw-waiter", other_role, 1).await;
        child.kill().unwrap();
        let killed_at = Instant::now();
        assert!(holding.release().await.unwrap());
        let granted = granted_once_the_dead_entry_lapsed(waiting, killed_at, queue_timeout).await;
        assert_eq!(
            entries(&redis, "rw-waiter", dead_role),
            0,
            "the dead {dead}er's entry"
        );
        if other == "read" {
            assert_eq!(granted.fence(), 0, "no write was ever granted");
        }
        assert!(granted.release().await.unwrap());
        // Nothing holds the lock back any more.
        let written = lock.write().no_wait().acquire().await.unwrap();
        assert!(written.release().await.unwrap());
        assert_eq!(keys(&redis), vec!["fencelock:{rw-waiter}:fence"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_releases_and_asks_again_goes_after_a_reader_that_waited() {
    let redis = server();
    let a = client(&redis.url());
    let writer = a.read_write_lock("rw-waiter");
    let writing = writer.write().acquire().await.unwrap();
    // The reader is in a child process, so that it can be frozen: however slow it is to wake,
    // its turn comes before the writer's next one.
    let mut child = spawn_waiter(&redis, "read", Duration::from_secs(5));
    child.pause().unwrap();
    assert!(writing.release().await.unwrap());
    let again = spawn_acquire(writer.write().wait_up_to(Duration::from_secs(10)));
    settle().await;
    assert!(
        !again.is_finished(),
        "the writer took the lock again before the reader that waited for it"
    );
    assert_eq!(entries(&redis, "rw-waiter", "i:"), 1);
    child.resume().unwrap();
    child
        .wait_for_line("RELEASED", Duration::from_secs(5))
        .unwrap();
    let (_, written) = again.await.unwrap();
    let written = written.expect("the writer did not get its turn after the reader");
    assert!(written.release().await.unwrap());
    assert_eq!(keys(&redis), vec!["fencelock:{rw-waiter}:fence"]);
}
