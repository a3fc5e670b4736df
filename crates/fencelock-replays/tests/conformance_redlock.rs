//! The plain lock over Redlock against its real scripts: random walks of [`RedlockModel`] (two
//! clients that acquire without waiting, renew, release; an instance that restarts without its
//! data and stays out for the lease; leases that end) replayed on three real `redis-server`s
//! through the library's Redlock client, comparing after every step which request holds the
//! lock on each instance with the model's state, and each answer (a grant and its fence, a
//! refusal, a renewal refused) with the model's.
//!
//! The library sends a request's tries to every instance at once: a walk takes a request's
//! three tries in a row (the model lets other steps come between them; the exhaustive check
//! covers that). What the library does in the background (the give-back of a minority's grants,
//! the hold put back where a renewal found it gone, the try still in flight when a majority
//! answered) is awaited by comparing until the instances match the model. Leases last a
//! minute; a lease that ends in the model is ended with `PEXPIREAT key 1`; a restart is
//! `SIGKILL` and, once the model's instance is back, a start on the same port with no data. A
//! request that gives up its hold after a refused renewal is forgotten (it writes nothing).
//! Each grant's fence must be above every fence before it in the walk. The walks start with the
//! fence counters absent or behind the clocks: with every counter ahead of its instance's clock
//! (a clock stepped back everywhere) a restarted instance and one that took no part in the last
//! grant can give its fence again, outside the model's assumption that the clocks agree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{LEASE, Replay, Seen, Start, Walk};
use fencelock::{Client, Error, LockGuard};
use fencelock_model::redlock::{INSTANCES, RedlockAction, RedlockModel, RedlockState, Request};
use fencelock_testkit::RedisServer;
use redis::AsyncCommands;

const WALKS: usize = 24;
/// Each instance's time limit for a call. The walks assume that an instance the model has up
/// answers within it: a call that runs out of it counts as no answer, and the library gives
/// back what it may have taken there (a 300 ms limit ran out on a loaded 2-core CI machine, the
/// chaos runs beside the tests, and the instance then held nothing where the model's held the
/// grant).
const INSTANCE_LIMIT: Duration = Duration::from_secs(1);
const STEPS: usize = 12;

/// The three instances, shared by the walks.
type Servers = Arc<Mutex<Vec<RedisServer>>>;

struct Real {
    servers: Servers,
    clients: Vec<Client>,
    name: String,
    guards: Vec<Option<LockGuard>>,
    /// The real owner token of each model token.
    tokens: HashMap<u8, String>,
    /// Every grant's fence so far.
    fences: Vec<u64>,
    start: Start,
    seen: Seen,
    /// An instance comes back at once, with the library's calls to it still waiting.
    quick: bool,
}

impl Real {
    fn key(&self) -> String {
        format!("fencelock:{{{}}}", self.name)
    }

    /// Acts on instance `j`.
    fn server<T>(&self, j: usize, act: impl FnOnce(&mut RedisServer) -> T) -> T {
        act(&mut self.servers.lock().unwrap()[j])
    }

    async fn redis(&self, j: usize) -> Option<redis::aio::MultiplexedConnection> {
        let url = self.server(j, |s| s.is_running().then(|| s.url()))?;
        let client = redis::Client::open(url).unwrap();
        Some(client.get_multiplexed_async_connection().await.unwrap())
    }

    /// The owner token holding the lock on instance `j` (`None`: free, or the instance is
    /// down).
    async fn holder(&self, j: usize) -> Option<String> {
        let mut redis = self.redis(j).await?;
        let value: Option<String> = redis.get(self.key()).await.unwrap();
        value.map(|v| v.split(':').next().unwrap().to_owned())
    }

    /// The real holders the model's state says, per instance.
    fn expected(&self, s: &RedlockState) -> Vec<Option<String>> {
        (0..INSTANCES)
            .map(|j| {
                let inst = &s.instances[j];
                if inst.down_until > s.now {
                    return None;
                }
                let (token, expires) = inst.lock?;
                (expires > s.now).then(|| self.tokens[&token].clone())
            })
            .collect()
    }

    async fn holders(&self) -> Vec<Option<String>> {
        let mut all = Vec::new();
        for j in 0..INSTANCES {
            all.push(self.holder(j).await);
        }
        all
    }

