//! Running fencelock's scripts: one round trip per operation, each a Lua script run by SHA
//! (re-loaded transparently when the server answers `NOSCRIPT`), and the replies they give. The
//! scripts of each kind of lock live next to its module; [`Hold`] says which one applies. The
//! plain lock's own scripts, the shared holder-entry extend, inspect and force-release are here.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{RedisError, Script, Value};

use crate::connection::Server;
use crate::error::Conflict;
use crate::keys::LockKeys;
use crate::lock::hold::{Arg, Call, Hold};

/// A Lua script with the shared helpers (`prelude.lua`) prepended, and its source (a renewal
/// pipeline loads it with `SCRIPT LOAD`).
pub(crate) struct Lua {
    pub(crate) script: Script,
    pub(crate) source: &'static str,
}

impl Lua {
    pub(crate) fn new(source: &'static str) -> Self {
        Lua {
            script: Script::new(source),
            source,
        }
    }
}

/// A script of this crate: `lua!("acquire.lua")` is that file (next to the module that names it)
/// with the shared prelude in front.
macro_rules! lua {
    ($file:literal) => {
        std::sync::LazyLock::new(|| {
            $crate::lock::protocol::Lua::new(concat!(
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lock/prelude.lua")),
                include_str!($file)
            ))
        })
    };
}

pub(crate) static ACQUIRE: LazyLock<Lua> = lua!("acquire.lua");
pub(crate) static RELEASE: LazyLock<Lua> = lua!("release.lua");
pub(crate) static EXTEND: LazyLock<Lua> = lua!("extend.lua");
pub(crate) static ENTRY_EXTEND: LazyLock<Lua> = lua!("entry_extend.lua");
pub(crate) static REASSERT: LazyLock<Lua> = lua!("reassert.lua");
static INSPECT: LazyLock<Lua> = lua!("inspect.lua");
static FORCE_RELEASE: LazyLock<Lua> = lua!("force_release.lua");

impl redis::ToRedisArgs for Arg<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        match self {
            Arg::Str(s) => s.write_redis_args(out),
            Arg::Text(s) => s.write_redis_args(out),
            Arg::Int(n) => n.write_redis_args(out),
        }
    }
}

impl Call<'_> {
    fn invocation(&self) -> redis::ScriptInvocation<'static> {
        let mut invocation = self.lua.script.prepare_invoke();
        for key in &self.keys {
            invocation.key(key.as_ref());
        }
        for arg in &self.args {
            invocation.arg(arg);
        }
        invocation
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        server: &Server,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        server.invoke(&self.invocation(), limit).await
    }

    fn push_to(&self, pipe: &mut redis::Pipeline) {
        let command = pipe
            .cmd("EVALSHA")
            .arg(self.lua.script.get_hash())
            .arg(self.keys.len());
        for key in &self.keys {
            command.arg(key.as_ref());
        }
        for arg in &self.args {
            command.arg(arg);
        }
    }
}

/// What Redis said to an acquire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AcquireReply {
    /// The lock is ours, with this fence.
    Granted { fence: u64 },
    /// Another owner holds it; `remaining` is how long until something in the way lapses (its
    /// lease; `None`: a key with no expiry).
    Held { remaining: Option<Duration> },
    /// A key holds something that is not a fencelock lock.
    Foreign { key: String, found: String },
    /// The request conflicts with the lock's state (another kind, another number of permits,
    /// a read-to-write upgrade, the re-entry limit). Nothing was written.
    Refused(Conflict),
}

/// The lease as Redis wants it: whole milliseconds, at least one.
pub(crate) fn lease_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

pub(crate) async fn acquire(
    server: Server,
    hold: Arc<Hold>,
    ttl: Duration,
    limit: Duration,
) -> redis::RedisResult<AcquireReply> {
    let reply: Vec<Value> = hold.acquire_call(ttl).run(&server, limit).await?;
    match reply.as_slice() {
        [Value::Int(1), fence] => Ok(AcquireReply::Granted {
            fence: as_u64(fence)?,
        }),
        // -1: a key with no expiry. Any other negative wait is over already.
        [Value::Int(0), Value::Int(pttl)] => Ok(AcquireReply::Held {
            remaining: (*pttl != -1)
                .then(|| Duration::from_millis(u64::try_from(*pttl).unwrap_or(0))),
        }),
        [Value::Int(-1), key, found] => Ok(AcquireReply::Foreign {
            key: as_string(key)?,
            found: describe_type(&as_string(found)?),
        }),
        [Value::Int(-2), what, detail] => {
            let detail = as_string(detail)?;
            let conflict = match as_string(what)?.as_str() {
                "kind" => Conflict::OtherKind {
                    found: describe_kind(&detail),
                    requested: hold.kind.label(),
                },
                "permits" => Conflict::PermitsMismatch {
                    requested: match &hold.kind {
                        crate::lock::hold::Kind::Permit { permits } => *permits,
                        _ => 0,
                    },
                    held_with: detail,
                },
                "depth" => Conflict::ReentryLimit {
                    limit: detail.parse().unwrap_or(0),
                },
                "upgrade" => Conflict::Upgrade,
                "write-reentry" => Conflict::WriteReentry,
                _ => return Err(unexpected("acquire", &reply)),
            };
            Ok(AcquireReply::Refused(conflict))
        }
        _ => Err(unexpected("acquire", &reply)),
    }
}

