//! A hold's label: shown by `inspect` for every kind, kept beside the lock while the hold is
//! renewed, deleted with the release, lapsed with the lease of a holder that stops renewing;
//! an unlabelled hold sends what it always sent.

use crate::common;

use std::time::Duration;

use fencelock::{Error, MAX_LABEL_LEN};
use futures_util::StreamExt;

use common::{client, keys, request, server};

/// The label keys on the server.
fn label_keys(redis: &fencelock_testkit::RedisServer) -> Vec<String> {
    keys(redis)
        .into_iter()
        .filter(|k| k.contains(":label:"))
        .collect()
}

#[tokio::test]
async fn every_kind_shows_its_holders_label_and_deletes_it_on_release() {
    let redis = server();
    let a = client(&redis.url());
    for kind in ["lock", "fair", "reentrant", "write", "read", "semaphore"] {
        let name = format!("labelled-{kind}");
        let label = format!("host-1:{kind} job 7");
        let guard = request(&a, kind, &name)
            .label(label.as_str())
            .no_wait()
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        let info = a.inspect(&name).await.unwrap();
        let holder = match kind {
            "read" | "semaphore" => info.shared.first().cloned(),
            _ => info.holder.clone(),
        };
        let holder = holder.unwrap_or_else(|| panic!("{kind}: no holder in {info:?}"));
        assert_eq!(holder.label.as_deref(), Some(label.as_str()), "{kind}");
        assert_eq!(label_keys(&redis).len(), 1, "{kind}");
        assert!(guard.release().await.unwrap(), "{kind}");
        assert_eq!(label_keys(&redis), Vec::<String>::new(), "{kind}");
    }
}

#[tokio::test]
async fn an_unlabelled_hold_shows_no_label_and_writes_no_label_key() {
    let redis = server();
    let a = client(&redis.url());
    let guard = a
        .lock("plain")
        .ttl(Duration::from_millis(300))
        .acquire()
        .await
        .unwrap();
    // Renewed a few times by the watchdog.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let info = a.inspect("plain").await.unwrap();
    assert_eq!(info.holder.and_then(|h| h.label), None);
    assert_eq!(label_keys(&redis), Vec::<String>::new());
    guard.release().await.unwrap();
}

/// The commands a client sends while `work` runs (MONITOR, without those scripts run).
async fn sent_while<F: Future<Output = ()>>(
    redis: &fencelock_testkit::RedisServer,
    work: F,
) -> Vec<String> {
    let mut lines = common::monitor(redis).await;
    work.await;
    // A marker, to know every earlier line has arrived.
    if let Err(e) = redis.cmd(&["ECHO", "end-of-test"]) {
        panic!("ECHO: {e}");
    }
    let mut sent = Vec::new();
    while let Some(line) = lines.next().await {
        if line.contains("end-of-test") {
            break;
        }
        if !line.contains(" lua]") {
            sent.push(line);
        }
    }
    sent
}

#[tokio::test]
async fn a_labelled_hold_sends_one_more_command_per_grant_renewal_and_release_and_an_unlabelled_none()
 {
    let redis = server();
    let a = client(&redis.url());
    common::warm_up(&a).await;
    let ttl = Duration::from_millis(300);
    let cycle = |label: Option<&'static str>| {
        let a = a.clone();
        async move {
            let request = a.lock("counted").ttl(ttl);
            let request = match label {
                Some(label) => request.label(label),
                None => request,
            };
            let guard = request.acquire().await.unwrap();
            // About three renewals.
            tokio::time::sleep(Duration::from_millis(350)).await;
            assert!(guard.release().await.unwrap());
        }
    };
    let unlabelled = sent_while(&redis, cycle(None)).await;
    assert!(
        unlabelled.iter().all(|l| !l.contains(":label:")),
        "{unlabelled:#?}"
    );
    assert!(
        unlabelled
            .iter()
            .all(|l| l.contains("\"fencelock:{counted}\"") && !l.contains("\"fencelock:{counted}:")),
        "an unlabelled hold names its lock key alone: {unlabelled:#?}"
    );
    let labelled = sent_while(&redis, cycle(Some("worker-9"))).await;
    let label_commands: Vec<&String> = labelled.iter().filter(|l| l.contains(":label:")).collect();
    let count = |command: &str| {
        label_commands
            .iter()
            .filter(|l| l.contains(&format!("\"{command}\"")))
            .count()
    };
    assert_eq!(count("SET"), 1, "{labelled:#?}");
    assert_eq!(count("DEL"), 1, "{labelled:#?}");
    // Each renewal re-arms the label once (a renewal is one or two commands on the lock key:
    // `SET … IFEQ` where the server has it, the extend script otherwise).
    let on_the_lock = labelled.len() - label_commands.len();
    let renewals = count("PEXPIRE");
    assert!(
        renewals >= 1 && renewals <= on_the_lock - 2,
        "{labelled:#?}"
    );
    assert_eq!(
        label_commands.len(),
        2 + renewals,
        "one command per grant, renewal and release: {labelled:#?}"
    );
}

