//! The resource side of fencing, on Redis: a set of writes applied in one script **only if**
//! the writer's fence is at least the largest fence the resource has accepted, which the same
//! script raises. A holder whose lease ran out while it was paused, and whose lock another
//! holder has taken since (with a larger fence), gets [`Error::Fenced`] and changes nothing.
//!
//! ```no_run
//! # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
//! use fencelock::fenced::Writes;
//!
//! let store = client.fenced_store("accounts/42")?;
//! let guard = client.lock("accounts/42").acquire().await?;
//! let writes = Writes::new()
//!     .hset("account:{accounts/42}", "balance", "100")
//!     .rpush("account:{accounts/42}:log", "balance set to 100");
//! store.apply(guard.fence(), &writes).await?; // Error::Fenced if a newer holder wrote
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! The resource's fence is kept at `PREFIX:fenced:{RESOURCE}` (no expiry). One resource should
//! be written under one lock name: fences of different names are not ordered with each other
//! (a resource written under two names accepts a fence of either that is not older than the
//! last one it took). On Redis Cluster the keys of one call must share the resource's hash
//! tag — name them `...{RESOURCE}...` as in the example.
//!
//! Writes that [`Writes`] does not cover go in a caller's own Lua body under the same check:
//! [`FencedStore::script`]. A resource on another Redis server is reached through a [`Client`]
//! for that server.

use std::time::Duration;

use redis::Value;

use crate::client::Client;
use crate::connection::Server;
use crate::error::{Error, Result};
use crate::script::reply::{as_string, describe_type, unexpected};
use crate::script::{Arg, Args, Call, Lua, lua};

mod script;
pub use script::FencedScript;

pub(crate) static WRITE: std::sync::LazyLock<Lua> = lua!("check.lua", "write.lua");
pub(crate) static SET_ONE: std::sync::LazyLock<Lua> = lua!("check.lua", "set_one.lua");
/// The server's clock (see [`FencedStore::server_clock`]).
pub(crate) static CLOCK: std::sync::LazyLock<Lua> = lua!("clock.lua");

/// One write of a fenced call.
#[derive(Debug, Clone)]
struct Write {
    command: &'static str,
    key: String,
    args: Vec<Vec<u8>>,
}

/// The writes of one fenced call, applied together or not at all (see [`FencedStore::apply`]).
/// Values are bytes: anything that is `AsRef<[u8]>` (`&str`, `String`, `&[u8]`, `Vec<u8>`).
///
/// ```
/// use fencelock::fenced::Writes;
///
/// let writes = Writes::new()
///     .set("report:{nightly}", "done")
///     .set("thumbnail:{nightly}", [0x89, b'P', b'N', b'G'])
///     .incr_by("runs:{nightly}", 1);
/// assert!(!writes.is_empty());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Writes {
    writes: Vec<Write>,
}

fn bytes(value: impl AsRef<[u8]>) -> Vec<u8> {
    value.as_ref().to_vec()
}

impl Writes {
    /// No writes yet.
    pub fn new() -> Self {
        Writes::default()
    }

    fn push(mut self, command: &'static str, key: &str, args: Vec<Vec<u8>>) -> Self {
        self.writes.push(Write {
            command,
            key: key.to_owned(),
            args,
        });
        self
    }

    /// `SET key value`.
    pub fn set(self, key: &str, value: impl AsRef<[u8]>) -> Self {
        self.push("set", key, vec![bytes(value)])
    }

    /// `SET key value PX ttl`.
    pub fn set_with_ttl(self, key: &str, value: impl AsRef<[u8]>, ttl: Duration) -> Self {
        let ms = crate::script::lease_millis(ttl).to_string();
        self.push("set", key, vec![bytes(value), bytes("PX"), bytes(ms)])
    }

    /// `DEL key`.
    pub fn del(self, key: &str) -> Self {
        self.push("del", key, Vec::new())
    }

