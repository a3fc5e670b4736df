//! Promises settled through one queue per JavaScript thread. napi's own future-to-Promise call
//! makes a thread-safe function (a libuv handle, opened and closed) and two runtime tasks for
//! every Promise; here the package's JavaScript makes the Promise (`pending(id)`), the future
//! runs as one task, and its outcome comes back through the thread's one [`Queue`], which
//! settles it (`settle(id, error, value)`) on the JavaScript thread. The queue never keeps the
//! process alive by itself: the package's JavaScript does while a Promise is pending, as a
//! timer would (`lib/bridge.js`).

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::Arc;

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

/// `settle(id, error, value)`, the package's JavaScript.
type SettleFn<'env, V> = Function<'env, FnArgs<(u32, Option<Error>, Option<V>)>, ()>;

/// The thread's queue into JavaScript (weak: it does not keep the process alive).
type Queue = ThreadsafeFunction<Settle, (), (), Status, false, true>;

struct Bridge {
    /// `[pending(id), settle(id, error, value)]`, the package's JavaScript (read by index:
    /// no property name to make on each call).
    hooks: ObjectRef<false>,
    queue: Arc<Queue>,
}

/// The places of `pending` and `settle` in the hooks.
const PENDING: u32 = 0;
const SETTLE: u32 = 1;

thread_local! {
    static BRIDGE: RefCell<Option<Rc<Bridge>>> = const { RefCell::new(None) };
    static NEXT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Installs this thread's bridge: `hooks` is `[pending(id), settle(id, error, value)]`
/// (`pending` makes a pending Promise, `settle` settles it); `wake` is called (with nothing) after each batch of settlings.
#[napi]
pub fn install_bridge(hooks: Object, wake: Function<(), ()>) -> Result<()> {
    let queue = wake
        .build_threadsafe_function::<Settle>()
        .weak::<true>()
        .callee_handled::<false>()
        .build_callback(|ctx: ThreadsafeCallContext<Settle>| (ctx.value)(&ctx.env))?;
    let bridge = Bridge {
        hooks: hooks.create_ref()?,
        queue: Arc::new(queue),
    };
    BRIDGE.with(|slot| *slot.borrow_mut() = Some(Rc::new(bridge)));
    Ok(())
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
    let queue = bridge.queue.clone();
    // (Not boxed: the caller, `cancel.rs`, boxes the library's future; this one is a few
    // hundred bytes, which the task holds as it is.)
    napi::bindgen_prelude::spawn(async move {
        let outcome = match AssertUnwindSafe(work).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::new(
                Status::GenericFailure,
                "fencelock: a call panicked (a bug: please report it)",
            )),
        };
        let settle: Settle =
            Box::new(move |env| settle(env, id, outcome.and_then(|v| convert(env, v))));
        queue.call(settle, ThreadsafeFunctionCallMode::NonBlocking);
    });
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
