//! Redis Cluster: every kind of lock on a real 3-master cluster, waiters woken by sharded
//! pub/sub, renewals batched per slot, scripts loaded on the slot's master only, the operator's
//! view over every master, and a failover that loses a granted lock (the holder is told, fences
//! keep growing, the old holder's late write is refused).

use crate::common;

use std::collections::BTreeSet;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{calls, request};
use fencelock::{Client, Error};
use fencelock_testkit::RedisCluster;

/// One cluster (3 masters, one replica each) shared by the tests of this file that do not
/// change its topology; its processes die with the test process.
fn shared() -> &'static RedisCluster {
    static CLUSTER: OnceLock<RedisCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match RedisCluster::start(3, 1) {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start a Redis Cluster: {e}"),
    })
}

fn cluster_client(cluster: &RedisCluster) -> Client {
    // Two seeds: the client finds the rest.
    let urls = cluster.urls();
    match Client::cluster(&urls[..2])
        .command_timeout(Duration::from_millis(800))
        .build()
    {
        Ok(client) => client,
        Err(e) => panic!("cannot build a cluster client: {e}"),
    }
}

/// The port of the master serving the keys of lock `name`.
fn master_port(cluster: &RedisCluster, name: &str) -> u16 {
    match cluster.master_of(&format!("fencelock:{{{name}}}")) {
        Ok(node) => node.port(),
        Err(e) => panic!("master of {name}: {e}"),
    }
}

