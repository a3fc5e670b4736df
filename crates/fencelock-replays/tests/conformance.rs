//! The model against the real scripts: random walks of [`LockModel`] (the lock taken without
//! waiting, renewals, releases, fenced writes, time passing) replayed on a real `redis-server`
//! through the library, comparing after every step what the server holds (the lock's holder,
//! the fence counter, the resource's accepted fence) with the model's state. Model time maps
//! onto the server's without waiting: a lease that ends in the model is ended on the server
//! with `PEXPIREAT key 1` (the real leases are a minute long).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;

use common::{Answers, Keys, LEASE, Replay, Request, Seen, Walk};
use fencelock::fenced::Writes;
use fencelock::{Client, Error};
use fencelock_model::trace::{Seen as Saw, WriteOutcome};
use fencelock_model::{Action, LockModel, Phase, State};
use redis::AsyncCommands;

const WALKS: usize = 200;
const STEPS: usize = 12;
/// A fence counter far ahead of the server clock in µs (the year 2096), below 2^53 (Lua's
/// numbers are doubles: every fence is below it).
const AHEAD: u64 = 4_000_000_000_000_000;

struct Real {
    client: Client,
    keys: Keys,
    requests: Vec<Request>,
    /// The real fence of each model grant.
    fences: HashMap<u8, u64>,
    seen: Seen,
    /// What the clients were answered, explained by the model at the end.
    answers: Answers,
    walk: usize,
}

impl Real {
    async fn step(&mut self, model: &LockModel, before: &State, after: &State, action: Action) {
        match action {
            Action::Acquire(i) => {
                let i = usize::from(i);
                self.answers.saw(i, Saw::Request);
                let got = self
                    .client
                    .lock(&self.keys.name)
                    .no_wait()
                    .auto_renew(false)
                    .ttl(LEASE)
                    .acquire()
                    .await;
                match (got, after.clients[i].phase) {
                    (Ok(guard), Phase::Holding { grant, .. }) => {
                        if self.fences.contains_key(&u8::MAX) {
                            let last = before
                                .grants
                                .checked_sub(1)
                                .map_or(AHEAD, |g| self.fences[&g]);
                            assert_eq!(
                                guard.fence(),
                                last + 1,
                                "a grant with the counter ahead of the clock"
                            );
                        }
                        self.fences.insert(grant, guard.fence());
                        let fence = guard.fence();
                        self.answers.granted(i, fence);
                        self.seen.count("granted");
                        self.requests[i] = Request::Holding(guard);
                    }
                    (Err(Error::Busy { .. }), Phase::Idle) => {
                        self.answers.saw(i, Saw::NotGranted);
                        self.seen.count("busy");
                    }
                    (got, phase) => panic!(
                        "acquire by {i}: {:?}, the model: {phase:?}",
                        got.map(|g| g.fence())
                    ),
                }
            }
            Action::Renew(i) => {
                let i = usize::from(i);
                let got = self.requests[i].guard(i).extend(LEASE).await;
                match (got, after.clients[i].phase) {
                    (Ok(()), Phase::Holding { .. }) => {}
                    (Err(Error::NotHeld { .. }), Phase::Idle) => {
                        self.seen.count("renewal refused");
                        let request = &mut self.requests[i];
                        self.answers.refused(i, request).await;
                    }
                    (got, phase) => panic!("renew by {i}: {got:?}, the model: {phase:?}"),
                }
            }
            Action::Release(i) => {
                let i = usize::from(i);
                let held = before
                    .server
                    .holder(before.now)
                    .is_some_and(|h| h.owner == u8::try_from(i).unwrap());
                let request = &mut self.requests[i];
                self.answers.give_back(i, request, held).await;
                self.seen.count(if held {
                    "released"
                } else {
                    "release of a lost lock"
                });
            }
            Action::Decide(_) => {}
            Action::Write(i) => {
                let i = usize::from(i);
                let Phase::Holding { grant, .. } = before.clients[i].phase else {
                    panic!("not holding")
                };
                let fence = self.fences[&grant];
                let store = self.client.fenced_store(&self.keys.name).unwrap();
                let data = format!("data:{{{}}}", self.keys.name);
                let writes = Writes::new().set(&data, i.to_string());
                let accepts = model.resource_accepts(before.resource, before.clients_fence(i));
                match store.apply(fence, &writes).await {
                    Ok(accepted) => {
                        assert_eq!(accepted, fence);
                        assert!(accepts, "write by {i} accepted, the model refuses it");
                        self.answers.wrote(i, fence, WriteOutcome::Accepted);
                        self.seen.count("write accepted");
                    }
                    Err(Error::Fenced { accepted, .. }) => {
                        assert!(!accepts, "write by {i} refused, the model accepts it");
                        let store = accepted;
                        self.answers
                            .wrote(i, fence, WriteOutcome::Refused { store });
                        self.seen.count("stale write refused");
                    }
                    Err(e) => panic!("write by {i}: {e}"),
                }
            }
            Action::Tick => {
                if before.server.holder(before.now).is_some()
                    && after.server.holder(after.now).is_none()
                {
                    self.keys.expire("").await;
                }
            }
            other => panic!("{other:?} is not replayed"),
        }
    }

