//! Redis Cluster subscriptions through a failover, at scale: a few hundred waiters on a hundred
//! locks' channels and a few election observers, on a cluster of its own (3 masters, one
//! replica each). The master that serves most of them fails over gracefully, which unsubscribes
//! every sharded channel of its slots unasked, after a pause of it in which every client's
//! calls to it time out (every client must answer again within seconds); right after, every lock is released and every
//! leader proclaims a new value. Each waiter must get its lock by a release message (within
//! seconds, where the fallback, its next try of its own, is 20 s away), and each observer must
//! hear the new value (where its fallback, a read at the end of the leader's lease, is a minute
//! away) after being told of the gap the failover made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fencelock::Client;
use fencelock::election::Observation;
use fencelock_testkit::RedisCluster;
use futures_util::StreamExt;

/// Locks on the master that fails over, and on each of the two others.
const LOCKS_ON_FAILED: usize = 90;
const LOCKS_ON_OTHERS: usize = 15;
/// Waiters per lock, one per waiter client.
const WAITERS_PER_LOCK: usize = 3;
/// Elections on the master that fails over, and on each of the two others.
const ELECTIONS_ON_FAILED: usize = 12;
const ELECTIONS_ON_OTHERS: usize = 3;
/// The holders' and leaders' leases: their ends are no fallback within the test.
const LEASE: Duration = Duration::from_secs(60);
/// A waiter's place in line lasts this long, and it tries again of its own accord a third of
/// it after its last try: the fallback a lost message costs.
const PLACE_LASTS: Duration = Duration::from_secs(60);
/// The longest a release message may take to reach its waiter, or an announcement its
/// observer, even on a loaded machine (the slowest of 360 grants after a failover took 3.3 s
/// on a quiet one); half of a waiter's own retry (20 s), far below an observer's (60 s).
const PROMPT: Duration = Duration::from_secs(10);

fn client(cluster: &RedisCluster) -> Client {
    match Client::cluster(cluster.urls())
        .command_timeout(Duration::from_secs(1))
        .build()
    {
        Ok(client) => client,
        Err(e) => panic!("cannot build a cluster client: {e}"),
    }
}

/// `count` names (`prefix-i`) whose hash tag is served by the `m`-th master.
fn names_on(cluster: &RedisCluster, prefix: &str, m: usize, count: usize) -> Vec<String> {
    let port = cluster.masters()[m].port();
    let names: Vec<String> = (0..100_000)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|name| match cluster.master_of(&format!("{{{name}}}")) {
            Ok(node) => node.port() == port,
            Err(e) => panic!("{e}"),
        })
        .take(count)
        .collect();
    assert_eq!(names.len(), count, "not enough names on master {m}");
    names
}

