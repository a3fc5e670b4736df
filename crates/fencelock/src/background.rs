//! Counting background work: [`Background`], the work a client (or one future, in its
//! [`Cleanup`]) leaves running, each piece counted by a [`Running`] ticket until it ends, and
//! waited for until none is left.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The work still under way in the background: calls to instances that run on after their
/// operation was decided (over Redlock), releases of dropped guards and of lost rounds, and
/// re-assertions. Counted from the moment the work is handed over (a [`Running`] ticket) until
/// it ends, so that `Instances::wait_idle` sees all of it.
#[derive(Default)]
pub(crate) struct Background {
    running: AtomicUsize,
    idle: tokio::sync::Notify,
}

impl Background {
    /// A ticket that counts as this background work until it is dropped.
    pub(crate) fn count(self: &Arc<Self>) -> Running {
        Running::start(self)
    }

    /// Whether no work is counted now.
    pub(crate) fn is_idle(&self) -> bool {
        self.running.load(Ordering::SeqCst) == 0
    }

    /// Waits (at most `limit`, if any) until no work is counted. True if none is.
    pub(crate) async fn idle(&self, limit: Option<Duration>) -> bool {
        let until = limit.and_then(|l| tokio::time::Instant::now().checked_add(l));
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            // Registered before the check, so a ticket dropped in between is not missed.
            idle.as_mut().enable();
            if self.is_idle() {
                return true;
            }
            match until {
                Some(until) => {
                    if tokio::time::timeout_at(until, idle).await.is_err() {
                        return self.is_idle();
                    }
                }
                None => idle.await,
            }
        }
    }
}

/// One piece of background work; counted from its creation until it is dropped.
pub(crate) struct Running(Arc<Background>);

impl Running {
    fn start(background: &Arc<Background>) -> Self {
        background.running.fetch_add(1, Ordering::SeqCst);
        Running(background.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
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
pub struct Cleanup(Arc<Background>);

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
        self.0.is_idle()
    }

    /// Waits, at most `limit`, until what it counts is done (each background release retries
    /// a few times, then leaves the rest to the lease). True if it is.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only waits.
    pub async fn done(&self, limit: Duration) -> bool {
        self.0.idle(Some(limit)).await
    }
}

/// A ticket in the clean-up of the running future, if it runs in one ([`Cleanup::scope`]).
pub(crate) fn own_ticket() -> Option<Running> {
    CLEANUP.try_with(|c| c.0.count()).ok()
}
