//! The read-write lock's model against its real scripts: random walks of [`RwModel`] (two
//! writers, one that waits and one that only tries, and two readers that wait; renewals,
//! releases, leases that end) replayed on a real `redis-server` through the library, comparing
//! after every step the holders (token, reader or writer, the writer's fence), the waiting
//! requests in their order of arrival, and the fence counter with the model's state, and each
//! answer (a grant and its fence, a wait, busy, a renewal refused, what a release found) with
//! the model's.
//!
//! Each model client is a `ReadWriteLock` handle on a `Client` of its own, with one request at
//! a time; a waiting request is a task. Leases and places last a minute (no timer of the
//! library fires within a walk); a lease that ends in the model is ended by writing an expiry in
//! the past into its entry. A release (and a waiter's due try) wakes every waiter (`all` on the
//! lock's channel), and the model then lets every waiter try once, in arrival order: with one
//! writer that waits, whom that grants does not depend on the order. Crashes are left to the
//! model's exhaustive check.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Keys, LEASE, Replay, Request, Runs, Seen, Start, Walk};
use fencelock::admin::Releases;
use fencelock::{Client, Error, ReadWriteLock};
use fencelock_model::rwlock::{Role, RwAction, RwModel, RwPhase, RwState};
use redis::AsyncCommands;
use stateright::Model;

const WALKS: usize = 90;
const STEPS: usize = 14;

/// What the lock's hash holds: the live holders (token -> (writes, fence)) and the live waiting
/// requests ((arrival, token, writes), sorted).
type Hash = (
    HashMap<String, (bool, Option<u64>)>,
    Vec<(u64, String, bool)>,
);

struct Real {
    model: RwModel,
    handles: Vec<ReadWriteLock>,
    keys: Keys,
    requests: Vec<Request>,
    /// The real hold token of each model token.
    tokens: HashMap<u8, String>,
    /// The real fence of each model write fence.
    fences: HashMap<u32, u64>,
    start: Start,
    seen: Seen,
    /// Each client's subscription to the lock's releases, kept for the walk: a request that
    /// waits then tries as a waiter from its first try, once (no second try after it
    /// subscribes, which on a loaded machine could run after a later step).
    _releases: Vec<Releases>,
}

impl Real {
    async fn hash(&mut self) -> Hash {
        let all: HashMap<String, String> =
            self.keys.redis.hgetall(self.keys.key("")).await.unwrap();
        let mut held = HashMap::new();
        let mut waiting = Vec::new();
        for (field, value) in &all {
            let Some((role, token)) = field.split_at_checked(2) else {
                continue;
            };
            if !matches!(role, "r:" | "w:" | "q:" | "i:") {
                continue;
            }
            let parts: Vec<&str> = value.split(':').collect();
            let expiry: u64 = parts[0].parse().unwrap();
            if expiry <= 1 {
                continue;
            }
            match role {
                "r:" => {
                    held.insert(token.to_owned(), (false, None));
                }
                "w:" => {
                    let fence = parts[2].parse().unwrap();
                    held.insert(token.to_owned(), (true, Some(fence)));
                }
                "q:" | "i:" => {
                    let arrival: u64 = parts[1].parse().unwrap();
                    waiting.push((arrival, token.to_owned(), role == "i:"));
                }
                _ => {}
            }
        }
        waiting.sort();
        (held, waiting)
    }

    /// The model's last write fence, as the server has it (a reader is answered it).
    fn last_write(&self, fence: u32) -> u64 {
        if fence == 0 {
            self.start.counter().unwrap_or(0)
        } else {
            self.fences[&fence]
        }
    }

    /// Client `i`'s request was granted (its guard in `self.requests[i]`, or its task's): learns
    /// its token and checks its fence.
    async fn granted(&mut self, i: usize, after: &RwState, step: &str) {
        let RwPhase::Holding { token, fence, .. } = after.clients[i] else {
            panic!("{step}: the model: client {i} does not hold");
        };
        let real = match &self.requests[i] {
            Request::Waiting(_) => self.requests[i].taken(i, step).await,
            Request::Holding(guard) => guard.fence(),
            Request::Idle => panic!("{step}: client {i} has no request"),
        };
        if !self.tokens.contains_key(&token) {
            let (held, _) = self.hash().await;
            let known: Vec<&String> = self.tokens.values().collect();
            let new: Vec<&String> = held.keys().filter(|t| !known.contains(t)).collect();
            assert_eq!(new.len(), 1, "{step}: the new holder among {held:?}");
            self.tokens.insert(token, new[0].clone());
        }
        if self.model.writes[i] {
            self.start.check(real, self.fences.values().copied(), step);
            self.fences.insert(fence, real);
            self.seen.count("a write granted");
        } else {
            assert_eq!(real, self.last_write(fence), "{step}: a reader's fence");
            self.seen.count("a read granted");
        }
    }

