//! The semaphore's model against its real scripts: random walks of [`SemModel`] (requests for
//! 2, 2 and 1 of 3 permits that are granted or wait, renewals, releases, leases that end)
//! replayed on a real `redis-server` through the library, comparing after every step the
//! permits held (token, permits, fence), the waiting requests in their order, and the fence
//! counter with the model's state.
//!
//! Each model client is a `Client` of its own with one request at a time; a waiting request is
//! a task. Leases and places last a minute (no timer of the library fires within a walk); a
//! lease that ends in the model is ended by writing an expiry in the past into its fields. What
//! frees permits (a release, a lease that ends) wakes every waiter (`all` on the lock's
//! channel, as `release.lua` publishes it while requests wait), and the model then lets every
//! waiter try once, in arrival order: whom that grants does not depend on the order.
//!
//! What the clients were answered (requests, grants with their fences and permits, renewals
//! refused, releases) is recorded as a trace and explained by the model at each walk's end
//! (`fencelock_model::trace`), a holder counted as told once its deadline passes in the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Answers, Keys, LEASE, Replay, Request, Seen, Start, Walk};
use fencelock::{Client, Error};
use fencelock_model::semaphore::{SemAction, SemModel, SemPhase, SemState};
use fencelock_model::trace::Seen as Saw;
use redis::AsyncCommands;
use stateright::Model;

const WALKS: usize = 100;
const STEPS: usize = 14;

/// What the semaphore's hash holds: the permits held (token -> (permits, fence), leases not
/// ended) and the waiting requests ((arrival, token, permits), sorted).
type Hash = (HashMap<String, (u8, u64)>, Vec<(u64, String, u8)>);

struct Real {
    model: SemModel,
    clients: Vec<Client>,
    keys: Keys,
    requests: Vec<Request>,
    tokens: HashMap<u8, String>,
    fences: HashMap<u32, u64>,
    /// Where the fence counter started.
    start: Start,
    seen: Seen,
    /// What the clients were answered, explained by the model at the end.
    answers: Answers,
    walk: usize,
}

impl Real {
    async fn hash(&mut self) -> Hash {
        let all: HashMap<String, String> =
            self.keys.redis.hgetall(self.keys.key("")).await.unwrap();
        let mut held: HashMap<String, (u8, u64)> = HashMap::new();
        let mut waiting = Vec::new();
        for (field, value) in &all {
            if field == "kind" || field == "permits" {
                continue;
            }
            let mut parts = value.split(':');
            let expiry: u64 = parts.next().unwrap().parse().unwrap();
            if let Some(permit) = field.strip_prefix("p:") {
                if expiry <= 1 {
                    continue;
                }
                let token = permit.split('/').next().unwrap().to_owned();
                let fence: u64 = parts.next().unwrap().parse().unwrap();
                held.entry(token).or_insert((0, fence)).0 += 1;
            } else if let Some(token) = field.strip_prefix("w:") {
                let k: u8 = parts.next().unwrap().parse().unwrap();
                let arrival: u64 = parts.next().unwrap().parse().unwrap();
                waiting.push((arrival, token.to_owned(), k));
            }
        }
        waiting.sort();
        (held, waiting)
    }

    /// Waits for client `i`'s request to be granted, and learns its token and fence.
    async fn granted(&mut self, i: usize, token: u8, fence: u32) {
        let real_fence = self.requests[i].granted(i).await;
        let (held, _) = self.hash().await;
        let (real, _) = held
            .iter()
            .find(|(_, (_, f))| *f == real_fence)
            .expect("the grant's permits");
        self.tokens.insert(token, real.clone());
        // Above the counter it started from; among the grants of one wake-up the order is the
        // server's, not the model's tries': above those learned before it only in number.
        self.start.check(real_fence, [], "a grant");
        assert!(
            !self.fences.values().any(|&f| f == real_fence),
            "fence {real_fence} granted twice"
        );
        self.fences.insert(fence, real_fence);
        self.seen.count("granted");
        let permits = u32::from(self.model.takes[i]);
        self.answers.saw(
            i,
            Saw::Granted {
                fence: real_fence,
                permits,
            },
        );
    }

