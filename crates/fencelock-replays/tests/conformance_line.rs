//! The plain lock's line of waiters against the real scripts: random walks of [`LockModel`] with
//! the line ([`LockModel::passing`], [`LockModel::dead_waiter`]: requests that wait in line, a
//! waiter's tries, releases that pass the lock to the first in line with a claim, the passed
//! waiter's confirmation, pass messages delivered or lost, waiters and holders that crash, time
//! passing) replayed on a real `redis-server` through the library, comparing after every step
//! what the server holds (the holder's token, fence and mark, whether its lease is a pass's
//! claim or a full one, the fence counter, the line in order) with the model's state.
//!
//! How the model maps onto the server:
//! - Each request of a model client is a request of a `Client` of its own, made for it (so its
//!   first try is never a waiting one: a client that waited a moment ago would still have the
//!   lock's channel subscribed, and try as a waiter at once); a waiting request is a task. A
//!   crash closes the request's client: nothing it holds or waits for is given back.
//! - The pass messages are the replay's: the clients are an ACL user that may not publish, so a
//!   release's message is refused (`release.lua` passes the lock all the same) and every pass is
//!   lost unless the replay delivers it (the model's `Deliver`), as `to:<token>:<fence>:<ms>:
//!   <ends>` on the waiter's own channel, whose claim lasts as long as the place (the library
//!   then takes the lock without a command and leaves its confirmation to the step that renews).
//!   A waiter's try is prompted with the wake a release sends, `to:<token>`.
//! - Time: leases and places last a minute, so no timer of the library fires within a walk; a
//!   lease that ends in the model is ended with `PEXPIREAT key 1`. A pass's claim (1 s on the
//!   server) is checked right after its release and then made [`CLAIM_MS`] long, until the model
//!   ends it. A place's score is checked when a try writes it (the server's clock plus the
//!   place's duration), then set to stand for the model's place: its `(lapses, client)`, in the
//!   model's order (places taken within one step go by client; on the server, by the
//!   millisecond of the try), ten minutes ahead of the server's clock while the place lasts, a
//!   past millisecond once it lapsed.
//! - A request's first try reads no line and marks no grant (`kinds/plain/mod.rs`); the model's
//!   does the same, and a waiter's try marks its grant while others are in line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use Action::{Acquire, Crash, Deliver, Lose, Release, Renew, Tick};
use common::line::{
    self, CLAIM_MS, DEAD_WAITER, PASS_CLAIM_MS, PASSING, PLACE_MS, PLACE_SLACK, lapsed, token,
};
use common::{Answers, Keys, LEASE, Replay, Request, Seen, Start, Walk};
use fencelock::{Client, Error};
use fencelock_model::trace::Seen as Saw;
use fencelock_model::{Action, LockModel, Phase, State};

const WALKS: usize = 200;
const STEPS: usize = 16;
/// How long a request waits (longer than a walk).
const WAIT: Duration = Duration::from_secs(120);
/// Where the scores that stand for the model's places start, ahead of the server's clock in ms
/// (past every place a try writes: those are a place's duration ahead).
const AHEAD_MS: u64 = 10 * PLACE_MS;

struct Real {
    /// The URL of the clients' user.
    url: String,
    keys: Keys,
    /// The client of each model client's request, while it has one.
    clients: Vec<Option<Client>>,
    requests: Vec<Request>,
    /// The real owner token of each model token.
    tokens: HashMap<u8, String>,
    /// The real fence of each model grant.
    fences: HashMap<u8, u64>,
    /// When each model token's latest place lapses, as its try wrote it (and was told).
    places: HashMap<u8, u64>,
    /// The place each pass was made on (the waiter's latest when the release read the line).
    passes: HashMap<u8, u64>,
    /// Where the scores that stand for the model's places start.
    base: u64,
    start: Start,
    seed: u64,
    scripts: &'static [&'static [Action]],
    seen: Seen,
    /// What the clients were answered, explained by the model at the end.
    answers: Answers,
}

