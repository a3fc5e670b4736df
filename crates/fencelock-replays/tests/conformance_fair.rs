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
//!
//! What the clients were answered (requests, grants and their fences, renewals refused,
//! releases) is recorded as a trace and explained by the model at each walk's end
//! (`fencelock_model::trace`), a holder counted as told once its deadline passes in the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Answers, Keys, LEASE, Replay, Request, Seen, Start, Walk};
use fencelock::{Client, Error};
use fencelock_model::fair::{FairAction, FairModel, FairPhase, FairState};
use fencelock_model::trace::Seen as Saw;
use redis::AsyncCommands;
use stateright::Model;

const WALKS: usize = 100;
const STEPS: usize = 14;

struct Real {
    clients: Vec<Client>,
    keys: Keys,
    requests: Vec<Request>,
    /// The real owner token of each model token.
    tokens: HashMap<u8, String>,
    /// The real fence of each model fence.
    fences: HashMap<u32, u64>,
    /// Where the fence counter started.
    start: Start,
    seen: Seen,
    /// What the clients were answered, explained by the model at the end.
    answers: Answers,
    walk: usize,
}

impl Real {
    /// Learns the real fence of model fence `model`: above every earlier one (`Start::check`).
    fn learn(&mut self, model: u32, real: u64, what: &str) {
        if let Some(&known) = self.fences.get(&model) {
            assert_eq!(known, real, "{what}: model fence {model}");
            return;
        }
        self.start.check(real, self.fences.values().copied(), what);
        self.fences.insert(model, real);
    }

    /// The lock key's `(token, fence)`.
    async fn holder(&mut self) -> Option<(String, u64)> {
        let value: Option<String> = self.keys.redis.get(self.keys.key("")).await.unwrap();
        let value = value?;
        let (token, fence) = value.rsplit_once(':').unwrap();
        Some((token.to_owned(), fence.parse().unwrap()))
    }

    /// Waits for client `i`'s waiting request to be granted.
    async fn granted(&mut self, i: usize, fence: u32) {
        let real = self.requests[i].granted(i).await;
        assert_eq!(real, self.fences[&fence], "client {i}'s fence");
        self.answers.granted(i, real);
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
                        .fair_lock(&self.keys.name)
                        .ttl(LEASE)
                        .queue_timeout(LEASE)
                        .auto_renew(false)
                        .wait_up_to(Duration::from_secs(120));
                    self.answers.saw(i, Saw::Request);
                    self.requests[i] = Request::waiting(request.acquire());
                }
                match granted {
                    Some((token, fence)) => {
                        if retry {
                            // The wake a release sends to the head, which tries again: on its
                            // own channel, or on the lock's while nobody listens there yet
                            // (`publish_to`).
                            let real = self.tokens[&token].clone();
                            let channel = self.keys.key(":released");
                            let reached: i64 = self
                                .keys
                                .redis
                                .publish(format!("{channel}:{real}"), format!("to:{real}"))
                                .await
                                .unwrap();
                            if reached == 0 {
                                let _: i64 = self
                                    .keys
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
                            self.learn(fence, real_fence, "a grant");
                        }
                        self.granted(i, fence).await;
                        self.seen.count(match (retry, passed) {
                            (false, _) => "granted",
                            (true, false) => "granted to the head of the queue",
                            (true, true) => "a passed lock taken by the waiter's try",
                        });
                    }
                    None if retry => self.seen.count("a waiter's try"),
                    None => {
                        let FairPhase::Waiting { token, .. } = after.clients[i].phase else {
                            panic!("acquire by {i}: the model {:?}", after.clients[i].phase)
                        };
                        let length = after.queue.len();
                        let queue =
                            common::until(format!("client {i} did not queue"), async || {
                                let queue = self.keys.zrange(":queue").await;
                                (queue.len() >= length).then_some(queue)
                            })
                            .await;
                        self.tokens.insert(token, queue.last().unwrap().clone());
                        self.seen.count("queued");
                    }
                }
            }
            FairAction::Renew(i) => {
                let i = usize::from(i);
                let got = self.requests[i].guard(i).extend(LEASE).await;
                match (got, after.clients[i].phase) {
                    (Ok(()), FairPhase::Holding { .. }) => {}
                    (Err(Error::NotHeld { .. }), FairPhase::Idle) => {
                        self.seen.count("renewal refused");
                        let request = &mut self.requests[i];
                        self.answers.refused(i, request).await;
                    }
                    (got, phase) => panic!("renew by {i}: {got:?}, the model: {phase:?}"),
                }
            }
            FairAction::Release(i) => {
                let i = usize::from(i);
                let held = before.holder().is_some_and(|h| usize::from(h.owner) == i);
                self.answers.give_back(i, &mut self.requests[i], held).await;
                if let Some(h) = after.holder() {
                    // Passed to the head: its fence is the one the lock key shows.
                    let (token, fence) = self.holder().await.expect("a passed lock");
                    assert_eq!(token, self.tokens[&h.token], "the pass's head");
                    self.learn(h.fence, fence, "a pass");
                    self.seen.count("passed");
                } else {
                    self.seen.count(if held {
                        "released"
                    } else {
                        "release of a lost lock"
                    });
                }
            }
            FairAction::Lose(_) => {}
            FairAction::Tick => {
                if before.holder().is_some() && after.holder().is_none() {
                    self.keys.expire("").await;
                }
            }
            other => panic!("{other:?} is not replayed"),
        }
    }

    /// The lock key's holder once it is there (a waiter's try may still be on its way).
    async fn waited_holder(&mut self) -> (String, u64) {
        common::until("no holder", async || self.holder().await).await
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
        let counter = self.keys.counter().await;
        let expected = if s.fence > 0 {
            Some(self.fences[&s.fence])
        } else {
            self.start.counter()
        };
        assert_eq!(counter, expected, "{step}: the fence counter");
        let queue = self.keys.zrange(":queue").await;
        let expected: Vec<String> = s
            .queue
            .iter()
            .map(|p| self.tokens[&p.token].clone())
            .collect();
        assert_eq!(queue, expected, "{step}: the queue");
        let mut alive = self.keys.zrange(":alive").await;
        alive.sort();
        let mut queued = queue;
        queued.sort();
        assert_eq!(alive, queued, "{step}: the liveness set");
    }
}