/// Releases `hold` if it is still there (raising the fence key to at least `fence` first, when
/// given) and wakes waiters. True if it was held.
pub(crate) async fn release(
    server: Server,
    hold: Arc<Hold>,
    fence: Option<u64>,
    limit: Duration,
) -> redis::RedisResult<bool> {
    let released: i64 = hold.release_call(fence).run(&server, limit).await?;
    Ok(released == 1)
}

/// What an extend found on one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extended {
    /// The lease was re-armed.
    Yes,
    /// The key is gone (expired, deleted, or the instance lost its data).
    Missing,
    /// Someone else (or something else) is at the key.
    Taken,
}

impl Extended {
    fn from_reply(reply: i64) -> Self {
        match reply {
            1 => Extended::Yes,
            0 => Extended::Missing,
            _ => Extended::Taken,
        }
    }
}

/// Re-arms `hold`'s lease to `ttl` if it is still there.
pub(crate) async fn extend(
    server: Server,
    hold: Arc<Hold>,
    ttl: Duration,
    limit: Duration,
) -> redis::RedisResult<Extended> {
    let reply: i64 = hold.extend_call(ttl).run(&server, limit).await?;
    Ok(Extended::from_reply(reply))
}

/// Puts `hold` back on an instance whose key is gone (over Redlock, while the owner still holds
/// a majority). True if it was put back; false also for kinds that do not re-assert.
pub(crate) async fn reassert(
    server: Server,
    hold: Arc<Hold>,
    fence: u64,
    ttl: Duration,
    limit: Duration,
) -> redis::RedisResult<bool> {
    let Some(call) = hold.reassert_call(fence, ttl) else {
        return Ok(false);
    };
    let reply: i64 = call.run(&server, limit).await?;
    Ok(reply == 1)
}

/// One lease to re-arm in a batch.
pub(crate) struct ExtendItem {
    pub(crate) hold: Arc<Hold>,
    pub(crate) ttl: Duration,
}

/// Re-arms many leases (of any kinds) in one round trip: a pipeline of extend scripts. Each item
/// gets its own answer or error. The whole call fails only when the pipeline itself does (the
/// server is unreachable).
pub(crate) async fn extend_many(
    server: Server,
    items: Arc<[ExtendItem]>,
    limit: Duration,
) -> redis::RedisResult<Vec<redis::RedisResult<Extended>>> {
    let calls: Vec<Call> = items.iter().map(|i| i.hold.extend_call(i.ttl)).collect();
    // The pipeline starts with a SCRIPT LOAD of each script it uses (cheap when the script is
    // cached: a hash and a lookup), so that a server that lost its script cache (restart,
    // failover, SCRIPT FLUSH) does not answer NOSCRIPT to every renewal of the batch.
    let mut scripts: Vec<&'static Lua> = Vec::new();
    for call in &calls {
        if !scripts.iter().any(|s| std::ptr::eq(*s, call.lua)) {
            scripts.push(call.lua);
        }
    }
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for lua in &scripts {
        pipe.cmd("SCRIPT").arg("LOAD").arg(lua.source);
    }
    for call in &calls {
        call.push_to(&mut pipe);
    }
    let replies: Vec<redis::RedisResult<Value>> = server.pipeline(&pipe, limit).await?;
    Ok(replies
        .into_iter()
        .skip(scripts.len())
        .map(|r| {
            r.and_then(|v| redis::from_redis_value::<i64>(v).map_err(RedisError::from))
                .map(Extended::from_reply)
        })
        .collect())
}

/// A lock's state as stored on one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredState {
    Lock(StoredLock),
    Foreign { key: String, found: String },
}