    async fn compare(&mut self, s: &State, step: &str) {
        let value: Option<String> = self.keys.redis.get(self.keys.key("")).await.unwrap();
        let holder = s.server.holder(s.now);
        match (&value, holder) {
            (None, None) => {}
            (Some(value), Some(h)) => {
                let fence = value.trim_end_matches('+').rsplit(':').next().unwrap();
                assert_eq!(
                    fence,
                    self.fences[&h.grant].to_string(),
                    "{step}: the holder's fence"
                );
            }
            _ => panic!("{step}: the server holds {value:?}, the model {holder:?}"),
        }
        let counter = self.keys.counter().await;
        let latest = s
            .grants
            .checked_sub(1)
            .map_or(self.fences.get(&u8::MAX).copied(), |g| {
                Some(self.fences[&g])
            });
        assert_eq!(counter, latest, "{step}: the fence counter");
        let store = self.client.fenced_store(&self.keys.name).unwrap();
        let accepted = store.accepted().await.unwrap();
        assert_eq!(
            accepted,
            s.accepted_grant.map_or(0, |g| self.fences[&g]),
            "{step}: the resource"
        );
    }
}

trait FenceOf {
    fn clients_fence(&self, i: usize) -> u32;
}

impl FenceOf for State {
    fn clients_fence(&self, i: usize) -> u32 {
        match self.clients[i].phase {
            Phase::Holding { fence, .. } => fence,
            _ => 0,
        }
    }
}

impl Replay<LockModel> for Real {
    /// The first walk is the paused holder's: its lease runs out before it writes, and the next
    /// holder wrote first.
    fn script(&self, number: usize) -> Vec<Action> {
        if number > 0 {
            return Vec::new();
        }
        vec![
            Action::Acquire(0),
            Action::Decide(0),
            Action::Tick,
            Action::Tick,
            Action::Tick,
            Action::Acquire(1),
            Action::Decide(1),
            Action::Write(1),
            Action::Write(0),
        ]
    }

    async fn advance(&mut self, walk: &mut Walk<'_, LockModel>, state: State) -> State {
        // Weighted, so that leases run out within a walk and paused holders write late: time
        // passing, decisions and writes three times as likely as the rest. The real server has
        // no replica (and the model no failover here).
        let action = walk.draw(&state, |a| match a {
            Action::Replicate => 0,
            Action::Tick | Action::Decide(_) | Action::Write(_) => 3,
            _ => 1,
        });
        let next = walk.take(&state, action);
        self.step(walk.model, &state, &next, action).await;
        self.answers.deadlines(&next, &self.requests);
        self.compare(&next, &walk.step()).await;
        next
    }

    async fn end(self) -> Seen {
        self.answers.explained(&format!("walk {}", self.walk));
        common::end(self.requests, self.seen).await
    }
}

#[tokio::test(flavor = "current_thread")]
async fn random_walks_of_the_model_match_the_real_scripts() {
    let (server, redis) = common::server().await;
    let client = common::client(&server);
    let model = LockModel {
        failovers: 0,
        steps_back: 0,
        max_time: u8::try_from(STEPS).unwrap(),
        max_grants: u8::try_from(STEPS).unwrap(),
        ..LockModel::fences()
    };
    let start = async |walk| {
        let mut real = Real {
            client: client.clone(),
            keys: Keys::new(&redis, format!("walk{walk}")),
            requests: (0..model.clients).map(|_| Request::Idle).collect(),
            fences: HashMap::new(),
            seen: Seen::default(),
            answers: Answers::default(),
            walk,
        };
        // Every other walk starts with the fence counter far ahead of the server's clock (as
        // after a clock step back), so that grants take `last + 1`: the model's fence is the
        // same `max(last + 1, clock)` either way, and the comparisons are of the real fences.
        if walk % 2 == 1 {
            let key = real.keys.key(":fence");
            let _: () = real.keys.redis.set(key, AHEAD).await.unwrap();
            real.fences.insert(u8::MAX, AHEAD);
        }
        real
    };
    let seen = common::walks(&model, WALKS, STEPS, 0x9e37_79b9_7f4a_7c15, start).await;
    seen.assert_saw(&[
        "granted",
        "busy",
        "renewal refused",
        "stale write refused",
        "released",
        "release of a lost lock",
    ]);
}
