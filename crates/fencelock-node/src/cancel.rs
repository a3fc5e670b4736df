//! One call, one Promise: [`call`] runs the library's future on the runtime and makes its
//! JavaScript value on the JavaScript thread. A call that can wait takes a [`Cancel`] (the
//! package's JavaScript cancels it when the caller's `AbortSignal` aborts): the future is
//! dropped (the library's calls are cancel-safe: a waiter leaves its place in line), and a
//! result that was on its way when the cancellation came is undone there, in one place (a lock
//! granted to a cancelled request is released). The Promise then rejects with the `cancelled`
//! code, which the JavaScript side turns into the signal's reason, once the call's own give-back
//! (counted in its [`Cleanup`]) is done: not the rest of the thread's background work. A result
//! that reaches the JavaScript thread after the cancellation is given back in the background;
//! [`Cancel::settled`] waits for those give-backs (a client's `close()` does).

use std::future::Future;
use std::sync::Arc;

use fencelock::{Cleanup, Count, Flag};
use fencelock_bind::held::Task;
use fencelock_bind::keeper::{Delivery, FLUSH};
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{Env, Result};
use napi_derive::napi;

use crate::bridge;
use crate::env::keeper;
use crate::errors::Failure;

/// A cancellation for the calls it is given to.
#[napi]
pub struct Cancel {
    shared: Arc<Shared>,
}

/// What a [`Cancel`] shares with its calls: the flag, and the give-backs in progress of the
/// results that came back after it was raised.
#[derive(Default)]
struct Shared {
    flag: Flag,
    undoing: Count,
}

#[napi]
impl Cancel {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)] // a JavaScript class: made with `new`
    pub fn new() -> Self {
        Cancel {
            shared: Arc::new(Shared::default()),
        }
    }

    /// Cancels the calls given this (now and later).
    #[napi]
    pub fn cancel(&self) {
        self.shared.flag.raise();
    }

    /// Resolves once the results its calls gave after the cancellation are given back (a grant
    /// that raced it released), at most 2 s.
    #[napi]
    pub fn settled<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let shared = self.shared.clone();
        call(
            env,
            Stop::Never,
            async move {
                let _ = tokio::time::timeout(FLUSH, shared.undoing.zero()).await;
            },
            |_, ()| Ok(()),
        )
    }
}

/// A call's view of its [`Cancel`].
#[derive(Clone)]
struct Token(Arc<Shared>);

impl Token {
    fn is_cancelled(&self) -> bool {
        self.0.flag.is_up()
    }

    /// Over when cancelled.
    async fn cancelled(&mut self) {
        self.0.flag.raised().await;
    }

    /// Runs `task`, the give-back of a result that came after the cancellation, as `keeper`'s
    /// background work, counted until it is done ([`Cancel::settled`]).
    fn undo(&self, keeper: &Arc<fencelock_bind::keeper::Keeper>, task: Task) {
        let shared = self.0.clone();
        shared.undoing.up();
        keeper.background(async move {
            task.await;
            shared.undoing.down();
        });
    }
}

/// Runs `work` and answers a Promise of `convert(outcome)` (see the module docs); its outcome
/// holds nothing to give back.
pub fn call<'env, T, V, W, C>(
    env: &'env Env,
    stop: Stop<'_>,
    work: W,
    convert: C,
) -> Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    W: Future<Output = T> + Send + 'static,
    C: FnOnce(&Env, T) -> std::result::Result<V, Failure> + Send + 'static,
{
    run(env, stop, work, convert, None::<fn(T) -> Option<Task>>)
}

/// [`call`] for a call whose outcome may hold something (a grant): `undo` gives it back when a
/// cancellation came first, or when the end of the thread comes before the outcome reaches
/// JavaScript (a settle still queued at `process.exit()`).
pub fn call_holding<'env, T, V, W, C, U>(
    env: &'env Env,
    stop: Stop<'_>,
    work: W,
    convert: C,
    undo: U,
) -> Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    W: Future<Output = T> + Send + 'static,
    C: FnOnce(&Env, T) -> std::result::Result<V, Failure> + Send + 'static,
    U: FnOnce(T) -> Option<Task> + Send + 'static,
{
    run(env, stop, work, convert, Some(undo))
}

/// An outcome on its way to the JavaScript thread: as it is, or kept by the keeper until the
/// settle claims it (an outcome that holds something).
enum Outcome<T, U>
where
    T: Send + 'static,
    U: FnOnce(T) -> Option<Task> + Send + 'static,
{
    Plain(T),
    Kept(Delivery<T, U>),
}

