//! One server's calls against a real `redis-server`: an acquire repeated by one token, and the
//! watchdog's pipelined batch answered per lock.

use super::*;
use crate::keys::LockKeys;
use crate::kinds::{plain::Plain, semaphore::Permit};
use crate::token::OwnerToken;
use fencelock_testkit::RedisServer;

const LIMIT: Duration = Duration::from_secs(2);

fn attempt(ttl: Duration) -> Attempt {
    Attempt {
        ttl,
        queue_timeout: Duration::ZERO,
        others_wait: false,
        waiting: false,
    }
}

fn server_for(redis: &RedisServer) -> Server {
    let client = redis::Client::open(redis.url()).unwrap();
    Server::new(client, LIMIT).unwrap()
}

fn plain(keys: &LockKeys) -> Arc<Hold> {
    Arc::new(Hold {
        name: Arc::from("test"),
        protocol: Arc::new(Plain),
        keys: keys.clone(),
        token: OwnerToken::generate().unwrap(),
        linger: Duration::ZERO,
        marked: Default::default(),
        releasing: Default::default(),
        released_fence: Default::default(),
        holder_label: None,
    })
}

#[tokio::test]
async fn acquire_is_idempotent_for_one_token() {
    let redis = RedisServer::start().unwrap();
    let server = server_for(&redis);
    let keys = LockKeys::new("fencelock", "idem");
    let hold = plain(&keys);
    let first = acquire(
        server.clone(),
        hold.clone(),
        attempt(Duration::from_secs(1)),
        LIMIT,
        Arc::default(),
    )
    .await
    .unwrap();
    let AcquireReply::Granted { fence } = first else {
        panic!("{first:?}")
    };
    // A retry with the same token (as after a lost reply) confirms the same fence and
    // re-arms the lease.
    redis.cmd(&["PEXPIRE", keys.lock(), "100"]).unwrap();
    let again = acquire(
        server.clone(),
        hold.clone(),
        attempt(Duration::from_secs(5)),
        LIMIT,
        Arc::default(),
    )
    .await
    .unwrap();
    assert_eq!(again, AcquireReply::Granted { fence });
    let redis::Value::Int(pttl) = redis.cmd(&["PTTL", keys.lock()]).unwrap() else {
        panic!("PTTL")
    };
    assert!(pttl > 4000, "lease not re-armed: {pttl}");
    // Another token is refused and told the remaining lease.
    let other = plain(&keys);
    let held = acquire(
        server.clone(),
        other.clone(),
        attempt(Duration::from_secs(1)),
        LIMIT,
        Arc::default(),
    )
    .await
    .unwrap();
    assert!(
        matches!(held, AcquireReply::Held { remaining: Some(r), .. } if r > Duration::from_secs(4)),
        "{held:?}"
    );
    // Only the owner's token releases, whatever fence it names; the fence key stays.
    for named in [
        ReleaseFence::Unknown,
        ReleaseFence::Held(fence),
        ReleaseFence::WriteBack(fence),
    ] {
        assert!(
            !release(server.clone(), other.clone(), named, LIMIT)
                .await
                .unwrap(),
            "{named:?}"
        );
    }
    assert!(
        release(
            server.clone(),
            hold.clone(),
            ReleaseFence::Held(fence),
            LIMIT
        )
        .await
        .unwrap()
    );
    assert!(
        !release(server.clone(), hold, ReleaseFence::Held(fence), LIMIT)
            .await
            .unwrap()
    );
    let mut left = redis.keys().unwrap();
    left.sort();
    assert_eq!(left, vec![keys.fence().to_owned()]);
}

#[tokio::test]
async fn extend_many_answers_per_lock_in_one_pipeline() {
    let redis = RedisServer::start().unwrap();
    let server = server_for(&redis);
    let held = plain(&LockKeys::new("fencelock", "held"));
    let gone = plain(&LockKeys::new("fencelock", "gone"));
    let permit = Arc::new(Hold {
        name: Arc::from("sem"),
        protocol: Arc::new(Permit {
            permits: 2,
            take: 1,
        }),
        keys: LockKeys::new("fencelock", "sem"),
        token: OwnerToken::generate().unwrap(),
        linger: Duration::ZERO,
        marked: Default::default(),
        releasing: Default::default(),
        released_fence: Default::default(),
        holder_label: None,
    });
    for hold in [&held, &permit] {
        let reply = acquire(
            server.clone(),
            hold.clone(),
            attempt(Duration::from_millis(500)),
            LIMIT,
            Arc::default(),
        )
        .await
        .unwrap();
        assert!(matches!(reply, AcquireReply::Granted { .. }), "{reply:?}");
    }
    redis.script_flush().unwrap();
    let items: Arc<[ExtendItem]> = Arc::from(vec![
        ExtendItem {
            hold: held.clone(),
            ttl: Duration::from_secs(9),
            fence: None,
        },
        ExtendItem {
            hold: gone,
            ttl: Duration::from_secs(9),
            fence: None,
        },
        ExtendItem {
            hold: permit.clone(),
            ttl: Duration::from_secs(9),
            fence: None,
        },
    ]);
    let replies = extend_many(server, items, Duration::from_secs(2))
        .await
        .unwrap();
    let replies: Vec<Extended> = replies.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        replies,
        vec![Extended::Yes, Extended::Missing, Extended::Yes]
    );
    assert!(redis.keys().unwrap().iter().all(|k| !k.contains("gone")));
    for key in [&held.keys.lock(), &permit.keys.lock()] {
        let redis::Value::Int(pttl) = redis.cmd(&["PTTL", key]).unwrap() else {
            panic!("PTTL")
        };
        assert!(pttl > 8000, "{key} not re-armed: {pttl}");
    }
}
