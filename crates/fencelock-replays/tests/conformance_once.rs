//! Run-once's model against its real scripts: random walks of [`OnceModel`] (runs that begin,
//! record, fail, find the work done or give up after the failures allowed, and leases that run
//! out under a run, so that a paused run's record or failure comes after a newer run began)
//! replayed on a real `redis-server` through the library's `Once`, comparing after every step
//! the lock's holder and fence, the resource's fence floor, the record's fence and the count of
//! failed runs with the model's state.
//!
//! Each model run is a `Client` of its own. Leases last a minute (no timer of the library fires
//! within a walk); a lease that ends in the model is ended with `PEXPIREAT key 1`. The library's
//! `begin()` takes the lock and begins in one call, so a grant is always followed at once by
//! its begin: the model's pause between the two (a begin refused by its fence) is left to the
//! model checker (`tests/check.rs`). A run that begins while another holds the lock waits (a
//! task, in the lock's line) and is passed the lock by the holder's release: its begin then
//! reads the record and the count again (`begin.lua`). One run waits at a time, and the holder's
//! lease does not run out while one does (the waiter is told of a release, not of an expiry).
//! Every other walk starts with the lock's fence counter ahead of the clock, or behind it
//! (`Start`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{Keys, Replay, Seen, Start, Walk};
use fencelock::once::{Begun, OnceGuard};
use fencelock::{Client, Error, Result};
use fencelock_model::once::{OnceAction, OnceModel, OnceState, Run};
use redis::AsyncCommands;
use stateright::Model;
use tokio::task::JoinHandle;

const WALKS: usize = 60;
const STEPS: usize = 14;
/// The job's key.
const JOB: &str = "job";
/// How long a lease lasts: no renewal is due within a walk.
const LEASE: Duration = Duration::from_secs(60);

struct Real {
    model: OnceModel,
    clients: Vec<Client>,
    keys: Keys,
    /// Each run's guard, while it works.
    guards: HashMap<usize, Box<OnceGuard>>,
    /// The run that waits for the lock, and its `begin()`.
    waiting: Option<(usize, JoinHandle<Result<Begun>>)>,
    /// The real fence of each model fence.
    fences: HashMap<u32, u64>,
    start: Start,
    seen: Seen,
}

impl Real {
    /// The record's key, its count of failed runs', the resource's fence key.
    fn key(&self, what: &str) -> String {
        let name = &self.keys.name;
        match what {
            "record" => format!("fencelock:once:{{{name}}}:{JOB}"),
            "failures" => format!("fencelock:once-failed:{{{name}}}:{JOB}"),
            _ => format!("fencelock:fenced:{{{name}}}"),
        }
    }

    /// Run `i`'s `begin()` (the record read, the lock taken, then `begin.lua`), as a task.
    fn spawn_begin(&self, i: usize) -> JoinHandle<Result<Begun>> {
        let once = self.clients[i]
            .once(JOB)
            .lock(&self.keys.name)
            .ttl(LEASE)
            .attempts(u32::from(self.model.attempts));
        tokio::spawn(once.begin())
    }

    /// Run `i` begins, as its model run has.
    async fn begin(&mut self, i: usize, after: &OnceState) {
        let begun = self.spawn_begin(i).await.unwrap();
        self.begun(i, begun, after, false);
    }

    /// Run `i`'s begin answered `begun` (after it `waited` for the lock); the model's run is
    /// in `after`.
    fn begun(&mut self, i: usize, begun: Result<Begun>, after: &OnceState, waited: bool) {
        match (begun, after.runs[i]) {
            (Ok(Begun::Run(guard)), Run::Working(fence)) => {
                let real = guard.fence();
                self.start
                    .check(real, self.fences.values().copied(), "a grant");
                self.fences.insert(fence, real);
                self.guards.insert(i, guard);
                self.seen.count("began");
            }
            (Ok(Begun::AlreadyDone(done)), Run::Finished(false)) => {
                assert!(
                    after.record.is_some(),
                    "run {i}: done {done:?}, the model: none"
                );
                self.seen.count(if waited {
                    "found the work done in its begin"
                } else {
                    "found the work done"
                });
            }
            (Ok(Begun::GaveUp(gave_up)), Run::Finished(false)) => {
                let spent = after.record.is_none() && after.failures >= self.model.attempts;
                assert!(spent, "run {i} gave up: {gave_up:?}, the model did not");
                self.seen.count(if waited {
                    "gave up in its begin"
                } else {
                    "gave up"
                });
            }
            (got, run) => panic!("run {i} began: {:?}, the model: {run:?}", got.map(|_| ())),
        }
    }

