//! The plain lock's line of waiters on the server, for its replay (`conformance_line.rs`): the
//! clients' ACL user, whose releases' messages are refused (the replay delivers or loses each
//! pass itself), the server's clock, the holder's value and TTL, the line with its scores, the
//! messages the replay sends to one waiter; and the replay's first walks.

use fencelock_model::Action::{Acquire, Crash, Deliver, Lose, Release, Renew, Tick};
use fencelock_model::{Action, Phase, State};
use fencelock_testkit::RedisServer;
use redis::AsyncCommands;

use super::{Keys, Redis};

/// A place's duration (the queue timeout, which is also the lease), in ms.
pub const PLACE_MS: u64 = super::LEASE.as_millis() as u64;
/// The claim of a pass as `release.lua` writes it (`PASS_CLAIM_MS`), in ms.
pub const PASS_CLAIM_MS: i64 = 1_000;
/// The claim once checked, in ms: long enough that no claim runs out on the server within a
/// walk (the replay ends it when the model's does), short of a lease (60 s), which tells the
/// two apart.
pub const CLAIM_MS: i64 = 20_000;
/// How far a place's lapse may come short of a place's duration from the server's clock read
/// after the try that took it (the try ran first), in ms.
pub const PLACE_SLACK: u64 = 10_000;

/// The first walks of `LockModel::passing`: a pass delivered and confirmed; a pass whose message
/// is lost, taken by the waiter's try; the same after the claim ran out; a holder that crashed.
pub const PASSING: &[&[Action]] = &[
    &[
        Acquire(0),
        Acquire(1),
        Release(0),
        Deliver(1),
        Renew(1),
        Release(1),
    ],
    &[Acquire(0), Acquire(1), Release(0), Lose(1), Acquire(1)],
    &[
        Acquire(0),
        Acquire(1),
        Release(0),
        Lose(1),
        Tick,
        Acquire(1),
    ],
    &[
        Acquire(0),
        Acquire(1),
        Crash(0),
        Tick,
        Acquire(1),
        Tick,
        Acquire(1),
        Tick,
        Acquire(1),
    ],
];

/// The first walks of `LockModel::dead_waiter`: a pass to a waiter that died, whose claim runs
/// out for the one behind it; a dead waiter's place that lapses, which the release passes over;
/// a pass whose claim ran out and was taken by another, told to the waiter after it took a place
/// again: it believes it holds, and its release gives up its place.
pub const DEAD_WAITER: &[&[Action]] = &[
    &[
        Acquire(0),
        Acquire(1),
        Acquire(2),
        Crash(1),
        Release(0),
        Tick,
        Acquire(2),
    ],
    &[
        Acquire(0),
        Acquire(1),
        Acquire(2),
        Crash(1),
        Tick,
        Acquire(2),
        Renew(0),
        Tick,
        Acquire(2),
        Renew(0),
        Tick,
        Acquire(2),
        Release(0),
        Deliver(2),
        Renew(2),
    ],
    &[
        Acquire(0),
        Acquire(1),
        Release(0),
        Tick,
        Acquire(2),
        Acquire(1),
        Deliver(1),
        Release(1),
    ],
];

/// The token of a client's request, if it has one.
pub fn token(phase: Phase) -> Option<u8> {
    match phase {
        Phase::Waiting { token, .. } | Phase::Holding { token, .. } => Some(token),
        Phase::Idle | Phase::Dead => None,
    }
}

/// How many places in the line have lapsed.
pub fn lapsed(s: &State) -> usize {
    s.server.waiters.iter().filter(|p| p.0 <= s.now).count()
}

/// An ACL user on `server` that may do everything but publish, and a URL for it: a release's
/// message is refused (`release.lua` passes the lock all the same, and answers 2), so no waiter
/// hears of a pass unless the replay tells it.
pub async fn muted_url(server: &RedisServer, redis: &mut Redis) -> String {
    let rules = ["on", ">muted", "~*", "&*", "+@all", "-publish", "-spublish"];
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("muted")
        .arg(&rules[..])
        .query_async(redis)
        .await
        .unwrap();
    format!("redis://muted:muted@127.0.0.1:{}", server.port())
}

/// The server's clock, in ms.
pub async fn now_ms(redis: &mut Redis) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(redis).await.unwrap();
    secs * 1000 + micros / 1000
}

/// What holds the lock: its owner token, its fence, whether it is marked `+` (someone waited),
/// and the key's TTL in ms.
#[derive(Debug)]
pub struct Held {
    pub token: String,
    pub fence: u64,
    pub marked: bool,
    pub pttl: i64,
}

impl Keys {
    /// The key's TTL in ms (-2: no key, -1: no expiry).
    pub async fn pttl(&mut self, suffix: &str) -> i64 {
        self.redis.pttl(self.key(suffix)).await.unwrap()
    }

    /// What holds the lock, if anything.
    pub async fn held(&mut self) -> Option<Held> {
        let value: Option<String> = self.redis.get(self.key("")).await.unwrap();
        let value = value?;
        let pttl = self.pttl("").await;
        let (rest, marked) = match value.strip_suffix('+') {
            Some(rest) => (rest, true),
            None => (value.as_str(), false),
        };
        let (token, fence) = rest.rsplit_once(':').unwrap();
        Some(Held {
            token: token.to_owned(),
            fence: fence.parse().unwrap(),
            marked,
            pttl,
        })
    }

    /// The line (`:waiters`): each place's token and score (when it lapses), in order.
    pub async fn line(&mut self) -> Vec<(String, u64)> {
        let line: Vec<(String, f64)> = self
            .redis
            .zrange_withscores(self.key(":waiters"), 0, -1)
            .await
            .unwrap();
        // (Scores are whole server milliseconds, below 2^53.)
        line.into_iter()
            .map(|(token, score)| (token, score as u64))
            .collect()
    }

    /// Sets the score of `token`'s place, if it has one.
    pub async fn place(&mut self, token: &str, score: u64) {
        let _: i64 = redis::cmd("ZADD")
            .arg(self.key(":waiters"))
            .arg("XX")
            .arg(score)
            .arg(token)
            .query_async(&mut self.redis)
            .await
            .unwrap();
    }

    /// Sets the lock key's TTL to `ms`.
    pub async fn lasts(&mut self, ms: i64) {
        let _: bool = self.redis.pexpire(self.key(""), ms).await.unwrap();
    }

    /// Sends `message` to the waiter with owner token `token` as a release does
    /// (`publish_to`, PROTOCOL.md): on its own channel, or on the lock's while nobody listens
    /// there yet.
    pub async fn tell(&mut self, token: &str, message: &str) {
        let channel = self.key(":released");
        let reached: i64 = self
            .redis
            .publish(format!("{channel}:{token}"), message)
            .await
            .unwrap();
        if reached == 0 {
            let _: i64 = self.redis.publish(channel, message).await.unwrap();
        }
    }
}
