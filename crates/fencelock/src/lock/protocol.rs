//! The plain lock's protocol: one round trip per operation, each a Lua script run by SHA
//! (re-loaded transparently when the server answers `NOSCRIPT`). This is the one place that says
//! how a lock is acquired, released, extended and inspected.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{RedisError, Script, Value};

use crate::connection::Server;
use crate::keys::LockKeys;
use crate::token::OwnerToken;

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("acquire.lua")));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("release.lua")));
static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("extend.lua")));
static INSPECT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("inspect.lua")));
static REASSERT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("reassert.lua")));
static FORCE_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("force_release.lua")));

/// What Redis said to an acquire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AcquireReply {
    /// The lock is ours, with this fence.
    Granted { fence: u64 },
    /// Another owner holds it; `remaining` is its lease (`None`: the key has no expiry).
    Held { remaining: Option<Duration> },
    /// A key holds something that is not a fencelock lock.
    Foreign { key: String, found: String },
}

/// The lease as Redis wants it: whole milliseconds, at least one.
pub(crate) fn lease_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

pub(crate) async fn acquire(
    server: Server,
    keys: Arc<LockKeys>,
    token: OwnerToken,
    ttl: Duration,
    limit: Duration,
) -> redis::RedisResult<AcquireReply> {
    let mut invocation = ACQUIRE.prepare_invoke();
    invocation
        .key(&keys.lock)
        .key(&keys.fence)
        .arg(token.as_str())
        .arg(lease_millis(ttl));
    let reply: Vec<Value> = server.invoke(&invocation, limit).await?;
    match reply.as_slice() {
        [Value::Int(1), fence] => Ok(AcquireReply::Granted {
            fence: as_u64(fence)?,
        }),
        [Value::Int(0), Value::Int(pttl)] => Ok(AcquireReply::Held {
            remaining: u64::try_from(*pttl).ok().map(Duration::from_millis),
        }),
        [Value::Int(-1), key, found] => Ok(AcquireReply::Foreign {
            key: as_string(key)?,
            found: describe_type(&as_string(found)?),
        }),
        _ => Err(unexpected("acquire", &reply)),
    }
}

/// Deletes the lock if `token` holds it, raising the fence key to at least `fence` and
/// publishing on the release channel. True if it was held.
pub(crate) async fn release(
    server: Server,
    keys: Arc<LockKeys>,
    token: OwnerToken,
    fence: Option<u64>,
    limit: Duration,
) -> redis::RedisResult<bool> {
    let mut invocation = RELEASE.prepare_invoke();
    invocation
        .key(&keys.lock)
        .key(&keys.fence)
        .arg(token.as_str())
        .arg(&keys.channel)
        .arg(fence.map(|f| f.to_string()).unwrap_or_default());
    let released: i64 = server.invoke(&invocation, limit).await?;
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

/// Re-arms the lease to `ttl` if `token` holds the lock.
pub(crate) async fn extend(
    server: Server,
    keys: Arc<LockKeys>,
    token: OwnerToken,
    ttl: Duration,
    limit: Duration,
) -> redis::RedisResult<Extended> {
    let mut invocation = EXTEND.prepare_invoke();
    invocation
        .key(&keys.lock)
        .arg(token.as_str())
        .arg(lease_millis(ttl));
    let reply: i64 = server.invoke(&invocation, limit).await?;
    Ok(Extended::from_reply(reply))
}

/// Puts `token`'s hold back on an instance whose key is gone (over Redlock, while the owner still
/// holds a majority). True if it was put back.
pub(crate) async fn reassert(
    server: Server,
    keys: Arc<LockKeys>,
    token: OwnerToken,
    fence: u64,
    ttl: Duration,
    limit: Duration,
) -> redis::RedisResult<bool> {
    let mut invocation = REASSERT.prepare_invoke();
    invocation
        .key(&keys.lock)
        .key(&keys.fence)
        .arg(token.as_str())
        .arg(lease_millis(ttl))
        .arg(fence);
    let reply: i64 = server.invoke(&invocation, limit).await?;
    Ok(reply == 1)
}

/// One lease to re-arm in a batch.
pub(crate) struct ExtendItem {
    pub(crate) keys: Arc<LockKeys>,
    pub(crate) token: OwnerToken,
    pub(crate) ttl: Duration,
}

/// Re-arms many leases in one round trip (a pipeline of the extend script). Each item gets its
/// own answer or error. The whole call fails only when the pipeline itself does (the server is
/// unreachable).
pub(crate) async fn extend_many(
    server: Server,
    items: Arc<[ExtendItem]>,
    limit: Duration,
) -> redis::RedisResult<Vec<redis::RedisResult<Extended>>> {
    // The pipeline starts with SCRIPT LOAD (cheap when the script is cached: a hash and a
    // lookup), so that a server that lost its script cache (restart, failover, SCRIPT FLUSH)
    // does not answer NOSCRIPT to every renewal of the batch.
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("SCRIPT")
        .arg("LOAD")
        .arg(include_str!("extend.lua"));
    for item in items.iter() {
        pipe.cmd("EVALSHA")
            .arg(EXTEND.get_hash())
            .arg(1)
            .arg(&item.keys.lock)
            .arg(item.token.as_str())
            .arg(lease_millis(item.ttl));
    }
    let replies: Vec<redis::RedisResult<Value>> = server.pipeline(&pipe, limit).await?;
    Ok(replies
        .into_iter()
        .skip(1) // the SCRIPT LOAD
        .map(|r| {
            r.and_then(|v| redis::from_redis_value::<i64>(v).map_err(RedisError::from))
                .map(Extended::from_reply)
        })
        .collect())
}

/// A lock's state as stored in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredState {
    Lock {
        /// The holder's value (`token:fence`), if held.
        value: Option<String>,
        /// The key's PTTL (-2: no key, -1: no expiry).
        pttl: i64,
        /// The last fence handed out, if any.
        last_fence: Option<u64>,
    },
    Foreign {
        key: String,
        found: String,
    },
}

