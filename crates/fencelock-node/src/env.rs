//! What fencelock keeps per JavaScript thread (the main thread, each worker): its
//! [`Keeper`] (the background work the package leaves running, the clients, the holds), and the
//! end of it. A thread's environment ends at the process's natural exit or a worker's end;
//! napi runs the cleanup hook added here then, which gives back what is still held (and the
//! grants whose settles are still queued for the thread) and waits for the background work, at
//! most [`FLUSH`]. Node.js skips that hook on the main thread for `process.exit()`: the
//! package's JavaScript calls [`shutdown_at_exit`] from the `exit` event instead (and from
//! SIGINT and SIGTERM when nobody else handles them). Both leave the keeper ended: whatever
//! comes after (a grant landing late, a call made by a later `exit` listener) is given back or
//! stopped at once. [`shutdown`], the program's own call, leaves it usable.

use std::cell::RefCell;
use std::sync::Arc;

use fencelock_bind::keeper::{After, FLUSH, Keeper};
use napi::bindgen_prelude::{block_on, within_runtime_if_available};
use napi::{Env, Result};
use napi_derive::napi;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// What a guard, a leadership, a multi-lock guard or a run keeps of the thread and the client
/// that made it.
pub type Context = fencelock_bind::kept::Context<()>;

/// What a hold made now with `client` keeps of this thread and of it.
pub fn context(env: &Env, client: Arc<fencelock::Client>) -> Result<Context> {
    Ok(Context {
        keeper: keeper(env)?,
        home: (),
        client,
    })
}

thread_local! {
    /// This thread's keeper, made with its first client.
    static KEEPER: RefCell<Option<Arc<Keeper>>> = const { RefCell::new(None) };
}

/// This thread's keeper (made on first use, with the cleanup hook that ends it).
pub fn keeper(env: &Env) -> Result<Arc<Keeper>> {
    KEEPER.with(|slot| {
        if let Some(keeper) = slot.borrow().as_ref() {
            return Ok(keeper.clone());
        }
        let runtime = within_runtime_if_available(tokio::runtime::Handle::current);
        let keeper = Keeper::new(runtime);
        // Added here, after napi's own hook (which stops the runtime when the last environment
        // goes): hooks run newest first, so this one runs while the runtime is still there.
        env.add_env_cleanup_hook(keeper.clone(), |keeper| end(&keeper, After::Ended))?;
        *slot.borrow_mut() = Some(keeper.clone());
        Ok(keeper)
    })
}

/// Stops `keeper`'s waits, gives back what it still holds and the grants not yet settled, and
/// waits for its background work, at most [`FLUSH`].
fn end(keeper: &Arc<Keeper>, after: After) {
    // On the JavaScript thread, outside the runtime: blocking is what the end is for.
    block_on(keeper.end_all(FLUSH, after));
}

fn end_thread(after: After) {
    let keeper = KEEPER.with(|slot| slot.borrow().clone());
    if let Some(keeper) = keeper {
        end(&keeper, after);
    }
}

/// The end of this thread's fencelock: stops the waits (their places in line left), releases
/// what is still held (and resigns what still leads), grants whose settles are still queued
/// included, then waits for the background work, at most 2 s. Blocks the calling thread. A
/// program that handles SIGINT or SIGTERM itself calls it before it exits; the thread's
/// fencelock is usable again afterwards.
#[napi]
pub fn shutdown() {
    end_thread(After::Reopen);
}

/// [`shutdown`] at the process's end (the package's `exit` event, and SIGINT and SIGTERM when
/// nobody else handles them): it leaves the thread's fencelock ended, so that a grant landing
/// after it, or a call a later `exit` listener makes, is given back or stopped at once.
#[napi]
pub fn shutdown_at_exit() {
    end_thread(After::Ended);
}

/// How many holds this thread keeps now (guards, leaderships, multi-lock guards, runs): what
/// [`shutdown`] would give back.
#[napi]
pub fn held_count() -> u32 {
    KEEPER.with(|slot| {
        slot.borrow()
            .as_ref()
            .map_or(0, |k| u32::try_from(k.held_count()).unwrap_or(u32::MAX))
    })
}

/// The library's log (its `tracing` events) on standard error, or to the application's logger
/// with each event's fields (`logger.rs`), from `FENCELOCK_LOG`'s level:
/// `error`, `warn` (the default), `info`, `debug`, `trace`, or `off`.
pub fn install_logging() {
    let level = match std::env::var("FENCELOCK_LOG").ok().as_deref() {
        Some("off") => return,
        Some("error") => tracing::Level::ERROR,
        Some("info") => tracing::Level::INFO,
        Some("debug") => tracing::Level::DEBUG,
        Some("trace") => tracing::Level::TRACE,
        _ => tracing::Level::WARN,
    };
    let format = tracing_subscriber::fmt::layer()
        .with_writer(crate::logger::Writer)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // The fields are gathered before the formatter writes the event's line, whose writer takes
    // them for the application's loggers (layers see an event in the order they were added).
    let subscriber = tracing_subscriber::Registry::default()
        .with(tracing_subscriber::filter::LevelFilter::from_level(level))
        .with(fencelock_bind::log_fields::Gather)
        .with(format);
    // Another subscriber (an embedding program's) wins.
    let _ = subscriber.try_init();
}
