//! Promises settled in batches, both ways, through one bridge per JavaScript thread. napi's
//! own future-to-Promise call makes a thread-safe function (a libuv handle, opened and closed)
//! and two runtime tasks for every Promise, and wakes each thread once per call. Here:
//!
//! - the package's JavaScript makes the Promise (`pending(id)`), and the call's future waits in
//!   the thread's list of calls until the JavaScript hands the list to the runtime in one go
//!   ([`send_calls`], from a microtask: once per turn of the event loop, however many calls
//!   were made in it), as one task that starts them all;
//! - each outcome goes into the thread's [`Outbox`], and only the one that finds it empty wakes
//!   the JavaScript thread, which settles every outcome there in one go
//!   (`settle(id, error, value)` each).
//!
//! The outbox never keeps the process alive by itself: the package's JavaScript does while a
//! Promise is pending, as a timer would (`lib/bridge.js`). The end of the thread (`env.rs`)
//! starts the calls still in the list first, so that a release made just before it is not lost.

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::FutureExt;
use napi::bindgen_prelude::{
    FnArgs, Function, JsObjectValue, Object, ObjectRef, PromiseRaw, Status, ToNapiValue,
};
use napi::threadsafe_function::{
    ThreadsafeCallContext, ThreadsafeFunction, ThreadsafeFunctionCallMode,
};
use napi::{Env, Error, Result};
use napi_derive::napi;

/// What the runtime hands the JavaScript thread: the settling of one Promise.
type Settle = Box<dyn FnOnce(&Env) -> Result<()> + Send>;

/// A call's work, on its way to the runtime.
type Call = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `settle(id, error, value)`, the package's JavaScript.
type SettleFn<'env, V> = Function<'env, FnArgs<(u32, Option<Error>, Option<V>)>, ()>;

/// The wake of the JavaScript thread (weak: it does not keep the process alive).
type Wake = ThreadsafeFunction<(), (), (), Status, false, true>;

/// The outcomes on their way to one JavaScript thread.
struct Outbox {
    settles: Arc<Mutex<Vec<Settle>>>,
    wake: Wake,
}

impl Outbox {
    /// Adds `settle`, and wakes the JavaScript thread if it was the first since the last drain.
    fn send(&self, settle: Settle) {
        let first = {
            let mut settles = self.settles.lock().unwrap_or_else(PoisonError::into_inner);
            settles.push(settle);
            settles.len() == 1
        };
        if first {
            self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// Settles every outcome in `settles` (on the JavaScript thread); the first error, after all.
fn drain(env: &Env, settles: &Mutex<Vec<Settle>>) -> Result<()> {
    let batch = std::mem::take(&mut *settles.lock().unwrap_or_else(PoisonError::into_inner));
    let mut first_error = None;
    for settle in batch {
        if let Err(error) = settle(env) {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

struct Bridge {
    /// `[pending(id), settle(id, error, value)]`, the package's JavaScript (read by index:
    /// no property name to make on each call).
    hooks: ObjectRef<false>,
    outbox: Arc<Outbox>,
}

/// The places of `pending` and `settle` in the hooks.
const PENDING: u32 = 0;
const SETTLE: u32 = 1;

thread_local! {
    static BRIDGE: RefCell<Option<Rc<Bridge>>> = const { RefCell::new(None) };
    static NEXT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// The calls made since the JavaScript last sent them to the runtime.
    static CALLS: RefCell<Vec<Call>> = const { RefCell::new(Vec::new()) };
}

/// Installs this thread's bridge: `hooks` is `[pending(id), settle(id, error, value)]`
/// (`pending` makes a pending Promise, and sees that [`send_calls`] is called before the
/// thread goes back to its event loop; `settle` settles one); `wake` is called (with nothing)
/// after each batch of settlings.
#[napi]
pub fn install_bridge(hooks: Object, wake: Function<(), ()>) -> Result<()> {
    let settles: Arc<Mutex<Vec<Settle>>> = Arc::default();
    let drained = settles.clone();
    let wake = wake
        .build_threadsafe_function::<()>()
        .weak::<true>()
        .callee_handled::<false>()
        .build_callback(move |ctx: ThreadsafeCallContext<()>| drain(&ctx.env, &drained))?;
    let bridge = Bridge {
        hooks: hooks.create_ref()?,
        outbox: Arc::new(Outbox { settles, wake }),
    };
    BRIDGE.with(|slot| *slot.borrow_mut() = Some(Rc::new(bridge)));
    Ok(())
}

/// Hands the calls made on this thread since the last time to the runtime, as one task that
/// starts them all (the package's JavaScript calls it from a microtask; the end of the thread
/// calls it before it gives back what is held).
#[napi]
pub fn send_calls() {
    let mut calls = CALLS.with(|calls| std::mem::take(&mut *calls.borrow_mut()));
    if calls.len() > 1 {
        napi::bindgen_prelude::spawn(async move {
            for call in calls {
                tokio::spawn(call);
            }
        });
    } else if let Some(call) = calls.pop() {
        napi::bindgen_prelude::spawn(call);
    }
}

fn current() -> Option<Rc<Bridge>> {
    BRIDGE.with(|slot| slot.borrow().clone())
}

/// Runs `work` on the runtime and answers a Promise of `convert(outcome)`, made on the
/// JavaScript thread (napi's own path where the package's JavaScript installed no bridge).
pub fn promise<'env, T, V, W, C>(env: &'env Env, work: W, convert: C) -> Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    W: Future<Output = Result<T>> + Send + 'static,
    C: FnOnce(&Env, T) -> Result<V> + Send + 'static,
{
    let Some(bridge) = current() else {
        return env.spawn_future_with_callback(work, convert);
    };
    let id = NEXT.with(|next| {
        let id = next.get();
        next.set(id.wrapping_add(1));
        id
    });
    let hooks = bridge.hooks.get_value(env)?;
    let pending: Function<'_, u32, PromiseRaw<'env, V>> = hooks.get_element(PENDING)?;
    let promise = pending.call(id)?;
    let outbox = bridge.outbox.clone();
    // Boxed: the task then moves a pointer, not the future (some kilobytes), as it starts and
    // as it ends.
    let call: Call = Box::pin(async move {
        let outcome = match AssertUnwindSafe(work).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::new(
                Status::GenericFailure,
                "fencelock: a call panicked (a bug: please report it)",
            )),
        };
        outbox.send(Box::new(move |env| {
            settle(env, id, outcome.and_then(|v| convert(env, v)))
        }));
    });
    CALLS.with(|calls| calls.borrow_mut().push(call));
    Ok(promise)
}

/// Settles Promise `id` with `outcome` (on the JavaScript thread).
fn settle<V: ToNapiValue>(env: &Env, id: u32, outcome: Result<V>) -> Result<()> {
    let Some(bridge) = current() else {
        return Ok(());
    };
    let hooks = bridge.hooks.get_value(env)?;
    let settle: SettleFn<'_, V> = hooks.get_element(SETTLE)?;
    let args = match outcome {
        Ok(value) => (id, None, Some(value)),
        Err(error) => (id, Some(error), None),
    };
    settle.call(FnArgs::from(args))
}
