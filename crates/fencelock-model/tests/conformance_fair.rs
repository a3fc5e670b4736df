//! The fair lock's model against its real scripts: random walks of [`FairModel`] (requests that
//! are granted or queue, a waiter's tries, renewals, releases that pass the lock to the head of
//! the queue, time passing) replayed on a real `redis-server` through the library, comparing
//! after every step what the server holds (the lock's holder and fence, the fence counter, the
//! queue in order, the liveness set) with the model's state.
//!
//! Each model client is a `Client` of its own with one request at a time; a waiting request is
//! a task. Model time maps onto the server's without waiting: leases and places last a minute
//! (so no timer of the library fires within a walk), a lease that ends in the model is ended
//! with `PEXPIREAT key 1`, and a waiter's try that the model grants is prompted with the wake
//! a release sends (`to:<token>` on the waiter's own channel, PROTOCOL.md). A pass is taken by
//! the waiter's own try (its requests do not renew automatically, so the library confirms the
//! passed lock with a try instead of the watchdog): the model's lost message and retry.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::time::Duration;

use fencelock::{Client, Error, LockGuard};
use fencelock_model::fair::{FairAction, FairModel, FairPhase, FairState};
use fencelock_testkit::RedisServer;
use redis::AsyncCommands;
use stateright::Model;
use tokio::task::JoinHandle;

const WALKS: usize = 100;
const STEPS: usize = 14;
const LEASE: Duration = Duration::from_secs(60);
/// How long the test waits for the library to do what the model did.
const PATIENCE: Duration = Duration::from_secs(10);

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % u64::try_from(n).unwrap()).unwrap()
    }
}

/// A model client's request on the server.
enum Request {
    Idle,
    Waiting(JoinHandle<fencelock::Result<LockGuard>>),
    Holding(LockGuard),
}

struct Real {
    clients: Vec<Client>,
    redis: redis::aio::MultiplexedConnection,
    name: String,
    requests: Vec<Request>,
    /// The real owner token of each model token.
    tokens: HashMap<u8, String>,
    /// The real fence of each model fence.
    fences: HashMap<u32, u64>,
    seen: HashMap<&'static str, usize>,
}

impl Real {
    fn key(&self) -> String {
        format!("fencelock:{{{}}}", self.name)
    }

    async fn queue(&mut self) -> Vec<String> {
        self.redis
            .zrange(format!("{}:queue", self.key()), 0, -1)
            .await
            .unwrap()
    }

    /// The lock key's `(token, fence)`.
    async fn holder(&mut self) -> Option<(String, u64)> {
        let value: Option<String> = self.redis.get(self.key()).await.unwrap();
        let value = value?;
        let (token, fence) = value.rsplit_once(':').unwrap();
        Some((token.to_owned(), fence.parse().unwrap()))
    }

    /// Waits for client `i`'s waiting request to be granted.
    async fn granted(&mut self, i: usize, fence: u32) {
        let Request::Waiting(task) = std::mem::replace(&mut self.requests[i], Request::Idle) else {
            panic!("client {i} has no waiting request")
        };
        let guard = tokio::time::timeout(PATIENCE, task)
            .await
            .unwrap_or_else(|_| panic!("client {i} was not granted"))
            .unwrap()
            .unwrap();
        assert_eq!(guard.fence(), self.fences[&fence], "client {i}'s fence");
        self.requests[i] = Request::Holding(guard);
    }

