//! The engine's operations on one server: acquire, release, extend and re-assert a hold (one
//! script call each, the script chosen by the hold's protocol), a pipelined batch of extends for
//! the watchdog, and the decoding of their replies.

#[cfg(feature = "cluster")]
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "cluster")]
use redis::cluster_routing::Slot;
use redis::{FromRedisValue, RedisError, Value};

use crate::background::Count;
use crate::connection::{Server, Undelivered};
use crate::engine::protocol::Hold;
use crate::engine::protocol::{Attempt, ReleaseFence};
use crate::engine::{label, native};
use crate::error::Conflict;
use crate::kind::LockKind;
use crate::script::Call;
use crate::script::reply::{self, as_string, as_u64, describe_type, unexpected};

/// What Redis said to an acquire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AcquireReply {
    /// The lock is ours, with this fence.
    Granted { fence: u64 },
    /// Another owner holds it; `remaining` is how long until something in the way lapses (its
    /// lease; `None`: a key with no expiry). `place`: the server millisecond at which the
    /// caller's place in line lapses, when it took one (a plain lock's waiter).
    Held {
        remaining: Option<Duration>,
        place: Option<u64>,
    },
    /// A key holds something that is not a fencelock lock.
    Foreign { key: String, found: String },
    /// The request conflicts with the lock's state (another kind, another number of permits,
    /// a read-to-write upgrade, the re-entry limit). Nothing was written.
    Refused(Conflict),
}

/// Runs `hold`'s acquire script for `attempt`.
pub(crate) async fn acquire(
    server: Server,
    hold: Arc<Hold>,
    attempt: Attempt,
    limit: Duration,
    background: Arc<Count>,
) -> redis::RedisResult<AcquireReply> {
    // A grant (or a place in line) whose caller went away before it came (cancelled, or past
    // its time limit while its call waited in a batch) is given back here. Counted, from the
    // moment the call waits, in the client's background work (what `Client::wait_idle` waits
    // for) and in the caller's clean-up (if any), until the reply is delivered or given back.
    let undelivered = || -> Undelivered {
        let (server, hold) = (server.clone(), hold.clone());
        let tickets = (background.ticket(), crate::background::own_ticket());
        Box::new(move |value: Value| {
            if holds_something(&value) {
                give_back_late(server, hold, limit, tickets);
            }
        })
    };
    let value = server
        .run_coalesced(&hold.acquire_call(attempt), limit, undelivered)
        .await?;
    if hold.is_releasing() && holds_something(&value) {
        // Answered after the hold's release began (over Redlock, a call that ran on past its
        // round's outcome and reached an instance that was away): what it took goes back,
        // after it on the same connection. The caller reads the answer as usual.
        let tickets = (background.ticket(), crate::background::own_ticket());
        give_back_late(server.clone(), hold.clone(), limit, tickets);
    }
    if reply::is_grant(&value) {
        return Ok(AcquireReply::Granted {
            fence: as_u64(&value)?,
        });
    }
    let reply = Vec::<Value>::from_redis_value(value).map_err(RedisError::from)?;
    match reply.as_slice() {
        // -1: a key with no expiry. Any other negative wait is over already.
        [Value::Int(reply::HELD), Value::Int(pttl), place @ ..] => Ok(AcquireReply::Held {
            remaining: (*pttl != -1)
                .then(|| Duration::from_millis(u64::try_from(*pttl).unwrap_or(0))),
            place: match place {
                [] => None,
                [lapses] => Some(as_u64(lapses)?),
                _ => return Err(unexpected("acquire", &reply)),
            },
        }),
        [Value::Int(reply::FOREIGN), key, found] => Ok(AcquireReply::Foreign {
            key: as_string(key)?,
            found: describe_type(&as_string(found)?),
        }),
        [Value::Int(reply::CONFLICT), what, detail] => {
            let (what, detail) = (as_string(what)?, as_string(detail)?);
            let conflict = if what == "kind" {
                Some(Conflict::OtherKind {
                    found: LockKind::from_script(&detail),
                    requested: hold.protocol.kind(),
                })
            } else {
                hold.protocol.conflict(&what, &detail)
            };
            conflict
                .map(AcquireReply::Refused)
                .ok_or_else(|| unexpected("acquire", &reply))
        }
        _ => Err(unexpected("acquire", &reply)),
    }
}

/// Whether an acquire's reply took something on the server: a grant, or a place in line.
fn holds_something(value: &Value) -> bool {
    reply::is_grant(value) || matches!(value.as_sequence(), Some([Value::Int(reply::HELD), _, _]))
}

