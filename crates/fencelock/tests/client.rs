//! The client as a whole, against real redis-server processes: refusals classified as what they
//! are (authentication, permissions), background work that `wait_idle` waits for (and a
//! cancelled acquisition's own, that its `Cleanup` waits for), and the operator's `list`.

use crate::common;

use std::time::Duration;

use fencelock::{Cleanup, Client, Error, LostReason};
use fencelock_testkit::RedisServer;

use common::{client, server};

/// A server with an ACL user `app` (password `right-horse-battery`) that may do everything.
fn server_with_user() -> RedisServer {
    let redis = server();
    let acl = [
        "ACL",
        "SETUSER",
        "app",
        "on",
        ">right-horse-battery",
        "~*",
        "&*",
        "+@all",
    ];
    if let Err(err) = redis.cmd(&acl) {
        panic!("cannot create the ACL user: {err}");
    }
    redis
}

#[tokio::test]
async fn a_wrong_password_is_an_authentication_failure_not_an_unreachable_server() {
    let redis = server_with_user();
    let url = format!("redis://app:wrong-horse@127.0.0.1:{}", redis.port());
    let client = Client::open(&url).unwrap();
    let err = client.lock("auth").no_wait().acquire().await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, Error::AuthFailed { lock, server, .. }
            if lock == "auth" && *server == format!("127.0.0.1:{}", redis.port())),
        "{err:?}"
    );
    assert!(text.contains("authentication failed"), "{text}");
    assert!(!text.contains("wrong-horse"), "{text}");
    // The right password works, and nothing was left held by the refused attempt.
    assert!(redis.keys().unwrap().is_empty());
    let url = format!("redis://app:right-horse-battery@127.0.0.1:{}", redis.port());
    let guard = Client::open(&url)
        .unwrap()
        .lock("auth")
        .acquire()
        .await
        .unwrap();
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn no_password_for_a_server_that_requires_one_is_an_authentication_failure() {
    let redis = server();
    let url = redis.url();
    redis
        .cmd(&["CONFIG", "SET", "requirepass", "s3cret-pass"])
        .unwrap();
    let err = client(&url).lock("noauth").no_wait().acquire().await;
    assert!(matches!(err, Err(Error::AuthFailed { .. })), "{err:?}");
}