    /// Waits until the instances hold what the model says (the library's background work done).
    async fn compare(&self, s: &RedlockState, step: &str) {
        let expected = self.expected(s);
        let mut last = Vec::new();
        let matched = common::until(format!("{step}: the instances"), async || {
            last = self.holders().await;
            (last == expected).then_some(())
        });
        if tokio::time::timeout(common::PATIENCE, matched)
            .await
            .is_err()
        {
            panic!(
                "{step}: the instances hold {last:?}, the model {expected:?} (tokens {:?})",
                self.tokens
            );
        }
    }

    /// Waits until every client reaches instance `j` again, after its restart (the model's
    /// instance answers from the step it is back; a client finds its old connection broken
    /// by its first call there): each takes and gives back a lock of another name until its
    /// grant shows on `j`.
    async fn reconnect(&self, j: usize) {
        for (c, client) in self.clients.iter().enumerate() {
            // A name of its own: another client's grant there says nothing of this one's.
            let warm = format!("{}-warm{c}", self.name);
            let key = format!("fencelock:{{{warm}}}");
            common::until(
                format!("a client reaching instance {j} again"),
                async || {
                    let guard = client
                        .lock(&warm)
                        .ttl(LEASE)
                        .no_wait()
                        .acquire()
                        .await
                        .ok()?;
                    let mut redis = self.redis(j).await?;
                    let there: bool = redis.exists(&key).await.unwrap();
                    let _ = guard.release().await;
                    there.then_some(())
                },
            )
            .await;
        }
    }

    /// Client `i` acquires: its three tries at once.
    async fn acquire(&mut self, i: usize, after: &RedlockState, step: &str) {
        let answer = self.clients[i]
            .lock(&self.name)
            .ttl(LEASE)
            .auto_renew(false)
            .no_wait()
            .acquire()
            .await;
        match (answer, after.clients[i]) {
            (Ok(guard), Request::Holding { token, .. }) => {
                let fence = guard.fence();
                self.start.check(fence, self.fences.iter().copied(), step);
                self.fences.push(fence);
                // The token, from an instance the model says it was granted.
                let j = (0..INSTANCES)
                    .find(|&j| after.instances[j].lock.is_some_and(|(t, _)| t == token))
                    .expect("a granting instance");
                let real = common::until(format!("{step}: the grant on {j}"), async || {
                    self.holder(j).await
                })
                .await;
                self.tokens.insert(token, real);
                self.guards[i] = Some(guard);
                self.seen.count("granted");
            }
            (Err(Error::Busy { .. } | Error::NoQuorum { .. }), Request::Idle) => {
                self.seen.count("refused");
            }
            (answer, request) => {
                panic!("{step}: acquire by {i}: {answer:?}, the model {request:?}")
            }
        }
    }

    async fn step(
        &mut self,
        before: &RedlockState,
        after: &RedlockState,
        action: RedlockAction,
        step: &str,
    ) {
        match action {
            RedlockAction::Try(i, _) => self.acquire(usize::from(i), after, step).await,
            RedlockAction::Renew(i) => {
                let i = usize::from(i);
                let guard = self.guards[i].take().expect("a guard");
                let renewed = guard.extend(LEASE).await;
                match (renewed, after.clients[i]) {
                    (Ok(()), Request::Holding { .. }) => {
                        self.guards[i] = Some(guard);
                        self.seen.count(if after.reasserted && !before.reasserted {
                            "renewed and put back"
                        } else {
                            "renewed"
                        });
                    }
                    (Err(Error::NotHeld { .. } | Error::NoQuorum { .. }), Request::Idle) => {
                        // Given up without a release (the model's client writes nothing).
                        std::mem::forget(guard);
                        self.seen.count("a renewal refused");
                    }
                    (renewed, request) => {
                        panic!("{step}: renewal by {i}: {renewed:?}, the model {request:?}")
                    }
                }
            }
            RedlockAction::Release(i) => {
                let guard = self.guards[usize::from(i)].take().expect("a guard");
                let _ = guard.release().await;
                self.seen.count("released");
            }
            RedlockAction::Restart(j) => {
                let j = usize::from(j);
                self.server(j, RedisServer::kill).unwrap();
                self.seen.count("restarted");
            }
            RedlockAction::Tick => {
                for j in 0..INSTANCES {
                    let (was, is) = (&before.instances[j], &after.instances[j]);
                    if was.down_until > before.now && is.down_until <= after.now {
                        // The model's calls to an instance that is away get no answer: the
                        // library's calls to it run out their time limit before it is back
                        // (one waiting for the connection would otherwise be sent then), but
                        // in the first walk (see `script`).
                        if !self.quick {
                            tokio::time::sleep(INSTANCE_LIMIT + Duration::from_millis(200)).await;
                        }
                        self.server(j, RedisServer::restart).unwrap();
                        self.reconnect(j).await;
                        self.seen.count("back");
                    } else if let Some((_, e)) = was.lock
                        && e > before.now
                        && e <= after.now
                        && was.down_until <= before.now
                        && let Some(mut redis) = self.redis(j).await
                    {
                        let _: i64 = redis.pexpire_at(self.key(), 1).await.unwrap();
                        self.seen.count("a lease ended");
                    }
                }
            }
            RedlockAction::Write(_) => unreachable!("no writes are drawn"),
        }
    }
}

