//! What a guard, a leadership, a multi-lock guard or a run-once keeps of its hold: the library's
//! value behind a lock (so that calls from any thread or task can borrow it, and the one that
//! gives it back can take it), given back at the interpreter's exit if it is still there, and in
//! the background when Python drops the object unreleased.

use std::sync::{Arc, Weak};

use fencelock::LockGuard;
use fencelock::election::Leadership;
use fencelock::multi::MultiGuard;
use fencelock::once::OnceGuard;
use tokio::sync::RwLock;

use crate::client::Context;
use crate::operation::{Cancel, Operation, Outcome};
use crate::process::{EndAtExit, Task};

/// A hold the library gives back: a lock released, a leadership resigned.
pub trait GiveBack: Send + Sync + 'static {
    /// The future that gives it back.
    fn give_back(self) -> Task;
}

impl GiveBack for LockGuard {
    fn give_back(self) -> Task {
        Box::pin(async move {
            let _ = self.release().await;
        })
    }
}

impl GiveBack for Leadership {
    fn give_back(self) -> Task {
        Box::pin(async move {
            let _ = self.resign().await;
        })
    }
}

impl GiveBack for MultiGuard {
    fn give_back(self) -> Task {
        Box::pin(async move {
            let _ = self.release().await;
        })
    }
}

impl GiveBack for OnceGuard {
    fn give_back(self) -> Task {
        Box::pin(async move {
            let _ = self.give_up().await;
        })
    }
}

/// The hold, while nobody has taken it to give it back; shared by the calls that use it.
pub struct Hold<T>(RwLock<Option<T>>);

impl<T> Hold<T> {
    /// The hold behind its lock: read it to use it, write it to take it.
    pub fn slot(&self) -> &RwLock<Option<T>> {
        &self.0
    }
}

impl<T: GiveBack> EndAtExit for Hold<T> {
    fn end(&self) -> Option<Task> {
        // One being given back (its slot taken for writing) is ended by that call.
        let value = self.0.try_write().ok()?.take()?;
        Some(value.give_back())
    }
}

/// A hold kept for Python (see the module docs).
pub struct Kept<T: GiveBack> {
    hold: Arc<Hold<T>>,
    context: Context,
    /// Its entry among what the process ends at exit.
    id: u64,
}

impl<T: GiveBack> Kept<T> {
    /// Keeps `value`, and has the process end it at exit if it is still there then.
    pub fn new(value: T, context: Context) -> Self {
        let hold = Arc::new(Hold(RwLock::new(Some(value))));
        let weak: Weak<dyn EndAtExit> = Arc::downgrade(&hold) as Weak<dyn EndAtExit>;
        let id = context.process.add_held(weak);
        Kept { hold, context, id }
    }

    /// The hold.
    pub fn hold(&self) -> &Hold<T> {
        &self.hold
    }

    /// Starts `call`, given the hold, as an operation of the hold's client.
    pub fn start<F>(&self, cancel: Cancel, call: impl FnOnce(Arc<Hold<T>>) -> F) -> Operation
    where
        F: Future<Output = Box<dyn Outcome>> + Send + 'static,
    {
        let Context { process, client } = &self.context;
        Operation::start(
            process,
            Some(client.clone()),
            cancel,
            call(self.hold.clone()),
        )
    }
}

impl<T: GiveBack> Drop for Kept<T> {
    fn drop(&mut self) {
        let process = &self.context.process;
        process.forget_held(self.id);
        // Given back in the background (work that exit waits for), unless a call took it.
        if let Some(task) = self.hold.end() {
            process.background(task);
        }
    }
}
