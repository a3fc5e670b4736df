//! The reentrant lock's model against its real scripts: random walks of [`ReModel`] (two
//! owners that acquire without waiting, again while they hold, up to the re-entry limit; renew
//! and release their holds one at a time, also after their lease ended; crash) replayed on a
//! real `redis-server` through the library, comparing after every step the lock's hash (its
//! owner, its fence and its number of holds) and the fence counter with the model's state, and
//! each answer (a grant and its fence, busy, the re-entry limit, a renewal refused, what a
//! release found) with the model's.
//!
//! Each model client is a `ReentrantLock` handle on a `Client` of its own. Leases last a minute
//! (no timer of the library fires within a walk); a lease that ends in the model is ended with
//! `PEXPIREAT key 1`. A crash forgets the client's guards (nothing is released). A walk's fence
//! counter starts absent, ahead of the server's clock or behind it (`Start`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;

use common::{Keys, LEASE, Replay, Seen, Start, Walk};
use fencelock::{Client, Conflict, Error, LockGuard, ReentrantLock};
use fencelock_model::reentrant::{ReAction, ReModel, ReState};
use redis::AsyncCommands;

const WALKS: usize = 90;
const STEPS: usize = 14;

struct Real {
    handles: Vec<ReentrantLock>,
    keys: Keys,
    /// Each client's guards, in the order of the model's holds.
    guards: Vec<Vec<LockGuard>>,
    /// The real fence of each model fence.
    fences: HashMap<u32, u64>,
    /// The real owner token of each client, as the hash names it.
    owners: HashMap<u8, String>,
    start: Start,
    seen: Seen,
}

impl Real {
    /// Replays `action`, from `before` to `after`; `step` names it in a failure.
    async fn step(&mut self, before: &ReState, after: &ReState, action: ReAction, step: &str) {
        match action {
            ReAction::Acquire(i) => self.acquire(before, after, i, step).await,
            ReAction::Renew(i, h) => {
                let (c, h) = (usize::from(i), usize::from(h));
                let kept = after.clients[c].holds.len() == before.clients[c].holds.len();
                let renewed = self.guards[c][h].extend(LEASE).await;
                match renewed {
                    Ok(()) => {
                        assert!(kept, "{step}: a renewal the model refuses");
                        self.seen.count("renewed");
                    }
                    Err(Error::NotHeld { .. }) => {
                        assert!(!kept, "{step}: a renewal the model allows was refused");
                        self.seen.count("a renewal refused");
                        let guard = self.guards[c].remove(h);
                        let released = guard.release().await.unwrap();
                        assert!(!released, "{step}: a refused hold was released");
                    }
                    Err(e) => panic!("{step}: renewal: {e}"),
                }
            }
            ReAction::Release(i, h) => {
                let (c, h) = (usize::from(i), usize::from(h));
                let token = before.clients[c].holds[h].token;
                let there = before
                    .key
                    .as_ref()
                    .is_some_and(|k| k.holds.contains(&token));
                let guard = self.guards[c].remove(h);
                let released = guard
                    .release()
                    .await
                    .unwrap_or_else(|e| panic!("{step}: release: {e}"));
                assert_eq!(released, there, "{step}: what the release found");
                self.seen.count(match (there, after.key.is_none()) {
                    (false, _) => "a release found its hold gone",
                    (true, true) => "the last hold released",
                    (true, false) => "a hold released",
                });
            }
            ReAction::Crash(i) => {
                for guard in std::mem::take(&mut self.guards[usize::from(i)]) {
                    std::mem::forget(guard);
                }
                self.seen.count("crashed");
            }
            ReAction::Tick => {
                if before.key.is_some() && after.key.is_none() {
                    self.keys.expire("").await;
                    self.seen.count("a lease ran out");
                }
            }
        }
    }