impl Replay<RedlockModel> for Real {
    /// The first walk: an instance away before anyone reached it, a request granted by the
    /// other two, another's refused while its try to the first waits for a connection, the
    /// hold released, and the instance back at once: the refused request's try, sent then,
    /// must give back what it takes there (it did not, before: the lock stayed taken there for
    /// a lease).
    fn script(&self, number: usize) -> Vec<RedlockAction> {
        if number > 0 {
            return Vec::new();
        }
        vec![
            RedlockAction::Restart(0),
            RedlockAction::Try(0, 0),
            RedlockAction::Tick,
            RedlockAction::Try(1, 0),
            RedlockAction::Release(0),
            RedlockAction::Tick,
        ]
    }

    async fn advance(
        &mut self,
        walk: &mut Walk<'_, RedlockModel>,
        state: RedlockState,
    ) -> RedlockState {
        let action = walk.draw(&state, |a| match a {
            RedlockAction::Tick => 3,
            RedlockAction::Try(..) => 3,
            RedlockAction::Write(_) => 0,
            _ => 1,
        });
        let mut next = walk.take(&state, action);
        if let RedlockAction::Try(i, _) = action {
            // The request's other tries, in a row.
            while let Request::Trying { tried, .. } = next.clients[usize::from(i)] {
                let j = u8::try_from(tried.count_ones()).unwrap();
                next = walk.take(&next, RedlockAction::Try(i, j));
            }
        }
        let step = walk.step();
        self.step(&state, &next, action, &step).await;
        self.compare(&next, &step).await;
        next
    }

    async fn end(mut self) -> Seen {
        for guard in self.guards.iter_mut().filter_map(Option::take) {
            let _ = guard.release().await;
        }
        for server in self.servers.lock().unwrap().iter_mut() {
            if !server.is_running() {
                server.restart().unwrap();
            }
        }
        self.seen
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_walks_of_redlock_match_the_real_scripts() {
    let servers: Vec<RedisServer> = (0..INSTANCES)
        .map(|_| RedisServer::start().unwrap_or_else(|e| panic!("cannot start redis-server: {e}")))
        .collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let model = RedlockModel {
        max_time: u8::try_from(STEPS).unwrap(),
        max_requests: u8::try_from(STEPS).unwrap(),
        ..RedlockModel::small()
    };
    let clients: Vec<Client> = (0..model.clients)
        .map(|_| {
            Client::redlock(&urls)
                .instance_timeout(INSTANCE_LIMIT)
                .command_timeout(INSTANCE_LIMIT)
                .build()
                .unwrap()
        })
        .collect();
    let servers: Servers = Arc::new(Mutex::new(servers));
    let start = async |walk: usize| {
        let name = format!("redlock{walk}");
        // Absent or behind the clocks, in turn (see the module's comment).
        let start = if walk.is_multiple_of(2) {
            Start::Fresh
        } else {
            Start::Behind
        };
        if let Some(counter) = start.counter() {
            for url in &urls {
                let mut redis = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .unwrap();
                let key = format!("fencelock:{{{name}}}:fence");
                let _: () = redis.set(key, counter).await.unwrap();
            }
        }
        Real {
            servers: servers.clone(),
            clients: clients.clone(),
            name,
            guards: (0..model.clients).map(|_| None).collect(),
            tokens: HashMap::new(),
            fences: Vec::new(),
            start,
            seen: Seen::default(),
            quick: walk == 0,
        }
    };
    let seen = common::walks(&model, WALKS, STEPS, 0x9e37_79b9_7f4a_7c15, start).await;
    seen.assert_saw(&[
        "granted",
        "refused",
        "renewed",
        "renewed and put back",
        "a renewal refused",
        "released",
        "restarted",
        "back",
        "a lease ended",
    ]);
}