impl Real {
    /// Learns the real fence of model grant `grant`: above every earlier one (`Start::check`).
    fn learn(&mut self, grant: u8, real: u64, what: &str) {
        if let Some(&known) = self.fences.get(&grant) {
            assert_eq!(known, real, "{what}: grant {grant}'s fence");
            return;
        }
        self.start.check(real, self.fences.values().copied(), what);
        self.fences.insert(grant, real);
    }

    /// A try wrote a place for `token` (any token: a new request's): waits for it, and checks
    /// when it lapses. Answers its token and score.
    async fn fresh_place(&mut self, token: Option<&str>, what: &str) -> (String, u64) {
        let base = self.base;
        let (token, lapses) = common::until(format!("{what}: no place taken"), async || {
            let line = self.keys.line().await;
            // Every other score stands for a model place: below 1000, or from `base` on.
            line.into_iter().find(|(t, s)| {
                (1000..base).contains(s) && token.is_none_or(|token| token == t.as_str())
            })
        })
        .await;
        let now = line::now_ms(&mut self.keys.redis).await;
        assert!(
            lapses <= now + PLACE_MS && lapses + PLACE_SLACK >= now + PLACE_MS,
            "{what}: a place that lapses at {lapses}, the server's clock at {now} ms"
        );
        (token, lapses)
    }

    /// A new request of client `i`: granted at once, or in line.
    async fn request(&mut self, i: usize, after: &State, what: &str) {
        let client = Client::builder(&self.url).build().unwrap();
        // Renewed automatically, as a request must be to take a pass from its message; the
        // first renewal is due a third of a lease after the grant, past the walk.
        let request = client
            .lock(&self.keys.name)
            .ttl(LEASE)
            .queue_timeout(LEASE)
            .wait_up_to(WAIT);
        self.requests[i] = Request::waiting(request.acquire());
        self.clients[i] = Some(client);
        self.answers.saw(i, Saw::Request);
        match after.clients[i].phase {
            Phase::Holding { token, grant, .. } => {
                let fence = self.requests[i].taken(i, what).await;
                self.answers.granted(i, fence);
                let held = self.keys.held().await.expect("a holder");
                assert_eq!(held.fence, fence, "{what}: the grant's fence");
                self.tokens.insert(token, held.token);
                self.learn(grant, fence, what);
                self.seen.count("granted");
            }
            Phase::Waiting { token, .. } => {
                let (real, lapses) = self.fresh_place(None, what).await;
                self.tokens.insert(token, real);
                self.places.insert(token, lapses);
                self.seen.count("queued");
            }
            phase => panic!("{what}: acquire by {i}, the model: {phase:?}"),
        }
    }

    /// Client `i`'s waiter with `token` tries again.
    async fn retry(&mut self, i: usize, token: u8, before: &State, after: &State, what: &str) {
        let real = self.tokens[&token].clone();
        self.keys.tell(&real, &format!("to:{real}")).await;
        match after.clients[i].phase {
            Phase::Holding { grant, .. } => {
                let fence = self.requests[i].taken(i, what).await;
                self.answers.granted(i, fence);
                self.learn(grant, fence, what);
                let own = before
                    .server
                    .holder(before.now)
                    .is_some_and(|h| h.token == token);
                let after_dead = before.server.lock.is_some_and(|h| {
                    h.passed && before.clients[usize::from(h.owner)].phase == Phase::Dead
                });
                self.seen.count(if own {
                    "a passed lock taken by the waiter's try"
                } else if after_dead {
                    "granted by waiting after a dead waiter's claim"
                } else {
                    "granted by waiting"
                });
            }
            Phase::Waiting { .. } => {
                let (_, lapses) = self.fresh_place(Some(&real), what).await;
                self.places.insert(token, lapses);
                self.seen.count("a waiter's try");
            }
            phase => panic!("{what}: a try by {i}, the model: {phase:?}"),
        }
    }