    /// A new request by client `i`.
    async fn request(&mut self, i: usize, after: &SemState) {
        let request = self.clients[i]
            .semaphore(&self.keys.name, u32::from(self.model.permits))
            .take(u32::from(self.model.takes[i]))
            .ttl(LEASE)
            .queue_timeout(LEASE)
            .auto_renew(false)
            .wait_up_to(Duration::from_secs(120));
        self.answers.saw(i, Saw::Request);
        self.requests[i] = Request::waiting(request.acquire());
        match after.clients[i] {
            SemPhase::Holding { token, fence, .. } => self.granted(i, token, fence).await,
            SemPhase::Waiting { token, .. } => {
                let real = common::until(format!("client {i} did not wait"), async || {
                    let (_, waiting) = self.hash().await;
                    let known: Vec<&String> = self.tokens.values().collect();
                    let (_, real, _) = waiting.into_iter().find(|w| !known.contains(&&w.1))?;
                    Some(real)
                })
                .await;
                self.tokens.insert(token, real);
                // The next request arrives in a later millisecond (the script orders requests
                // of one millisecond by token; the model by arrival).
                tokio::time::sleep(Duration::from_millis(2)).await;
                self.seen.count("waits");
            }
            phase => panic!("acquire by {i}: the model {phase:?}"),
        }
    }

    /// Every waiter tries once (woken by `all`): the model's tries in arrival order, and the
    /// real grants awaited.
    async fn retry_all(&mut self, state: SemState, walk: &mut Walk<'_, SemModel>) -> SemState {
        let mut state = state;
        let waiters: Vec<u8> = state.places.iter().map(|p| p.client).collect();
        if waiters.is_empty() {
            return state;
        }
        let channel = self.keys.key(":released");
        let _: i64 = self.keys.redis.publish(channel, "all").await.unwrap();
        for w in waiters {
            let next = self
                .model
                .next_state(&state, SemAction::Acquire(w))
                .unwrap();
            walk.push(SemAction::Acquire(w));
            if let SemPhase::Holding { token, fence, .. } = next.clients[usize::from(w)] {
                self.granted(usize::from(w), token, fence).await;
                self.seen.count("a waiter granted");
            } else {
                self.seen.count("a waiter's try");
            }
            state = next;
        }
        state
    }

    /// One step; answers whether it freed permits (every waiter then tries).
    async fn step(&mut self, before: &SemState, after: &SemState, action: SemAction) -> bool {
        match action {
            SemAction::Acquire(i) => {
                self.request(usize::from(i), after).await;
                false
            }
            SemAction::Renew(i) => {
                let i = usize::from(i);
                let got = self.requests[i].guard(i).extend(LEASE).await;
                match (got, after.clients[i]) {
                    (Ok(()), SemPhase::Holding { .. }) => false,
                    (Err(Error::NotHeld { .. }), SemPhase::Idle) => {
                        self.seen.count("renewal refused");
                        let request = &mut self.requests[i];
                        self.answers.refused(i, request).await;
                        false
                    }
                    (got, phase) => panic!("renew by {i}: {got:?}, the model: {phase:?}"),
                }
            }
            SemAction::Release(i) => {
                let i = usize::from(i);
                let SemPhase::Holding { token, .. } = before.clients[i] else {
                    panic!("the model: client {i} holds nothing")
                };
                let held = before
                    .holds
                    .iter()
                    .any(|h| h.token == token && h.expires > before.now);
                self.answers.give_back(i, &mut self.requests[i], held).await;
                self.seen.count(if held {
                    "released"
                } else {
                    "release of a lost hold"
                });
                true
            }
            SemAction::Tick => {
                let ended: Vec<_> = before
                    .holds
                    .iter()
                    .filter(|h| h.expires > before.now && h.expires <= after.now)
                    .copied()
                    .collect();
                for h in &ended {
                    let real = self.tokens[&h.token].clone();
                    let value = format!("1:{}", self.fences[&h.fence]);
                    for f in 1..=h.k {
                        let field = if f == 1 {
                            format!("p:{real}")
                        } else {
                            format!("p:{real}/{f}")
                        };
                        let key = self.keys.key("");
                        let _: i64 = self.keys.redis.hset(key, field, &value).await.unwrap();
                    }
                    self.seen.count("a lease ended");
                }
                !ended.is_empty()
            }
            other => panic!("{other:?} is not replayed"),
        }
    }