    /// A new request by client `i`.
    async fn request(&mut self, i: usize, after: &RwState, step: &str) {
        let handle = &self.handles[i];
        let request = if self.model.writes[i] {
            handle.write()
        } else {
            handle.read()
        }
        .ttl(LEASE)
        .auto_renew(false);
        if !self.model.waits[i] {
            match request.try_acquire().await.unwrap() {
                Some(guard) => {
                    self.requests[i] = Request::Holding(guard);
                    self.granted(i, after, step).await;
                }
                None => {
                    assert_eq!(after.clients[i], RwPhase::Idle, "{step}: busy");
                    self.seen.count("busy");
                }
            }
            return;
        }
        let request = request
            .queue_timeout(LEASE)
            .wait_up_to(Duration::from_secs(120));
        let before = self.keys.runs().await;
        self.requests[i] = Request::waiting(request.acquire());
        match after.clients[i] {
            RwPhase::Holding { .. } => self.granted(i, after, step).await,
            RwPhase::Waiting { token, .. } => {
                let real = common::until(format!("{step}: client {i} did not wait"), async || {
                    let (_, waiting) = self.hash().await;
                    let known: Vec<&String> = self.tokens.values().collect();
                    let (_, real, _) = waiting.into_iter().find(|w| !known.contains(&&w.1))?;
                    Some(real)
                })
                .await;
                self.tokens.insert(token, real);
                self.keys.until_scripts(before.scripts + 1, step).await;
                self.seen.count("waits");
            }
            phase => panic!("{step}: acquire by {i}: the model {phase:?}"),
        }
    }

    /// Every waiter tries once (woken by `all`): the model's tries in arrival order, and the
    /// real grants awaited. `before` is what the server had run before the step, which made
    /// `own` script calls (a release's; the wake it published, if it found an entry, is the
    /// only one sent), and every waiter's try is awaited, so that none runs late.
    async fn retry_all(
        &mut self,
        state: RwState,
        walk: &mut Walk<'_, RwModel>,
        before: Runs,
        own: u64,
    ) -> RwState {
        let mut state = state;
        let mut waiters: Vec<(u8, u8)> = state
            .entries
            .iter()
            .filter(|e| matches!(e.role, Role::ReaderWaits | Role::WriterWaits))
            .filter(|e| {
                matches!(
                    state.clients[usize::from(e.client)],
                    RwPhase::Waiting { .. }
                )
            })
            .map(|e| (e.arrival, e.client))
            .collect();
        if waiters.is_empty() {
            return state;
        }
        waiters.sort_unstable();
        if self.keys.runs().await.messages == before.messages {
            let channel = self.keys.key(":released");
            let _: i64 = self.keys.redis.publish(channel, "all").await.unwrap();
        }
        let tries = u64::try_from(waiters.len()).unwrap();
        for (_, w) in waiters {
            let next = walk.model.next_state(&state, RwAction::Acquire(w)).unwrap();
            walk.push(RwAction::Acquire(w));
            if let RwPhase::Holding { .. } = next.clients[usize::from(w)] {
                self.granted(usize::from(w), &next, &walk.step()).await;
                self.seen.count("a waiter granted");
            } else {
                self.seen.count("a waiter's try");
            }
            state = next;
        }
        let scripts = before.scripts + own + tries;
        self.keys.until_scripts(scripts, &walk.step()).await;
        state
    }

    /// One step; answers whether every waiter tries after it (a release).
    async fn step(
        &mut self,
        before: &RwState,
        after: &RwState,
        action: RwAction,
        step: &str,
    ) -> bool {
        match action {
            RwAction::Acquire(i) => {
                self.request(usize::from(i), after, step).await;
                false
            }
            RwAction::Renew(i) => {
                let i = usize::from(i);
                let got = self.requests[i].guard(i).extend(LEASE).await;
                match (got, after.clients[i]) {
                    (Ok(()), RwPhase::Holding { .. }) => self.seen.count("renewed"),
                    (Err(Error::NotHeld { .. }), RwPhase::Idle) => {
                        self.requests[i].refused(i, &mut self.seen).await;
                    }
                    (got, phase) => panic!("{step}: renew by {i}: {got:?}, the model: {phase:?}"),
                }
                false
            }
            RwAction::Release(i) => {
                let i = usize::from(i);
                let RwPhase::Holding { token, .. } = before.clients[i] else {
                    panic!("{step}: the model: client {i} holds nothing")
                };
                let held = before
                    .entries
                    .iter()
                    .any(|e| e.token == token && e.expires > before.now);
                self.requests[i].give_back(i, held, step).await;
                self.seen.count(if held {
                    "released"
                } else {
                    "release of a lost hold"
                });
                true
            }
            RwAction::Tick => {
                let ended: Vec<_> = before
                    .entries
                    .iter()
                    .filter(|e| matches!(e.role, Role::Reader | Role::Writer))
                    .filter(|e| e.expires > before.now && e.expires <= after.now)
                    .copied()
                    .collect();
                for e in &ended {
                    let prefix = if e.role == Role::Writer { "w:" } else { "r:" };
                    let field = format!("{prefix}{}", self.tokens[&e.token]);
                    let key = self.keys.key("");
                    let value: String = self.keys.redis.hget(&key, &field).await.unwrap();
                    let rest = value.split_once(':').unwrap().1;
                    let _: i64 = self
                        .keys
                        .redis
                        .hset(&key, &field, format!("1:{rest}"))
                        .await
                        .unwrap();
                    self.seen.count("a lease ended");
                }
                false
            }
            other => panic!("{step}: {other:?} is not replayed"),
        }
    }

