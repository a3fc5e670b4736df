//! The admin scripts' replies: a lock's state as stored on one instance, and what a
//! force-release found there.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::{FORCE_RELEASE, INSPECT};
use crate::connection::Server;
use crate::keys::LockKeys;
use crate::script::reply::{as_string, describe_type, unexpected};
use crate::script::{Arg, Args, Call};

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
    let queue = keys.queue();
    let call = Call::new(&INSPECT, &[keys.lock(), keys.fence(), &queue], Args::new());
    let reply: Vec<Value> = server.run_script(&call, limit).await?;
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
    let args = Args::from_iter([Arg::Str(keys.channel())]);
    let call = Call::new(&FORCE_RELEASE, &[keys.lock()], args);
    let reply: Vec<Value> = server.run_script(&call, limit).await?;
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