pub(crate) async fn inspect(
    server: Server,
    keys: Arc<LockKeys>,
    limit: Duration,
) -> redis::RedisResult<StoredState> {
    let mut invocation = INSPECT.prepare_invoke();
    invocation.key(&keys.lock).key(&keys.fence);
    let reply: Vec<Value> = server.invoke(&invocation, limit).await?;
    match reply.as_slice() {
        [Value::Int(1), value, Value::Int(pttl), fence] => {
            let value = as_string(value)?;
            let fence = as_string(fence)?;
            Ok(StoredState::Lock {
                value: (!value.is_empty()).then_some(value),
                pttl: *pttl,
                last_fence: fence.parse().ok(),
            })
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
    let mut invocation = FORCE_RELEASE.prepare_invoke();
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
    use fencelock_testkit::RedisServer;

    const LIMIT: Duration = Duration::from_secs(2);

    fn server_for(redis: &RedisServer) -> Server {
        let client = redis::Client::open(redis.url()).unwrap();
        Server::new(client, LIMIT).unwrap()
    }

    #[tokio::test]
    async fn acquire_is_idempotent_for_one_token() {
        let redis = RedisServer::start().unwrap();
        let server = server_for(&redis);
        let keys = Arc::new(LockKeys::new("fencelock", "idem"));
        let token = OwnerToken::generate().unwrap();
        let first = acquire(
            server.clone(),
            keys.clone(),
            token.clone(),
            Duration::from_secs(1),
            LIMIT,
        )
        .await
        .unwrap();
        let AcquireReply::Granted { fence } = first else {
            panic!("{first:?}")
        };
        // A retry with the same token (as after a lost reply) confirms the same fence and
        // re-arms the lease.
        redis.cmd(&["PEXPIRE", &keys.lock, "100"]).unwrap();
        let again = acquire(
            server.clone(),
            keys.clone(),
            token.clone(),
            Duration::from_secs(5),
            LIMIT,
        )
        .await
        .unwrap();
        assert_eq!(again, AcquireReply::Granted { fence });
        let redis::Value::Int(pttl) = redis.cmd(&["PTTL", &keys.lock]).unwrap() else {
            panic!("PTTL")
        };
        assert!(pttl > 4000, "lease not re-armed: {pttl}");
        // Another token is refused and told the remaining lease.
        let other = OwnerToken::generate().unwrap();
        let held = acquire(
            server.clone(),
            keys.clone(),
            other.clone(),
            Duration::from_secs(1),
            LIMIT,
        )
        .await
        .unwrap();
        assert!(
            matches!(held, AcquireReply::Held { remaining: Some(r) } if r > Duration::from_secs(4)),
            "{held:?}"
        );
        // Only the owner's token releases; the fence key stays.
        assert!(
            !release(server.clone(), keys.clone(), other.clone(), None, LIMIT)
                .await
                .unwrap()
        );
        assert!(
            release(
                server.clone(),
                keys.clone(),
                token.clone(),
                Some(fence),
                LIMIT
            )
            .await
            .unwrap()
        );
        assert!(
            !release(
                server.clone(),
                keys.clone(),
                token.clone(),
                Some(fence),
                LIMIT
            )
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
        let held = Arc::new(LockKeys::new("fencelock", "held"));
        let gone = LockKeys::new("fencelock", "gone");
        let token = OwnerToken::generate().unwrap();
        acquire(
            server.clone(),
            held.clone(),
            token.clone(),
            Duration::from_millis(500),
            LIMIT,
        )
        .await
        .unwrap();
        redis.script_flush().unwrap();
        let items: Arc<[ExtendItem]> = Arc::from(vec![
            ExtendItem {
                keys: held.clone(),
                token: token.clone(),
                ttl: Duration::from_secs(9),
            },
            ExtendItem {
                keys: Arc::new(gone),
                token: token.clone(),
                ttl: Duration::from_secs(9),
            },
        ]);
        let replies = extend_many(server, items, Duration::from_secs(2))
            .await
            .unwrap();
        let replies: Vec<Extended> = replies.into_iter().map(Result::unwrap).collect();
        assert_eq!(replies, vec![Extended::Yes, Extended::Missing]);
        assert!(redis.keys().unwrap().iter().all(|k| !k.contains("gone")));
    }
}
