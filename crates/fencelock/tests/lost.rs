//! The lost signal ([`fencelock::LostSignal`]): when the holder learns of a loss, every signal
//! learns it at once.

use crate::common;

use std::future::IntoFuture;
use std::time::Duration;

use fencelock::{Error, LostReason};

use common::{client, server};

/// A loss that `extend` finds (the key deleted behind the holder's back) ends the lease at
/// once: a lost signal already waiting wakes with the reason, long before the lease's deadline,
/// and every signal says so when asked.
#[tokio::test]
async fn a_loss_that_extend_finds_wakes_the_lost_signal_at_once() {
    let redis = server();
    let client = client(&redis.url());
    let guard = client
        .lock("found-lost")
        .ttl(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    let signal = guard.lost();
    assert!(!signal.is_lost());
    assert_eq!(signal.reason(), None);
    let waiting = tokio::spawn(guard.lost().into_future());
    redis
        .cmd(&["DEL", &common::lock_key("found-lost")])
        .unwrap();
    let extended = guard.extend(Duration::from_secs(60)).await;
    assert!(
        matches!(extended, Err(Error::NotHeld { .. })),
        "{extended:?}"
    );
    // Woken by the end of the lease, not by its deadline a minute away.
    let reason = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting lost signal was not woken")
        .unwrap();
    assert_eq!(reason, LostReason::NotOwner);
    assert!(signal.is_lost());
    assert_eq!(signal.reason(), Some(LostReason::NotOwner));
}
