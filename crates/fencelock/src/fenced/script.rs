//! A caller's own fenced script: a Lua body that runs only if the writer's fence is at least the
//! largest the resource has accepted (see [`FencedStore::script`]).

use std::sync::Arc;

use redis::{FromRedisValue, Value};

use super::FencedStore;
use crate::error::{Error, Result};
use crate::script::reply::unexpected;
use crate::script::{Arg, Args, Call, Lua};

/// The fence check (shared with the store's writes) and the frame around a caller's body.
const CHECK: &str = include_str!("check.lua");
const CALLER: &str = include_str!("caller.lua");
/// Where the body goes in `caller.lua`.
const BODY: &str = "-- BODY\n";

/// A caller's Lua body that runs only with a fence the resource accepts. Cheap to clone; build
/// it once and apply it many times (it runs by SHA).
#[derive(Clone)]
pub struct FencedScript {
    store: FencedStore,
    lua: Arc<Lua>,
}

impl std::fmt::Debug for FencedScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedScript")
            .field("resource", &self.store.resource)
            .finish_non_exhaustive()
    }
}

impl FencedStore {
    /// A fenced script with the caller's own Lua `body`. The body sees its own `KEYS` and
    /// `ARGV` (those passed to [`FencedScript::apply`]) and runs only when the writer's fence
    /// is at least the largest the resource has accepted; the resource's fence is raised after
    /// it. What the body returns is the reply.
    ///
    /// The body is yours: what it writes before a Lua error stays written, so do every check
    /// before the first write. On Redis Cluster its keys must share the resource's hash tag.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client, fence: u64) -> fencelock::Result<()> {
    /// let store = client.fenced_store("accounts/42")?;
    /// let debit = store.script(
    ///     "local balance = tonumber(redis.call('hget', KEYS[1], 'balance') or '0')
    ///      if balance < tonumber(ARGV[1]) then return -1 end
    ///      return redis.call('hincrby', KEYS[1], 'balance', -tonumber(ARGV[1]))",
    /// );
    /// let left: i64 = debit.apply(fence, &["account:{accounts/42}"], &["30"]).await?;
    /// # Ok(()) }
    /// ```
    pub fn script(&self, body: &str) -> FencedScript {
        let frame = CALLER.replacen(BODY, &format!("{body}\n"), 1);
        FencedScript {
            store: self.clone(),
            lua: Arc::new(Lua::new(format!("{CHECK}{frame}"))),
        }
    }
}

impl FencedScript {
    /// Runs the body with `keys` and `args` if `fence` is at least the largest fence the
    /// resource has accepted, then raises that to `fence`; otherwise runs nothing. Returns the
    /// body's reply (`Value::Nil` when it returns nothing: use `()` or an `Option`).
    ///
    /// # Errors
    ///
    /// - [`Error::Fenced`]: a newer fence was accepted; the body did not run.
    /// - [`Error::FencedWrongType`]: the resource's fence key holds something else.
    /// - [`Error::InvalidArgument`]: a fence of 0.
    /// - [`Error::Redis`]: the body failed (a Lua error, a write on a key of the wrong type) or
    ///   its reply is not a `T`; connection errors as for any operation.
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe in the sense that a cancelled call may still be applied by Redis.
    pub async fn apply<T: FromRedisValue>(
        &self,
        fence: u64,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T> {
        let store = &self.store;
        if fence == 0 {
            return Err(Error::invalid(
                &store.resource,
                "a fenced write needs a fence (> 0)",
            ));
        }
        let mut all_keys: Vec<&str> = Vec::with_capacity(keys.len() + 1);
        all_keys.push(&store.fence_key);
        all_keys.extend_from_slice(keys);
        let mut all_args: Args = Args::new();
        all_args.push(Arg::Int(fence));
        all_args.extend(args.iter().map(|a| Arg::Str(a)));
        let call = Call::new(&self.lua, &all_keys, all_args);
        let error = |e: redis::RedisError| store.server.error(&store.resource, "fenced script", e);
        let reply: Vec<Value> = store
            .server
            .run_script(&call, store.timeout)
            .await
            .map_err(error)?;
        let body_reply = match reply.as_slice() {
            [Value::Int(1), _] => Value::Nil,
            [Value::Int(1), _, value] => value.clone(),
            _ => {
                return match store.decode(fence, &reply).map_err(error)? {
                    Ok(_) => Err(error(unexpected("fenced script", &reply))),
                    Err(err) => {
                        let refused = Err(err);
                        crate::observe::fenced_write(&store.resource, &refused);
                        refused
                    }
                };
            }
        };
        crate::observe::fenced_write(&store.resource, &Ok(()));
        T::from_redis_value(body_reply).map_err(|e| error(redis::RedisError::from(e)))
    }
}