/// Gives back, in the background, what a try of `hold` took on `server` though nobody will
/// use it (its caller went away, or the hold's release had begun); `tickets` count it in the
/// client's background work and in the caller's clean-up until it ends.
fn give_back_late<T: Send + 'static>(server: Server, hold: Arc<Hold>, limit: Duration, tickets: T) {
    tokio::spawn(async move {
        // With the fence its hold's release writes back (over Redlock), if that release has
        // begun: whichever of the two reaches the instance first raises its fence key.
        let fence = match hold.released_fence() {
            Some(fence) if hold.protocol.writes_fence_back() => ReleaseFence::WriteBack(fence),
            _ => ReleaseFence::Unknown,
        };
        if let Err(err) = release(server, hold.clone(), fence, limit).await {
            tracing::debug!(lock = %hold.name, %err, "could not give back a grant nobody took");
        }
        drop(tickets);
    });
}

/// Releases `hold` if it is still there (raising the fence key to at least the fence first, over
/// Redlock) and wakes waiters. True if it was held.
pub(crate) async fn release(
    server: Server,
    hold: Arc<Hold>,
    fence: ReleaseFence,
    limit: Duration,
) -> redis::RedisResult<bool> {
    let call = hold.release_call(fence);
    let release = server.run_coalesced(&call, limit, || Box::new(|_| {}));
    // A labelled hold's label goes with it, side by side with the release.
    let value = match label::delete(&hold) {
        None => release.await?,
        Some(cmd) => {
            // Boxed: joined in place, the two calls would make every release's future (and
            // every future that awaits one) as large as both.
            let delete = label::send(server.clone(), cmd, &hold.name, limit);
            Box::pin(futures_util::future::join(release, delete))
                .await
                .0?
        }
    };
    match i64::from_redis_value(value).map_err(RedisError::from)? {
        reply::RELEASED_UNTOLD => {
            tracing::warn!(lock = %hold.name, server = %server.addr, "released, but the server refused the wake-up message (the ACL user may not publish on the lock's channel): waiters take the lock when they next look, at the latest when the lease they were told would have run out");
            Ok(true)
        }
        released => Ok(released == 1),
    }
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

/// Re-arms `hold`'s lease to `ttl` if it is still there: natively where the kind and the
/// server allow it (`fence`: the grant's fence as the value on one server holds it; see
/// `native.rs`), by the kind's extend script otherwise.
pub(crate) async fn extend(
    server: Server,
    hold: Arc<Hold>,
    fence: Option<u64>,
    ttl: Duration,
    limit: Duration,
) -> redis::RedisResult<Extended> {
    match label::rearm(&hold, ttl) {
        None => extend_lease(server, &hold, fence, ttl, limit).await,
        // A labelled hold's label is re-armed side by side with its lease.
        Some(cmd) => {
            let rearm = label::send(server.clone(), cmd, &hold.name, limit);
            futures_util::future::join(extend_lease(server, &hold, fence, ttl, limit), rearm)
                .await
                .0
        }
    }
}

/// [`extend`] of the lease alone.
async fn extend_lease(
    server: Server,
    hold: &Arc<Hold>,
    fence: Option<u64>,
    ttl: Duration,
    limit: Duration,
) -> redis::RedisResult<Extended> {
    if let Some(answer) = native::extend(&server, hold, fence, ttl, limit).await {
        return answer.map(|()| Extended::Yes);
    }
    let reply: i64 = server.run_script(&hold.extend_call(ttl), limit).await?;
    let extended = Extended::from_reply(reply);
    if extended == Extended::Yes {
        native::remember_mark(&server, hold, fence);
    }
    Ok(extended)
}

/// Puts `hold` back on an instance whose key is gone (over Redlock, while the owner still holds
/// a majority), with its label if it has one. True if it was put back; false also for kinds
/// that do not re-assert.
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
    let reply: i64 = server.run_script(&call, limit).await?;
    if reply != 1 {
        return Ok(false);
    }
    if let Some(cmd) = label::write(&hold, ttl) {
        label::send(server, cmd, &hold.name, limit).await;
    }
    Ok(true)
}

/// One lease to re-arm in a batch.
pub(crate) struct ExtendItem {
    pub(crate) hold: Arc<Hold>,
    pub(crate) ttl: Duration,
    /// The grant's fence as the value on one server holds it (`None` over Redlock): a lease
    /// re-armed alone may be re-armed natively (`native.rs`).
    pub(crate) fence: Option<u64>,
}

