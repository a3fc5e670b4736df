//! What the conformance tests share: a real `redis-server` from the testkit and clients of it,
//! the lock's keys read and leases ended on the server (`PEXPIREAT key 1`: model time maps onto
//! the server's without waiting), a request of a client (waiting as a task, or holding), the
//! outcomes counted, and the driver of the seeded random walks; the plain lock's line of waiters
//! (`line.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)] // a test fails by panicking

use std::collections::HashMap;
use std::fmt::{self, Debug, Display};
use std::future::Future;
use std::time::Duration;

use fencelock::{Client, LockGuard};
use fencelock_testkit::RedisServer;
use redis::AsyncCommands;
use stateright::Model;
use tokio::task::JoinHandle;

mod answers;
pub mod line;

pub use answers::Answers;

/// Leases and places last a minute: no timer of the library fires within a walk.
pub const LEASE: Duration = Duration::from_secs(60);
/// How long a test waits for the library to do what the model did.
pub const PATIENCE: Duration = Duration::from_secs(10);

pub type Redis = redis::aio::MultiplexedConnection;

/// A fresh `redis-server` and a connection to it for reading the keys.
pub async fn server() -> (RedisServer, Redis) {
    let server = RedisServer::start().unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
    let redis = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (server, redis)
}

/// A client of the library on `server`.
pub fn client(server: &RedisServer) -> Client {
    Client::builder(&server.url()).build().unwrap()
}

/// `n` clients of their own on `server`, one a model client.
pub fn clients(server: &RedisServer, n: usize) -> Vec<Client> {
    (0..n).map(|_| client(server)).collect()
}

/// One lock's keys on the server (the lock key, and the keys named after it).
pub struct Keys {
    pub redis: Redis,
    pub name: String,
}

impl Keys {
    pub fn new(redis: &Redis, name: String) -> Self {
        Self {
            redis: redis.clone(),
            name,
        }
    }

    /// The lock key (`suffix` empty) or one named after it (`:fence`, `:queue`, …).
    pub fn key(&self, suffix: &str) -> String {
        format!("fencelock:{{{}}}{suffix}", self.name)
    }

    /// The fence counter.
    pub async fn counter(&mut self) -> Option<u64> {
        self.redis.get(self.key(":fence")).await.unwrap()
    }

    /// The members of a sorted set, in order.
    pub async fn zrange(&mut self, suffix: &str) -> Vec<String> {
        self.redis.zrange(self.key(suffix), 0, -1).await.unwrap()
    }

    /// Ends the key now, as its expiry in the model has.
    pub async fn expire(&mut self, suffix: &str) {
        let _: i64 = self.redis.pexpire_at(self.key(suffix), 1).await.unwrap();
    }

    /// What the server has run so far, from `INFO commandstats`.
    pub async fn runs(&mut self) -> Runs {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.redis)
            .await
            .unwrap();
        let mut runs = Runs::default();
        for line in info.lines() {
            let Some((command, fields)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let field = |name: &str| -> u64 {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                    .map_or(0, |n| n.parse().unwrap())
            };
            let answered = field("calls") - field("failed_calls");
            match command {
                "eval" | "evalsha" => runs.scripts += answered,
                "publish" => runs.messages += answered,
                _ => {}
            }
        }
        runs
    }

    /// Waits until the server has answered `scripts` script calls in all: the tries that
    /// waiters make on their own (after a release message) have run, so that none runs late,
    /// after a later step has changed what it finds.
    pub async fn until_scripts(&mut self, scripts: u64, what: &str) {
        until(
            format!("{what}: {scripts} script calls were not all made"),
            async || (self.runs().await.scripts >= scripts).then_some(()),
        )
        .await;
    }
}

/// Counts of what a server has run: the script calls answered without an error (`EVALSHA` and
/// `EVAL`; the `NOSCRIPT` answer the library follows with an `EVAL` is not one), and the
/// messages published (by scripts too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Runs {
    pub scripts: u64,
    pub messages: u64,
}

/// Where a walk's fence counter starts: absent, far ahead of the server's clock in µs (as after
/// a clock step back, or a counter restored from a later time), or behind it. Ahead, every
/// grant must continue the counter (`last + 1`): the shared rule of `prelude.lua`'s
/// `next_fence` and of the scripts that write it inline, which a walk that starts fresh never
/// tells from the clock alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Fresh,
    Ahead,
    Behind,
}

/// A fence counter far ahead of the server clock in µs (the year 2096), below 2^53 (Lua's
/// numbers are doubles: every fence is below it).
pub const AHEAD: u64 = 4_000_000_000_000_000;
/// A fence counter far behind the server clock in µs.
pub const BEHIND: u64 = 1_000;
/// Below any server clock in µs these tests run at (2001-09-09).
const CLOCK_FLOOR: u64 = 1_000_000_000_000_000;