    /// `HSET key field value`.
    pub fn hset(self, key: &str, field: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Self {
        self.push("hset", key, vec![bytes(field), bytes(value)])
    }

    /// `HDEL key field`.
    pub fn hdel(self, key: &str, field: impl AsRef<[u8]>) -> Self {
        self.push("hdel", key, vec![bytes(field)])
    }

    /// `INCRBY key by`.
    pub fn incr_by(self, key: &str, by: i64) -> Self {
        self.push("incrby", key, vec![bytes(by.to_string())])
    }

    /// `PEXPIRE key ttl`.
    pub fn pexpire(self, key: &str, ttl: Duration) -> Self {
        let ms = crate::script::lease_millis(ttl).to_string();
        self.push("pexpire", key, vec![bytes(ms)])
    }

    /// `RPUSH key value`.
    pub fn rpush(self, key: &str, value: impl AsRef<[u8]>) -> Self {
        self.push("rpush", key, vec![bytes(value)])
    }

    /// `LPUSH key value`.
    pub fn lpush(self, key: &str, value: impl AsRef<[u8]>) -> Self {
        self.push("lpush", key, vec![bytes(value)])
    }

    /// `SADD key member`.
    pub fn sadd(self, key: &str, member: impl AsRef<[u8]>) -> Self {
        self.push("sadd", key, vec![bytes(member)])
    }

    /// `SREM key member`.
    pub fn srem(self, key: &str, member: impl AsRef<[u8]>) -> Self {
        self.push("srem", key, vec![bytes(member)])
    }

    /// `XADD key * field value ...`.
    pub fn xadd<F: AsRef<[u8]>, V: AsRef<[u8]>>(self, key: &str, fields: &[(F, V)]) -> Self {
        let mut args = vec![bytes("*")];
        for (field, value) in fields {
            args.push(bytes(field));
            args.push(bytes(value));
        }
        self.push("xadd", key, args)
    }

    /// Whether there are no writes.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// A resource in Redis that refuses writes with a stale fence. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FencedStore {
    server: Server,
    resource: String,
    fence_key: String,
    timeout: Duration,
}

impl Client {
    /// The fenced resource `resource` on this client's Redis (one server, a Redis Cluster or a
    /// Sentinel master). See [`crate::fenced`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad resource name (the rules of lock names);
    /// [`Error::Unsupported`] for a Redlock client: a resource lives on one server (open one
    /// with its own client).
    pub fn fenced_store(&self, resource: impl Into<String>) -> Result<FencedStore> {
        let resource = resource.into();
        crate::keys::validate_name(&resource)?;
        let instances = &self.shared.instances;
        let [server] = instances.servers() else {
            return Err(Error::Unsupported {
                lock: resource,
                reason: "a fenced resource lives on one Redis server, cluster or Sentinel \
                         master, not on Redlock's independent instances; build a client for \
                         the resource's server"
                    .into(),
            });
        };
        Ok(FencedStore {
            server: server.clone(),
            fence_key: format!("{}:fenced:{{{resource}}}", self.shared.prefix),
            resource,
            timeout: instances.command_timeout(),
        })
    }
}

impl FencedStore {
    /// The resource's name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The key that holds the largest fence the resource has accepted
    /// (`PREFIX:fenced:{RESOURCE}`). It never expires; deleting it while the resource's lock
    /// is in use would let a stale holder write again.
    pub fn fence_key(&self) -> &str {
        &self.fence_key
    }

    /// Applies `writes` if `fence` is at least the largest fence the resource has accepted,
    /// and raises that to `fence`; otherwise changes nothing. Returns the fence accepted now.
    ///
    /// # Errors
    ///
    /// - [`Error::Fenced`]: a newer fence was accepted; nothing was written.
    /// - [`Error::FencedWrongType`]: a key (the resource's fence key, or a key of a write) holds a
    ///   value of another type; nothing was written.
    /// - [`Error::InvalidArgument`]: no writes, or a fence of 0.
    /// - Connection errors as for any operation ([`Error::Unreachable`], ...). A call that
    ///   timed out may or may not have been applied; applying it again with the same fence is
    ///   safe only if the writes are (a `SET` is, an `INCRBY` is not).
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe in the sense that a cancelled call may still be applied by Redis.
    pub async fn apply(&self, fence: u64, writes: &Writes) -> Result<u64> {
        if writes.is_empty() || fence == 0 {
            return Err(Error::invalid(
                &self.resource,
                "a fenced write needs a fence (> 0) and at least one write",
            ));
        }
        let call = match writes.writes.as_slice() {
            // One plain SET (the most common fenced write): a script without the generic
            // writes' decoding.
            [Write { command, key, args }]
                if *command == "set" && args.len() == 1 && *key != self.fence_key =>
            {
                let args = Args::from_iter([Arg::Int(fence), Arg::Bytes(&args[0])]);
                Call::new(&SET_ONE, &[&self.fence_key, key.as_str()], args)
            }
            _ => self.generic_call(fence, writes),
        };
        let reply: Vec<Value> = self
            .server
            .run_script(&call, self.timeout)
            .await
            .map_err(|e| self.server.error(&self.resource, "fenced write", e))?;
        let result = self
            .decode(fence, &reply)
            .map_err(|e| self.server.error(&self.resource, "fenced write", e))?;
        crate::observe::fenced_write(&self.resource, &result);
        result
    }

    /// The call of `write.lua` for any writes: each as its command, its key's index and its
    /// arguments.
    fn generic_call<'a>(&'a self, fence: u64, writes: &'a Writes) -> Call<'a> {
        let mut keys: Vec<&str> = vec![&self.fence_key];
        let mut args: Args = Args::new();
        args.push(Arg::Int(fence));
        for write in &writes.writes {
            let index = match keys.iter().position(|k| *k == write.key) {
                Some(i) => i + 1,
                None => {
                    keys.push(&write.key);
                    keys.len()
                }
            };
            args.push(Arg::Str(write.command));
            args.push(Arg::Int(u64::try_from(index).unwrap_or(u64::MAX)));
            args.push(Arg::Int(
                u64::try_from(write.args.len()).unwrap_or(u64::MAX),
            ));
            for arg in &write.args {
                args.push(Arg::Bytes(arg));
            }
        }
        Call::new(&WRITE, &keys, args)
    }