    async fn compare(&mut self, s: &SemState, step: &str) {
        let (held, waiting) = self.hash().await;
        let expected: HashMap<String, (u8, u64)> = s
            .holds
            .iter()
            .filter(|h| h.expires > s.now)
            .map(|h| (self.tokens[&h.token].clone(), (h.k, self.fences[&h.fence])))
            .collect();
        assert_eq!(held, expected, "{step}: the permits held");
        let order: Vec<(String, u8)> = waiting.into_iter().map(|(_, t, k)| (t, k)).collect();
        let expected: Vec<(String, u8)> = s
            .places
            .iter()
            .map(|p| (self.tokens[&p.token].clone(), p.k))
            .collect();
        assert_eq!(order, expected, "{step}: the waiting requests");
        // The largest fence granted (the grants of one wake-up may run in another order than
        // the model's tries: the same grants, their fences in another order).
        let counter = self.keys.counter().await;
        assert_eq!(
            s.fence > 0 || self.start.counter().is_some(),
            counter.is_some(),
            "{step}: the fence counter"
        );
        assert_eq!(
            counter,
            self.fences
                .values()
                .copied()
                .chain(self.start.counter())
                .max(),
            "{step}: the fence counter"
        );
    }
}

impl Replay<SemModel> for Real {
    async fn advance(&mut self, walk: &mut Walk<'_, SemModel>, state: SemState) -> SemState {
        // Time passing three times as likely as the rest, so that leases end within a walk.
        let action = walk.draw(&state, |a| if *a == SemAction::Tick { 3 } else { 1 });
        let retry = matches!(action, SemAction::Acquire(i)
            if matches!(state.clients[usize::from(i)], SemPhase::Waiting { .. }));
        let mut state = state;
        if retry {
            // A waiter's try: every waiter tries (nothing was freed since the last time they
            // all did, unless time passed: then they are due).
            state = self.retry_all(state, walk).await;
        } else {
            let next = walk.take(&state, action);
            let freed = self.step(&state, &next, action).await;
            state = next;
            if freed {
                state = self.retry_all(state, walk).await;
            }
        }
        self.compare(&state, &walk.step()).await;
        // A holder whose deadline has passed in the model knows it.
        for (i, (c, request)) in state.clients.iter().zip(&self.requests).enumerate() {
            if let (SemPhase::Holding { deadline, .. }, Request::Holding(guard)) = (c, request)
                && *deadline <= state.now
            {
                self.answers.told(i, guard.fence());
            }
        }
        state
    }

    async fn end(self) -> Seen {
        self.answers.explained(&format!("walk {}", self.walk));
        common::end(self.requests, self.seen).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_walks_of_the_semaphore_match_the_real_scripts() {
    let (server, redis) = common::server().await;
    let model = SemModel {
        crashes: 0,
        max_time: u8::try_from(STEPS).unwrap(),
        max_grants: u8::try_from(STEPS).unwrap(),
        ..SemModel::small()
    };
    let clients = common::clients(&server, model.takes.len());
    let start = async |walk| {
        let mut real = Real {
            model: model.clone(),
            clients: clients.clone(),
            keys: Keys::new(&redis, format!("sem{walk}")),
            requests: (0..model.takes.len()).map(|_| Request::Idle).collect(),
            tokens: HashMap::new(),
            fences: HashMap::new(),
            start: Start::of(walk),
            seen: Seen::default(),
            answers: Answers::of(u32::from(model.permits)),
            walk,
        };
        real.start.set(&mut real.keys).await;
        real
    };
    let seen = common::walks(&model, WALKS, STEPS, 0x853c_49e6_748f_ea9b, start).await;
    seen.assert_saw(&[
        "granted",
        "waits",
        "a waiter granted",
        "a waiter's try",
        "released",
        "a lease ended",
        "renewal refused",
    ]);
}
