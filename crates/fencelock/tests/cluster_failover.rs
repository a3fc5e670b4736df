//! Redis Cluster failovers under contention, on a cluster of its own (3 masters, one replica
//! each): a graceful `CLUSTER FAILOVER` and a master killed with SIGKILL. Service resumes on the
//! promoted replica, fences keep growing, no two holders that were not told of a loss overlap;
//! and the deterministic lost-lock recipe (a grant that never reached the replica) tells the
//! holder and refuses its late fenced write.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fencelock::Client;
use fencelock_testkit::RedisCluster;

fn start_cluster() -> RedisCluster {
    match RedisCluster::start(3, 1) {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start a Redis Cluster: {e}"),
    }
}

fn cluster_client(cluster: &RedisCluster) -> Client {
    match Client::cluster(cluster.urls())
        .command_timeout(Duration::from_millis(500))
        .build()
    {
        Ok(client) => client,
        Err(e) => panic!("cannot build a cluster client: {e}"),
    }
}

/// The index (among the masters) of the master serving lock `name`.
fn master_index(cluster: &RedisCluster, name: &str) -> usize {
    let port = match cluster.master_of(&format!("fencelock:{{{name}}}")) {
        Ok(node) => node.port(),
        Err(e) => panic!("{e}"),
    };
    match cluster.masters().iter().position(|m| m.port() == port) {
        Some(i) => i,
        None => panic!("{name} is served by {port}, not by a first master"),
    }
}

/// A lock name served by the `m`-th master.
fn name_on(cluster: &RedisCluster, prefix: &str, m: usize) -> String {
    for i in 0..1000 {
        let name = format!("{prefix}-{i}");
        if master_index(cluster, &name) == m {
            return name;
        }
    }
    panic!("no name on master {m}")
}

/// What the contending workers saw.
#[derive(Default)]
struct Record {
    /// Per lock: the largest fence granted so far, and who holds it now.
    state: Mutex<HashMap<String, (u64, Option<u64>)>>,
    grants: AtomicU64,
    errors: AtomicU64,
    /// Fence regressions and overlaps of holders that were never told of a loss.
    violations: Mutex<Vec<String>>,
    /// The last grant, as time since the run started (ms), per lock.
    last_grant: Mutex<HashMap<String, u64>>,
    /// The longest time between two grants of one lock (ms): the worst unavailability.
    worst_gap: AtomicU64,
}

/// Workers contending for `names` until `stop`.
fn contend(
    cluster: &RedisCluster,
    names: &[String],
    workers: u64,
    record: &Arc<Record>,
    stop: &Arc<AtomicBool>,
    started: Instant,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let client = cluster_client(cluster);
        let names = names.to_vec();
        let record = record.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut turn = 0usize;
            while !stop.load(Ordering::SeqCst) {
                turn += 1;
                let name = &names[(turn + worker as usize) % names.len()];
                let acquired = client
                    .lock(name.as_str())
                    .ttl(Duration::from_secs(2))
                    .wait_up_to(Duration::from_secs(3))
                    .acquire()
                    .await;
                let guard = match acquired {
                    Ok(guard) => guard,
                    Err(_) => {
                        record.errors.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                {
                    let mut state = record.state.lock().unwrap_or_else(|e| e.into_inner());
                    let entry = state.entry(name.clone()).or_default();
                    if guard.fence() <= entry.0 {
                        record.violations.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                            "{name}: fence {} granted after {}",
                            guard.fence(),
                            entry.0
                        ));
                    }
                    entry.0 = entry.0.max(guard.fence());
                    entry.1 = Some(worker);
                }
                record.grants.fetch_add(1, Ordering::SeqCst);
                let at = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                let previous = record
                    .last_grant
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.clone(), at);
                if let Some(previous) = previous {
                    record.worst_gap.fetch_max(at.saturating_sub(previous), Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                {
                    let mut state = record.state.lock().unwrap_or_else(|e| e.into_inner());
                    let entry = state.entry(name.clone()).or_default();
                    if entry.1 != Some(worker) && guard.is_held() {
                        record.violations.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                            "{name}: worker {worker} (fence {}) overlapped another holder without being told",
                            guard.fence()
                        ));
                    }
                    if entry.1 == Some(worker) {
                        entry.1 = None;
                    }
                }
                let _ = guard.release().await;
            }
        }));
    }
    tasks
}

