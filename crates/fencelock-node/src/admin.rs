//! The operator's calls for JavaScript: a lock's state (`inspect`), the held locks (`list`),
//! and a watch of a lock's releases; and [`Follow`], a stream of the library's followed one
//! item at a time (the releases here, an election's observations).

use fencelock::admin::{Holder, LockInfo, Release, Waiter};
use futures_util::Stream;
use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{Env, Result};
use napi_derive::napi;

use crate::cancel::{Cancel, Stop, call};
use crate::errors::{Failure, millis_opt, ms};

/// Who holds a lock, as far as it is safe to show.
#[napi(object, object_from_js = false)]
pub struct HolderValue {
    pub token_prefix: String,
    pub fence: Option<u64>,
    /// Milliseconds left of its lease (`null`: the key has no expiry).
    pub remaining: Option<f64>,
    pub holds: Option<u32>,
    pub permits: Option<u32>,
    /// The holder's label (its request's `label`), if it gave one.
    pub label: Option<String>,
}

/// A request waiting for a lock, as far as it is safe to show.
#[napi(object, object_from_js = false)]
pub struct WaiterValue {
    pub place: Option<u32>,
    /// Milliseconds it has waited.
    pub waited: Option<f64>,
    pub token_prefix: String,
    /// `reader` or `writer` for a read-write lock.
    pub side: Option<String>,
}

/// A lock's state as Redis has it.
#[napi(object, object_from_js = false)]
pub struct LockInfoValue {
    pub name: String,
    /// A `LockKind` code, or `null` when nothing is held.
    pub kind: Option<String>,
    pub permits: Option<u32>,
    pub holder: Option<HolderValue>,
    pub shared: Vec<HolderValue>,
    pub waiting: f64,
    pub waiters: Vec<WaiterValue>,
    pub last_fence: Option<u64>,
}

/// An error as a plain value (a name `list` skipped): the JavaScript side makes it a
/// `FencelockError`.
#[napi(object, object_from_js = false)]
pub struct ErrorValue {
    pub code: String,
    pub message: String,
    pub lock: Option<String>,
}

/// What `list` found.
#[napi(object, object_from_js = false)]
pub struct ListingValue {
    pub locks: Vec<LockInfoValue>,
    pub skipped: Vec<ErrorValue>,
    pub unanswered: Vec<String>,
}

fn holder(h: &Holder) -> HolderValue {
    HolderValue {
        token_prefix: h.token_prefix.clone(),
        fence: h.fence,
        remaining: h.remaining.map(ms),
        holds: h.holds,
        permits: h.permits,
        label: h.label.clone(),
    }
}

fn waiter(w: &Waiter) -> WaiterValue {
    WaiterValue {
        place: w.place,
        waited: w.waited.map(ms),
        token_prefix: w.token_prefix.clone(),
        side: w.side.as_ref().map(|s| s.code().to_owned()),
    }
}

pub fn info(info: &LockInfo) -> LockInfoValue {
    #[allow(clippy::cast_precision_loss)] // a count of waiters
    let waiting = info.waiting as f64;
    LockInfoValue {
        name: info.name.clone(),
        kind: info.kind.as_ref().map(|k| k.code().to_owned()),
        permits: info.permits,
        holder: info.holder.as_ref().map(holder),
        shared: info.shared.iter().map(holder).collect(),
        waiting,
        waiters: info.waiters.iter().map(waiter).collect(),
        last_fence: info.last_fence,
    }
}

pub fn listing(listing: fencelock::admin::Listing) -> ListingValue {
    ListingValue {
        locks: listing.locks.iter().map(info).collect(),
        skipped: listing
            .skipped
            .iter()
            .map(|e| ErrorValue {
                code: e.code().to_owned(),
                message: e.to_string(),
                lock: e.lock_name().map(str::to_owned),
            })
            .collect(),
        unanswered: listing.unanswered,
    }
}

/// A stream followed one item at a time (`fencelock_bind::follow`), each wait a Promise.
pub struct Follow<S>(fencelock_bind::follow::Follow<S>);

impl<S> Follow<S>
where
    S: Stream + Unpin + Send + 'static,
    S::Item: Send,
{
    pub fn new(stream: S) -> Self {
        Follow(fencelock_bind::follow::Follow::new(stream))
    }

    /// `convert(item)` of the next item, waiting at most `timeout` milliseconds (`None`: as
    /// long as it takes); `null` when the time ran out or the stream ended.
    pub fn next<'env, V, C>(
        &self,
        env: &'env Env,
        timeout: Option<f64>,
        cancel: Option<&Cancel>,
        convert: C,
    ) -> Result<PromiseRaw<'env, Option<V>>>
    where
        V: ToNapiValue + 'static,
        C: FnOnce(S::Item) -> V + Send + 'static,
    {
        let limit = millis_opt("", "timeout", timeout).map_err(|f| f.into_js(env))?;
        call(
            env,
            Stop::AtEnd(cancel),
            self.0.next(limit),
            move |_, next| Ok::<_, Failure>(next.map(convert)),
        )
    }
}

/// A watch of one lock's releases.
#[napi]
pub struct Releases {
    follow: Follow<fencelock::admin::Releases>,
}

impl Releases {
    pub fn new(stream: fencelock::admin::Releases) -> Self {
        Releases {
            follow: Follow::new(stream),
        }
    }
}

#[napi]
impl Releases {
    /// `true` at the lock's next release (one missed across a lost connection counts), waiting
    /// at most `timeout` milliseconds (`undefined`: as long as it takes); `null` when the time
    /// ran out.
    #[napi]
    pub fn next<'env>(
        &self,
        env: &'env Env,
        timeout: Option<f64>,
        cancel: Option<&Cancel>,
    ) -> Result<PromiseRaw<'env, Option<bool>>> {
        self.follow.next(env, timeout, cancel, |_: Release| true)
    }
}