/// Re-arms many leases (of any kinds) in one round trip: a pipeline of extend scripts, as runs
/// of their batch forms; a lease alone as [`extend`] does (natively where it can). Each item
/// gets its own answer or error. The whole call fails only when the pipeline itself does (the
/// server is unreachable).
pub(crate) async fn extend_many(
    server: Server,
    items: Arc<[ExtendItem]>,
    limit: Duration,
) -> redis::RedisResult<Vec<redis::RedisResult<Extended>>> {
    if let [item] = &items[..] {
        let answer = extend(
            server.clone(),
            item.hold.clone(),
            item.fence,
            item.ttl,
            limit,
        );
        return Ok(vec![Ok(answer.await?)]);
    }
    let calls: Vec<Call> = items.iter().map(|i| i.hold.extend_call(i.ttl)).collect();
    if items.iter().any(|i| i.hold.holder_label.is_some()) {
        // Labelled holds' labels are re-armed side by side with the batch: one command more
        // per labelled hold, none for the others.
        let rearms = items.iter().filter_map(|i| {
            let cmd = label::rearm(&i.hold, i.ttl)?;
            Some(label::send(server.clone(), cmd, &i.hold.name, limit))
        });
        let batch = extend_calls(&server, &calls, limit);
        return futures_util::future::join(batch, futures_util::future::join_all(rearms))
            .await
            .0;
    }
    extend_calls(&server, &calls, limit).await
}

/// The extend calls of [`extend_many`] in one pipeline (on Redis Cluster, one per slot).
async fn extend_calls(
    server: &Server,
    calls: &[Call<'_>],
    limit: Duration,
) -> redis::RedisResult<Vec<redis::RedisResult<Extended>>> {
    #[cfg(feature = "cluster")]
    if server.sharded() {
        return extend_by_slot(server, calls, limit).await;
    }
    extend_batch(server, calls, limit).await
}

/// [`extend_many`] on Redis Cluster.
#[cfg(feature = "cluster")]
async fn extend_by_slot(
    server: &Server,
    calls: &[Call<'_>],
    limit: Duration,
) -> redis::RedisResult<Vec<redis::RedisResult<Extended>>> {
    // Redis Cluster: a pipeline must stay within one slot, so the batch is one pipeline per
    // slot, all sent at once (the cluster connection multiplexes those of one node).
    let mut slots: HashMap<Slot, Vec<usize>> = HashMap::new();
    for (i, call) in calls.iter().enumerate() {
        slots
            .entry(Slot::for_key(call.routing_key()))
            .or_default()
            .push(i);
    }
    let batches = slots.into_values().map(|positions| {
        let calls: Vec<&Call> = positions.iter().filter_map(|&i| calls.get(i)).collect();
        async move { (positions, extend_batch(server, &calls, limit).await) }
    });
    let mut replies: Vec<redis::RedisResult<Extended>> =
        calls.iter().map(|_| Err(not_sent())).collect();
    let mut failed = None;
    let mut answered = false;
    for (positions, batch) in futures_util::future::join_all(batches).await {
        match batch {
            Ok(batch) => {
                answered = true;
                for (i, reply) in positions.into_iter().zip(batch) {
                    if let Some(slot) = replies.get_mut(i) {
                        *slot = reply;
                    }
                }
            }
            Err(err) => {
                for &i in &positions {
                    if let Some(slot) = replies.get_mut(i) {
                        *slot = Err(err.clone());
                    }
                }
                failed = Some(err);
            }
        }
    }
    match failed {
        // Nothing reached the cluster: the whole call failed, as with one server.
        Some(err) if !answered => Err(err),
        _ => Ok(replies),
    }
}

fn not_sent() -> RedisError {
    RedisError::from((redis::ErrorKind::Client, "renewal not sent"))
}

/// One pipeline of extend scripts (on Redis Cluster, all in one slot), as runs of their batch
/// forms (`Server::run_many`).
async fn extend_batch<'c, C: std::borrow::Borrow<Call<'c>>>(
    server: &Server,
    calls: &[C],
    limit: Duration,
) -> redis::RedisResult<Vec<redis::RedisResult<Extended>>> {
    let calls: Vec<&Call<'c>> = calls.iter().map(std::borrow::Borrow::borrow).collect();
    let replies = server.run_many(&calls, limit).await?;
    Ok(replies
        .into_iter()
        .map(|r| {
            r.and_then(|v| redis::from_redis_value::<i64>(v).map_err(RedisError::from))
                .map(Extended::from_reply)
        })
        .collect())
}

#[cfg(test)]
mod tests;