/// A lock of any kind, as stored on one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredLock {
    /// `free`, `lock` (plain or fair), `reentrant`, `rw` or `semaphore`.
    pub(crate) kind: String,
    pub(crate) last_fence: Option<u64>,
    /// A reentrant lock's hold count, a semaphore's N.
    pub(crate) detail: Option<u32>,
    /// Queued fair-lock waiters, or a read-write lock's waiting readers and writers.
    pub(crate) waiting: u64,
    pub(crate) entries: Vec<StoredEntry>,
}

/// One holder of a stored lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredEntry {
    /// `holder`, `writer`, `reader` or `permit`.
    pub(crate) role: String,
    /// The owner token (for a permit, the permit's token).
    pub(crate) token: String,
    /// Milliseconds left on its lease (-1: no expiry).
    pub(crate) remaining_ms: i64,
    pub(crate) fence: Option<u64>,
}

pub(crate) async fn inspect(
    server: Server,
    keys: Arc<LockKeys>,
    limit: Duration,
) -> redis::RedisResult<StoredState> {
    let mut invocation = INSPECT.script.prepare_invoke();
    invocation
        .key(&keys.lock)
        .key(&keys.fence)
        .key(keys.queue());
    let reply: Vec<Value> = server.invoke(&invocation, limit).await?;
    match reply.as_slice() {
        [
            Value::Int(1),
            kind,
            fence,
            detail,
            Value::Int(waiting),
            rest @ ..,
        ] => {
            let mut entries = Vec::new();
            for chunk in rest.chunks(4) {
                let [role, token, Value::Int(remaining_ms), fence] = chunk else {
                    return Err(unexpected("inspect", &reply));
                };
                entries.push(StoredEntry {
                    role: as_string(role)?,
                    token: as_string(token)?,
                    remaining_ms: *remaining_ms,
                    fence: as_string(fence)?.parse().ok(),
                });
            }
            Ok(StoredState::Lock(StoredLock {
                kind: as_string(kind)?,
                last_fence: as_string(fence)?.parse().ok(),
                detail: as_string(detail)?.parse().ok(),
                waiting: u64::try_from(*waiting).unwrap_or(0),
                entries,
            }))
        }
        [Value::Int(-1), key, found] => Ok(StoredState::Foreign {
            key: as_string(key)?,
            found: describe_type(&as_string(found)?),
        }),
        _ => Err(unexpected("inspect", &reply)),
    }
}

/// What an operator's force-release found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ForceReleaseReply {
    Released,
    WasFree,
    Foreign { key: String, found: String },
}

pub(crate) async fn force_release(
    server: Server,
    keys: Arc<LockKeys>,
    limit: Duration,
) -> redis::RedisResult<ForceReleaseReply> {
    let mut invocation = FORCE_RELEASE.script.prepare_invoke();
    invocation.key(&keys.lock).arg(&keys.channel);
    let reply: Vec<Value> = server.invoke(&invocation, limit).await?;
    match reply.as_slice() {
        [Value::Int(1)] => Ok(ForceReleaseReply::Released),
        [Value::Int(0)] => Ok(ForceReleaseReply::WasFree),
        [Value::Int(-1), key, found] => Ok(ForceReleaseReply::Foreign {
            key: as_string(key)?,
            found: describe_type(&as_string(found)?),
        }),
        _ => Err(unexpected("force-release", &reply)),
    }
}

/// A lock kind recorded in Redis, for messages.
fn describe_kind(kind: &str) -> String {
    match kind {
        "lock" => "a plain or fair lock".to_owned(),
        "reentrant" => "a reentrant lock".to_owned(),
        "rw" => "a read-write lock".to_owned(),
        "semaphore" => "a semaphore".to_owned(),
        other => format!("a lock of kind {other:?}"),
    }
}

fn describe_type(found: &str) -> String {
    match found {
        "string" | "list" | "set" | "zset" | "hash" | "stream" => format!("a {found}"),
        other => other.to_owned(),
    }
}

fn as_u64(value: &Value) -> redis::RedisResult<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).map_err(|_| unexpected_value("a fence", value)),
        _ => Err(unexpected_value("a fence", value)),
    }
}

fn as_string(value: &Value) -> redis::RedisResult<String> {
    match value {
        Value::BulkString(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        _ => Err(unexpected_value("a string", value)),
    }
}

fn unexpected(script: &str, reply: &[Value]) -> RedisError {
    RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply from fencelock script",
        format!("{script}: {reply:?}"),
    ))
}