    async fn compare(&mut self, s: &RwState, step: &str) {
        let (held, waiting) = self.hash().await;
        let expected: HashMap<String, (bool, Option<u64>)> = s
            .entries
            .iter()
            .filter(|e| e.expires > s.now && matches!(e.role, Role::Reader | Role::Writer))
            .map(|e| {
                let writes = e.role == Role::Writer;
                let fence = writes.then(|| self.fences[&e.fence]);
                (self.tokens[&e.token].clone(), (writes, fence))
            })
            .collect();
        assert_eq!(held, expected, "{step}: the holders");
        let order: Vec<(String, bool)> = waiting.into_iter().map(|(_, t, w)| (t, w)).collect();
        let mut places: Vec<_> = s
            .entries
            .iter()
            .filter(|e| {
                e.expires > s.now && matches!(e.role, Role::ReaderWaits | Role::WriterWaits)
            })
            .collect();
        places.sort_by_key(|e| e.arrival);
        let expected: Vec<(String, bool)> = places
            .iter()
            .map(|e| (self.tokens[&e.token].clone(), e.role == Role::WriterWaits))
            .collect();
        assert_eq!(order, expected, "{step}: the waiting requests");
        let counter = self.keys.counter().await;
        let last = self
            .fences
            .values()
            .copied()
            .chain(self.start.counter())
            .max();
        assert_eq!(counter, last, "{step}: the fence counter");
    }
}

impl Replay<RwModel> for Real {
    async fn advance(&mut self, walk: &mut Walk<'_, RwModel>, state: RwState) -> RwState {
        let action = walk.draw(&state, |a| if *a == RwAction::Tick { 3 } else { 1 });
        let retry = matches!(action, RwAction::Acquire(i)
            if matches!(state.clients[usize::from(i)], RwPhase::Waiting { .. }));
        let mut state = state;
        let before = self.keys.runs().await;
        if retry {
            state = self.retry_all(state, walk, before, 0).await;
        } else {
            let next = walk.take(&state, action);
            let step = walk.step();
            let wake = self.step(&state, &next, action, &step).await;
            state = next;
            if wake {
                state = self.retry_all(state, walk, before, 1).await;
            }
        }
        self.compare(&state, &walk.step()).await;
        state
    }

    async fn end(self) -> Seen {
        common::end(self.requests, self.seen).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_walks_of_the_read_write_lock_match_the_real_scripts() {
    let (server, redis) = common::server().await;
    let model = RwModel {
        writes: vec![true, true, false, false],
        waits: vec![true, false, true, true],
        crashes: 0,
        max_time: u8::try_from(STEPS).unwrap(),
        max_grants: u8::try_from(STEPS).unwrap(),
        ..RwModel::small()
    };
    let clients: Vec<Client> = common::clients(&server, model.writes.len());
    let start = async |walk| {
        let name = format!("rw{walk}");
        let mut releases = Vec::new();
        for client in &clients {
            releases.push(client.releases(&name).await.unwrap());
        }
        let mut real = Real {
            model: model.clone(),
            handles: clients.iter().map(|c| c.read_write_lock(&name)).collect(),
            keys: Keys::new(&redis, name),
            requests: (0..model.writes.len()).map(|_| Request::Idle).collect(),
            tokens: HashMap::new(),
            fences: HashMap::new(),
            start: Start::of(walk),
            seen: Seen::default(),
            _releases: releases,
        };
        real.start.set(&mut real.keys).await;
        real
    };
    let seen = common::walks(&model, WALKS, STEPS, 0x2545_f491_4f6c_dd1d, start).await;
    seen.assert_saw(&[
        "a write granted",
        "a read granted",
        "waits",
        "busy",
        "a waiter granted",
        "a waiter's try",
        "renewed",
        "renewal refused",
        "released",
        "release of a lost hold",
        "a lease ended",
    ]);
}