    async fn renew(&mut self, i: usize, before: &State, after: &State, what: &str) {
        let got = self.requests[i].guard(i).extend(LEASE).await;
        match (got, after.clients[i].phase) {
            (Ok(()), Phase::Holding { .. }) => {
                let passed = before.server.holder(before.now).is_some_and(|h| h.passed);
                self.seen.count(if passed {
                    "a claim confirmed"
                } else {
                    "renewed"
                });
            }
            (Err(Error::NotHeld { .. }), Phase::Idle) => {
                // Given up as the model does, sending nothing (the client closes first).
                self.seen.count("renewal refused");
                let fence = self.requests[i].guard(i).fence();
                self.answers.told(i, fence);
                self.end(i).await;
            }
            (got, phase) => panic!("{what}: renew by {i}: {got:?}, the model: {phase:?}"),
        }
    }

    async fn release(&mut self, i: usize, before: &State, after: &State, what: &str) {
        let token = token(before.clients[i].phase);
        let held = before
            .server
            .holder(before.now)
            .is_some_and(|h| Some(h.token) == token);
        let fence = self.requests[i].guard(i).fence();
        self.answers.saw(i, Saw::Release { fence });
        self.requests[i].give_back(i, held, what).await;
        let answer = Some(held);
        self.answers.saw(
            i,
            Saw::Released {
                fence,
                held: answer,
            },
        );
        let passed = after.server.holder(after.now).filter(|_| held);
        if let Some(h) = passed {
            // The claim, read at once (it lasts a second on the server), then made longer.
            let real = self.keys.held().await.expect("a passed lock");
            assert_eq!(real.token, self.tokens[&h.token], "{what}: passed to");
            assert!(
                0 < real.pttl && real.pttl <= PASS_CLAIM_MS,
                "{what}: a pass's lease of {} ms, not the claim",
                real.pttl
            );
            self.keys.lasts(CLAIM_MS).await;
            self.learn(h.grant, real.fence, what);
            self.passes.insert(h.token, self.places[&h.token]);
            let dead = after.clients[usize::from(h.owner)].phase == Phase::Dead;
            self.seen.count(if dead {
                "passed to a dead waiter"
            } else {
                "passed"
            });
        } else {
            self.seen.count(if held {
                "released"
            } else {
                "release of a lost lock"
            });
        }
        if let Some(client) = self.clients[i].take() {
            client.close().await;
        }
        if lapsed(after) < lapsed(before) {
            self.seen.count("a release drops a lapsed place");
        }
        let place = |s: &State| s.server.waiters.iter().any(|p| Some(p.2) == token);
        if !held && place(before) {
            self.seen.count("a lost lock's release gives up its place");
        }
    }

    /// The pass message on its way to client `i` arrives.
    async fn deliver(&mut self, i: usize, before: &State, what: &str) {
        let pass = before.clients[i].inbox.expect("a pass on its way");
        if !matches!(before.clients[i].phase, Phase::Waiting { token, .. } if token == pass.token) {
            // The request it was passed to ended: nobody listens for it.
            self.seen.count("a pass message too late");
            return;
        }
        let real = self.tokens[&pass.token].clone();
        let fence = self.fences[&pass.grant];
        let lapses = self.passes[&pass.token];
        let message = format!("to:{real}:{fence}:{lapses}:{lapses}");
        self.keys.tell(&real, &message).await;
        let got = self.requests[i].taken(i, what).await;
        self.answers.granted(i, got);
        assert_eq!(got, fence, "{what}: the fence of the pass delivered");
        self.seen.count("a pass delivered");
    }

    async fn tick(&mut self, before: &State, after: &State) {
        if let Some(h) = before.server.holder(before.now)
            && after.server.holder(after.now).is_none()
        {
            self.keys.expire("").await;
            let dead = after.clients[usize::from(h.owner)].phase == Phase::Dead;
            self.seen.count(match (h.passed, dead) {
                (false, _) => "a lease ran out",
                (true, false) => "a claim ran out",
                (true, true) => "a dead waiter's claim ran out",
            });
        }
        if lapsed(after) > lapsed(before) {
            self.seen.count("a place lapsed");
        }
    }

