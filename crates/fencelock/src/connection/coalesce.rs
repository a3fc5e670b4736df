//! Group commit of script calls on one connection: calls of one script that pile up while one
//! of them is on its way go to Redis together, as one call of the script's batch form
//! (`script/batch.lua`), when the one on its way has come back.
//!
//! Nothing waits for a timer, and a call made alone (or with one other) is sent at once, as it
//! is. Under load, each script has at most two calls or batches on their way per connection, and
//! Redis runs the script once per batch instead of once per call, which is where a busy client's
//! server time goes.
//!
//! A call that was queued but not yet sent when its caller went away is never sent. A call
//! sent in a batch whose caller went away meanwhile has its reply handed to its `undelivered`
//! hook (an acquire gives back what it was granted), so that nothing is left behind.
//!
//! Calls that go together anyway (the watchdog's renewals, `Server::run_many`) are sent the
//! same way: one pipeline of batch-form runs, each call's reply taken out of its run's.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::{RedisError, RedisResult, Value};
use tokio::sync::oneshot;

use super::Server;
use crate::script::{Batch, Call, Encoded};

/// The most calls in one batch: bounds how long one script runs on the server.
const MOST_PER_BATCH: usize = 64;

/// How many calls of one queue may be on their way at once before the next waits: two, so that
/// two callers at once (two workers of one client contending for a lock, say) do not wait for
/// each other. Once calls pile up and a batch is on its way, the next calls wait for it (one
/// batch at a time per queue): the batches are about twice as large as with two on their way,
/// and each costs the server one script run.
const IN_FLIGHT: usize = 2;

/// What to do with the reply of a call whose caller went away before it came.
pub(crate) type Undelivered = Box<dyn FnOnce(Value) + Send>;

/// The queues of one connection, one per script (and shape of call): a handful, so a list is
/// quicker to search than a hash map.
#[derive(Default)]
pub(crate) struct Coalescer {
    queues: Mutex<Queues>,
}

#[derive(Default)]
struct Queues(Vec<(QueueKey, Queue)>);

impl Queues {
    fn get_mut(&mut self, key: &QueueKey) -> Option<&mut Queue> {
        self.0.iter_mut().find(|(k, _)| k == key).map(|(_, q)| q)
    }

    fn get_or_add(&mut self, key: QueueKey) -> &mut Queue {
        let at = match self.0.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                self.0.push((key, Queue::default()));
                self.0.len() - 1
            }
        };
        &mut self.0[at].1
    }
}

/// Calls share a batch when they run the same script with as many keys and arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
struct QueueKey {
    batch: usize,
    keys: usize,
    args: usize,
}

#[derive(Default)]
struct Queue {
    /// Calls and batches of this queue on their way.
    in_flight: usize,
    /// A task is sending what waits (it counts in `in_flight` while it runs).
    flushing: bool,
    waiting: VecDeque<Waiter>,
}

/// A call waiting for the one on its way, with everything it needs to be sent later.
struct Waiter {
    call: Encoded,
    limit: Duration,
    reply: oneshot::Sender<RedisResult<Value>>,
    undelivered: Undelivered,
}

impl Coalescer {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A queue's turn: when dropped (its call came back, or its caller went away), whatever piled
/// up meanwhile is sent, by a task that goes on while calls keep coming.
struct Turn<'a> {
    server: &'a Server,
    batch: &'a Arc<Batch>,
    key: QueueKey,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut queues = self.server.coalescer.lock();
        let Some(queue) = queues.get_mut(&self.key) else {
            return;
        };
        queue.in_flight = queue.in_flight.saturating_sub(1);
        if queue.waiting.is_empty() || queue.flushing {
            return;
        }
        // Outside a runtime (it is shutting down) the waiters are dropped and see an error.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            queue.flushing = true;
            queue.in_flight += 1;
            drop(queues);
            runtime.spawn(flush(self.server.clone(), self.batch.clone(), self.key));
        }
    }
}