    async fn step(&mut self, before: &OnceState, after: &OnceState, action: OnceAction) {
        match action {
            OnceAction::Begin(i) => self.begin(i, after).await,
            OnceAction::Record(i) => {
                let guard = self.guards.remove(&i).expect("a run that works");
                match (guard.done().await, after.runs[i]) {
                    (Ok(()), Run::Finished(true)) => self.seen.count("recorded"),
                    (Err(Error::Fenced { .. }), Run::Finished(false)) => {
                        self.seen.count("a paused run's record refused");
                    }
                    (got, run) => panic!("run {i} recorded: {got:?}, the model: {run:?}"),
                }
            }
            OnceAction::Fail(i) => {
                let guard = self.guards.remove(&i).expect("a run that works");
                let counted = guard.failed().await.unwrap();
                if after.failures > before.failures {
                    assert_eq!(
                        counted,
                        Some(u64::from(after.failures)),
                        "run {i}'s failure"
                    );
                    self.seen.count("a failure counted");
                } else {
                    assert_eq!(
                        counted, None,
                        "run {i}'s failure, the model did not count it"
                    );
                    self.seen.count("a paused run's failure not counted");
                }
            }
            OnceAction::Tick => {
                if before.holder.is_some() && after.now == before.expires {
                    self.keys.expire("").await;
                    self.seen.count("a lease ran out");
                }
            }
            other => panic!("{other:?} is not replayed"),
        }
    }

    /// Run `i` waits for the lock: its `begin()` read the record and the count, and is in the
    /// lock's line.
    async fn wait(&mut self, i: usize) {
        let task = self.spawn_begin(i);
        let line = self.keys.key(":waiters");
        let redis = &mut self.keys.redis;
        common::until(format!("run {i} did not wait"), async || {
            let waiting: u64 = redis.zcard(&line).await.unwrap();
            (waiting > 0).then_some(())
        })
        .await;
        self.waiting = Some((i, task));
        self.seen.count("waited");
    }

    async fn compare(&mut self, s: &OnceState, step: &str) {
        let value: Option<String> = self.keys.redis.get(self.keys.key("")).await.unwrap();
        // (`+`: someone waited for it.)
        let holder = value.map(|v| {
            let fence = v.rsplit_once(':').unwrap().1.trim_end_matches('+');
            fence.parse::<u64>().unwrap()
        });
        let expected = s
            .holder
            .filter(|_| s.now < s.expires)
            .map(|i| match s.runs[i] {
                Run::Working(fence) | Run::Granted(fence) => self.fences[&fence],
                run => panic!("{step}: the model's holder {i} is {run:?}"),
            });
        assert_eq!(holder, expected, "{step}: the lock's fence");
        let floor: Option<u64> = self.keys.redis.get(self.key("floor")).await.unwrap();
        if s.floor > 0 && !self.fences.contains_key(&s.floor) {
            // A run that waited and found, in its begin, the work done or given up: its fence
            // is seen only as the floor it raised.
            let real = floor.expect("a floor");
            let earlier = self.fences.values().copied();
            self.start.check(real, earlier, "a begin's fence");
            self.fences.insert(s.floor, real);
        }
        let expected = (s.floor > 0).then(|| self.fences[&s.floor]);
        assert_eq!(floor, expected, "{step}: the resource's fence floor");
        let record: Option<String> = self.keys.redis.get(self.key("record")).await.unwrap();
        let record = record.map(|r| r.split_once(':').unwrap().0.parse::<u64>().unwrap());
        assert_eq!(
            record,
            s.record.map(|f| self.fences[&f]),
            "{step}: the record"
        );
        let failures: Option<u8> = self.keys.redis.get(self.key("failures")).await.unwrap();
        assert_eq!(failures.unwrap_or(0), s.failures, "{step}: the failed runs");
    }
}

