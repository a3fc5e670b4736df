//! Polite revocation, as Curator's `Revoker`: an operator (or another process) asks the holders
//! of a lock to let go ([`Client::request_release`]), and a holder hears it through
//! [`LockGuard::release_requested`]. Nothing is taken from a live holder: it decides when to
//! release. `Client::force_release` stays for holders that are gone.
//!
//! A request is recorded beside the lock (`PREFIX:{NAME}:revoke`, the last fence handed out, for
//! as long as the current hold may last) and announced on `PREFIX:{NAME}:revoke` as a channel,
//! so that a holder that starts listening after the request still finds it, and a later holder
//! (a larger fence) is not asked.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Value;

use crate::client::Client;
use crate::connection::Server;
use crate::engine::LockGuard;
use crate::error::Result;
use crate::keys::{self, LockKeys};
use crate::script::reply::as_u64;
use crate::script::{Arg, Args, Call, Lua, lua};

pub(crate) static ASK: LazyLock<Lua> = lua!("ask.lua");
pub(crate) static ASKED: LazyLock<Lua> = lua!("asked.lua");

/// The request key, which is also the request channel: `PREFIX:{NAME}:revoke`.
fn request_key(keys: &LockKeys) -> String {
    format!("{}:revoke", keys.lock())
}

impl Client {
    /// Asks the holders of lock `name` to release it (polite revocation): each holder's
    /// [`LockGuard::release_requested`] resolves, and `fencelock run` passes the request on to
    /// its command. It takes nothing: a holder that does not listen keeps the lock. Returns
    /// whether the lock was held (on any instance) when asked.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// if client.request_release("reports/nightly").await? {
    ///     println!("asked the holder to let go");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a bad name;
    /// [`Error::Unreachable`](crate::Error::Unreachable) and the other connection errors when no
    /// instance answered (over Redlock: when none did).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a dropped call may still have asked on some instances.
    pub async fn request_release(&self, name: impl Into<String>) -> Result<bool> {
        let name = name.into();
        keys::validate_name(&name)?;
        let instances = &self.shared.instances;
        let keys = Arc::new(self.shared.keys(&name));
        let limit = instances.command_timeout();
        let answers = instances
            .on_all(
                None,
                |server| ask(server.clone(), keys.clone(), limit),
                |_| false,
            )
            .await;
        let mut asked = false;
        let mut answered = 0;
        for answer in &answers {
            if let Some(Ok(held)) = answer {
                answered += 1;
                asked |= *held;
            }
        }
        if answered == 0 {
            return Err(instances.failure(&name, "request-release", answers, 0, 0));
        }
        Ok(asked)
    }
}

async fn ask(server: Server, keys: Arc<LockKeys>, limit: Duration) -> redis::RedisResult<bool> {
    let key = request_key(&keys);
    let args = Args::from_iter([Arg::Str(&key)]);
    let call = Call::new(&ASK, &[keys.lock(), keys.fence(), &key], args);
    let reply: i64 = server.run_script(&call, limit).await?;
    Ok(reply == 1)
}

/// The largest fence a standing request covers on `server` (0: none).
async fn asked_fence(server: Server, key: Arc<str>, limit: Duration) -> redis::RedisResult<u64> {
    let call = Call::new(&ASKED, &[&key], Args::new());
    let reply: Value = server.run_script(&call, limit).await?;
    as_u64(&reply)
}

impl LockGuard {
    /// Resolves when someone asks the holder to release this lock
    /// ([`Client::request_release`], `fencelock release --ask`); never while nobody does.
    /// Only requests made while this hold is held count (one made before it was granted, for
    /// an earlier holder, does not). The guard still holds the lock: release it when the work
    /// is at a point where it can stop.
    ///
    /// It listens on the client's pub/sub connection from the first poll, and also reads the
    /// standing request then and after every reconnection, so a request made before it was
    /// called, or while the connection was down, is not missed.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// let guard = client.lock("reports/nightly").acquire().await?;
    /// tokio::select! {
    ///     () = guard.release_requested() => println!("asked to let go; stopping at a safe point"),
    ///     reason = guard.lost() => println!("lost: {reason}"),
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// The future owns what it needs (it does not borrow the guard), so it can be kept
    /// beside the guard or moved into a task.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping it stops listening; calling it again starts afresh.
    pub fn release_requested(&self) -> impl Future<Output = ()> + Send + use<> {
        let shared = self.shared().clone();
        let key: Arc<str> = Arc::from(request_key(&self.hold().keys));
        let fence = self.fence();
        async move {
            let instances = &shared.instances;
            let limit = instances.command_timeout();
            let mut subscriptions = instances.subscribe(&key, limit).await;
            loop {
                let answers = instances
                    .on_all(
                        None,
                        |server| asked_fence(server.clone(), key.clone(), limit),
                        |_| false,
                    )
                    .await;
                let asked = answers
                    .iter()
                    .any(|a| matches!(a, Some(Ok(asked)) if *asked > 0 && *asked >= fence));
                if asked {
                    return;
                }
                // A request message, or a lost connection (read again after it comes back).
                subscriptions.released().await;
            }
        }
    }
}