impl Replay<FairModel> for Real {
    async fn advance(&mut self, walk: &mut Walk<'_, FairModel>, state: FairState) -> FairState {
        // A pass is taken by the waiter's own try (scripted below), never delivered.
        let action = walk.draw(&state, |a| match a {
            FairAction::Deliver(_) | FairAction::Lose(_) => 0,
            FairAction::Tick => 3,
            _ => 1,
        });
        let model = walk.model;
        let mut next = walk.take(&state, action);
        self.step(&state, &next, action).await;
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
            walk.push(FairAction::Acquire(head));
            self.step(&next, &tried, FairAction::Acquire(head)).await;
            next = tried;
        }
        self.compare(&next, &walk.step()).await;
        // A holder whose deadline has passed in the model knows it.
        for (i, (c, request)) in next.clients.iter().zip(&self.requests).enumerate() {
            if let (FairPhase::Holding { deadline, .. }, Request::Holding(guard)) =
                (c.phase, request)
                && deadline <= next.now
            {
                self.answers.told(i, guard.fence());
            }
        }
        if let FairAction::Release(_) = action
            && let Some(h) = next.holder()
            && next.clients[usize::from(h.owner)].inbox.is_some()
        {
            // The pass's message is lost, and the waiter takes the passed lock with its own try.
            walk.script([FairAction::Lose(h.owner), FairAction::Acquire(h.owner)]);
        }
        next
    }

    async fn end(self) -> Seen {
        self.answers.explained(&format!("walk {}", self.walk));
        common::end(self.requests, self.seen).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_walks_of_the_fair_lock_match_the_real_scripts() {
    let (server, redis) = common::server().await;
    let model = FairModel {
        clients: 3,
        crashes: 0,
        lossy: true,
        steps_back: 0,
        max_time: u8::try_from(STEPS).unwrap(),
        max_grants: u8::try_from(STEPS).unwrap(),
        ..FairModel::small()
    };
    let clients = common::clients(&server, model.clients);
    let start = async |walk| {
        let mut real = Real {
            clients: clients.clone(),
            keys: Keys::new(&redis, format!("fair{walk}")),
            requests: (0..model.clients).map(|_| Request::Idle).collect(),
            tokens: HashMap::new(),
            fences: HashMap::new(),
            start: Start::of(walk),
            seen: Seen::default(),
            answers: Answers::default(),
            walk,
        };
        real.start.set(&mut real.keys).await;
        real
    };
    let seen = common::walks(&model, WALKS, STEPS, 0x2545_f491_4f6c_dd1d, start).await;
    seen.assert_saw(&[
        "granted",
        "queued",
        "a waiter's try",
        "granted to the head of the queue",
        "passed",
        "a passed lock taken by the waiter's try",
        "released",
        "renewal refused",
    ]);
}