    /// Client `i`'s request ends, sending nothing: its client closes first.
    async fn end(&mut self, i: usize) {
        if let Some(client) = self.clients[i].take() {
            client.close().await;
        }
        std::mem::replace(&mut self.requests[i], Request::Idle)
            .end()
            .await;
    }

    async fn step(&mut self, before: &State, after: &State, action: Action, what: &str) {
        match action {
            Acquire(i) => {
                let i = usize::from(i);
                match before.clients[i].phase {
                    Phase::Waiting { token, .. } => self.retry(i, token, before, after, what).await,
                    _ => self.request(i, after, what).await,
                }
            }
            Renew(i) => self.renew(usize::from(i), before, after, what).await,
            Release(i) => self.release(usize::from(i), before, after, what).await,
            Crash(i) => {
                let i = usize::from(i);
                self.seen.count(match before.clients[i].phase {
                    Phase::Waiting { .. } => "a waiter crashed",
                    Phase::Holding { .. } => "a holder crashed",
                    _ => "an idle client crashed",
                });
                self.answers.saw(i, Saw::Killed);
                self.end(i).await;
            }
            Deliver(i) => self.deliver(usize::from(i), before, what).await,
            Lose(_) => self.seen.count("a pass message lost"),
            Tick => self.tick(before, after).await,
            other => panic!("{other:?} is not replayed"),
        }
    }

    /// Sets each place's score to stand for the model's: `(lapses, client)` in order, from
    /// `base` while it lasts, a past millisecond once it lapsed.
    async fn map_places(&mut self, s: &State) {
        for &(lapses, client, token) in &s.server.waiters {
            let from = if lapses > s.now { self.base } else { 1 };
            let score = from + u64::from(lapses) * 8 + u64::from(client);
            let real = self.tokens[&token].clone();
            self.keys.place(&real, score).await;
        }
    }

    async fn compare(&mut self, s: &State, what: &str) {
        let held = self.keys.held().await;
        match (&held, s.server.holder(s.now)) {
            (None, None) => {}
            (Some(real), Some(h)) => {
                assert_eq!(real.token, self.tokens[&h.token], "{what}: the holder");
                assert_eq!(real.fence, self.fences[&h.grant], "{what}: the fence");
                assert_eq!(real.marked, h.marked, "{what}: the mark (someone waited)");
                if h.passed {
                    assert!(
                        0 < real.pttl && real.pttl <= CLAIM_MS,
                        "{what}: a pass's claim, a lease of {} ms",
                        real.pttl
                    );
                } else {
                    assert!(real.pttl > CLAIM_MS, "{what}: a lease of {} ms", real.pttl);
                }
            }
            (real, model) => panic!("{what}: the server holds {real:?}, the model {model:?}"),
        }
        let counter = self.keys.counter().await;
        let latest = s.grants.checked_sub(1).map(|g| self.fences[&g]);
        let expected = latest.or(self.start.counter());
        assert_eq!(counter, expected, "{what}: the fence counter");
        let line: Vec<String> = self.keys.line().await.into_iter().map(|p| p.0).collect();
        let expected: Vec<String> = s
            .server
            .waiters
            .iter()
            .map(|p| self.tokens[&p.2].clone())
            .collect();
        assert_eq!(line, expected, "{what}: the line");
        if !line.is_empty() {
            let pttl = self.keys.pttl(":waiters").await;
            assert!(
                0 < pttl && pttl <= i64::try_from(PLACE_MS).unwrap(),
                "{what}: the line lasts {pttl} ms"
            );
        }
    }
}

impl Replay<LockModel> for Real {
    fn script(&self, number: usize) -> Vec<Action> {
        self.scripts
            .get(number)
            .map_or_else(Vec::new, |s| s.to_vec())
    }