/// Waits (at most `limit`) until every lock in `names` has had a grant after `after`
/// (milliseconds since the start); the time that took.
async fn resumed(
    record: &Record,
    names: &[String],
    after: u64,
    started: Instant,
    limit: Duration,
) -> Duration {
    let since = Instant::now();
    loop {
        let all = {
            let last = record.last_grant.lock().unwrap_or_else(|e| e.into_inner());
            names
                .iter()
                .all(|n| last.get(n).is_some_and(|&t| t > after))
        };
        if all {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < limit,
            "grants did not resume within {limit:?} (at {:?})",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn millis_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_and_killed_master_failovers_keep_fences_growing_and_service_resuming() {
    let mut cluster = start_cluster();
    let names: Vec<String> = (0..3).map(|m| name_on(&cluster, "contended", m)).collect();
    let record = Arc::new(Record::default());
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks = contend(&cluster, &names, 4, &record, &stop, started);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = record.grants.load(Ordering::SeqCst);
    assert!(before > 0, "no grants before the faults");

    // A graceful failover of master 0.
    let replica = cluster
        .replica_of_master(0)
        .unwrap_or_else(|| panic!("no replica"));
    let fault = millis_since(started);
    {
        let cluster = &cluster;
        tokio::task::block_in_place(|| cluster.failover(replica, false))
            .unwrap_or_else(|e| panic!("CLUSTER FAILOVER: {e}"));
    }
    let graceful = resumed(&record, &names, fault, started, Duration::from_secs(20)).await;

    // Master 1 killed: its replica takes over once the cluster marks it failed.
    let fault = millis_since(started);
    let killed_at = Instant::now();
    cluster.nodes[1]
        .kill()
        .unwrap_or_else(|e| panic!("SIGKILL: {e}"));
    let promoted = cluster
        .replica_of_master(1)
        .unwrap_or_else(|| panic!("no replica"))
        .port();
    {
        let cluster = &cluster;
        let node = cluster
            .nodes
            .iter()
            .find(|n| n.port() == promoted)
            .unwrap_or_else(|| panic!("no node {promoted}"));
        tokio::task::block_in_place(|| cluster.wait_promoted(node))
            .unwrap_or_else(|e| panic!("the replica was not promoted: {e}"));
    }
    let promotion = killed_at.elapsed();
    let killed = resumed(&record, &names, fault, started, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap_or_else(|e| panic!("worker: {e}"));
    }
    let violations = record
        .violations
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    eprintln!(
        "cluster failovers: {} grants, {} failed attempts; longest time between two grants of \
         one lock {} ms; graceful: every lock granted again {:?} after the failover finished; \
         SIGKILL: promotion after {promotion:?}, every lock granted again {:?} after that",
        record.grants.load(Ordering::SeqCst),
        record.errors.load(Ordering::SeqCst),
        record.worst_gap.load(Ordering::SeqCst),
        graceful,
        killed,
    );
    assert!(violations.is_empty(), "{violations:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_lost_in_a_failover_is_reported_and_its_late_write_refused() {
    let cluster = start_cluster();
    let name = name_on(&cluster, "lost", 2);
    let master = &cluster.masters()[2];
    let replica = cluster
        .replica_of_master(2)
        .unwrap_or_else(|| panic!("no replica"));
    let holder_client = cluster_client(&cluster);
    let other_client = cluster_client(&cluster);

    // 1. Freeze the replica until its master gives up on it: the grant will not reach it.
    common::drop_stopped_replicas_quickly(master);
    replica.pause().unwrap_or_else(|e| panic!("{e}"));
    common::wait_for_count(
        "replicas connected to the master",
        0,
        Duration::from_secs(10),
        || common::connected_replicas(master),
    )
    .await;

    // 2. Grant on the master.
    let guard = holder_client
        .lock(name.as_str())
        .ttl(Duration::from_secs(3))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let old_fence = guard.fence();

    // 3. Freeze the master, and let the replica take over without it.
    master.pause().unwrap_or_else(|e| panic!("{e}"));
    replica.resume().unwrap_or_else(|e| panic!("{e}"));
    let takeover = replica.cmd(&["CLUSTER", "FAILOVER", "TAKEOVER"]);
    let failover_at = Instant::now();
    // The old master comes back as a replica of the new one (and drops its copy of the lock).
    master.resume().unwrap_or_else(|e| panic!("{e}"));
    takeover.unwrap_or_else(|e| panic!("CLUSTER FAILOVER TAKEOVER: {e}"));
    {
        let cluster = &cluster;
        tokio::task::block_in_place(|| cluster.wait_promoted(replica))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let promoted_after = failover_at.elapsed();
    let mut held_answers = 0_u32;

    // The lock is gone on the new master: another owner gets it at once (the old lease, were
    // it there, would still run for seconds), with a larger fence.
    let next = loop {
        match other_client.lock(name.as_str()).try_acquire().await {
            Ok(Some(next)) => break next,
            // Held: on the new master, the recipe did not lose the lock; on the old one (which
            // answers from its stale copy until it hears of the takeover, and the client may
            // still route there), try again.
            Ok(None) => {
                let key = format!("fencelock:{{{name}}}");
                let on_new_master = replica.cmd(&["EXISTS", &key]);
                assert_ne!(
                    on_new_master,
                    Ok(redis::Value::Int(1)),
                    "the lock survived the failover; the recipe did not lose it"
                );
                held_answers += 1;
                assert!(
                    failover_at.elapsed() < Duration::from_secs(10),
                    "still routed to the old master 10 s after the takeover (the cluster agreed \
                     on the new master after {promoted_after:?}; {held_answers} answers of \
                     held since)"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) if failover_at.elapsed() < Duration::from_secs(10) => {
                eprintln!("retrying after the failover: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no service after the failover: {e}"),
        }
    };
    let resumed_after = failover_at.elapsed();
    assert!(
        next.fence() > old_fence,
        "fence went backwards across the failover: {old_fence} -> {}",
        next.fence()
    );
    // The old holder is told.
    let told = tokio::time::timeout(Duration::from_secs(10), guard.lost()).await;
    let reason = told.unwrap_or_else(|_| panic!("the holder of a lost lock was not told"));
    let told_after = failover_at.elapsed();
    // The resource takes the new holder's write and refuses the old holder's late one.
    assert!(common::fenced_write(
        replica,
        &name,
        next.fence(),
        "new holder"
    ));
    assert!(
        !common::fenced_write(replica, &name, old_fence, "old holder"),
        "the stale fence was accepted"
    );
    let value = replica
        .cmd(&["GET", &format!("resource:{{{name}}}:value")])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(value, redis::Value::BulkString(b"new holder".to_vec()));
    eprintln!(
        "cluster lost-lock failover: the cluster agreed after {promoted_after:?}, new grant \
         {resumed_after:?} after the takeover ({held_answers} answers of held before it), old \
         holder told after {told_after:?} ({reason}); stale write refused"
    );
    assert!(next.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert!(!guard.release().await.unwrap_or_else(|e| panic!("{e}")));
}

/// A node that stops serving a slot tells the clients subscribed to the slot's sharded channels
/// with an `sunsubscribe` push nobody asked for (a failover, a migration, `CLUSTER DELSLOTS`).
/// On a connection that also carries commands, that push was taken as the reply to the oldest
/// command on its way, and every later reply as the reply to the command after its own: an
/// acquire could be answered with another call's `1` and take it for fence 1. Here a client
/// waits for a lock (so it is subscribed on its master) while its acquire of another lock on
/// that master is held back by `CLIENT PAUSE`, and the node drops and takes back the waited-for
/// lock's slot meanwhile. The held-back acquire gets its own reply, and the waiter still gets
/// the lock when it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrequested_sunsubscribe_push_does_not_shift_command_replies() {
    let cluster = match RedisCluster::start(3, 0) {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start a Redis Cluster: {e}"),
    };
    let build = || {
        Client::cluster(cluster.urls())
            .command_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_else(|e| panic!("cannot build a cluster client: {e}"))
    };
    let (holder, client) = (build(), build());
    let waited = name_on(&cluster, "waited", 0);
    let other = name_on(&cluster, "other", 0);
    let master = &cluster.masters()[0];
    let held = holder
        .lock(waited.as_str())
        .ttl(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let held_fence = held.fence();
    let waiter = {
        let client = client.clone();
        let waited = waited.clone();
        tokio::spawn(async move {
            client
                .lock(waited.as_str())
                .wait_up_to(Duration::from_secs(30))
                .acquire()
                .await
        })
    };
    common::wait_for_count(
        "the waiter subscribed on the master",
        true,
        Duration::from_secs(10),
        || matches!(master.cmd(&["PUBSUB", "SHARDCHANNELS"]), Ok(redis::Value::Array(c)) if !c.is_empty()),
    )
    .await;

    // Scripts wait while the master is paused for writes: the acquire stays on its way.
    master
        .cmd(&["CLIENT", "PAUSE", "3000", "WRITE"])
        .unwrap_or_else(|e| panic!("CLIENT PAUSE: {e}"));
    let acquire = {
        let client = client.clone();
        let other = other.clone();
        tokio::spawn(async move {
            client
                .lock(other.as_str())
                .ttl(Duration::from_secs(60))
                .try_acquire()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let slot = match master.cmd(&["CLUSTER", "KEYSLOT", &format!("fencelock:{{{waited}}}")]) {
        Ok(redis::Value::Int(slot)) => slot.to_string(),
        other => panic!("CLUSTER KEYSLOT: {other:?}"),
    };
    for args in [
        ["CLUSTER", "DELSLOTS", slot.as_str()],
        ["CLUSTER", "ADDSLOTS", slot.as_str()],
    ] {
        master
            .cmd(&args)
            .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")));
    }
    master
        .cmd(&["CLIENT", "UNPAUSE"])
        .unwrap_or_else(|e| panic!("CLIENT UNPAUSE: {e}"));

    let guard = acquire
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the held-back acquire of {other} failed: {e}"))
        .unwrap_or_else(|| panic!("{other} was free, yet refused"));
    let stored = master
        .cmd(&["GET", &format!("fencelock:{{{other}}}")])
        .unwrap_or_else(|e| panic!("{e}"));
    let redis::Value::BulkString(stored) = stored else {
        panic!("{other} is not held on the master: {stored:?}");
    };
    let stored = String::from_utf8_lossy(&stored).into_owned();
    assert!(
        stored.contains(&format!(":{}", guard.fence())),
        "{other}: granted fence {}, the master holds {stored}",
        guard.fence()
    );
    assert!(guard.fence() > 1_000_000, "fence {}", guard.fence());

    // The node unsubscribed the waiter's channel: the client subscribes it again, and the
    // waiter gets the lock at its release (not when the lease would have ended).
    let channel = format!("fencelock:{{{waited}}}:released");
    common::wait_for_count(
        "the waiter subscribed again on the master",
        true,
        Duration::from_secs(10),
        || {
            matches!(master.cmd(&["PUBSUB", "SHARDCHANNELS"]),
                Ok(redis::Value::Array(c)) if c.contains(&redis::Value::BulkString(channel.clone().into_bytes())))
        },
    )
    .await;
    let released_at = Instant::now();
    assert!(held.release().await.unwrap_or_else(|e| panic!("{e}")));
    let next = waiter
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the waiter for {waited}: {e}"));
    assert!(next.fence() > held_fence);
    eprintln!(
        "after an unrequested sunsubscribe: the held-back acquire got its own fence, the \
         waiter the lock {:?} after its release",
        released_at.elapsed()
    );
    assert!(
        released_at.elapsed() < Duration::from_secs(20),
        "the waiter got {waited} only {:?} after its release",
        released_at.elapsed()
    );
    assert!(guard.release().await.unwrap_or_else(|e| panic!("{e}")));
    assert!(next.release().await.unwrap_or_else(|e| panic!("{e}")));
}
