//! Each hold's lifecycle, whatever the language: a lock's ([`HeldLock`]), a leadership's
//! ([`Leading`]: the value announced last, proclaim), several locks' ([`HeldMulti`]: which name
//! was lost, and why), a run-once's ([`HeldRun`]: done or given up), and what undoes a result
//! nobody took ([`undo_begun`]). A package wraps each in its language's class and converts the
//! answers.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use fencelock::election::Leadership;
use fencelock::multi::{MultiGuard, MultiLost};
use fencelock::once::{Begun, OnceGuard};
use fencelock::{LockGuard, LostReason, LostSignal};

use crate::held::{GiveBack, Task};
use crate::kept::{Context, Kept, lost_pair};

/// A held lock: its name, fence and lost signal, and the guard kept.
pub struct HeldLock<H> {
    name: String,
    fence: u64,
    lost: LostSignal,
    kept: Kept<LockGuard, H>,
}

impl<H> HeldLock<H> {
    pub fn new(guard: LockGuard, context: Context<H>) -> Self {
        HeldLock {
            name: guard.name().to_owned(),
            fence: guard.fence(),
            lost: guard.lost(),
            kept: Kept::new(guard, context),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn fence(&self) -> u64 {
        self.fence
    }

    pub fn kept(&self) -> &Kept<LockGuard, H> {
        &self.kept
    }

    pub fn lost(&self) -> &LostSignal {
        &self.lost
    }

    /// Whether the lock is still held, as far as this process can tell now.
    pub fn is_held(&self) -> bool {
        !self.lost.is_lost()
    }

    /// `(code, message)` if the lock is lost (or released) now.
    pub fn lost_now(&self) -> Option<(&'static str, String)> {
        lost_pair(&self.lost)
    }

    /// Until the lease's deadline as this process knows it (zero once passed or released).
    pub fn remaining(&self) -> Duration {
        self.kept
            .hold()
            .peek(LockGuard::remaining)
            .unwrap_or(Duration::ZERO)
    }

    /// Re-arms the lease to `ttl` from now (`NotHeld` once released).
    pub fn extend(&self, ttl: Duration) -> impl Future<Output = fencelock::Result<()>> + 'static {
        let hold = self.kept.hold().clone();
        async move {
            let guard = hold.slot().read().await;
            match guard.as_ref() {
                Some(guard) => guard.extend(ttl).await,
                None => Err(hold.given_back_error()),
            }
        }
    }

    /// Resolves `Ok` when someone asks for this lock (`request_release`) while it is held;
    /// `NotHeld` if the hold ends first (the watch ends with it).
    pub fn release_requested(&self) -> impl Future<Output = fencelock::Result<()>> + 'static {
        let requested = self.kept.hold().peek(LockGuard::release_requested);
        let lost = self.lost.clone();
        let lock = self.name.clone();
        async move {
            let reason = match requested {
                Some(requested) => tokio::select! {
                    () = requested => return Ok(()),
                    reason = lost.wait() => reason,
                },
                None => LostReason::Released, // being released, or released
            };
            Err(fencelock::Error::NotHeld { lock, reason })
        }
    }
}

/// A leadership: the election, its term, and the value announced last (kept through a
/// proclaim in flight and after the resignation).
pub struct Leading<H> {
    election: String,
    term: u64,
    since: SystemTime,
    lost: LostSignal,
    value: Arc<Mutex<String>>,
    kept: Kept<Leadership, H>,
}

impl<H> Leading<H> {
    pub fn new(leadership: Leadership, context: Context<H>) -> Self {
        Leading {
            election: leadership.election().name().to_owned(),
            term: leadership.term(),
            since: leadership.since(),
            lost: leadership.lost(),
            value: Arc::new(Mutex::new(leadership.value().to_owned())),
            kept: Kept::new(leadership, context),
        }
    }

    pub fn election(&self) -> &str {
        &self.election
    }

    pub fn term(&self) -> u64 {
        self.term
    }

    /// When the term began, by the server's clock.
    pub fn since(&self) -> SystemTime {
        self.since
    }

    pub fn kept(&self) -> &Kept<Leadership, H> {
        &self.kept
    }

    pub fn lost(&self) -> &LostSignal {
        &self.lost
    }