    fn decode(&self, fence: u64, reply: &[Value]) -> redis::RedisResult<Result<u64>> {
        Ok(match reply {
            [Value::Int(1), accepted] => Ok(as_string(accepted)?.parse().unwrap_or(fence)),
            [Value::Int(0), accepted] => Err(Error::Fenced {
                resource: self.resource.clone(),
                fence,
                accepted: as_string(accepted)?.parse().unwrap_or(u64::MAX),
            }),
            [Value::Int(-1), key, found] => Err(Error::FencedWrongType {
                resource: self.resource.clone(),
                key: as_string(key)?,
                found: describe_type(&as_string(found)?),
            }),
            _ => return Err(unexpected("fenced write", reply)),
        })
    }

    /// Runs one of the crate's scripts composed after `check.lua` (`KEYS[1]` the resource's
    /// fence key, `ARGV[1]` the fence), with `keys` after the fence key and `args` after the
    /// fence:
    /// what its reply holds after `{1, fence}`, or the check's refusals as errors
    /// ([`Error::Fenced`], [`Error::FencedWrongType`]). `what` names the call in errors.
    pub(crate) async fn run_checked(
        &self,
        lua: &Lua,
        fence: u64,
        keys: &[&str],
        args: &[u64],
        what: &'static str,
    ) -> Result<Vec<Value>> {
        let mut all: Vec<&str> = Vec::with_capacity(keys.len().saturating_add(1));
        all.push(&self.fence_key);
        all.extend_from_slice(keys);
        let args = std::iter::once(fence)
            .chain(args.iter().copied())
            .map(Arg::Int);
        let call = Call::new(lua, &all, Args::from_iter(args));
        let mut reply: Vec<Value> = self
            .server
            .run_script(&call, self.timeout)
            .await
            .map_err(|e| self.server.error(&self.resource, what, e))?;
        if matches!(reply.first(), Some(Value::Int(1))) && reply.len() >= 2 {
            return Ok(reply.split_off(2));
        }
        match self.decode(fence, &reply) {
            Ok(Err(e)) => Err(e),
            Ok(Ok(_)) => Err(self
                .server
                .error(&self.resource, what, unexpected(what, &reply))),
            Err(e) => Err(self.server.error(&self.resource, what, e)),
        }
    }

    /// Waits, as the client asks (`wait_for_replicas`), for the replicas to acknowledge what
    /// was written to `key` on the resource's server, for the lock `lock`.
    pub(crate) async fn confirm_replicas(
        &self,
        ack: crate::engine::ReplicaAck,
        lock: &str,
        key: &str,
        what: &'static str,
    ) -> Result<()> {
        crate::engine::confirm_replicas_on(&self.server, lock, key, ack, self.timeout, what).await
    }

    /// The clock of the resource's server (`TIME`, on the node that serves the resource's
    /// hash tag), to the microsecond.
    pub(crate) async fn server_clock(&self) -> Result<std::time::SystemTime> {
        let call = Call::new(&CLOCK, &[&self.fence_key], Args::new());
        let reply: Value = self
            .server
            .run_script(&call, self.timeout)
            .await
            .map_err(|e| {
                self.server
                    .error(&self.resource, "read the server's clock", e)
            })?;
        let micros = as_string(&reply).ok().and_then(|t| t.parse::<u64>().ok());
        match micros {
            Some(micros) => Ok(std::time::UNIX_EPOCH + Duration::from_micros(micros)),
            None => Err(self.server.error(
                &self.resource,
                "read the server's clock",
                unexpected("read the server's clock", &[reply]),
            )),
        }
    }

    /// What `key` holds, as text (`None`: nothing), read on the resource's server.
    pub(crate) async fn get(&self, key: &str) -> Result<Option<String>> {
        self.server
            .query(redis::cmd("GET").arg(key), self.timeout)
            .await
            .map_err(|e| self.server.error(&self.resource, "read", e))
    }

    /// What `keys` hold, as text, in one read (`MGET`; the keys share the resource's hash tag).
    pub(crate) async fn get_many(&self, keys: &[&str]) -> Result<Vec<Option<String>>> {
        self.server
            .query(redis::cmd("MGET").arg(keys), self.timeout)
            .await
            .map_err(|e| self.server.error(&self.resource, "read", e))
    }

    /// The largest fence the resource has accepted (0 if none).
    ///
    /// # Errors
    ///
    /// Connection errors; [`Error::Redis`] if the fence key holds something else.
    pub async fn accepted(&self) -> Result<u64> {
        let value: Option<String> = self
            .server
            .query(redis::cmd("GET").arg(&self.fence_key), self.timeout)
            .await
            .map_err(|e| {
                self.server
                    .error(&self.resource, "read the accepted fence", e)
            })?;
        Ok(value.and_then(|v| v.parse().ok()).unwrap_or(0))
    }
}
