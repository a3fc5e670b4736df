//! The model against the real scripts: random walks of [`LockModel`] (the lock taken without
//! waiting, renewals, releases, fenced writes, time passing) replayed on a real `redis-server`
//! through the library, comparing after every step what the server holds (the lock's holder,
//! the fence counter, the resource's accepted fence) with the model's state. Model time maps
//! onto the server's without waiting: a lease that ends in the model is ended on the server
//! with `PEXPIREAT key 1` (the real leases are a minute long).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::time::Duration;

use fencelock::fenced::Writes;
use fencelock::{Client, Error, LockGuard};
use fencelock_model::{Action, LockModel, Phase, State};
use fencelock_testkit::RedisServer;
use redis::AsyncCommands;
use stateright::Model;

const WALKS: usize = 200;
const STEPS: usize = 12;
const LEASE: Duration = Duration::from_secs(60);
/// A fence counter far ahead of the server clock in µs (the year 2096), below 2^53 (Lua's
/// numbers are doubles: every fence is below it).
const AHEAD: u64 = 4_000_000_000_000_000;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % u64::try_from(n).unwrap()).unwrap()
    }
}

struct Real {
    model: LockModel,
    client: Client,
    redis: redis::aio::MultiplexedConnection,
    name: String,
    guards: Vec<Option<LockGuard>>,
    /// The real fence of each model grant.
    fences: HashMap<u8, u64>,
    /// How often each outcome came up.
    seen: HashMap<&'static str, usize>,
}

impl Real {
    fn key(&self) -> String {
        format!("fencelock:{{{}}}", self.name)
    }

