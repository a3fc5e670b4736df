//! The keeper's two signals, made for a call's hot path: a [`Count`] of work in progress that
//! can be waited down to zero, and a [`Flag`] that can be waited up. Each is an atomic beside
//! one `Notify`: counting a call is two atomic operations, where a `watch` channel's every send
//! woke its eight notifiers (about 4,000 instructions of an uncontended acquire + release).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Work in progress, counted up and down; [`zero`](Count::zero) waits for none.
#[derive(Default)]
pub struct Count {
    n: AtomicUsize,
    zero: Notify,
}

impl Count {
    /// One more.
    pub fn up(&self) {
        self.n.fetch_add(1, Ordering::SeqCst);
    }

    /// One fewer (each `up` has its `down`).
    pub fn down(&self) {
        if self.n.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.zero.notify_waiters();
        }
    }

    /// Over when none is left.
    pub async fn zero(&self) {
        until(&self.zero, || self.n.load(Ordering::SeqCst) == 0).await;
    }
}

/// A flag, raised and lowered; [`raised`](Flag::raised) waits for it to be up.
#[derive(Default)]
pub struct Flag {
    up: AtomicBool,
    raised: Notify,
}

impl Flag {
    pub fn raise(&self) {
        self.up.store(true, Ordering::SeqCst);
        self.raised.notify_waiters();
    }

    pub fn lower(&self) {
        self.up.store(false, Ordering::SeqCst);
    }

    /// Whether it is up now.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    /// Over once the flag is up.
    pub async fn raised(&self) {
        until(&self.raised, || self.is_up()).await;
    }
}

/// Over once `done` holds, checked again each time `changed` is notified (by whoever makes it
/// hold, with `notify_waiters`).
async fn until(changed: &Notify, done: impl Fn() -> bool) {
    loop {
        let notified = changed.notified();
        tokio::pin!(notified);
        // Registered before the check: a change in between wakes it.
        notified.as_mut().enable();
        if done() {
            return;
        }
        notified.await;
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)] // a test fails by panicking
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{Count, Flag};

    #[tokio::test]
    async fn zero_waits_for_the_last_down_and_raised_for_the_raise() {
        let count = Arc::new(Count::default());
        count.zero().await; // none yet
        count.up();
        count.up();
        let waiting = tokio::spawn({
            let count = count.clone();
            async move { count.zero().await }
        });
        count.down();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "one is left");
        count.down();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("zero after the last down")
            .expect("the waiting task");

        let flag = Arc::new(Flag::default());
        let waiting = tokio::spawn({
            let flag = flag.clone();
            async move { flag.raised().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "not raised yet");
        flag.raise();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("over once raised")
            .expect("the waiting task");
        flag.lower();
        assert!(
            tokio::time::timeout(Duration::from_millis(20), flag.raised())
                .await
                .is_err(),
            "lowered again"
        );
    }
}