fn unexpected_value(what: &str, value: &Value) -> RedisError {
    RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected value in fencelock script reply",
        format!("expected {what}, got {value:?}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::hold::Kind;
    use crate::token::OwnerToken;
    use fencelock_testkit::RedisServer;

    const LIMIT: Duration = Duration::from_secs(2);

    fn server_for(redis: &RedisServer) -> Server {
        let client = redis::Client::open(redis.url()).unwrap();
        Server::new(client, LIMIT).unwrap()
    }

    fn plain(keys: &Arc<LockKeys>) -> Arc<Hold> {
        Arc::new(Hold {
            name: Arc::from("test"),
            kind: Kind::Plain,
            keys: keys.clone(),
            token: OwnerToken::generate().unwrap(),
        })
    }

    #[tokio::test]
    async fn acquire_is_idempotent_for_one_token() {
        let redis = RedisServer::start().unwrap();
        let server = server_for(&redis);
        let keys = Arc::new(LockKeys::new("fencelock", "idem"));
        let hold = plain(&keys);
        let first = acquire(server.clone(), hold.clone(), Duration::from_secs(1), LIMIT)
            .await
            .unwrap();
        let AcquireReply::Granted { fence } = first else {
            panic!("{first:?}")
        };
        // A retry with the same token (as after a lost reply) confirms the same fence and
        // re-arms the lease.
        redis.cmd(&["PEXPIRE", &keys.lock, "100"]).unwrap();
        let again = acquire(server.clone(), hold.clone(), Duration::from_secs(5), LIMIT)
            .await
            .unwrap();
        assert_eq!(again, AcquireReply::Granted { fence });
        let redis::Value::Int(pttl) = redis.cmd(&["PTTL", &keys.lock]).unwrap() else {
            panic!("PTTL")
        };
        assert!(pttl > 4000, "lease not re-armed: {pttl}");
        // Another token is refused and told the remaining lease.
        let other = plain(&keys);
        let held = acquire(server.clone(), other.clone(), Duration::from_secs(1), LIMIT)
            .await
            .unwrap();
        assert!(
            matches!(held, AcquireReply::Held { remaining: Some(r) } if r > Duration::from_secs(4)),
            "{held:?}"
        );
        // Only the owner's token releases; the fence key stays.
        assert!(!release(server.clone(), other, None, LIMIT).await.unwrap());
        assert!(
            release(server.clone(), hold.clone(), Some(fence), LIMIT)
                .await
                .unwrap()
        );
        assert!(
            !release(server.clone(), hold, Some(fence), LIMIT)
                .await
                .unwrap()
        );
        let mut left = redis.keys().unwrap();
        left.sort();
        assert_eq!(left, vec![keys.fence.clone()]);
    }

    #[tokio::test]
    async fn extend_many_answers_per_lock_in_one_pipeline() {
        let redis = RedisServer::start().unwrap();
        let server = server_for(&redis);
        let held = plain(&Arc::new(LockKeys::new("fencelock", "held")));
        let gone = plain(&Arc::new(LockKeys::new("fencelock", "gone")));
        let permit = Arc::new(Hold {
            name: Arc::from("sem"),
            kind: Kind::Permit { permits: 2 },
            keys: Arc::new(LockKeys::new("fencelock", "sem")),
            token: OwnerToken::generate().unwrap(),
        });
        for hold in [&held, &permit] {
            let reply = acquire(
                server.clone(),
                hold.clone(),
                Duration::from_millis(500),
                LIMIT,
            )
            .await
            .unwrap();
            assert!(matches!(reply, AcquireReply::Granted { .. }), "{reply:?}");
        }
        redis.script_flush().unwrap();
        let items: Arc<[ExtendItem]> = Arc::from(vec![
            ExtendItem {
                hold: held.clone(),
                ttl: Duration::from_secs(9),
            },
            ExtendItem {
                hold: gone,
                ttl: Duration::from_secs(9),
            },
            ExtendItem {
                hold: permit.clone(),
                ttl: Duration::from_secs(9),
            },
        ]);
        let replies = extend_many(server, items, Duration::from_secs(2))
            .await
            .unwrap();
        let replies: Vec<Extended> = replies.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            replies,
            vec![Extended::Yes, Extended::Missing, Extended::Yes]
        );
        assert!(redis.keys().unwrap().iter().all(|k| !k.contains("gone")));
        for key in [&held.keys.lock, &permit.keys.lock] {
            let redis::Value::Int(pttl) = redis.cmd(&["PTTL", key]).unwrap() else {
                panic!("PTTL")
            };
            assert!(pttl > 8000, "{key} not re-armed: {pttl}");
        }
    }
}
