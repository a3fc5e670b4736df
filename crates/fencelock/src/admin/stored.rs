//! The admin scripts' replies: a lock's state as stored on one instance, and what a
//! force-release found there.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use super::{FORCE_RELEASE, INSPECT, Side};
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
    pub(crate) entries: Vec<StoredEntry>,
    /// The waiters, in line order: a plain lock's line, a fair lock's queue, a read-write
    /// lock's waiting readers and writers.
    pub(crate) waiters: Vec<StoredWaiter>,
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
    /// The label its hold wrote beside the lock (`LockRequest::label`), if any.
    pub(crate) label: Option<String>,
}

/// One waiter of a stored lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredWaiter {
    /// A read-write lock's waiter: what it waits for (`None` for other kinds).
    pub(crate) side: Option<Side>,
    /// The waiter's token (for a read-write lock, its hold token).
    pub(crate) token: String,
    /// Milliseconds since it arrived (-1: not known).
    pub(crate) waited_ms: i64,
    /// Its place in line on this instance, 1 first (`None`: the kind keeps no order).
    pub(crate) place: Option<u32>,
}

pub(crate) async fn inspect(
    server: Server,
    keys: Arc<LockKeys>,
    limit: Duration,
) -> redis::RedisResult<StoredState> {
    let (queue, alive, waiters) = (keys.queue(), keys.alive(), keys.waiters());
    let call = Call::new(
        &INSPECT,
        &[keys.lock(), keys.fence(), &queue, &alive, &waiters],
        Args::new(),
    );
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
            let mut waiters = Vec::new();
            // A holder is (role, token, ms, fence, label), a waiter (role, token, ms, place).
            let mut rest = rest;
            while let [role, token, Value::Int(ms), last, more @ ..] = rest {
                let (role, token) = (as_string(role)?, as_string(token)?);
                let side = match role.as_str() {
                    "wait" => None,
                    "wait-reader" => Some(Side::Reader),
                    "wait-writer" => Some(Side::Writer),
                    _ => {
                        let [label, more @ ..] = more else {
                            return Err(unexpected("inspect", &reply));
                        };
                        let label = as_string(label)?;
                        entries.push(StoredEntry {
                            role,
                            token,
                            remaining_ms: *ms,
                            fence: as_string(last)?.parse().ok(),
                            label: (!label.is_empty()).then_some(label),
                        });
                        rest = more;
                        continue;
                    }
                };
                waiters.push(StoredWaiter {
                    side,
                    token,
                    waited_ms: *ms,
                    place: as_string(last)?.parse().ok(),
                });
                rest = more;
            }
            if !rest.is_empty() {
                return Err(unexpected("inspect", &reply));
            }
            if usize::try_from(*waiting).ok() != Some(waiters.len()) {
                return Err(unexpected("inspect", &reply));
            }
            Ok(StoredState::Lock(StoredLock {
                kind: as_string(kind)?,
                last_fence: as_string(fence)?.parse().ok(),
                detail: as_string(detail)?.parse().ok(),
                entries,
                waiters,
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
