//! Counting background work: a [`Count`] of the work a client (or one future, in its
//! [`Cleanup`]) leaves running, each piece counted by a [`Running`] ticket until it ends, and
//! waited for until none is left. [`Count`] and [`Flag`] are also the language packages'
//! signals (`fencelock-bind`'s keeper: its calls in progress and its end), made for a call's hot
//! path: each is an atomic beside one `Notify`, so counting a call is two atomic operations
//! (where a `watch` channel's every send woke its eight notifiers: about 4,000 instructions of
//! an uncontended acquire + release).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Work in progress, counted up and down; [`zero`](Count::zero) waits for none.
///
/// A client's background work is one: calls to instances that run on after their operation was
/// decided (over Redlock), releases of dropped guards and of lost rounds, and re-assertions,
/// each counted from the moment it is handed over (a [`Running`] ticket) until it ends, so that
/// `Instances::wait_idle` sees all of it. Public for the language packages; not part of the
/// API.
#[doc(hidden)]
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

    /// Whether none is counted now.
    pub fn is_zero(&self) -> bool {
        self.n.load(Ordering::SeqCst) == 0
    }

    /// Over when none is left.
    pub async fn zero(&self) {
        until(&self.zero, || self.is_zero()).await;
    }

    /// Waits (at most `limit`, if any) until none is left. True if none is.
    pub async fn zero_within(&self, limit: Option<Duration>) -> bool {
        match limit.and_then(|l| tokio::time::Instant::now().checked_add(l)) {
            Some(until) => {
                tokio::time::timeout_at(until, self.zero()).await.is_ok() || self.is_zero()
            }
            None => {
                self.zero().await;
                true
            }
        }
    }

    /// A ticket that counts one until it is dropped.
    pub(crate) fn ticket(self: &Arc<Self>) -> Running {
        self.up();
        Running(self.clone())
    }
}

/// A flag, raised and lowered; [`raised`](Flag::raised) waits for it to be up. Public for the
/// language packages; not part of the API.
#[doc(hidden)]
#[derive(Default)]
pub struct Flag {
    up: AtomicBool,
    raised: Notify,
}

impl Flag {
    /// Up, waking whoever waits for it.
    pub fn raise(&self) {
        self.up.store(true, Ordering::SeqCst);
        self.raised.notify_waiters();
    }

    /// Down.
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

/// One piece of background work; counted from its creation until it is dropped.
pub(crate) struct Running(Arc<Count>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.down();
    }
}

tokio::task_local! {
    /// The clean-up that the running future's background releases count in.
    static CLEANUP: Cleanup;
}

/// What a future of the library leaves to the background when it is dropped (a cancelled
/// acquisition gives back whatever its tries may have taken, and leaves its place in line): run
/// the future in [`scope`](Self::scope), drop it, then wait for [`done`](Self::done). That
/// waits for this future's own give-back only, not for the rest of the client's background
/// work (which [`Client::wait_idle`](crate::Client::wait_idle) waits for).
///
/// ```no_run
/// # async fn example(client: fencelock::Client) {
/// use std::time::Duration;
/// let cleanup = fencelock::Cleanup::new();
/// let acquiring = cleanup.scope(client.lock("jobs/nightly").acquire());
/// // Given up after a second: the request is dropped, and its give-back is under way.
/// let _ = tokio::time::timeout(Duration::from_secs(1), acquiring).await;
/// // Its place in line is left (or its grant released) once this resolves.
/// cleanup.done(Duration::from_secs(2)).await;
/// # }
/// ```
#[derive(Clone, Default)]
pub struct Cleanup(Arc<Count>);

impl std::fmt::Debug for Cleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cleanup")
            .field("done", &self.is_done())
            .finish()
    }
}

impl Cleanup {
    /// A clean-up that counts nothing yet.
    pub fn new() -> Self {
        Cleanup::default()
    }

    /// Runs `future` so that what it hands to the background (when it is dropped, or when it
    /// gives back a lost round where the outcome is unknown) counts in this clean-up.
    pub fn scope<F: std::future::Future>(
        &self,
        future: F,
    ) -> impl std::future::Future<Output = F::Output> + use<F> {
        CLEANUP.scope(self.clone(), future)
    }

    /// Whether nothing it counts is under way now.
    pub fn is_done(&self) -> bool {
        self.0.is_zero()
    }

    /// Waits, at most `limit`, until what it counts is done (each background release retries
    /// a few times, then leaves the rest to the lease). True if it is.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only waits.
    pub async fn done(&self, limit: Duration) -> bool {
        self.0.zero_within(Some(limit)).await
    }
}

/// A ticket in the clean-up of the running future, if it runs in one ([`Cleanup::scope`]).
pub(crate) fn own_ticket() -> Option<Running> {
    CLEANUP.try_with(|c| c.0.ticket()).ok()
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
        assert!(!count.zero_within(Some(Duration::from_millis(20))).await);
        count.down();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("zero after the last down")
            .expect("the waiting task");
        assert!(count.zero_within(Some(Duration::from_millis(20))).await);

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