impl Server {
    /// Runs a script call like [`Server::run_script`], but sends it together with other calls
    /// of the same script when one is already on its way (see the module docs). On Redis
    /// Cluster, on a Redlock instance ([`Server::in_call_order`]), or for a script without a
    /// batch form, it is sent as it is.
    ///
    /// # Cancel safety
    ///
    /// A queued call whose caller goes away is not sent; one already sent in a batch hands its
    /// reply to the hook `undelivered` makes (made only when the call waits: a call sent at once
    /// is the caller's own to answer for).
    pub(crate) async fn run_coalesced(
        &self,
        call: &Call<'_>,
        limit: Duration,
        undelivered: impl FnOnce() -> Undelivered,
    ) -> RedisResult<Value> {
        let Some(batch) = call
            .lua
            .batch()
            .filter(|_| self.coalesce && !self.sharded())
        else {
            return self.run_script(call, limit).await;
        };
        let key = QueueKey {
            batch: Arc::as_ptr(batch) as usize,
            keys: call.keys.len(),
            args: call.args.len(),
        };
        let waiting = {
            let mut queues = self.coalescer.lock();
            let queue = queues.get_or_add(key);
            if queue.in_flight >= IN_FLIGHT || queue.flushing || !queue.waiting.is_empty() {
                let (reply, waiting) = oneshot::channel();
                queue.waiting.push_back(Waiter {
                    call: call.encode(),
                    limit,
                    reply,
                    undelivered: undelivered(),
                });
                Some(waiting)
            } else {
                queue.in_flight += 1;
                None
            }
        };
        match waiting {
            None => {
                let _turn = Turn {
                    server: self,
                    batch,
                    key,
                };
                self.run_script(call, limit).await
            }
            Some(waiting) => {
                super::within(limit, async {
                    waiting.await.unwrap_or_else(|_| {
                        Err(RedisError::from((
                            redis::ErrorKind::Client,
                            "the batch this call was in was dropped",
                        )))
                    })
                })
                .await
            }
        }
    }
}

/// Sends what waits in one queue, batch after batch, until nothing is left.
async fn flush(server: Server, batch: Arc<Batch>, key: QueueKey) {
    loop {
        let waiters: Vec<Waiter> = {
            let mut queues = server.coalescer.lock();
            let Some(queue) = queues.get_mut(&key) else {
                return;
            };
            // A caller that went away before its call was sent: it is not sent.
            queue.waiting.retain(|w| !w.reply.is_closed());
            if queue.waiting.is_empty() {
                queue.flushing = false;
                queue.in_flight = queue.in_flight.saturating_sub(1);
                return;
            }
            let take = queue.waiting.len().min(MOST_PER_BATCH);
            queue.waiting.drain(..take).collect()
        };
        let limit = waiters.iter().map(|w| w.limit).max().unwrap_or_default();
        let calls = waiters.len();
        let all: Vec<&Encoded> = waiters.iter().map(|w| &w.call).collect();
        let replies = match server.run_batch(&batch, &all, limit).await {
            Err(err) if refused_before_running(&err) && calls > 1 => {
                // Refused as a whole (an ACL that denies one call's keys, say) before anything
                // ran: each call is sent on its own, so that it gets its own answer.
                let mut replies = Vec::with_capacity(calls);
                for call in &all {
                    let reply = server.run_batch(&batch, &[*call], limit).await;
                    replies.extend(split(reply, 1));
                }
                replies
            }
            reply => split(reply, calls),
        };
        drop(all);
        let replies_to = waiters.into_iter().map(|w| (w.reply, w.undelivered));
        for ((reply_to, undelivered), reply) in replies_to.zip(replies) {
            if let Err(Ok(value)) = reply_to.send(reply) {
                undelivered(value);
            }
        }
    }
}

/// The calls of one run of a batch form in [`Server::run_many`], each with its position.
type Run<'c, 'a> = Vec<(usize, &'c Call<'a>)>;

/// Where each call of [`Server::run_many`]'s pipeline went (with its position).
enum Sent<'c, 'a> {
    /// In one run of its script's batch form, with these calls.
    Batch(Arc<Batch>, Run<'c, 'a>),
    /// On its own (its script has no batch form, or the server refused its batch as a whole).
    One(usize, &'c Call<'a>),
}