impl Start {
    /// Walk `walk`'s start: fresh, ahead and behind in turn.
    pub fn of(walk: usize) -> Start {
        match walk % 3 {
            0 => Start::Fresh,
            1 => Start::Ahead,
            _ => Start::Behind,
        }
    }

    /// The counter it sets.
    pub fn counter(self) -> Option<u64> {
        match self {
            Start::Fresh => None,
            Start::Ahead => Some(AHEAD),
            Start::Behind => Some(BEHIND),
        }
    }

    /// Sets the counter of `keys` as this start says.
    pub async fn set(self, keys: &mut Keys) {
        if let Some(value) = self.counter() {
            let _: () = keys.redis.set(keys.key(":fence"), value).await.unwrap();
        }
    }

    /// Checks a real fence just granted against the counter it started from and every fence
    /// granted before it in the walk (`earlier`): above all of them, and right after the
    /// largest while the counter is ahead of the clock (no clock reading catches up with it).
    pub fn check(self, fence: u64, earlier: impl IntoIterator<Item = u64>, what: &str) {
        let last = earlier.into_iter().chain(self.counter()).max();
        if let Some(last) = last {
            assert!(
                fence > last,
                "{what}: fence {fence} is not above {last} (the walk started {self:?})"
            );
        }
        if self == Start::Ahead {
            assert!(
                fence <= AHEAD + 1_000_000,
                "{what}: fence {fence} did not continue the counter ahead of the clock"
            );
        } else {
            // Not ahead of the clock, the first fence is the server's clock in µs, and those
            // after it follow it (a counter alone would go on from `BEHIND`).
            assert!(
                fence > CLOCK_FLOOR,
                "{what}: fence {fence} is not the server's clock (the walk started {self:?})"
            );
        }
    }
}

/// How often each outcome came up.
#[derive(Default)]
pub struct Seen(HashMap<&'static str, usize>);

impl Seen {
    pub fn count(&mut self, outcome: &'static str) {
        *self.0.entry(outcome).or_default() += 1;
    }

    /// Asserts that every one of `outcomes` came up.
    pub fn assert_saw(&self, outcomes: &[&str]) {
        for outcome in outcomes {
            assert!(
                self.0.get(outcome).is_some_and(|n| *n > 0),
                "no walk saw: {outcome}"
            );
        }
    }
}

impl Debug for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A model client's request on the server: a waiting request is a task.
pub enum Request {
    Idle,
    Waiting(JoinHandle<fencelock::Result<LockGuard>>),
    Holding(LockGuard),
}

impl Request {
    /// A request that waits (`acquire` runs as a task).
    pub fn waiting(
        acquire: impl Future<Output = fencelock::Result<LockGuard>> + Send + 'static,
    ) -> Self {
        Self::Waiting(tokio::spawn(acquire))
    }

    /// The guard of client `i`, which holds.
    pub fn guard(&self, i: usize) -> &LockGuard {
        let Self::Holding(guard) = self else {
            panic!("client {i} holds nothing")
        };
        guard
    }

    /// Waits for client `i`'s waiting request to be granted; answers its fence.
    pub async fn granted(&mut self, i: usize) -> u64 {
        self.taken(i, "a step").await
    }

    /// As [`Request::granted`], naming the step (`what`) in a failure.
    pub async fn taken(&mut self, i: usize, what: &str) -> u64 {
        let Self::Waiting(task) = std::mem::replace(self, Self::Idle) else {
            panic!("{what}: client {i} has no waiting request")
        };
        let guard = tokio::time::timeout(PATIENCE, task)
            .await
            .unwrap_or_else(|_| panic!("{what}: client {i} was not granted"))
            .unwrap()
            .unwrap_or_else(|e| panic!("{what}: client {i}'s request: {e}"));
        let fence = guard.fence();
        *self = Self::Holding(guard);
        fence
    }

    /// Client `i` releases what it holds: asserts the answer is `held` (the model's).
    pub async fn release(&mut self, i: usize, held: bool) {
        self.give_back(i, held, "a step").await;
    }

    /// As [`Request::release`], naming the step (`what`) in a failure.
    pub async fn give_back(&mut self, i: usize, held: bool, what: &str) {
        let Self::Holding(guard) = std::mem::replace(self, Self::Idle) else {
            panic!("{what}: client {i} holds nothing")
        };
        let released = guard
            .release()
            .await
            .unwrap_or_else(|e| panic!("{what}: release by {i}: {e}"));
        assert_eq!(released, held, "{what}: release by {i}");
    }

    /// Client `i`'s renewal was refused: its guard is given up (the release finds the lease
    /// gone).
    pub async fn refused(&mut self, i: usize, seen: &mut Seen) {
        seen.count("renewal refused");
        self.release(i, false).await;
    }

    /// Gives back what the request holds, or stops its waiting.
    pub async fn end(self) {
        match self {
            Self::Holding(guard) => {
                let _ = guard.release().await;
            }
            Self::Waiting(task) => task.abort(),
            Self::Idle => {}
        }
    }
}

/// Polls `probe` until it answers, for at most [`PATIENCE`]; `what` says what did not happen.
pub async fn until<T>(what: impl Display, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let limit = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < limit, "{what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A seeded xorshift generator: every run replays the same walks.
pub struct Rng(u64);

impl Rng {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % u64::try_from(n).unwrap()).unwrap()
    }

    /// One of the actions `model` enables in `state`, drawn with `weight` (an action of weight
    /// 0 is never drawn).
    pub fn pick<M: Model>(
        &mut self,
        model: &M,
        state: &M::State,
        weight: impl Fn(&M::Action) -> usize,
    ) -> M::Action
    where
        M::Action: Clone,
    {
        let mut actions = Vec::new();
        model.actions(state, &mut actions);
        let mut pick = self.below(actions.iter().map(&weight).sum());
        actions
            .into_iter()
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
    }
}