    async fn step(&mut self, before: &FairState, after: &FairState, action: FairAction) {
        match action {
            FairAction::Acquire(i) => {
                let i = usize::from(i);
                let retry = matches!(before.clients[i].phase, FairPhase::Waiting { .. });
                let granted = match after.clients[i].phase {
                    FairPhase::Holding { token, fence, .. } => Some((token, fence)),
                    _ => None,
                };
                if !retry {
                    let request = self.clients[i]
                        .fair_lock(&self.name)
                        .ttl(LEASE)
                        .queue_timeout(LEASE)
                        .auto_renew(false)
                        .wait_up_to(Duration::from_secs(120));
                    self.requests[i] = Request::Waiting(tokio::spawn(request.acquire()));
                }
                match granted {
                    Some((token, fence)) => {
                        if retry {
                            // The wake a release sends to the head, which tries again: on its
                            // own channel, or on the lock's while nobody listens there yet
                            // (`publish_to`).
                            let real = self.tokens[&token].clone();
                            let channel = format!("{}:released", self.key());
                            let reached: i64 = self
                                .redis
                                .publish(format!("{channel}:{real}"), format!("to:{real}"))
                                .await
                                .unwrap();
                            if reached == 0 {
                                let _: i64 = self
                                    .redis
                                    .publish(channel, format!("to:{real}"))
                                    .await
                                    .unwrap();
                            }
                        }
                        let passed = self.fences.contains_key(&fence);
                        if !passed {
                            let (real_token, real_fence) = self.waited_holder().await;
                            self.tokens.insert(token, real_token);
                            self.fences.insert(fence, real_fence);
                        }
                        self.granted(i, fence).await;
                        *self
                            .seen
                            .entry(match (retry, passed) {
                                (false, _) => "granted",
                                (true, false) => "granted to the head of the queue",
                                (true, true) => "a passed lock taken by the waiter's try",
                            })
                            .or_default() += 1;
                    }
                    None if retry => *self.seen.entry("a waiter's try").or_default() += 1,
                    None => {
                        let FairPhase::Waiting { token, .. } = after.clients[i].phase else {
                            panic!("acquire by {i}: the model {:?}", after.clients[i].phase)
                        };
                        let length = after.queue.len();
                        let limit = tokio::time::Instant::now() + PATIENCE;
                        let queue = loop {
                            let queue = self.queue().await;
                            if queue.len() >= length {
                                break queue;
                            }
                            assert!(
                                tokio::time::Instant::now() < limit,
                                "client {i} did not queue"
                            );
                            tokio::time::sleep(Duration::from_millis(2)).await;
                        };
                        self.tokens.insert(token, queue.last().unwrap().clone());
                        *self.seen.entry("queued").or_default() += 1;
                    }
                }
            }
            FairAction::Renew(i) => {
                let i = usize::from(i);
                let Request::Holding(guard) = &self.requests[i] else {
                    panic!("client {i} holds nothing")
                };
                match (guard.extend(LEASE).await, after.clients[i].phase) {
                    (Ok(()), FairPhase::Holding { .. }) => {}
                    (Err(Error::NotHeld { .. }), FairPhase::Idle) => {
                        *self.seen.entry("renewal refused").or_default() += 1;
                        let Request::Holding(guard) =
                            std::mem::replace(&mut self.requests[i], Request::Idle)
                        else {
                            unreachable!()
                        };
                        assert!(!guard.release().await.unwrap());
                    }
                    (got, phase) => panic!("renew by {i}: {got:?}, the model: {phase:?}"),
                }
            }
            FairAction::Release(i) => {
                let i = usize::from(i);
                let Request::Holding(guard) =
                    std::mem::replace(&mut self.requests[i], Request::Idle)
                else {
                    panic!("client {i} holds nothing")
                };
                let held = before.holder().is_some_and(|h| usize::from(h.owner) == i);
                assert_eq!(guard.release().await.unwrap(), held, "release by {i}");
                if let Some(h) = after.holder() {
                    // Passed to the head: its fence is the one the lock key shows.
                    let (token, fence) = self.holder().await.expect("a passed lock");
                    assert_eq!(token, self.tokens[&h.token], "the pass's head");
                    self.fences.insert(h.fence, fence);
                    *self.seen.entry("passed").or_default() += 1;
                } else {
                    *self
                        .seen
                        .entry(if held {
                            "released"
                        } else {
                            "release of a lost lock"
                        })
                        .or_default() += 1;
                }
            }
            FairAction::Lose(_) => {}
            FairAction::Tick => {
                if before.holder().is_some() && after.holder().is_none() {
                    let _: i64 = self.redis.pexpire_at(self.key(), 1).await.unwrap();
                }
            }
            other => panic!("{other:?} is not replayed"),
        }
    }