/// Lock names whose slots are on at least two different masters.
fn names_on_several_masters(cluster: &RedisCluster, prefix: &str, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    let masters: BTreeSet<u16> = names.iter().map(|n| master_port(cluster, n)).collect();
    assert!(masters.len() >= 2, "{names:?} all live on one master");
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_excludes_and_fences_on_a_cluster() {
    let cluster = shared();
    let client = cluster_client(cluster);
    let other = cluster_client(cluster);
    for kind in ["lock", "fair", "reentrant", "write", "semaphore"] {
        for name in names_on_several_masters(cluster, &format!("kinds-{kind}"), 6) {
            let guard = request(&client, kind, &name)
                .try_acquire()
                .await
                .unwrap_or_else(|e| panic!("{kind} {name}: {e}"))
                .unwrap_or_else(|| panic!("{kind} {name}: busy on a fresh cluster"));
            let first = guard.fence();
            assert!(first > 0, "{kind} {name}");
            // The semaphore lets 3 in: fill it, then it is busy.
            let mut extra = Vec::new();
            if kind == "semaphore" {
                for _ in 0..2 {
                    extra.push(
                        request(&other, kind, &name)
                            .try_acquire()
                            .await
                            .unwrap_or_else(|e| panic!("{e}"))
                            .unwrap_or_else(|| panic!("{name}: a permit was refused")),
                    );
                }
            }
            let busy = request(&other, kind, &name)
                .try_acquire()
                .await
                .unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
            assert!(busy.is_none(), "{kind} {name}: granted twice");
            // The keys are on the master of the lock's slot.
            let master = cluster
                .master_of(&format!("fencelock:{{{name}}}"))
                .unwrap_or_else(|e| panic!("{e}"));
            let exists = master
                .cmd(&["EXISTS", &format!("fencelock:{{{name}}}")])
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(exists, redis::Value::Int(1), "{kind} {name}");
            assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
            for permit in extra {
                assert!(permit.release().await.unwrap_or_else(|e| panic!("{e}")));
            }
            let next = request(&other, kind, &name)
                .try_acquire()
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("{kind} {name}: still held after release"));
            assert!(
                next.fence() > first,
                "{kind} {name}: fence went {first} -> {}",
                next.fence()
            );
            assert!(next.release().await.unwrap_or_else(|e| panic!("{e}")));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiter_through_sharded_pubsub_in_the_slot() {
    let cluster = shared();
    let holder_client = cluster_client(cluster);
    let waiter_client = cluster_client(cluster);
    let name = "wake-me";
    let master_port = master_port(cluster, name);
    let master = cluster
        .nodes
        .iter()
        .find(|n| n.port() == master_port)
        .unwrap_or_else(|| panic!("no node on {master_port}"));
    let spublish_before = calls(master, "spublish");
    let publish_before: u64 = cluster.nodes.iter().map(|n| calls(n, "publish")).sum();

    // A long lease: only a release message can let the waiter in quickly.
    let lease = Duration::from_secs(60);
    let guard = holder_client
        .lock(name)
        .ttl(lease)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let result = waiter_client
            .lock(name)
            .wait_up_to(Duration::from_secs(30))
            .acquire()
            .await;
        (result, started.elapsed())
    });
    // Let the waiter subscribe and wait.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter got in while the lock was held"
    );
    let released_at = Instant::now();
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    let (result, _) = waiter.await.unwrap_or_else(|e| panic!("{e}"));
    let woken_after = released_at.elapsed();
    let next = result.unwrap_or_else(|e| panic!("waiter: {e}"));
    // Woken by the message, not by a timer: far sooner than the 60 s lease (a generous bound
    // for a loaded machine; the benchmark measures the real figure).
    assert!(
        woken_after < Duration::from_secs(5),
        "the waiter was not woken by the release: {woken_after:?}"
    );
    assert!(next.release().await.unwrap_or_else(|e| panic!("{e}")));
    // The release published in the lock's slot, on its master, and never cluster-wide.
    assert!(
        calls(master, "spublish") > spublish_before,
        "no SPUBLISH on the slot's master"
    );
    let publish_after: u64 = cluster.nodes.iter().map(|n| calls(n, "publish")).sum();
    assert_eq!(
        publish_after, publish_before,
        "a release was broadcast with PUBLISH"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_of_locks_in_many_slots_keep_every_lock() {
    let cluster = shared();
    let client = cluster_client(cluster);
    let names = names_on_several_masters(cluster, "renew", 40);
    // Long enough that a loaded machine running six nodes does not miss a renewal (each is due
    // a third of a lease in, with two thirds of a lease to spare).
    let ttl = Duration::from_secs(2);
    let mut guards = Vec::new();
    for name in &names {
        guards.push(
            client
                .lock(name.as_str())
                .ttl(ttl)
                .acquire()
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}")),
        );
    }
    // Several leases long: only renewals (batched, one pipeline per slot) keep them; without
    // them every key is gone after one lease.
    tokio::time::sleep(ttl * 3).await;
    for guard in &guards {
        assert!(guard.is_held(), "{} was lost", guard.name());
        let master = cluster
            .master_of(&format!("fencelock:{{{}}}", guard.name()))
            .unwrap_or_else(|e| panic!("{e}"));
        let pttl = common::integer_reply(
            master,
            &["PTTL", &format!("fencelock:{{{}}}", guard.name())],
        );
        assert!(pttl > 0, "{}: PTTL {pttl}", guard.name());
    }
    for guard in guards {
        assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_script_cache_is_reloaded_on_the_slot_master_while_a_replica_is_stopped() {
    let cluster = shared();
    let client = cluster_client(cluster);
    let name = "script-cache";
    let port = master_port(cluster, name);
    let master = cluster
        .nodes
        .iter()
        .find(|n| n.port() == port)
        .unwrap_or_else(|| panic!("no node on {port}"));
    // Load the scripts, then lose them on that master.
    let guard = client
        .lock(name)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    master.script_flush().unwrap_or_else(|e| panic!("{e}"));
    // A stopped replica (of another master) must not matter: the script is loaded with the
    // call, on the slot's master, not on every node.
    let replica = cluster
        .nodes
        .iter()
        .skip(3)
        .find(|n| n.port() != port)
        .unwrap_or_else(|| panic!("no replica"));
    let loads_elsewhere: u64 = cluster
        .nodes
        .iter()
        .filter(|n| n.port() != port && n.port() != replica.port())
        .map(|n| calls(n, "script|load") + calls(n, "eval"))
        .sum();
    replica.pause().unwrap_or_else(|e| panic!("{e}"));
    let result = client.lock(name).acquire().await;
    let resumed = replica.resume();
    let guard = result.unwrap_or_else(|e| panic!("acquire after SCRIPT FLUSH: {e}"));
    resumed.unwrap_or_else(|e| panic!("{e}"));
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    let loads_elsewhere_after: u64 = cluster
        .nodes
        .iter()
        .filter(|n| n.port() != port && n.port() != replica.port())
        .map(|n| calls(n, "script|load") + calls(n, "eval"))
        .sum();
    assert_eq!(
        loads_elsewhere, loads_elsewhere_after,
        "scripts were loaded on other nodes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_inspect_and_force_release_see_every_master() {
    let cluster = shared();
    let client = Client::cluster(cluster.urls())
        .key_prefix("admin-test")
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let names = names_on_several_masters(cluster, "listed", 8);
    let mut guards = Vec::new();
    for name in &names {
        guards.push(
            client
                .lock(name.as_str())
                // A force-released holder learns it at its next renewal, a third of its lease
                // later: a short lease keeps that well inside the wait below.
                .ttl(Duration::from_secs(3))
                .acquire()
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    let listing = client.list("*").await.unwrap_or_else(|e| panic!("{e}"));
    let listed: BTreeSet<&str> = listing.locks.iter().map(|l| l.name.as_str()).collect();
    let expected: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(listed, expected, "list over the cluster");
    assert!(listing.unanswered.is_empty(), "{:?}", listing.unanswered);

    let info = client
        .inspect(&names[0])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(info.is_held());
    assert!(
        client
            .force_release(&names[0])
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    tokio::time::timeout(Duration::from_secs(10), guards[0].lost())
        .await
        .unwrap_or_else(|_| panic!("the holder of a force-released lock was not told"));
    for guard in guards.into_iter().skip(1) {
        assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cluster_configurations_are_clear_errors() {
    let err = Client::cluster(Vec::<String>::new())
        .build()
        .map(drop)
        .unwrap_err();
    assert!(err.to_string().contains("no seed node URL"), "{err}");
    let err = Client::cluster(["redis://u:s3cret@127.0.0.1:1", "rediss://127.0.0.1:2"])
        .build()
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(err.contains("mixed"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    // A cluster that is not there: a prompt error naming the lock and the seeds.
    let port = fencelock_testkit::free_port().unwrap_or_else(|e| panic!("{e}"));
    let client = Client::cluster([format!("redis://127.0.0.1:{port}")])
        .command_timeout(Duration::from_millis(500))
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let err = client
        .lock("nowhere")
        .try_acquire()
        .await
        .map(drop)
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    assert!(
        text.contains("nowhere") && text.contains(&port.to_string()),
        "{text}"
    );
}

/// Lock passing on a cluster: the waiter's place is in the lock's slot, the release (which names
/// the line without declaring it) passes the lock there and tells the waiter by `SPUBLISH`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_passes_the_lock_to_a_waiter_on_a_cluster() {
    // A cluster of its own: the shared one's script-loading test counts loads on every node.
    let cluster = &RedisCluster::start(3, 0).unwrap_or_else(|e| panic!("{e}"));
    let a = cluster_client(cluster);
    let b = cluster_client(cluster);
    for name in names_on_several_masters(cluster, "passed", 4) {
        let master = cluster.master_of(&format!("fencelock:{{{name}}}")).unwrap();
        let held = a
            .lock(name.as_str())
            .ttl(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        let waiter = {
            let (b, name) = (b.clone(), name.clone());
            tokio::spawn(async move {
                b.lock(name)
                    .ttl(Duration::from_secs(10))
                    .wait_up_to(Duration::from_secs(5))
                    .acquire()
                    .await
            })
        };
        let first = held.fence();
        let line = format!("fencelock:{{{name}}}:waiters");
        common::wait_for_count("places in line", 1, Duration::from_secs(5), || {
            common::integer_reply(master, &["ZCARD", &line])
        })
        .await;
        assert!(held.release().await.unwrap(), "{name}");
        let guard = tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .unwrap_or_else(|_| panic!("{name}: the waiter was not passed the lock"))
            .unwrap()
            .unwrap();
        let stored = match master
            .cmd(&["GET", &format!("fencelock:{{{name}}}")])
            .unwrap()
        {
            redis::Value::BulkString(v) => String::from_utf8_lossy(&v).into_owned(),
            other => panic!("{name}: {other:?}"),
        };
        assert!(
            stored.ends_with(&format!(":{}", guard.fence())),
            "{name}: {stored} is not the waiter's grant {}",
            guard.fence()
        );
        assert!(guard.fence() > first);
        assert_eq!(common::integer_reply(master, &["ZCARD", &line]), 0);
        assert!(guard.release().await.unwrap());
    }
}

/// `Client::close` on a Redis Cluster client: the commands' connection and the
/// subscriptions' (to every node they reached) close, though a guard and a waiting request
/// still exist. A cluster of its own: the shared one has other tests' clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_drops_the_commands_and_the_subscriptions_connections() {
    let cluster = match RedisCluster::start(3, 0) {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start a Redis Cluster: {e}"),
    };
    let client = cluster_client(&cluster);
    let masters: Vec<_> = cluster.masters().iter().collect();
    // At least the commands' and the subscriptions' on the lock's master.
    common::close_drops_every_connection(client, &masters, "cluster-closing", 2).await;
}