/// Names on the master that fails over (0), then on masters 1 and 2.
fn spread(cluster: &RedisCluster, prefix: &str, on_failed: usize, on_others: usize) -> Vec<String> {
    let mut names = names_on(cluster, prefix, 0, on_failed);
    for m in 1..3 {
        names.extend(names_on(cluster, prefix, m, on_others));
    }
    names
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How many clients the master now serving `channel`'s slot has subscribed to it
/// (`PUBSUB SHARDNUMSUB`), or why it cannot say.
fn subscribers(cluster: &RedisCluster, channel: &str) -> Result<i64, String> {
    let node = cluster.master_of(channel).map_err(|e| e.to_string())?;
    match node.cmd(&["PUBSUB", "SHARDNUMSUB", channel]) {
        Ok(redis::Value::Array(reply)) => match reply.get(1) {
            Some(redis::Value::Int(n)) => Ok(*n),
            other => Err(format!("PUBSUB SHARDNUMSUB: {other:?}")),
        },
        other => Err(format!("PUBSUB SHARDNUMSUB: {other:?}")),
    }
}

/// The channels of `channels` that fewer than `expected` clients have subscribed on the master
/// now serving them, with their counts: what a failure is reported with.
fn unsubscribed(cluster: &RedisCluster, channels: &[String], expected: i64) -> Vec<String> {
    channels
        .iter()
        .filter_map(|channel| match subscribers(cluster, channel) {
            Ok(n) if n >= expected => None,
            Ok(n) => Some(format!("{channel}: {n} subscribers")),
            Err(e) => Some(format!("{channel}: {e}")),
        })
        .collect()
}

/// Where `channel` is subscribed (`PUBSUB SHARDNUMSUB` on every node, with the node's role),
/// and the connections with sharded subscriptions on the master serving it: what a lost
/// subscription is reported with.
fn whereabouts(cluster: &RedisCluster, channel: &str) -> String {
    let master = cluster.master_of(channel).map(|m| m.port()).ok();
    let mut report = format!("{channel}:");
    for node in cluster.nodes() {
        let count = match node.cmd(&["PUBSUB", "SHARDNUMSUB", channel]) {
            Ok(redis::Value::Array(reply)) => format!("{:?}", reply.get(1)),
            other => format!("{other:?}"),
        };
        let role = if Some(node.port()) == master {
            "master"
        } else {
            "other"
        };
        report.push_str(&format!("\n  {} ({role}): {count}", node.port()));
        if Some(node.port()) == master
            && let Ok(redis::Value::BulkString(list)) = node.cmd(&["CLIENT", "LIST"])
        {
            for line in String::from_utf8_lossy(&list).lines() {
                if !line.contains(" ssub=0 ") {
                    report.push_str(&format!("\n    {line}"));
                }
            }
        }
    }
    report
}

/// What the waiters saw: per lock, whether a release is on its way (since when) or when the
/// last one returned; per grant, how long after that release it came.
#[derive(Default)]
struct Waits {
    released: Mutex<HashMap<String, Release>>,
    /// Per grant: the lock, and the time from the lock's last release to the grant (none for a
    /// grant while the release call had not returned yet: the message came during the call,
    /// which may itself wait for a slot refresh of the `redis` crate).
    hops: Mutex<Vec<(String, Duration)>>,
    /// Waits that ended in an error, and were waited again.
    failed: std::sync::atomic::AtomicU64,
}

/// Where a lock's last release stands.
#[derive(Clone, Copy)]
enum Release {
    OnItsWay,
    Returned(Instant),
}

impl Waits {
    /// Runs `release`, the release of lock `name`, recording when it returned.
    async fn release<T>(&self, name: &str, release: impl std::future::Future<Output = T>) -> T {
        self.set(name, Release::OnItsWay);
        let released = release.await;
        self.set(name, Release::Returned(Instant::now()));
        released
    }

    fn set(&self, name: &str, release: Release) {
        let mut released = self.released.lock().unwrap_or_else(|e| e.into_inner());
        released.insert(name.to_owned(), release);
    }

    fn granted(&self, name: &str) {
        let since = match self
            .released
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            Some(Release::OnItsWay) => Duration::ZERO,
            Some(Release::Returned(at)) => at.elapsed(),
            // Cannot happen: every lock is held until the failover.
            None => Duration::MAX,
        };
        let mut hops = self.hops.lock().unwrap_or_else(|e| e.into_inner());
        hops.push((name.to_owned(), since));
    }
}

/// One waiter per lock and client, each waiting in line (its place lasting [`PLACE_LASTS`])
/// until granted, then holding the lock for 5 ms.
fn wait_for_all(
    clients: &[Client],
    names: &[String],
    waits: &Arc<Waits>,
) -> Vec<tokio::task::JoinHandle<Result<(), String>>> {
    let mut tasks = Vec::new();
    for client in clients {
        for name in names {
            let (client, name, waits) = (client.clone(), name.clone(), waits.clone());
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                // A try that fails (commands may time out for seconds around a failover) ends
                // the wait: wait again, in line again.
                let guard = loop {
                    let acquired = client
                        .lock(name.as_str())
                        .ttl(Duration::from_secs(10))
                        .queue_timeout(PLACE_LASTS)
                        .wait_up_to(Duration::from_secs(120))
                        .acquire()
                        .await;
                    match acquired {
                        Ok(guard) => break guard,
                        Err(e) if started.elapsed() > Duration::from_secs(120) => {
                            return Err(format!("the waiter for {name}: {e}"));
                        }
                        Err(_) => {
                            waits
                                .failed
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                };
                waits.granted(&name);
                tokio::time::sleep(Duration::from_millis(5)).await;
                let released = waits.release(&name, guard.release()).await;
                released.map_err(|e| format!("the release of {name}: {e}"))?;
                Ok(())
            }));
        }
    }
    tasks
}