impl Server {
    /// Runs many calls of one script (each with as many keys and arguments) within `limit`, as
    /// its batch form (`script/batch.lua`), loading it on `NOSCRIPT` as [`Server::run_script`]
    /// does.
    async fn run_batch(
        &self,
        batch: &Batch,
        calls: &[&Encoded],
        limit: Duration,
    ) -> redis::RedisResult<redis::Value> {
        let (keys, args) = calls
            .first()
            .map_or((0, 0), |c| (c.keys().count(), c.args().count()));
        let bytes = calls.iter().map(|c| c.len()).sum::<usize>();
        let write_keys = |c: &mut redis::Cmd| {
            for key in calls.iter().flat_map(|call| call.keys()) {
                c.arg(key);
            }
        };
        let write_args = |c: &mut redis::Cmd| {
            for arg in calls.iter().flat_map(|call| call.args()) {
                c.arg(arg);
            }
        };
        let shape = (calls.len(), keys, args);
        let command = |by_source: bool| {
            batch.command(
                self.sharded(),
                by_source,
                shape,
                bytes,
                &write_keys,
                &write_args,
            )
        };
        // A batch's reply is one reply per call, and a call's may be an error (a command its
        // script called was refused): each attempt goes as a pipeline of one command, whose
        // reply keeps such an error in its call's place. (`Cmd::query_async` makes the first
        // error anywhere in a reply the error of the whole: the batch would count as refused
        // before it ran, and each of its calls, which did run, would be sent again.)
        let deadline = tokio::time::Instant::now() + limit;
        let attempt = |by_source: bool| {
            let mut pipe = redis::Pipeline::with_capacity(1);
            pipe.ignore_errors();
            pipe.add_command(command(by_source));
            async move {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let mut replies: Vec<redis::RedisResult<redis::Value>> =
                    self.pipeline(&pipe, left).await?;
                replies.pop().unwrap_or_else(|| {
                    Err(RedisError::from((
                        redis::ErrorKind::Client,
                        "no reply to a batch",
                    )))
                })
            }
        };
        let result = match attempt(false).await {
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                attempt(true).await
            }
            other => other,
        };
        self.observe(&result);
        result
    }

    /// Runs many script calls at once, within `limit`: one pipeline in which the calls of each
    /// script (with as many keys and arguments) go as runs of its batch form, at most
    /// `MOST_PER_BATCH` calls a run, and a call of a script with no batch form goes as it is.
    /// The pipeline loads each script it runs first, so that a server that lost its scripts
    /// (a restart, a failover, `SCRIPT FLUSH`) runs it all the same. A run refused as a whole
    /// before it ran (an ACL that denies one call's keys) is sent again call by call, so that
    /// each call gets its own answer. One reply per call, in order; `Err` only if the pipeline
    /// itself failed. On Redis Cluster every call must be in one slot.
    ///
    /// # Cancel safety
    ///
    /// Dropped, it sends nothing more; what was sent runs (the watchdog's renewals are harmless
    /// to repeat).
    pub(crate) async fn run_many(
        &self,
        calls: &[&Call<'_>],
        limit: Duration,
    ) -> RedisResult<Vec<RedisResult<Value>>> {
        let deadline = tokio::time::Instant::now() + limit;
        // Calls of one script and shape, in runs of at most MOST_PER_BATCH, in call order.
        let mut runs: Vec<(QueueKey, Arc<Batch>, Run<'_, '_>)> = Vec::new();
        let mut sent = Vec::new();
        for (at, &call) in calls.iter().enumerate() {
            let Some(batch) = call.lua.batch() else {
                sent.push(Sent::One(at, call));
                continue;
            };
            let key = QueueKey {
                batch: Arc::as_ptr(batch) as usize,
                keys: call.keys.len(),
                args: call.args.len(),
            };
            match runs
                .iter_mut()
                .find(|(k, _, run)| *k == key && run.len() < MOST_PER_BATCH)
            {
                Some((_, _, run)) => run.push((at, call)),
                None => runs.push((key, batch.clone(), vec![(at, call)])),
            }
        }
        sent.extend(
            runs.into_iter()
                .map(|(_, batch, run)| Sent::Batch(batch, run)),
        );
        let mut replies: Vec<RedisResult<Value>> = calls.iter().map(|_| Err(not_sent())).collect();
        let mut again = Vec::new();
        for (sent, reply) in self.send_runs(&sent, limit).await? {
            match (sent, reply) {
                (Sent::Batch(_, run), Err(err))
                    if refused_before_running(&err) && run.len() > 1 =>
                {
                    again.extend(run.iter().map(|&(at, call)| Sent::One(at, call)));
                }
                (sent, reply) => deliver(&mut replies, sent, reply),
            }
        }
        if !again.is_empty() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let answered = match self.send_runs(&again, left).await {
                Ok(answered) => answered,
                Err(err) => again.iter().map(|sent| (sent, Err(err.clone()))).collect(),
            };
            for (sent, reply) in answered {
                deliver(&mut replies, sent, reply);
            }
        }
        Ok(replies)
    }

    /// One pipeline: a `SCRIPT LOAD` of each script it runs (cheap when the server has it: a
    /// hash and a lookup), then each of `sent`; the replies of `sent`, in order.
    async fn send_runs<'s, 'c, 'a>(
        &self,
        sent: &'s [Sent<'c, 'a>],
        limit: Duration,
    ) -> RedisResult<Vec<(&'s Sent<'c, 'a>, RedisResult<Value>)>> {
        let sharded = self.sharded();
        let mut sources: Vec<&str> = Vec::new();
        for s in sent {
            let source = match s {
                Sent::Batch(batch, _) => batch.variant(sharded).source.as_ref(),
                Sent::One(_, call) => call.lua.variant(sharded).source.as_ref(),
            };
            if !sources.iter().any(|s| std::ptr::eq(*s, source)) {
                sources.push(source);
            }
        }
        let mut pipe = redis::Pipeline::with_capacity(sources.len() + sent.len());
        pipe.ignore_errors();
        for source in &sources {
            pipe.cmd("SCRIPT").arg("LOAD").arg(*source);
        }
        for s in sent {
            let command = match s {
                Sent::Batch(batch, run) => {
                    let shape = run
                        .first()
                        .map_or((0, 0, 0), |(_, c)| (run.len(), c.keys.len(), c.args.len()));
                    let bytes = run.iter().map(|(_, c)| c.bytes()).sum();
                    let write_keys =
                        |c: &mut redis::Cmd| run.iter().for_each(|(_, call)| call.write_keys(c));
                    let write_args =
                        |c: &mut redis::Cmd| run.iter().for_each(|(_, call)| call.write_args(c));
                    batch.command(sharded, false, shape, bytes, &write_keys, &write_args)
                }
                Sent::One(_, call) => call.command(call.lua.variant(sharded), false),
            };
            pipe.add_command(command);
        }
        let replies: Vec<RedisResult<Value>> = self.pipeline(&pipe, limit).await?;
        Ok(sent
            .iter()
            .zip(replies.into_iter().skip(sources.len()))
            .collect())
    }
}