    /// The value announced last in this term.
    pub fn value(&self) -> String {
        self.value
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether this process still leads, as far as it can tell now.
    pub fn is_held(&self) -> bool {
        !self.lost.is_lost()
    }

    /// `(code, message)` if the leadership is lost (or resigned) now.
    pub fn lost_now(&self) -> Option<(&'static str, String)> {
        lost_pair(&self.lost)
    }

    /// Announces `value` for this term (`NotHeld` once resigned).
    pub fn proclaim(&self, value: String) -> impl Future<Output = fencelock::Result<()>> + 'static {
        let hold = self.kept.hold().clone();
        let announced = self.value.clone();
        async move {
            let mut leadership = hold.slot().write().await;
            let Some(leadership) = leadership.as_mut() else {
                return Err(hold.given_back_error());
            };
            leadership.proclaim(value).await?;
            leadership
                .value()
                .clone_into(&mut announced.lock().unwrap_or_else(PoisonError::into_inner));
            Ok(())
        }
    }
}

/// Several locks held together: each name's fence, their lost signals, the guard kept.
pub struct HeldMulti<H> {
    /// `(name, fence)` in the order the names were given.
    fences: Vec<(String, u64)>,
    lost: MultiLost,
    kept: Kept<MultiGuard, H>,
}

impl<H> HeldMulti<H> {
    pub fn new(guard: MultiGuard, context: Context<H>) -> Self {
        HeldMulti {
            fences: guard.fences().map(|(n, f)| (n.to_owned(), f)).collect(),
            lost: guard.lost_signal(),
            kept: Kept::new(guard, context),
        }
    }

    /// `(name, fence)` in the order the names were given.
    pub fn fences(&self) -> &[(String, u64)] {
        &self.fences
    }

    pub fn kept(&self) -> &Kept<MultiGuard, H> {
        &self.kept
    }

    /// Whether every name is still held, as far as this process can tell now.
    pub fn is_held(&self) -> bool {
        self.lost.is_held()
    }

    /// `(name, code, message)` of a name lost now (one lost rather than released, if any is).
    pub fn lost_now(&self) -> Option<(String, &'static str, String)> {
        let (name, reason) = self.lost.reason()?;
        Some((name, reason.code(), reason.to_string()))
    }

    /// Resolves when any name is lost (or released): which, and why.
    pub fn lost_wait(&self) -> impl Future<Output = (String, LostReason)> + 'static {
        let lost = self.lost.clone();
        async move { lost.wait().await }
    }
}

/// The lock of a run-once that has the work to do.
pub struct HeldRun<H> {
    name: String,
    fence: u64,
    lost: LostSignal,
    kept: Kept<OnceGuard, H>,
}

impl<H> HeldRun<H> {
    pub fn new(run: OnceGuard, context: Context<H>) -> Self {
        HeldRun {
            name: run.guard().name().to_owned(),
            fence: run.fence(),
            lost: run.guard().lost(),
            kept: Kept::new(run, context),
        }
    }

    /// The name of the lock the runs take turns on.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The run's lost signal: the work stops when it fires for a loss.
    pub fn lost(&self) -> &LostSignal {
        &self.lost
    }

    /// `(code, message)` if the run's lock is lost (or released) now.
    pub fn lost_now(&self) -> Option<(&'static str, String)> {
        lost_pair(&self.lost)
    }

    pub fn kept(&self) -> &Kept<OnceGuard, H> {
        &self.kept
    }

    /// Ends the run as `ending` says, and releases the lock: `true` if this call did it
    /// (`false`: ended already).
    pub fn finish(
        &self,
        ending: RunEnding,
    ) -> impl Future<Output = fencelock::Result<bool>> + 'static {
        let hold = self.kept.hold().clone();
        let busy = self.kept.context().keeper.busy();
        async move {
            let run = hold.slot().write().await.take();
            let finished = match (run, ending) {
                (Some(run), RunEnding::Done) => run.done().await.map(|()| true),
                (Some(run), RunEnding::Failed) => run.failed().await.map(|_| true),
                (Some(run), RunEnding::GiveUp) => run.give_up().await.map(|()| true),
                (None, _) => Ok(false),
            };
            drop(busy);
            finished
        }
    }
}

/// How a run-once's run ends (see [`HeldRun::finish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnding {
    /// The work was done: recorded.
    Done,
    /// The work failed: counted as a failed run, nothing recorded.
    Failed,
    /// The work was stopped (or never began): nothing recorded, nothing counted.
    GiveUp,
}

/// Gives back a run's lock that nobody took.
pub fn undo_begun(begun: fencelock::Result<Begun>) -> Option<Task> {
    match begun {
        Ok(Begun::Run(run)) => Some(run.give_back()),
        _ => None,
    }
}

/// Gives back a hold that nobody took (a grant to a cancelled request).
pub fn undo<T: GiveBack>(made: fencelock::Result<Option<T>>) -> Option<Task> {
    made.ok().flatten().map(GiveBack::give_back)
}
