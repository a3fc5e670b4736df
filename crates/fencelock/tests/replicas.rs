//! Replica acknowledgement of grants (`ClientBuilder::wait_for_replicas`) against a real master
//! and replica: a grant waits until the replica has it; a replica that does not answer makes the
//! grant fail and be given back (`Shortfall::Fail`), or only be logged (`Shortfall::Warn`).

use crate::common;

use std::time::{Duration, Instant};

use fencelock::once::Begun;
use fencelock::{Client, Error, Shortfall};
use fencelock_testkit::RedisServer;

use common::{integer_reply, server};

/// `INFO section` of `server`, as text.
fn info(server: &RedisServer, section: &str) -> String {
    match server
        .cmd(&["INFO", section])
        .unwrap_or_else(|e| panic!("INFO: {e}"))
    {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => format!("{other:?}"),
    }
}

/// A master and one replica of it, in sync.
fn master_and_replica() -> (RedisServer, RedisServer) {
    let master = server();
    let port = master.port().to_string();
    let replica = RedisServer::start_with_args(&["--replicaof", "127.0.0.1", &port])
        .unwrap_or_else(|e| panic!("cannot start a replica: {e}"));
    let started = Instant::now();
    loop {
        let text = info(&master, "replication");
        if text.contains("connected_slaves:1") && text.contains("state=online") {
            return (master, replica);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the replica did not sync: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A client that waits up to `wait` for one replica after each grant.
fn client(url: &str, wait: Duration, on_shortfall: Shortfall) -> Client {
    Client::builder(url)
        .wait_for_replicas(1, wait, on_shortfall)
        .command_timeout(wait + Duration::from_millis(500))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn a_grant_waits_for_the_replica_and_fails_without_it() {
    let (master, replica) = master_and_replica();
    // A generous wait while the replica answers: a loaded machine may take a while.
    let patient = client(&master.url(), Duration::from_secs(3), Shortfall::Fail);
    let guard = patient.lock("replicated").acquire().await.unwrap();
    // Acknowledged: the replica has the lock already.
    assert_eq!(
        integer_reply(&replica, &["EXISTS", "fencelock:{replicated}"]),
        1
    );
    assert!(guard.release().await.unwrap());

    // The replica stops answering: the grant is given back, and the caller told.
    replica.pause().unwrap();
    let strict = client(&master.url(), Duration::from_millis(300), Shortfall::Fail);
    let started = Instant::now();
    let err = strict.lock("unreplicated").acquire().await.unwrap_err();
    assert!(
        matches!(&err, Error::NotReplicated { lock, acknowledged: 0, wanted: 1, .. } if lock == "unreplicated"),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        integer_reply(&master, &["EXISTS", "fencelock:{unreplicated}"]),
        0,
        "the unreplicated grant was not given back"
    );

    // Only warned: the lock is kept.
    let lenient = client(&master.url(), Duration::from_millis(300), Shortfall::Warn);
    let guard = lenient.lock("unreplicated").acquire().await.unwrap();
    assert_eq!(
        integer_reply(&master, &["EXISTS", "fencelock:{unreplicated}"]),
        1
    );
    replica.resume().unwrap();
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn a_wait_longer_than_the_command_timeout_is_refused_when_the_client_is_built() {
    let err = Client::builder("redis://127.0.0.1:6379")
        .wait_for_replicas(1, Duration::from_secs(3), Shortfall::Fail)
        .command_timeout(Duration::from_secs(2))
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { reason } if reason.contains("command timeout")),
        "{err}"
    );
}

#[tokio::test]
async fn a_server_without_replicas_cannot_acknowledge() {
    let lonely = server();
    let err = client(&lonely.url(), Duration::from_millis(300), Shortfall::Fail)
        .lock("alone")
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotReplicated { .. }), "{err:?}");
    assert_eq!(integer_reply(&lonely, &["EXISTS", "fencelock:{alone}"]), 0);
}

/// A run-once's record waits for the replica too: acknowledged, the replica has it; when the
/// replica stops answering after the grant, recording fails with `NotReplicated`.
#[tokio::test]
async fn a_run_once_record_waits_for_the_replica() {
    let (master, replica) = master_and_replica();
    let patient = client(&master.url(), Duration::from_secs(3), Shortfall::Fail);
    let Begun::Run(run) = patient.once("migrate/1").begin().await.unwrap() else {
        panic!("done already");
    };
    run.done().await.unwrap();
    assert_eq!(
        integer_reply(
            &replica,
            &["EXISTS", "fencelock:once:{migrate/1}:migrate/1"]
        ),
        1
    );

    let Begun::Run(run) = patient.once("migrate/2").begin().await.unwrap() else {
        panic!("done already");
    };
    replica.pause().unwrap();
    let err = run.done().await.unwrap_err();
    replica.resume().unwrap();
    assert!(
        matches!(&err, Error::NotReplicated { lock, acknowledged: 0, wanted: 1, .. } if lock == "migrate/2"),
        "{err:?}"
    );
}

/// A run-once's begin raises the resource's fence floor, and with `wait_for_replicas` waits for
/// the replica to have it (a failover that lost it would let a stale run record after this one
/// began): three WAITs for a run (the grant, the floor, the record), read from the master's
/// command statistics.
#[tokio::test]
async fn a_run_once_begin_waits_for_the_replica_to_have_the_fence_floor() {
    let (master, _replica) = master_and_replica();
    let patient = client(&master.url(), Duration::from_secs(3), Shortfall::Fail);
    let waits = || {
        info(&master, "commandstats")
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let before = waits();
    let Begun::Run(run) = patient.once("floor/1").begin().await.unwrap() else {
        panic!("done already");
    };
    assert_eq!(waits() - before, 2, "the grant's WAIT and the floor's");
    run.done().await.unwrap();
    assert_eq!(waits() - before, 3, "and the record's");
}