/// Puts the reply of what was `sent` in its call's place (a run's: each call's own, out of it).
fn deliver(replies: &mut [RedisResult<Value>], sent: &Sent<'_, '_>, reply: RedisResult<Value>) {
    let mut put = |at: usize, reply| {
        if let Some(slot) = replies.get_mut(at) {
            *slot = reply;
        }
    };
    match sent {
        Sent::One(at, _) => put(*at, reply),
        Sent::Batch(_, run) => {
            for (&(at, _), reply) in run.iter().zip(split(reply, run.len())) {
                put(at, reply);
            }
        }
    }
}

fn not_sent() -> RedisError {
    RedisError::from((redis::ErrorKind::Client, "not sent"))
}

/// A batch's reply, one per call.
fn split(reply: RedisResult<Value>, calls: usize) -> Vec<RedisResult<Value>> {
    match reply {
        Ok(Value::BulkString(codes)) if codes.len() == calls => {
            crate::script::compact_replies(&codes).map(Ok).collect()
        }
        Ok(Value::Array(replies)) if replies.len() == calls => replies
            .into_iter()
            .map(|reply| match reply {
                Value::ServerError(err) => Err(RedisError::from(err)),
                reply => Ok(reply),
            })
            .collect(),
        Ok(other) => {
            let err = RedisError::from((
                redis::ErrorKind::Client,
                "unexpected reply to a batch",
                format!("{other:?}"),
            ));
            vec![Err(err); calls]
        }
        Err(err) => vec![Err(err); calls],
    }
}

/// Whether the server refused a batch before running any of it (it answered, with an error):
/// not a lost connection or a timeout, after which the batch may have run.
fn refused_before_running(err: &RedisError) -> bool {
    !super::errors::is_unreachable_kind(err)
}