    async fn step(&mut self, before: &State, after: &State, action: Action) {
        match action {
            Action::Acquire(i) => {
                let i = usize::from(i);
                let got = self
                    .client
                    .lock(&self.name)
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
                        *self.seen.entry("granted").or_default() += 1;
                        self.guards[i] = Some(guard);
                    }
                    (Err(Error::Busy { .. }), Phase::Idle) => {
                        *self.seen.entry("busy").or_default() += 1
                    }
                    (got, phase) => panic!(
                        "acquire by {i}: {:?}, the model: {phase:?}",
                        got.map(|g| g.fence())
                    ),
                }
            }
            Action::Renew(i) => {
                let i = usize::from(i);
                let guard = self.guards[i].as_ref().expect("a guard");
                let got = guard.extend(LEASE).await;
                match (got, after.clients[i].phase) {
                    (Ok(()), Phase::Holding { .. }) => {}
                    (Err(Error::NotHeld { .. }), Phase::Idle) => {
                        *self.seen.entry("renewal refused").or_default() += 1;
                        let guard = self.guards[i].take().expect("a guard");
                        assert!(!guard.release().await.unwrap());
                    }
                    (got, phase) => panic!("renew by {i}: {got:?}, the model: {phase:?}"),
                }
            }
            Action::Release(i) => {
                let i = usize::from(i);
                let guard = self.guards[i].take().expect("a guard");
                let held = before
                    .server
                    .holder(before.now)
                    .is_some_and(|h| h.owner == u8::try_from(i).unwrap());
                assert_eq!(guard.release().await.unwrap(), held, "release by {i}");
                *self
                    .seen
                    .entry(if held {
                        "released"
                    } else {
                        "release of a lost lock"
                    })
                    .or_default() += 1;
            }
            Action::Decide(_) => {}
            Action::Write(i) => {
                let i = usize::from(i);
                let Phase::Holding { grant, .. } = before.clients[i].phase else {
                    panic!("not holding")
                };
                let fence = self.fences[&grant];
                let store = self.client.fenced_store(&self.name).unwrap();
                let data = format!("data:{{{}}}", self.name);
                let writes = Writes::new().set(&data, i.to_string());
                let accepts = self
                    .model
                    .resource_accepts(before.resource, before.clients_fence(i));
                match store.apply(fence, &writes).await {
                    Ok(accepted) => {
                        assert_eq!(accepted, fence);
                        assert!(accepts, "write by {i} accepted, the model refuses it");
                        *self.seen.entry("write accepted").or_default() += 1;
                    }
                    Err(Error::Fenced { .. }) => {
                        assert!(!accepts, "write by {i} refused, the model accepts it");
                        *self.seen.entry("stale write refused").or_default() += 1;
                    }
                    Err(e) => panic!("write by {i}: {e}"),
                }
            }
            Action::Tick => {
                if before.server.holder(before.now).is_some()
                    && after.server.holder(after.now).is_none()
                {
                    let _: i64 = self.redis.pexpire_at(self.key(), 1).await.unwrap();
                }
            }
            other => panic!("{other:?} is not replayed"),
        }
    }

    async fn compare(&mut self, s: &State, step: &str) {
        let value: Option<String> = self.redis.get(self.key()).await.unwrap();
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
        let counter: Option<u64> = self
            .redis
            .get(format!("{}:fence", self.key()))
            .await
            .unwrap();
        let latest = s
            .grants
            .checked_sub(1)
            .map_or(self.fences.get(&u8::MAX).copied(), |g| {
                Some(self.fences[&g])
            });
        assert_eq!(counter, latest, "{step}: the fence counter");
        let store = self.client.fenced_store(&self.name).unwrap();
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

#[tokio::test(flavor = "current_thread")]
async fn random_walks_of_the_model_match_the_real_scripts() {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
    let client = Client::builder(&server.url()).build().unwrap();
    let redis = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let model = LockModel {
        failovers: 0,
        steps_back: 0,
        max_time: u8::try_from(STEPS).unwrap(),
        max_grants: u8::try_from(STEPS).unwrap(),
        ..LockModel::fences()
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut steps = 0;
    let mut seen: HashMap<&'static str, usize> = HashMap::new();
    for walk in 0..WALKS {
        let mut real = Real {
            model: model.clone(),
            client: client.clone(),
            redis: redis.clone(),
            name: format!("walk{walk}"),
            guards: (0..model.clients).map(|_| None).collect(),
            fences: HashMap::new(),
            seen: HashMap::new(),
        };
        // Every other walk starts with the fence counter far ahead of the server's clock (as
        // after a clock step back), so that grants take `last + 1`: the model's fence is the
        // same `max(last + 1, clock)` either way, and the comparisons are of the real fences.
        let ahead = walk % 2 == 1;
        if ahead {
            let key = format!("{}:fence", real.key());
            let _: () = real.redis.set(key, AHEAD).await.unwrap();
            real.fences.insert(u8::MAX, AHEAD);
        }
        let mut state = model.init_states().remove(0);
        let mut trail = Vec::new();
        // The first walk is the paused holder's: its lease runs out before it writes, and the
        // next holder wrote first.
        let mut scripted = if walk == 0 {
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
        } else {
            Vec::new()
        };
        scripted.reverse();
        for _ in 0..STEPS {
            if let Some(action) = scripted.pop() {
                let next = model.next_state(&state, action).expect("an enabled action");
                trail.push(action);
                let step = format!("walk {walk}, {trail:?}");
                real.step(&state, &next, action).await;
                real.compare(&next, &step).await;
                state = next;
                steps += 1;
                continue;
            }
            let mut actions = Vec::new();
            model.actions(&state, &mut actions);
            // The real server has no replica (and the model no failover here).
            actions.retain(|a| *a != Action::Replicate);
            // Weighted, so that leases run out within a walk and paused holders write late:
            // time passing, decisions and writes three times as likely as the rest.
            let weight = |a: &Action| match a {
                Action::Tick | Action::Decide(_) | Action::Write(_) => 3,
                _ => 1,
            };
            let mut pick = rng.below(actions.iter().map(weight).sum());
            let action = *actions
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
                .expect("an action");
            let next = model.next_state(&state, action).expect("an enabled action");
            trail.push(action);
            let step = format!("walk {walk}, {trail:?}");
            real.step(&state, &next, action).await;
            real.compare(&next, &step).await;
            state = next;
            steps += 1;
        }
        for (outcome, n) in &real.seen {
            *seen.entry(outcome).or_default() += n;
        }
        for guard in real.guards.into_iter().flatten() {
            let _ = guard.release().await;
        }
    }
    eprintln!("{WALKS} walks, {steps} steps replayed: {seen:?}");
    for outcome in [
        "granted",
        "busy",
        "renewal refused",
        "stale write refused",
        "released",
        "release of a lost lock",
    ] {
        assert!(
            seen.get(outcome).is_some_and(|n| *n > 0),
            "no walk saw: {outcome}"
        );
    }
}
