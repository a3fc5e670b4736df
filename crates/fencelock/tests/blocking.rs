//! The blocking facade: same semantics, no async runtime in the caller.

use crate::common;

use std::time::Duration;

use fencelock::blocking::Client;
use fencelock::{Error, LostReason};

use common::server;

#[test]
fn the_blocking_client_locks_fences_waits_and_releases() {
    let redis = server();
    let a = Client::open(&redis.url()).unwrap();
    let b = Client::open(&redis.url()).unwrap();
    let first = a
        .lock("blocking")
        .ttl(Duration::from_millis(300))
        .acquire()
        .unwrap();
    assert!(first.is_held());
    assert!(b.try_lock("blocking").unwrap().is_none());
    // Renewed in the background while this thread does something else.
    std::thread::sleep(Duration::from_millis(900));
    assert!(first.is_held());
    assert!(matches!(
        b.lock("blocking")
            .wait_up_to(Duration::from_millis(100))
            .acquire(),
        Err(Error::TimedOut { .. })
    ));
    let fence = first.fence();
    let waiter = std::thread::spawn(move || {
        let guard = b
            .lock("blocking")
            .wait_up_to(Duration::from_secs(5))
            .acquire()
            .unwrap();
        let fence = guard.fence();
        assert!(guard.release().unwrap());
        fence
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(first.release().unwrap());
    assert!(waiter.join().unwrap() > fence);
}

#[test]
fn a_blocking_guard_reports_loss_and_drop_releases() {
    let redis = server();
    let a = Client::open(&redis.url()).unwrap();
    let guard = a
        .lock("blocking-lost")
        .ttl(Duration::from_millis(300))
        .acquire()
        .unwrap();
    assert_eq!(guard.wait_lost(Duration::from_millis(50)), None);
    assert!(a.force_release("blocking-lost").unwrap());
    assert_eq!(
        guard.wait_lost(Duration::from_secs(2)),
        Some(LostReason::NotOwner)
    );
    assert!(matches!(
        guard.extend(Duration::from_secs(1)),
        Err(Error::NotHeld { .. })
    ));
    drop(guard);

    let dropped = a.lock("blocking-drop").acquire().unwrap();
    drop(dropped);
    // Released before `drop` returned.
    assert!(a.inspect("blocking-drop").unwrap().holder.is_none());
    let again = a
        .lock("blocking-drop")
        .wait_up_to(Duration::from_secs(2))
        .acquire()
        .unwrap();
    assert!(again.release().unwrap());
}

#[test]
fn the_blocking_client_offers_every_kind_of_lock() {
    let redis = server();
    let a = Client::open(&redis.url()).unwrap();
    let b = Client::open(&redis.url()).unwrap();

    let mine = a.reentrant_lock("b-reentrant");
    let outer = mine.acquire().unwrap();
    let inner = mine.clone().request().no_wait().acquire().unwrap();
    assert_eq!(outer.fence(), inner.fence());
    let theirs = b.reentrant_lock("b-reentrant");
    assert!(theirs.request().try_acquire().unwrap().is_none());
    assert!(inner.release().unwrap());
    assert!(theirs.request().try_acquire().unwrap().is_none());
    let first_fence = outer.fence();
    assert!(outer.release().unwrap());
    let taken = theirs.request().try_acquire().unwrap().unwrap();
    assert!(taken.fence() > first_fence);
    drop(taken);

    let rw_a = a.read_write_lock("b-rw");
    let rw_b = b.read_write_lock("b-rw");
    let r1 = rw_a.read().acquire().unwrap();
    let r2 = rw_b.read().acquire().unwrap();
    // A third owner's writer waits for both readers (rw_b itself would be an upgrade).
    let rw_c = b.read_write_lock("b-rw");
    assert!(rw_c.write().try_acquire().unwrap().is_none());
    assert!(matches!(
        rw_b.write().try_acquire(),
        Err(Error::Conflict { .. })
    ));
    drop((r1, r2));
    let w = rw_b
        .write()
        .wait_up_to(Duration::from_secs(5))
        .acquire()
        .unwrap();
    assert!(rw_a.read().try_acquire().unwrap().is_none());
    assert!(w.release().unwrap());

    let p1 = a.semaphore("b-sem", 2).acquire().unwrap();
    let p2 = b.semaphore("b-sem", 2).acquire().unwrap();
    assert!(a.semaphore("b-sem", 2).try_acquire().unwrap().is_none());
    assert_ne!(p1.fence(), p2.fence());
    drop((p1, p2));

    let f = a
        .fair_lock("b-fair")
        .queue_timeout(Duration::from_secs(1))
        .acquire()
        .unwrap();
    assert!(b.fair_lock("b-fair").try_acquire().unwrap().is_none());
    assert!(f.release().unwrap());
}

#[test]
fn the_blocking_fenced_store_refuses_a_stale_fence() {
    let redis = server();
    let client = Client::open(&redis.url()).unwrap();
    let store = client.fenced_store("blocking-store").unwrap();
    let old = client.lock("blocking-store").acquire().unwrap();
    let old_fence = old.fence();
    assert!(old.release().unwrap());
    let new = client.lock("blocking-store").acquire().unwrap();
    let writes = fencelock::fenced::Writes::new().set("v:{blocking-store}", "new");
    assert_eq!(store.apply(new.fence(), &writes).unwrap(), new.fence());
    let stale = fencelock::fenced::Writes::new().set("v:{blocking-store}", "old");
    assert!(matches!(
        store.apply(old_fence, &stale),
        Err(Error::Fenced { .. })
    ));
    assert_eq!(store.accepted().unwrap(), new.fence());
    // A caller's own body: runs with the holder's fence, not with the stale one.
    let append = store.script("return redis.call('append', KEYS[1], ARGV[1])");
    let len: i64 = append
        .apply(new.fence(), &["v:{blocking-store}"], &["+"])
        .unwrap();
    assert_eq!(len, 4);
    assert!(matches!(
        append.apply::<i64>(old_fence, &["v:{blocking-store}"], &["!"]),
        Err(Error::Fenced { .. })
    ));
    assert!(new.release().unwrap());
}