impl Replay<OnceModel> for Real {
    async fn advance(&mut self, walk: &mut Walk<'_, OnceModel>, state: OnceState) -> OnceState {
        let model = walk.model;
        let waits = state.runs.contains(&Run::Waiting);
        let held = state.now < state.expires;
        // Time passing twice as likely as the rest, so that leases run out under runs; not
        // past the holder's lease while a run waits, and one run waits at a time.
        let action = walk.draw(&state, |a| match a {
            OnceAction::Tick if waits && held && state.now + 1 == state.expires => 0,
            OnceAction::Tick => 2,
            OnceAction::Acquire(_) if waits && held => 0,
            a => usize::from(model.next_state(&state, *a).is_some()),
        });
        let mut next = walk.take(&state, action);
        match (action, next.runs[action_run(action)]) {
            (OnceAction::Acquire(i), Run::Granted(_)) => {
                // The library begins as soon as it holds the lock.
                let begun = walk.take(&next, OnceAction::Begin(i));
                self.step(&next, &begun, OnceAction::Begin(i)).await;
                next = begun;
            }
            (OnceAction::Acquire(i), Run::Waiting) => self.wait(i).await,
            // The work done, or given up, before the lock is taken.
            (OnceAction::Acquire(i), _) => self.begin(i, &next).await,
            _ => self.step(&state, &next, action).await,
        }
        if let Some((w, task)) = self.waiting.take_if(|_| next.now >= next.expires) {
            // The lock was released: passed to the run that waits, which begins.
            let taken = walk.take(&next, OnceAction::Take(w));
            let begun = walk.take(&taken, OnceAction::Begin(w));
            let answer = task.await.unwrap();
            self.begun(w, answer, &begun, true);
            next = begun;
        }
        self.compare(&next, &walk.step()).await;
        next
    }

    async fn end(self) -> Seen {
        for guard in self.guards.into_values() {
            let _ = guard.give_up().await;
        }
        if let Some((_, task)) = self.waiting {
            task.abort();
        }
        self.seen
    }
}

/// The run an action is about.
fn action_run(action: OnceAction) -> usize {
    match action {
        OnceAction::Acquire(i)
        | OnceAction::Take(i)
        | OnceAction::Begin(i)
        | OnceAction::Floor(i)
        | OnceAction::Record(i)
        | OnceAction::Fail(i) => i,
        OnceAction::Tick => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_walks_of_run_once_match_the_real_scripts() {
    let (server, redis) = common::server().await;
    let model = OnceModel {
        max_time: u8::try_from(STEPS).unwrap(),
        ..OnceModel::small()
    };
    let clients = common::clients(&server, model.clients);
    let start = async |walk| {
        let mut real = Real {
            model: model.clone(),
            clients: clients.clone(),
            keys: Keys::new(&redis, format!("once{walk}")),
            guards: HashMap::new(),
            waiting: None,
            fences: HashMap::new(),
            start: Start::of(walk),
            seen: Seen::default(),
        };
        real.start.set(&mut real.keys).await;
        real
    };
    let seen = common::walks(&model, WALKS, STEPS, 0x5851_f42d_4c95_7f2d, start).await;
    seen.assert_saw(&[
        "waited",
        "found the work done in its begin",
        "gave up in its begin",
        "began",
        "recorded",
        "found the work done",
        "a failure counted",
        "gave up",
        "a lease ran out",
        "a paused run's record refused",
        "a paused run's failure not counted",
    ]);
}