/// A walk under way: the model, the seeded draws, the actions taken (which name the step in a
/// failure) and the ones scripted to come next.
pub struct Walk<'a, M: Model> {
    pub model: &'a M,
    pub number: usize,
    rng: &'a mut Rng,
    actions: Vec<M::Action>,
    scripted: Vec<M::Action>,
}

impl<M: Model> Walk<'_, M>
where
    M::Action: Clone + Debug,
{
    /// The next actions are `actions`, in order, instead of drawn ones.
    pub fn script(&mut self, actions: impl IntoIterator<Item = M::Action>) {
        self.scripted = actions.into_iter().collect();
        self.scripted.reverse();
    }

    /// The next scripted action, or one that the model enables in `state`, drawn with `weight`.
    pub fn draw(&mut self, state: &M::State, weight: impl Fn(&M::Action) -> usize) -> M::Action {
        match self.scripted.pop() {
            Some(action) => action,
            None => self.rng.pick(self.model, state, weight),
        }
    }

    /// Records an action taken.
    pub fn push(&mut self, action: M::Action) {
        self.actions.push(action);
    }

    /// Takes `action`, which the model enables in `state`: the state after it (recorded).
    pub fn take(&mut self, state: &M::State, action: M::Action) -> M::State {
        let next = self
            .model
            .next_state(state, action.clone())
            .expect("an enabled action");
        self.push(action);
        next
    }

    /// `walk N, [actions]`.
    pub fn step(&self) -> String {
        format!("walk {}, {:?}", self.number, self.actions)
    }
}

/// One walk replayed on the server: a model's steps done through the library and compared.
pub trait Replay<M: Model> {
    /// The actions walk `number` begins with (none: all are drawn).
    fn script(&self, _number: usize) -> Vec<M::Action> {
        Vec::new()
    }

    /// Takes one step from `state` (an action drawn or scripted), replays it and compares;
    /// answers the state after it.
    async fn advance(&mut self, walk: &mut Walk<'_, M>, state: M::State) -> M::State;

    /// Gives back what the walk's clients still hold; answers the outcomes it saw.
    async fn end(self) -> Seen;
}

/// Gives back what `requests` hold (or stops their waiting); answers `seen`.
pub async fn end(requests: Vec<Request>, seen: Seen) -> Seen {
    for request in requests {
        request.end().await;
    }
    seen
}

/// `walks` random walks of `steps` steps each from `model`'s initial state, drawn from `seed`;
/// `start` makes walk N's replay. Answers the outcomes of them all.
pub async fn walks<M: Model, R: Replay<M>>(
    model: &M,
    walks: usize,
    steps: usize,
    seed: u64,
    mut start: impl AsyncFnMut(usize) -> R,
) -> Seen
where
    M::Action: Clone + Debug,
{
    let mut rng = Rng(seed);
    let mut replayed = 0;
    let mut seen = Seen::default();
    for number in 0..walks {
        let mut real = start(number).await;
        let mut walk = Walk {
            model,
            number,
            rng: &mut rng,
            actions: Vec::new(),
            scripted: Vec::new(),
        };
        walk.script(real.script(number));
        let mut state = model.init_states().remove(0);
        for _ in 0..steps {
            state = real.advance(&mut walk, state).await;
            replayed += 1;
        }
        for (outcome, n) in real.end().await.0 {
            *seen.0.entry(outcome).or_default() += n;
        }
    }
    eprintln!("{walks} walks, {replayed} steps replayed: {seen:?}");
    seen
}