impl<T, U> Outcome<T, U>
where
    T: Send + 'static,
    U: FnOnce(T) -> Option<Task> + Send + 'static,
{
    /// The outcome and what undoes it, unless the end of the thread gave it back first.
    fn claim(self) -> Option<(T, Option<U>)> {
        match self {
            Outcome::Plain(outcome) => Some((outcome, None)),
            Outcome::Kept(delivery) => delivery.claim().map(|(o, undo)| (o, Some(undo))),
        }
    }
}

fn run<'env, T, V, W, C, U>(
    env: &'env Env,
    stop: Stop<'_>,
    work: W,
    convert: C,
    undo: Option<U>,
) -> Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    W: Future<Output = T> + Send + 'static,
    C: FnOnce(&Env, T) -> std::result::Result<V, Failure> + Send + 'static,
    U: FnOnce(T) -> Option<Task> + Send + 'static,
{
    let keeper = keeper(env)?;
    let (token, running) = match stop {
        Stop::Never => (None, None),
        Stop::AtEnd(cancel) => (
            cancel.map(|c| Token(c.shared.clone())),
            Some(keeper.running()),
        ),
    };
    let mut waiting = token.clone();
    let cleanup = Cleanup::new();
    // Boxed at once: the layers below (the select, the bridge's task) then hold and move a
    // pointer, where each held the library's future (some kilobytes: an acquisition's is over
    // 4 KB) and copied it as it was made and moved (docs/BENCHMARKS.md).
    let mut work = Box::pin(cleanup.scope(work));
    let delivering = keeper.clone();
    let running = async move {
        let outcome = match running {
            None => Some(work.await),
            Some(mut running) => {
                let mut aborted = false;
                let outcome = tokio::select! {
                    biased;
                    () = running.ended() => None,
                    () = async {
                        match waiting.as_mut() {
                            Some(token) => token.cancelled().await,
                            None => std::future::pending().await,
                        }
                    } => {
                        aborted = true;
                        None
                    }
                    outcome = &mut work => Some(outcome),
                };
                // Counted until the work future is gone (dropped here: an aborted call hands
                // what it had to the background as it goes).
                drop(work);
                drop(running);
                if aborted {
                    // The dropped call handed what it had to the background (its place in
                    // line to leave, a grant to give back): its own give-back is done before
                    // the Promise rejects, at most `FLUSH`.
                    cleanup.done(FLUSH).await;
                }
                outcome
            }
        };
        // Kept by the keeper until the settle on the JavaScript thread claims it: the end of
        // the thread gives back what has not arrived by then.
        let outcome = outcome.map(|outcome| match undo {
            Some(undo) => Outcome::Kept(delivering.deliver(outcome, undo)),
            None => Outcome::Plain(outcome),
        });
        Ok::<_, napi::Error>(outcome)
    };
    bridge::promise(env, running, move |env, outcome| {
        // (Given back by the end of the thread already: ended as a stopped call is.)
        let Some((outcome, undo)) = outcome.and_then(Outcome::claim) else {
            return Err(Failure::Cancelled.into_js(env));
        };
        if let Some(token) = token.as_ref().filter(|t| t.is_cancelled()) {
            if let Some(task) = undo.and_then(|undo| undo(outcome)) {
                token.undo(&keeper, task);
            }
            return Err(Failure::Cancelled.into_js(env));
        }
        convert(env, outcome).map_err(|f| f.into_js(env))
    })
}

/// When a call stops before its end.
#[derive(Clone, Copy)]
pub enum Stop<'a> {
    /// Never: it goes on to its end (a release, a resignation: never stopped halfway). The end
    /// of the thread waits for it as background work.
    Never,
    /// At the end of the thread, and when the [`Cancel`] (if any) is cancelled (a wait, a read).
    AtEnd(Option<&'a Cancel>),
}

/// [`call`] for a call that holds nothing and is not cancelled (it stops at the end of the
/// thread): the library's result, converted.
pub fn answer<'env, T, V, W, C>(env: &'env Env, work: W, convert: C) -> Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    W: Future<Output = fencelock::Result<T>> + Send + 'static,
    C: FnOnce(T) -> V + Send + 'static,
{
    call(env, Stop::AtEnd(None), work, move |_, result| {
        result.map(convert).map_err(Failure::Lock)
    })
}