    /// Client `i` acquires: granted (a new grant or a re-entry, with its fence), busy, or
    /// refused by the re-entry limit, as the model says.
    async fn acquire(&mut self, before: &ReState, after: &ReState, i: u8, step: &str) {
        let c = usize::from(i);
        let answer = self.handles[c]
            .request()
            .ttl(LEASE)
            .auto_renew(false)
            .try_acquire()
            .await;
        let granted = after.clients[c].holds.len() > before.clients[c].holds.len();
        match answer {
            Ok(Some(guard)) => {
                assert!(granted, "{step}: a grant the model refuses");
                let fence = after.clients[c].holds.last().unwrap().fence;
                let real = guard.fence();
                if before.key.is_none() {
                    self.start
                        .check(real, self.fences.values().copied(), "a grant");
                    self.fences.insert(fence, real);
                    self.seen.count("granted");
                } else {
                    assert_eq!(
                        Some(&real),
                        self.fences.get(&fence),
                        "{step}: a re-entry's fence"
                    );
                    self.seen.count("entered again");
                }
                self.guards[c].push(guard);
            }
            Ok(None) => {
                assert!(!granted, "{step}: busy where the model grants");
                let owner = before.key.as_ref().map(|k| k.owner);
                assert!(
                    owner.is_some_and(|o| o != i),
                    "{step}: busy, owner {owner:?}"
                );
                self.seen.count("busy");
            }
            Err(Error::Conflict {
                conflict: Conflict::ReentryLimit { .. },
                ..
            }) => {
                assert!(
                    !granted,
                    "{step}: the re-entry limit where the model grants"
                );
                assert!(after.depth_refused, "{step}: the limit, not in the model");
                self.seen.count("the re-entry limit");
            }
            Err(e) => panic!("{step}: acquire: {e}"),
        }
    }

    /// The lock's hash and the fence counter against the model's.
    async fn compare(&mut self, s: &ReState, step: &str) {
        let all: HashMap<String, String> =
            self.keys.redis.hgetall(self.keys.key("")).await.unwrap();
        let Some(key) = &s.key else {
            assert!(
                all.is_empty(),
                "{step}: the lock is held on the server: {all:?}"
            );
            return;
        };
        let owner = all
            .get("owner")
            .unwrap_or_else(|| panic!("{step}: no owner: {all:?}"));
        let known = self
            .owners
            .entry(key.owner)
            .or_insert_with(|| owner.clone());
        assert_eq!(known, owner, "{step}: the owner");
        let fence: u64 = all["fence"].parse().unwrap();
        assert_eq!(
            Some(&fence),
            self.fences.get(&key.fence),
            "{step}: the fence"
        );
        let holds = all.keys().filter(|f| f.starts_with("h:")).count();
        assert_eq!(holds, key.holds.len(), "{step}: the holds: {all:?}");
        assert_eq!(all.get("kind").map(String::as_str), Some("reentrant"));
        if s.counter > 0 {
            let counter = self.keys.counter().await;
            assert_eq!(
                counter.as_ref(),
                self.fences.get(&s.counter),
                "{step}: the counter"
            );
        }
    }
}

impl Replay<ReModel> for Real {
    async fn advance(&mut self, walk: &mut Walk<'_, ReModel>, state: ReState) -> ReState {
        let action = walk.draw(&state, |a| match a {
            ReAction::Tick => 3,
            ReAction::Acquire(_) => 3,
            ReAction::Crash(_) => 1,
            _ => 2,
        });
        let next = walk.take(&state, action);
        let step = walk.step();
        self.step(&state, &next, action, &step).await;
        self.compare(&next, &step).await;
        next
    }

    async fn end(self) -> Seen {
        for guard in self.guards.into_iter().flatten() {
            let _ = guard.release().await;
        }
        self.seen
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_walks_of_the_reentrant_lock_match_the_real_scripts() {
    let (server, redis) = common::server().await;
    let model = ReModel {
        max_time: u8::try_from(STEPS).unwrap(),
        max_requests: u8::try_from(STEPS).unwrap(),
        ..ReModel::small()
    };
    let clients: Vec<Client> = common::clients(&server, model.clients);
    let limit = u32::from(model.limit);
    let start = async |walk| {
        let name = format!("reentrant{walk}");
        let mut real = Real {
            handles: clients
                .iter()
                .map(|c| c.reentrant_lock(&name).max_reentry(limit))
                .collect(),
            keys: Keys::new(&redis, name),
            guards: (0..model.clients).map(|_| Vec::new()).collect(),
            fences: HashMap::new(),
            owners: HashMap::new(),
            start: Start::of(walk),
            seen: Seen::default(),
        };
        real.start.set(&mut real.keys).await;
        real
    };
    let seen = common::walks(&model, WALKS, STEPS, 0x5eed_0f4e_e47a_9c31, start).await;
    seen.assert_saw(&[
        "granted",
        "entered again",
        "busy",
        "the re-entry limit",
        "renewed",
        "a renewal refused",
        "a hold released",
        "the last hold released",
        "a release found its hold gone",
        "crashed",
        "a lease ran out",
    ]);
}
