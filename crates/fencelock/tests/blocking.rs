//! The blocking facade: same semantics, no async runtime in the caller.

mod common;

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