/// What one observer saw, with when.
type Seen = Arc<Mutex<Vec<(Instant, Observation)>>>;

/// Follows `election` on `client`, recording every observation; returns once the first one
/// (the current leader) is in.
async fn observe(client: &Client, election: &str) -> Seen {
    let mut stream = client
        .election(election)
        .observe()
        .await
        .unwrap_or_else(|e| panic!("observe {election}: {e}"));
    let seen: Seen = Arc::default();
    let first = stream.next().await;
    let first = first.unwrap_or_else(|| panic!("observe {election}: the stream ended"));
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((Instant::now(), first));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Some(observation) = stream.next().await {
            let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
            record.push((Instant::now(), observation));
        }
    });
    seen
}

/// When `seen` first gave a leader with `value`.
fn when_seen(seen: &Seen, value: &str) -> Option<Instant> {
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    seen.iter().find_map(|(at, observation)| match observation {
        Observation::Leader(leader) if leader.value == value => Some(*at),
        _ => None,
    })
}

/// Whether `seen` reported a gap after `since`.
fn gap_since(seen: &Seen, since: Instant) -> bool {
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    seen.iter()
        .any(|(at, observation)| *at >= since && *observation == Observation::Gap)
}

/// Waits until every lock has every waiter in line and every waiter's client is subscribed
/// to its channel on the lock's master.
async fn all_in_line(cluster: &RedisCluster, names: &[String]) {
    let channels: Vec<String> = names
        .iter()
        .map(|n| format!("fencelock:{{{n}}}:released"))
        .collect();
    let since = Instant::now();
    loop {
        let behind = names.iter().filter(|name| {
            let line = format!("fencelock:{{{name}}}:waiters");
            let master = cluster.master_of(&line).unwrap_or_else(|e| panic!("{e}"));
            !matches!(master.cmd(&["ZCARD", &line]), Ok(redis::Value::Int(n)) if n == WAITERS_PER_LOCK as i64)
        });
        let behind = behind.count();
        let unsubscribed = unsubscribed(cluster, &channels, WAITERS_PER_LOCK as i64);
        if behind == 0 && unsubscribed.is_empty() {
            return;
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "waiters not in line after 60 s: {behind} locks short of waiters; {unsubscribed:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every election led by `holder` (with [`LEASE`]), and followed by `observer`.
async fn lead_and_observe(
    holder: &Client,
    observer: &Client,
    elections: &[String],
) -> (Vec<fencelock::election::Leadership>, Vec<Seen>) {
    let mut leaderships = Vec::new();
    let mut observers = Vec::new();
    for name in elections {
        let leadership = holder.election(name.as_str()).campaign("before");
        let leadership = leadership.ttl(LEASE).campaign().await;
        leaderships.push(leadership.unwrap_or_else(|e| panic!("campaign {name}: {e}")));
        let seen = observe(observer, name).await;
        assert!(
            when_seen(&seen, "before").is_some(),
            "{name}: no leader seen"
        );
        observers.push(seen);
    }
    (leaderships, observers)
}

/// Waits until every client answers a command again (at most 60 s); how long that took.
/// Sends every client's reads of 20 locks on the paused old master; answers how many failed
/// (timed out) once they all ended.
fn hold_up(clients: &[&Client], locks: &[String]) -> impl Future<Output = usize> + use<> {
    let mut reads = Vec::new();
    for client in clients {
        for name in locks.iter().take(20) {
            let (client, name) = ((*client).clone(), name.clone());
            reads.push(tokio::spawn(
                async move { client.inspect(name).await.is_err() },
            ));
        }
    }
    async move {
        let mut failed = 0;
        for read in reads {
            if read.await.unwrap_or_else(|e| panic!("a read: {e}")) {
                failed += 1;
            }
        }
        failed
    }
}

/// Commands of the clients whose requests were on their way to the old master may time out for
/// seconds (the `redis` crate's slot refresh): the test releases once every client answers, so
/// that a late grant can only be a lost message.
async fn answering(clients: &[&Client], name: &str) -> Duration {
    let since = Instant::now();
    for client in clients {
        while let Err(e) = client.inspect(name).await {
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "a client does not answer 60 s after the failover: {e}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    since.elapsed()
}

/// Waits for every waiter's task, and until every observer heard `after` (at most 90 s
/// each); what went wrong.
async fn ends(
    waiting: Vec<tokio::task::JoinHandle<Result<(), String>>>,
    observers: &[Seen],
) -> Vec<String> {
    let mut failures = Vec::new();
    for task in waiting {
        match tokio::time::timeout(Duration::from_secs(90), task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => failures.push(e),
            Ok(Err(e)) => failures.push(format!("a waiter panicked: {e}")),
            Err(_) => failures.push("a waiter was not granted within 90 s".to_owned()),
        }
    }
    let heard = tokio::time::timeout(Duration::from_secs(90), async {
        while !observers
            .iter()
            .all(|seen| when_seen(seen, "after").is_some())
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    if heard.is_err() {
        failures.push("an observer did not hear the new value within 90 s".to_owned());
    }
    failures
}

/// The observers that heard the new value later than [`PROMPT`] after it was proclaimed (or
/// never), and those on the failed master (the first [`ELECTIONS_ON_FAILED`]) that were not
/// told of a gap after `fault`.
fn late_or_untold(
    elections: &[String],
    observers: &[Seen],
    proclaimed: Instant,
    fault: Instant,
) -> (Vec<String>, Vec<String>) {
    let mut late = Vec::new();
    let mut no_gap = Vec::new();
    for (i, (name, seen)) in elections.iter().zip(observers).enumerate() {
        match when_seen(seen, "after") {
            Some(at) if at.saturating_duration_since(proclaimed) <= PROMPT => {}
            Some(at) => late.push(format!(
                "{name}: new value heard {} ms after the proclaim",
                millis(at.saturating_duration_since(proclaimed))
            )),
            None => late.push(format!("{name}: new value never heard")),
        }
        if i < ELECTIONS_ON_FAILED && !gap_since(seen, fault) {
            no_gap.push(name.clone());
        }
    }
    (late, no_gap)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiter_and_observer_hears_its_release_after_a_failover() {
    let cluster = match RedisCluster::start(3, 1) {
        Ok(cluster) => cluster,
        Err(e) => panic!("cannot start a Redis Cluster: {e}"),
    };
    let locks = spread(&cluster, "waited", LOCKS_ON_FAILED, LOCKS_ON_OTHERS);
    let elections = spread(
        &cluster,
        "elected",
        ELECTIONS_ON_FAILED,
        ELECTIONS_ON_OTHERS,
    );
    let holder = client(&cluster);
    let waiters: Vec<Client> = (0..WAITERS_PER_LOCK).map(|_| client(&cluster)).collect();
    let observer = client(&cluster);

    // Every lock held, with a waiter from each waiter client in line.
    let mut guards = Vec::new();
    for name in &locks {
        let guard = holder.lock(name.as_str()).ttl(LEASE).acquire().await;
        guards.push(guard.unwrap_or_else(|e| panic!("hold {name}: {e}")));
    }
    let waits = Arc::new(Waits::default());
    let waiting = wait_for_all(&waiters, &locks, &waits);
    all_in_line(&cluster, &locks).await;
    let (mut leaderships, observers) = lead_and_observe(&holder, &observer, &elections).await;

    // The master of most of them fails over: it unsubscribes their channels. It is paused
    // first, with calls of every client on their way to it, which time out: a failover on a
    // loaded machine (where the old master is slow to hand over) did that, and left the
    // `redis` crate's cluster connections of the clients with traffic of their own timing out
    // for minutes against a healthy cluster.
    let replica = cluster
        .replica_of_master(0)
        .unwrap_or_else(|| panic!("no replica"));
    let clients: Vec<&Client> = waiters.iter().chain([&observer, &holder]).collect();
    let old = &cluster.masters()[0];
    old.cmd(&["CLIENT", "PAUSE", "2500", "ALL"])
        .unwrap_or_else(|e| panic!("CLIENT PAUSE: {e}"));
    let held_up = hold_up(&clients, &locks);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fault = Instant::now();
    tokio::task::block_in_place(|| cluster.failover(replica, false))
        .unwrap_or_else(|e| panic!("CLUSTER FAILOVER: {e}"));
    let failed_over = fault.elapsed();
    let timed_out = held_up.await;
    assert!(
        timed_out > 0,
        "no call timed out: the pause held nothing up"
    );
    let answering = answering(&clients, &locks[0]).await;

    // Everything is released, and every leader proclaims a new value, at once.
    let released = Instant::now();
    for (name, guard) in locks.iter().zip(guards) {
        let released = waits.release(name, guard.release()).await;
        assert!(
            released.unwrap_or_else(|e| panic!("release {name}: {e}")),
            "{name} was not held by its holder any more"
        );
    }
    for (name, leadership) in elections.iter().zip(&mut leaderships) {
        let proclaimed = leadership.proclaim("after").await;
        proclaimed.unwrap_or_else(|e| panic!("proclaim on {name}: {e}"));
    }
    let proclaimed = Instant::now();

    // Every waiter gets its lock (through the line of waiters behind it, by messages), every
    // observer hears the new value, and the gap on the failed master.
    let failures = ends(waiting, &observers).await;
    let all_granted = released.elapsed();
    let hops = std::mem::take(&mut *waits.hops.lock().unwrap_or_else(|e| e.into_inner()));
    let slow: Vec<String> = hops
        .iter()
        .filter(|(_, hop)| *hop > PROMPT)
        .map(|(name, hop)| format!("{name}: granted {} ms after its release", millis(*hop)))
        .collect();
    let worst_hop = hops.iter().map(|(_, hop)| *hop).max().unwrap_or_default();
    let (late, no_gap) = late_or_untold(&elections, &observers, proclaimed, fault);
    eprintln!(
        "{} waiters, {} observers: failover of a paused master {} ms ({timed_out} reads timed \
         out), every client answering {} ms later ({} waits failed and waited again); every waiter granted {} ms after the releases, slowest grant \
         {} ms after the release before it",
        hops.len(),
        observers.len(),
        millis(failed_over),
        millis(answering),
        waits.failed.load(std::sync::atomic::Ordering::Relaxed),
        millis(all_granted),
        millis(worst_hop),
    );
    if !(failures.is_empty() && slow.is_empty() && late.is_empty() && no_gap.is_empty()) {
        // The elections' channels that their slot's master has no subscriber of now (the
        // locks' channels have none left: their waiters are done).
        let announce: Vec<String> = elections
            .iter()
            .map(|n| format!("fencelock:{{{n}}}:announce"))
            .collect();
        let lost = unsubscribed(&cluster, &announce, 1);
        for channel in announce
            .iter()
            .filter(|c| lost.iter().any(|l| l.starts_with(c.as_str())))
        {
            eprintln!("{}", whereabouts(&cluster, channel));
        }
        panic!(
            "failures: {failures:#?}\nwaiters woken late ({}): {slow:#?}\nobservers late: \
             {late:#?}\nobservers on the failed master told of no gap: {no_gap:#?}\nelection \
             channels without a subscriber on their master now: {lost:#?}",
            slow.len()
        );
    }
    assert_eq!(hops.len(), locks.len() * WAITERS_PER_LOCK);
}