    async fn advance(&mut self, walk: &mut Walk<'_, LockModel>, state: State) -> State {
        // Time passing, requests and a passed waiter's confirmation more likely than the rest,
        // a crash only of a client that holds or waits; the real server has no replica.
        let claim_of =
            |i: u8| (state.server.holder(state.now)).is_some_and(|h| h.passed && h.owner == i);
        let action = walk.draw(&state, |a| match *a {
            Tick | Acquire(_) => 3,
            Renew(i) if claim_of(i) => 6,
            Release(_) | Deliver(_) | Lose(_) => 2,
            Crash(i) if state.clients[usize::from(i)].phase == Phase::Idle => 0,
            Renew(_) | Crash(_) => 1,
            _ => 0,
        });
        let next = walk.take(&state, action);
        let what = format!("seed {:#x}, {}", self.seed, walk.step());
        self.step(&state, &next, action, &what).await;
        self.answers.deadlines(&next, &self.requests);
        self.map_places(&next).await;
        self.compare(&next, &what).await;
        next
    }

    async fn end(mut self) -> Seen {
        let walk = format!("seed {:#x}, walk {}", self.seed, self.keys.name);
        self.answers.explained(&walk);
        for i in 0..self.requests.len() {
            std::mem::replace(&mut self.requests[i], Request::Idle)
                .end()
                .await;
            if let Some(client) = self.clients[i].take() {
                client.close().await;
            }
        }
        self.seen
    }
}

/// `WALKS` walks of `model` from `seed`, the first ones `scripts`.
async fn replay(model: LockModel, seed: u64, scripts: &'static [&'static [Action]]) -> Seen {
    let model = LockModel {
        max_time: u8::try_from(STEPS).unwrap(),
        max_grants: u8::try_from(STEPS).unwrap(),
        ..model
    };
    let (server, mut redis) = common::server().await;
    let url = line::muted_url(&server, &mut redis).await;
    let start = async |walk| {
        let base = line::now_ms(&mut redis.clone()).await + AHEAD_MS;
        let mut real = Real {
            url: url.clone(),
            keys: Keys::new(&redis, format!("line{walk}")),
            clients: (0..model.clients).map(|_| None).collect(),
            requests: (0..model.clients).map(|_| Request::Idle).collect(),
            tokens: HashMap::new(),
            fences: HashMap::new(),
            places: HashMap::new(),
            passes: HashMap::new(),
            base,
            start: Start::of(walk),
            seed,
            scripts,
            seen: Seen::default(),
            answers: Answers::default(),
        };
        real.start.set(&mut real.keys).await;
        real
    };
    common::walks(&model, WALKS, STEPS, seed, start).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_line_the_pass_and_lost_messages_match_the_real_scripts() {
    let seen = replay(LockModel::passing(), 0x6a09_e667_f3bc_c909, PASSING).await;
    seen.assert_saw(&[
        "granted",
        "queued",
        "a waiter's try",
        "granted by waiting",
        "passed",
        "a pass delivered",
        "a claim confirmed",
        "a pass message lost",
        "a passed lock taken by the waiter's try",
        "a claim ran out",
        "a lease ran out",
        "a holder crashed",
        "a waiter crashed",
        "renewed",
        "renewal refused",
        "released",
        "release of a lost lock",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_in_line_matches_the_real_scripts() {
    let seen = replay(LockModel::dead_waiter(), 0xbb67_ae85_84ca_a73b, DEAD_WAITER).await;
    seen.assert_saw(&[
        "queued",
        "passed",
        "passed to a dead waiter",
        "a dead waiter's claim ran out",
        "granted by waiting after a dead waiter's claim",
        "a place lapsed",
        "a release drops a lapsed place",
        "a lost lock's release gives up its place",
        "a pass delivered",
        "a claim confirmed",
        "a waiter crashed",
    ]);
}