#[tokio::test]
async fn a_missing_acl_permission_is_named_as_such() {
    let redis = server();
    redis
        .cmd(&[
            "ACL",
            "SETUSER",
            "reader",
            "on",
            ">pw-of-reader",
            "~*",
            "&*",
            "+@connection",
            "+@read",
        ])
        .unwrap();
    let url = format!("redis://reader:pw-of-reader@127.0.0.1:{}", redis.port());
    let err = client(&url)
        .lock("perm")
        .no_wait()
        .acquire()
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, Error::PermissionDenied { lock, command: "acquire", .. } if lock == "perm"),
        "{err:?}"
    );
    assert!(
        text.contains("NOPERM") || text.contains("no permissions"),
        "{text}"
    );
    assert!(!text.contains("pw-of-reader"), "{text}");
    assert!(redis.keys().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquisition_s_cleanup_is_its_own_give_back() {
    let debug = || {
        RedisServer::start_with_args(&["--enable-debug-command", "local"])
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let (redis, slow) = (debug(), debug());
    let client = client(&redis.url());
    // Another client's dropped guard: its release is under way while its server sleeps 3 s.
    let other = common::client(&slow.url());
    let dropped = other
        .lock("elsewhere")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let other_sleep = slow.debug_sleep(Duration::from_secs(3));
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(dropped);
    let held = client
        .lock("wanted")
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cleanup = Cleanup::new();
    let waiting = cleanup.scope(client.lock("wanted").acquire());
    let given_up = async {
        let timed_out = tokio::time::timeout(Duration::from_millis(300), waiting).await;
        assert!(timed_out.is_err(), "the lock is held");
    };
    // Its own server sleeps too, a little: the give-back (leaving its place in line) waits.
    let ((), own_sleep) = tokio::join!(given_up, async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        redis.debug_sleep(Duration::from_millis(400))
    });
    let started = std::time::Instant::now();
    assert!(!cleanup.is_done(), "its give-back is under way");
    assert!(cleanup.done(Duration::from_secs(2)).await);
    // Done with its own server's sleep, long before the other release.
    assert!(started.elapsed() < Duration::from_millis(1500));
    let info = client
        .inspect("wanted")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(info.waiting, 0, "{info:#?}");
    assert!(
        !other.wait_idle(Duration::from_millis(1)).await,
        "the other release is still under way"
    );
    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
    let _ = own_sleep.join();
    let _ = other_sleep.join();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_idle_waits_for_the_release_of_a_dropped_guard_on_one_server() {
    let redis = RedisServer::start_with_args(&["--enable-debug-command", "local"]).unwrap();
    let client = client(&redis.url());
    let guard = client
        .lock("dropped")
        .ttl(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    // The server stops answering for a while; the guard is dropped meanwhile, so its release
    // is under way in the background.
    let sleeping = redis.debug_sleep(Duration::from_millis(600));
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(guard);
    assert!(
        !client.wait_idle(Duration::from_millis(1)).await,
        "the dropped guard's release is under way"
    );
    assert!(client.wait_idle(Duration::from_secs(5)).await);
    let _ = sleeping.join();
    assert!(
        !redis
            .keys()
            .unwrap()
            .contains(&"fencelock:{dropped}".to_owned()),
        "released once idle"
    );
    // No limit at all is "as long as it takes", not an overflow.
    assert!(client.wait_idle(Duration::MAX).await);
}

#[tokio::test]
async fn list_finds_the_held_locks_of_every_kind_and_skips_foreign_keys() {
    let redis = server();
    let client = client(&redis.url());
    let plain = client.lock("reports/daily").acquire().await.unwrap();
    let permit = client
        .semaphore("reports/licences", 3)
        .acquire()
        .await
        .unwrap();
    let other = client.lock("billing").acquire().await.unwrap();
    let freed = client.lock("reports/done").acquire().await.unwrap();
    assert!(freed.release().await.unwrap());
    redis
        .cmd(&["SET", "fencelock:{reports/junk}", "not a lock"])
        .unwrap();

    let listing = client.list("reports/*").await.unwrap();
    let names: Vec<&str> = listing.locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["reports/daily", "reports/licences"]);
    assert_eq!(
        listing.locks[0].holder.as_ref().and_then(|h| h.fence),
        Some(plain.fence())
    );
    assert_eq!(listing.locks[1].shared.len(), 1);
    assert!(
        matches!(listing.skipped.as_slice(), [Error::WrongType { lock, .. }] if lock == "reports/junk"),
        "{:?}",
        listing.skipped
    );
    assert!(listing.unanswered.is_empty());

    let all = client.list("*").await.unwrap();
    assert_eq!(all.locks.len(), 3);
    // Glob characters in the prefix are not special; in the pattern they are.
    assert_eq!(client.list("b?lling").await.unwrap().locks.len(), 1);
    assert_eq!(client.list("nothing*").await.unwrap().locks.len(), 0);
    for guard in [plain, permit, other] {
        assert!(guard.release().await.unwrap());
    }
    // The foreign key was only read.
    assert_eq!(
        redis.cmd(&["GET", "fencelock:{reports/junk}"]).unwrap(),
        redis::Value::BulkString(b"not a lock".to_vec())
    );
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_without_a_tls_hint() {
    // A free port with nothing listening: the server is simply not there.
    let port = fencelock_testkit::free_port().unwrap();
    let client = client(&format!("redis://127.0.0.1:{port}"));
    let err = client.lock("nobody").no_wait().acquire().await.unwrap_err();
    assert!(
        matches!(&err, Error::Unreachable { hint: None, .. }),
        "{err:?}"
    );
}

/// A key prefix spelled with the colon fencelock adds itself (`fencelock:`) is refused when the
/// client is built, naming the prefix to write instead; a colon inside a prefix is fine, and
/// its keys are `PREFIX:{NAME}`.
#[tokio::test]
async fn a_key_prefix_ending_with_a_colon_is_refused() {
    let redis = server();
    for prefix in ["fencelock:", "app:locks:", ":"] {
        let err = Client::builder(&redis.url())
            .key_prefix(prefix)
            .build()
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(&err, Error::Config { reason } if reason.contains("ends with ':'")),
            "{prefix:?}: {err}"
        );
    }
    let err = Client::builder(&redis.url())
        .key_prefix("fencelock:")
        .build()
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains(r#"write "fencelock""#), "{err}");

    let nested = Client::builder(&redis.url())
        .key_prefix("app:locks")
        .build()
        .unwrap();
    let guard = nested.lock("n").acquire().await.unwrap();
    assert_eq!(
        common::integer_reply(&redis, &["EXISTS", "app:locks:{n}"]),
        1
    );
    assert!(guard.release().await.unwrap());
}

/// `Client::close` drops the command connection and ends the release listener (its
/// connection with it) though a guard and a waiting request still exist; every later call
/// fails at once with `Error::Closed` naming its lock.
#[tokio::test]
async fn close_drops_the_connections_while_guards_and_requests_exist() {
    let redis = server();
    let client = client(&redis.url());
    // The command connection and the release listener's.
    common::close_drops_every_connection(client, &[&redis], "closing", 2).await;
}

/// After `close` nothing can be renewed: a hold still held is reported lost at its deadline,
/// with the close as the reason.
#[tokio::test]
async fn a_hold_of_a_closed_client_is_lost_at_its_deadline_for_that_reason() {
    let redis = server();
    let client = client(&redis.url());
    let ttl = Duration::from_millis(600);
    let guard = client.lock("closed-hold").ttl(ttl).acquire().await.unwrap();
    client.close().await;
    let reason = tokio::time::timeout(ttl * 3, guard.lost())
        .await
        .expect("no loss reported after the close");
    assert_eq!(
        reason,
        LostReason::Expired {
            last_error: Some("the client was closed".to_owned())
        }
    );
    assert!(!guard.is_held());
}

/// The blocking client's `close` is the same close.
#[test]
fn the_blocking_close_drops_the_connections_too() {
    let redis = server();
    let client = match fencelock::blocking::Client::open(&redis.url()) {
        Ok(client) => client,
        Err(e) => panic!("cannot build a blocking client: {e}"),
    };
    let guard = match client.lock("blocking-close").acquire() {
        Ok(guard) => guard,
        Err(e) => panic!("acquire: {e}"),
    };
    assert!(!common::client_connections(&redis).is_empty());
    client.close();
    assert!(client.is_closed());
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while !common::client_connections(&redis).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{:#?}",
            common::client_connections(&redis)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    common::closed(client.lock("after").acquire(), "after");
    common::closed(guard.release(), "blocking-close");
}