#[tokio::test]
async fn the_label_is_renewed_with_the_hold_and_lapses_with_the_lease_of_a_holder_that_stops() {
    let redis = server();
    let a = client(&redis.url());
    let ttl = Duration::from_millis(300);
    let renewed = a
        .lock("renewed")
        .ttl(ttl)
        .label("kept")
        .acquire()
        .await
        .unwrap();
    let stopped = a
        .lock("stopped")
        .ttl(ttl)
        .auto_renew(false)
        .label("gone")
        .acquire()
        .await
        .unwrap();
    let pttl = common::integer_reply(&redis, &["PTTL", &label_keys(&redis)[0]]);
    assert!(pttl > 0 && pttl <= 300, "{pttl}");
    // Three leases on: the renewed hold keeps its label, the other's lapsed with its lease.
    tokio::time::sleep(3 * ttl).await;
    let info = a.inspect("renewed").await.unwrap();
    assert_eq!(info.holder.and_then(|h| h.label).as_deref(), Some("kept"));
    let info = a.inspect("stopped").await.unwrap();
    assert!(!info.is_held());
    let left = label_keys(&redis);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].contains("{renewed}"), "{left:?}");
    assert!(!stopped.release().await.unwrap());
    assert!(renewed.release().await.unwrap());
    assert_eq!(label_keys(&redis), Vec::<String>::new());
}

#[tokio::test]
async fn inspect_shows_a_label_only_for_a_current_holder() {
    let redis = server();
    let a = client(&redis.url());
    let guard = a.lock("shown").acquire().await.unwrap();
    // A label key of another token (a holder gone, or anyone's write) is not the holder's.
    let stray = format!("fencelock:{{shown}}:label:{}", "ab".repeat(16));
    redis
        .cmd(&["SET", &stray, "impostor", "PX", "60000"])
        .unwrap();
    let info = a.inspect("shown").await.unwrap();
    assert_eq!(info.holder.and_then(|h| h.label), None);
    // Nor is one beside a free lock.
    guard.release().await.unwrap();
    let info = a.inspect("shown").await.unwrap();
    assert!(info.holder.is_none());
    // A label key that is not a string is no label.
    let guard = a.lock("odd").label("fine").acquire().await.unwrap();
    let key = label_keys(&redis)
        .into_iter()
        .find(|k| k.contains("{odd}"))
        .unwrap();
    redis.cmd(&["DEL", &key]).unwrap();
    redis.cmd(&["RPUSH", &key, "x"]).unwrap();
    let info = a.inspect("odd").await.unwrap();
    assert_eq!(info.holder.and_then(|h| h.label), None);
    guard.release().await.unwrap();
}

#[tokio::test]
async fn a_label_too_long_or_with_control_characters_is_refused_naming_the_lock() {
    let redis = server();
    let a = client(&redis.url());
    for bad in ["x".repeat(MAX_LABEL_LEN + 1), "line\nbreak".to_owned()] {
        match a.lock("checked").label(bad.as_str()).acquire().await {
            Err(Error::InvalidArgument { lock, reason }) => {
                assert_eq!(lock, "checked");
                assert!(reason.contains("label"), "{reason}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(keys(&redis).is_empty(), "nothing was sent");
    let longest = "é".repeat(MAX_LABEL_LEN / 2);
    let guard = a
        .lock("checked")
        .label(longest.as_str())
        .acquire()
        .await
        .unwrap();
    let info = a.inspect("checked").await.unwrap();
    assert_eq!(info.holder.and_then(|h| h.label), Some(longest));
    guard.release().await.unwrap();
}

#[tokio::test]
async fn several_locks_and_an_election_carry_their_label() {
    let redis = server();
    let a = client(&redis.url());
    let guard = a
        .multi_lock(["one", "two"])
        .label("batch-3")
        .acquire()
        .await
        .unwrap();
    for name in ["one", "two"] {
        let info = a.inspect(name).await.unwrap();
        assert_eq!(
            info.holder.and_then(|h| h.label).as_deref(),
            Some("batch-3")
        );
    }
    guard.release().await.unwrap();
    let leadership = a
        .election("leader")
        .campaign("node-a")
        .label("host-a:42")
        .campaign()
        .await
        .unwrap();
    let info = a.inspect("leader").await.unwrap();
    assert_eq!(
        info.holder.and_then(|h| h.label).as_deref(),
        Some("host-a:42")
    );
    assert!(leadership.resign().await.unwrap());
    assert_eq!(label_keys(&redis), Vec::<String>::new());
}

#[tokio::test]
async fn over_redlock_every_instance_keeps_the_label_until_the_release() {
    let (servers, urls) = common::redlock_servers(3);
    let a = common::redlock_client(&urls, Duration::from_secs(2));
    let guard = a.lock("spread").label("node-b:77").acquire().await.unwrap();
    // The write returns at a majority; the third follows.
    common::wait_for_count(
        "instances with the label",
        3,
        Duration::from_secs(5),
        || servers.iter().filter(|s| label_keys(s).len() == 1).count(),
    )
    .await;
    let info = a.inspect("spread").await.unwrap();
    assert_eq!(
        info.holder.and_then(|h| h.label).as_deref(),
        Some("node-b:77")
    );
    assert!(guard.release().await.unwrap());
    common::wait_for_count(
        "instances with the label",
        0,
        Duration::from_secs(5),
        || servers.iter().filter(|s| !label_keys(s).is_empty()).count(),
    )
    .await;
}
