//! The keeper's bookkeeping at the end: what it stops, gives back and leaves alone.

#![allow(clippy::expect_used)] // a test fails by panicking
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::runtime::Handle;

use super::{After, Keeper, Task};

/// What gives a result back here: one more give-back counted.
fn counted(given_back: &Arc<AtomicUsize>) -> impl FnOnce(u32) -> Option<Task> + Send + use<> {
    let given_back = given_back.clone();
    move |_| {
        Some(Box::pin(async move {
            given_back.fetch_add(1, Ordering::SeqCst);
        }) as Task)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_stops_the_calls_then_gives_back_what_nobody_took() {
    let keeper = Keeper::new(Handle::current());
    let given_back = Arc::new(AtomicUsize::new(0));

    // Claimed before the end: its language has it, and the end leaves it alone.
    let claimed = keeper.deliver(1, counted(&given_back));
    assert!(claimed.claim().is_some());
    // Not claimed when the end comes: the end gives it back.
    let waiting = keeper.deliver(2, counted(&given_back));
    // A call whose grant lands as the end stops it (after the end began, before the call
    // is counted out): given back at once.
    let mut running = keeper.running();
    let landing = tokio::spawn({
        let keeper = keeper.clone();
        let given_back = given_back.clone();
        async move {
            running.ended().await;
            let late = keeper.deliver(3, counted(&given_back));
            drop(running);
            late
        }
    });
    assert!(keeper.end_all(Duration::from_secs(5), After::Ended).await);
    let late = landing.await.expect("the call");
    assert!(waiting.claim().is_none(), "not given back by the end");
    assert!(
        late.claim().is_none(),
        "a grant that landed during the end was kept"
    );
    assert_eq!(given_back.load(Ordering::SeqCst), 2);

    // Ended for good: a result made now is given back at once, and a call stops at once.
    let after = keeper.deliver(4, counted(&given_back));
    assert!(after.claim().is_none(), "a result after the end was kept");
    assert!(keeper.idle(&[], Duration::from_secs(5)).await);
    assert_eq!(given_back.load(Ordering::SeqCst), 3);
    tokio::time::timeout(Duration::from_secs(5), keeper.running().ended())
        .await
        .expect("a call after the end stops at once");
}

#[tokio::test]
async fn an_end_that_reopens_leaves_later_results_to_their_language() {
    let keeper = Keeper::new(Handle::current());
    let given_back = Arc::new(AtomicUsize::new(0));
    assert!(keeper.end_all(Duration::from_secs(5), After::Reopen).await);
    let later = keeper.deliver(1, counted(&given_back));
    assert!(later.claim().is_some());
    assert!(
        tokio::time::timeout(Duration::from_millis(50), keeper.running().ended())
            .await
            .is_err(),
        "a call after the end stopped"
    );
    assert_eq!(given_back.load(Ordering::SeqCst), 0);
}