    /// The lock key's holder once it is there (a waiter's try may still be on its way).
    async fn waited_holder(&mut self) -> (String, u64) {
        let limit = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(holder) = self.holder().await {
                return holder;
            }
            assert!(tokio::time::Instant::now() < limit, "no holder");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    async fn compare(&mut self, s: &FairState, step: &str) {
        let holder = self.holder().await;
        match (&holder, s.holder()) {
            (None, None) => {}
            (Some((token, fence)), Some(h)) => {
                assert_eq!(token, &self.tokens[&h.token], "{step}: the holder");
                assert_eq!(*fence, self.fences[&h.fence], "{step}: the holder's fence");
            }
            (real, model) => panic!("{step}: the server holds {real:?}, the model {model:?}"),
        }
        let counter: Option<u64> = self
            .redis
            .get(format!("{}:fence", self.key()))
            .await
            .unwrap();
        let expected = (s.fence > 0).then(|| self.fences[&s.fence]);
        assert_eq!(counter, expected, "{step}: the fence counter");
        let queue = self.queue().await;
        let expected: Vec<String> = s
            .queue
            .iter()
            .map(|p| self.tokens[&p.token].clone())
            .collect();
        assert_eq!(queue, expected, "{step}: the queue");
        let mut alive: Vec<String> = self
            .redis
            .zrange(format!("{}:alive", self.key()), 0, -1)
            .await
            .unwrap();
        alive.sort();
        let mut queued = queue;
        queued.sort();
        assert_eq!(alive, queued, "{step}: the liveness set");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_walks_of_the_fair_lock_match_the_real_scripts() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
    let redis = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let model = FairModel {
        clients: 3,
        crashes: 0,
        lossy: true,
        steps_back: 0,
        max_time: u8::try_from(STEPS).unwrap(),
        max_grants: u8::try_from(STEPS).unwrap(),
        ..FairModel::small()
    };
    let clients: Vec<Client> = (0..model.clients)
        .map(|_| Client::builder(&server.url()).build().unwrap())
        .collect();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut steps = 0;
    let mut seen: HashMap<&'static str, usize> = HashMap::new();
    for walk in 0..WALKS {
        let mut real = Real {
            clients: clients.clone(),
            redis: redis.clone(),
            name: format!("fair{walk}"),
            requests: (0..model.clients).map(|_| Request::Idle).collect(),
            tokens: HashMap::new(),
            fences: HashMap::new(),
            seen: HashMap::new(),
        };
        let mut state = model.init_states().remove(0);
        let mut trail = Vec::new();
        let mut scripted: Vec<FairAction> = Vec::new();
        for _ in 0..STEPS {
            let action = if let Some(action) = scripted.pop() {
                action
            } else {
                let mut actions = Vec::new();
                model.actions(&state, &mut actions);
                // A pass is taken by the waiter's own try (scripted below), never delivered.
                actions.retain(|a| !matches!(a, FairAction::Deliver(_) | FairAction::Lose(_)));
                let weight = |a: &FairAction| match a {
                    FairAction::Tick => 3,
                    _ => 1,
                };
                let mut pick = rng.below(actions.iter().map(weight).sum());
                *actions
                    .iter()
                    .find(|a| {
                        let w = weight(a);
                        if pick < w {
                            true
                        } else {
                            pick -= w;
                            false
                        }
                    })
                    .expect("an action")
            };
            let mut next = model.next_state(&state, action).expect("an enabled action");
            trail.push(action);
            real.step(&state, &next, action).await;
            if action == FairAction::Tick
                && next.holder().is_none()
                && let Some(head) = next.queue.first().map(|p| p.client)
            {
                // A lease ran out with waiters queued: the head, due, tries at once. (A waiter
                // tries once more after it subscribes, which on a loaded machine can come late:
                // the head's late try is this one, and another waiter's finds the head first.)
                let tried = model
                    .next_state(&next, FairAction::Acquire(head))
                    .expect("an enabled action");
                trail.push(FairAction::Acquire(head));
                real.step(&next, &tried, FairAction::Acquire(head)).await;
                next = tried;
            }
            let step = format!("walk {walk}, {trail:?}");
            real.compare(&next, &step).await;
            if let FairAction::Release(_) = action
                && let Some(h) = next.holder()
                && next.clients[usize::from(h.owner)].inbox.is_some()
            {
                // The waiter takes the passed lock with its own try.
                scripted = vec![FairAction::Acquire(h.owner), FairAction::Lose(h.owner)];
            }
            state = next;
            steps += 1;
        }
        for (outcome, n) in &real.seen {
            *seen.entry(outcome).or_default() += n;
        }
        for request in real.requests {
            match request {
                Request::Holding(guard) => {
                    let _ = guard.release().await;
                }
                Request::Waiting(task) => task.abort(),
                Request::Idle => {}
            }
        }
    }
    eprintln!("{WALKS} walks, {steps} steps replayed: {seen:?}");
    for outcome in [
        "granted",
        "queued",
        "a waiter's try",
        "granted to the head of the queue",
        "passed",
        "a passed lock taken by the waiter's try",
        "released",
        "renewal refused",
    ] {
        assert!(
            seen.get(outcome).is_some_and(|n| *n > 0),
            "no walk saw: {outcome}"
        );
    }
}
