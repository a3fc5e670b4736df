//! Leader election against real servers: terms grow across leaders, proclaim is seen and a
//! deposed leader's refused, observers see every leader in term order and a gap when their
//! subscription is killed; Cluster and Sentinel; Redlock refused.

use crate::common;

use std::time::Duration;

use fencelock::election::{Election, Leader, Observation, Observe};
use fencelock::{Client, Error};
use fencelock_testkit::{RedisCluster, SENTINEL_MASTER, SentinelSet};
use futures_util::StreamExt;

use common::server;

/// Long enough for anything a loaded machine does in a step.
const STEP: Duration = Duration::from_secs(10);

async fn next(observer: &mut Observe) -> Observation {
    match tokio::time::timeout(STEP, observer.next()).await {
        Ok(Some(seen)) => seen,
        Ok(None) => panic!("the observer ended"),
        Err(_) => panic!("no observation within {STEP:?}"),
    }
}

/// Asserts that nothing more is observed for a moment.
async fn nothing_more(observer: &mut Observe) {
    if let Ok(seen) = tokio::time::timeout(Duration::from_millis(300), observer.next()).await {
        panic!("unexpected observation {seen:?}");
    }
}

fn leader_of(seen: Observation) -> Leader {
    match seen {
        Observation::Leader(leader) => leader,
        other => panic!("expected a leader, saw {other:?}"),
    }
}

async fn observe(election: &Election) -> Observe {
    election
        .observe()
        .await
        .unwrap_or_else(|e| panic!("observe: {e}"))
}

async fn current(election: &Election) -> Option<Leader> {
    election
        .leader()
        .await
        .unwrap_or_else(|e| panic!("leader: {e}"))
}

#[tokio::test]
async fn terms_strictly_increase_across_successive_leaders() {
    let redis = server();
    let clients: Vec<Client> = (0..3).map(|_| common::client(&redis.url())).collect();
    let mut terms = Vec::new();
    for round in 0..6 {
        let election = clients[round % 3].election("scheduler");
        let leadership = election
            .campaign(format!("node-{round}"))
            .ttl(Duration::from_millis(500))
            .wait_up_to(STEP)
            .await
            .unwrap_or_else(|e| panic!("campaign {round}: {e}"));
        let seen = current(&election)
            .await
            .unwrap_or_else(|| panic!("no leader"));
        assert_eq!(
            (seen.term, seen.value.as_str()),
            (leadership.term(), format!("node-{round}").as_str())
        );
        terms.push(leadership.term());
        if round % 2 == 0 {
            assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
            assert_eq!(current(&election).await, None);
        } else {
            // A leader dropped without resigning: its lock is released in the background,
            // unannounced; the next campaign still gets a larger term.
            drop(leadership);
            clients[0].wait_idle(STEP).await;
        }
    }
    assert!(
        terms.windows(2).all(|w| w[0] < w[1]),
        "terms must grow: {terms:?}"
    );
}

#[tokio::test]
async fn a_deposed_leaders_proclaim_and_resignation_are_refused() {
    let redis = server();
    let (a, b) = (common::client(&redis.url()), common::client(&redis.url()));
    let mut first = a
        .election("jobs")
        .campaign("a")
        .ttl(Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let busy = b.election("jobs").campaign("b").no_wait().await;
    assert!(matches!(busy, Err(Error::Busy { .. })), "{busy:?}");
    // An operator clears the leader's lock (as a lease running out would): another takes over.
    assert!(
        b.force_release("jobs")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    let second = b
        .election("jobs")
        .campaign("b")
        .wait_up_to(STEP)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(second.term() > first.term());
    let refused = first.proclaim("a-again").await;
    match refused {
        Err(Error::NotLeader {
            election,
            term,
            current,
        }) => {
            assert_eq!(election, "jobs");
            assert_eq!(term, first.term());
            assert_eq!(current, Some(second.term()));
        }
        other => panic!("a deposed leader's proclaim must be refused, got {other:?}"),
    }
    assert_eq!(first.value(), "a");
    let seen = current(&b.election("jobs")).await;
    assert_eq!(
        seen.map(|l| (l.term, l.value)),
        Some((second.term(), "b".into()))
    );
    // Its resignation changes nothing either: it is no longer the leader.
    assert!(!first.resign().await.unwrap_or_else(|e| panic!("{e}")));
    let seen = current(&b.election("jobs")).await;
    assert_eq!(seen.map(|l| l.term), Some(second.term()));
}

#[tokio::test]
async fn proclaim_is_seen_by_leader_and_by_observers() {
    let redis = server();
    let client = common::client(&redis.url());
    let election = client.election("api");
    let mut observer = observe(&election).await;
    assert_eq!(next(&mut observer).await, Observation::Vacant);
    let mut leadership = election
        .campaign("10.0.0.1:80")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let elected = leader_of(next(&mut observer).await);
    assert_eq!(
        (elected.term, elected.value.as_str()),
        (leadership.term(), "10.0.0.1:80")
    );
    leadership
        .proclaim("10.0.0.2:80")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let proclaimed = leader_of(next(&mut observer).await);
    assert_eq!(
        (proclaimed.term, proclaimed.value.as_str(), proclaimed.since),
        (elected.term, "10.0.0.2:80", elected.since),
        "a proclaim keeps the term and its start"
    );
    assert_eq!(current(&election).await, Some(proclaimed));
    assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(next(&mut observer).await, Observation::Vacant);
    nothing_more(&mut observer).await;
}

#[tokio::test]
async fn observers_see_every_leader_in_term_order() {
    let redis = server();
    let clients: Vec<Client> = (0..2).map(|_| common::client(&redis.url())).collect();
    let first = clients[0]
        .election("ring")
        .campaign("first")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut observer = observe(&clients[1].election("ring")).await;
    let mut expected = vec![Observation::Leader(Leader::clone(
        &current(&clients[0].election("ring"))
            .await
            .unwrap_or_else(|| panic!("no leader")),
    ))];
    assert!(first.resign().await.unwrap_or_else(|e| panic!("{e}")));
    expected.push(Observation::Vacant);
    // Leaders in quick succession, from both clients: every one is seen, in order.
    for round in 0..8 {
        let election = clients[round % 2].election("ring");
        let mut leadership = election
            .campaign(format!("leader-{round}"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        expected.push(Observation::Leader(
            current(&election)
                .await
                .unwrap_or_else(|| panic!("no leader")),
        ));
        leadership
            .proclaim(format!("leader-{round}-b"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        expected.push(Observation::Leader(
            current(&election)
                .await
                .unwrap_or_else(|| panic!("no leader")),
        ));
        assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
        expected.push(Observation::Vacant);
    }
    let mut seen = Vec::new();
    for _ in 0..expected.len() {
        seen.push(next(&mut observer).await);
    }
    assert_eq!(seen, expected);
    nothing_more(&mut observer).await;
}

#[tokio::test]
async fn a_killed_subscription_is_reported_as_a_gap_then_the_current_leader() {
    let redis = server();
    let client = common::client(&redis.url());
    let election = client.election("gap");
    let leadership = election
        .campaign("before")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut observer = observe(&election).await;
    let before = leader_of(next(&mut observer).await);
    assert_eq!(before.value, "before");
    match redis.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]) {
        Ok(redis::Value::Int(killed)) => assert!(killed >= 1, "no pub/sub client killed"),
        other => panic!("CLIENT KILL: {other:?}"),
    }
    assert_eq!(next(&mut observer).await, Observation::Gap);
    // Once subscribed again, the then-current leader (the same one) is given.
    assert_eq!(
        next(&mut observer).await,
        Observation::Leader(before.clone())
    );
    // Announcements are heard again.
    assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(next(&mut observer).await, Observation::Vacant);
    let after = election
        .campaign("after")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let seen = leader_of(next(&mut observer).await);
    assert_eq!((seen.term, seen.value.as_str()), (after.term(), "after"));
    assert!(seen.term > before.term);
}

#[tokio::test]
async fn elections_are_refused_over_redlock_before_anything_is_sent() {
    let (_servers, urls) = common::redlock_servers(3);
    let client = common::redlock_client(&urls, Duration::from_millis(200));
    let election = client.election("quorum");
    let campaign = election.campaign("x").no_wait().await;
    let leader = election.leader().await;
    let observed = election.observe().await;
    for err in [campaign.err(), leader.err(), observed.err()] {
        match err {
            Some(Error::Unsupported { lock, reason }) => {
                assert_eq!(lock, "quorum");
                assert!(reason.contains("election \"quorum\""), "{reason}");
            }
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
}

/// Campaign, observe, proclaim and resign on one client of a deployment.
async fn one_leadership_on(client: &Client, name: &str) {
    let election = client.election(name);
    let mut observer = observe(&election).await;
    assert_eq!(next(&mut observer).await, Observation::Vacant);
    let mut leadership = election
        .campaign("one")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(leader_of(next(&mut observer).await).term, leadership.term());
    leadership
        .proclaim("two")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(leader_of(next(&mut observer).await).value, "two");
    assert_eq!(
        current(&election).await.map(|l| l.value),
        Some("two".into())
    );
    assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(next(&mut observer).await, Observation::Vacant);
}

#[tokio::test]
async fn an_election_works_on_redis_cluster() {
    let cluster = RedisCluster::start(3, 0).unwrap_or_else(|e| panic!("cluster: {e}"));
    let client = Client::cluster(cluster.urls())
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    for name in ["alpha", "beta", "gamma"] {
        one_leadership_on(&client, name).await;
    }
}

#[tokio::test]
async fn an_election_works_with_sentinel() {
    let set = SentinelSet::start(1, 1).unwrap_or_else(|e| panic!("sentinel: {e}"));
    let client = Client::sentinel(set.sentinel_urls(), SENTINEL_MASTER)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    one_leadership_on(&client, "followed").await;
}

#[test]
fn the_blocking_election_campaigns_observes_and_resigns() {
    let redis = server();
    let client = fencelock::blocking::Client::open(&redis.url()).unwrap_or_else(|e| panic!("{e}"));
    let election = client.election("blocking");
    let mut observer = election.observe().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(observer.next_within(STEP), Some(Observation::Vacant));
    let mut leadership = election
        .campaign("x")
        .ttl(Duration::from_secs(5))
        .campaign()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(leadership.is_held());
    leadership.proclaim("y").unwrap_or_else(|e| panic!("{e}"));
    let term = leadership.term();
    assert_eq!(
        election.leader().ok().flatten().map(|l| (l.term, l.value)),
        Some((term, "y".into()))
    );
    drop(leadership); // resigns
    let seen: Vec<Observation> = (0..3).filter_map(|_| observer.next_within(STEP)).collect();
    assert!(
        matches!(&seen[..], [Observation::Leader(x), Observation::Leader(y), Observation::Vacant] if x.value == "x" && y.value == "y"),
        "{seen:?}"
    );
    assert_eq!(election.leader().ok().flatten(), None);
}

/// The lock's term and the record's term, read together (`MULTI`): a leader holds the lock
/// without its record being there for it (a gap) when the first is set and differs.
async fn lock_and_record(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> (Option<u64>, Option<u64>) {
    let lock = format!("fencelock:{{{name}}}");
    let record = format!("{lock}:leader");
    let (value, term): (Option<String>, Option<String>) = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg(&lock)
        .cmd("HGET")
        .arg(&record)
        .arg("term")
        .query_async(conn)
        .await
        .unwrap_or_else(|e| panic!("MULTI: {e}"));
    let held = value.and_then(|v| {
        v.trim_end_matches('+')
            .split_once(':')
            .and_then(|(_, fence)| fence.parse().ok())
    });
    (held, term.and_then(|t| t.parse().ok()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_term_always_has_its_leader_through_campaigns_drops_and_resignations() {
    let redis = server();
    let name = "no-gap";
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut campaigners = Vec::new();
    for i in 0..4u64 {
        let client = common::client(&redis.url());
        let stop = stop.clone();
        campaigners.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let election = client.election(name);
                let campaign = election
                    .campaign(format!("node-{i}-{n}"))
                    .ttl(Duration::from_secs(5))
                    .wait_up_to(Duration::from_secs(5));
                // Now and then a campaign is given up while it runs, as a cancelled task is.
                if n.is_multiple_of(5) {
                    let _ =
                        tokio::time::timeout(Duration::from_micros(300), campaign.campaign()).await;
                    continue;
                }
                let Ok(leadership) = campaign.await else {
                    continue;
                };
                tokio::time::sleep(Duration::from_millis(n % 3)).await;
                // Dropped (resigned in the background) or resigned.
                if n.is_multiple_of(2) {
                    drop(leadership);
                } else {
                    let _ = leadership.resign().await;
                }
            }
        }));
    }
    let reader = common::client(&redis.url());
    let election = reader.election(name);
    let mut conn = redis::Client::open(redis.url())
        .unwrap_or_else(|e| panic!("{e}"))
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut gaps = Vec::new();
    let mut held_seen = 0;
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < until {
        let (held, recorded) = lock_and_record(&mut conn, name).await;
        if let Some(term) = held {
            held_seen += 1;
            if recorded != Some(term) {
                gaps.push((term, recorded));
            }
        }
        // `leader()` reads the same two keys in one script: it agrees with the lock.
        let leader = election.leader().await.unwrap_or_else(|e| panic!("{e}"));
        let (held_after, _) = lock_and_record(&mut conn, name).await;
        if leader.is_none() && held.is_some() && held == held_after {
            gaps.push((held.unwrap_or_default(), None));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for campaigner in campaigners {
        let _ = campaigner.await;
    }
    assert!(
        held_seen > 50,
        "the leadership was seen held {held_seen} times only"
    );
    assert!(gaps.is_empty(), "a term held without its leader: {gaps:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_sees_vacant_within_a_lease_of_a_leader_that_vanished() {
    let redis = server();
    let proxy = fencelock_testkit::FaultProxy::start(
        redis
            .url()
            .trim_start_matches("redis://")
            .parse()
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await
    .unwrap_or_else(|e| panic!("proxy: {e}"));
    // The leader reaches Redis through the proxy, which then swallows everything: it can
    // neither renew nor resign, as a SIGKILLed or frozen leader.
    let leader_client = common::client(&proxy.url());
    let observer_client = common::client(&redis.url());
    let ttl = Duration::from_secs(2);
    let leadership = leader_client
        .election("vanished")
        .campaign("node-a")
        .ttl(ttl)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut observer = observer_client
        .election("vanished")
        .observe()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(next(&mut observer).await, Observation::Leader(l) if l.term == leadership.term())
    );
    let vanished = tokio::time::Instant::now();
    proxy.set_blackhole(true);
    let seen = next(&mut observer).await;
    let after = vanished.elapsed();
    assert_eq!(seen, Observation::Vacant, "after {after:?}");
    // Within one lease of the last renewal the observer saw (and the lease a third renewed).
    assert!(
        after <= ttl + Duration::from_millis(1500),
        "Vacant only after {after:?}"
    );
    std::mem::forget(leadership);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resignation_is_one_script_call() {
    let redis = server();
    let client = common::client(&redis.url());
    // The scripts loaded once (a first call of a script is an EVALSHA refused, then its EVAL).
    let first = client
        .election("one-call")
        .campaign("node-0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(first.resign().await.unwrap_or_else(|e| panic!("{e}")));
    let leadership = client
        .election("one-call")
        .campaign("node-a")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut observer = client
        .election("one-call")
        .observe()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(next(&mut observer).await, Observation::Leader(_)));
    let before = common::calls(&redis, "evalsha") + common::calls(&redis, "eval");
    assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
    let after = common::calls(&redis, "evalsha") + common::calls(&redis, "eval");
    assert_eq!(after - before, 1, "calls for one resignation");
    assert_eq!(next(&mut observer).await, Observation::Vacant);
    assert_eq!(
        client.election("one-call").leader().await.ok().flatten(),
        None
    );
    // A dropped leadership resigns too (in the background): observers are told.
    let dropped = client
        .election("one-call")
        .campaign("node-b")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(next(&mut observer).await, Observation::Leader(l) if l.value == "node-b"));
    drop(dropped);
    assert_eq!(next(&mut observer).await, Observation::Vacant);
}

/// The leader's record outlives its term's lease, renewed with it: a leader renewed over several
/// leases is the leader at every read, its record expiring after its lock; and once a leader
/// vanished without resigning (its lease lapsed), its record goes a moment later, so that
/// elections of many names leave no key each behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leaders_record_expires_after_its_lease_and_not_before() {
    let redis = server();
    let proxy = fencelock_testkit::FaultProxy::start(redis.addr())
        .await
        .unwrap_or_else(|e| panic!("proxy: {e}"));
    let leader_client = common::client(&proxy.url());
    let reader = common::client(&redis.url());
    let ttl = Duration::from_millis(600);
    let mut leadership = leader_client
        .election("expiring")
        .campaign("node-a")
        .ttl(ttl)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let election = reader.election("expiring");
    let lock = "fencelock:{expiring}";
    let record = "fencelock:{expiring}:leader";
    let pttl = |key: &str| common::integer_reply(&redis, &["PTTL", key]);
    // Over several leases, renewed by the leader: the leader at every read, and the record due
    // after the lock.
    let until = tokio::time::Instant::now() + ttl * 4;
    let mut reads = 0;
    while tokio::time::Instant::now() < until {
        let seen = current(&election)
            .await
            .unwrap_or_else(|| panic!("no leader after {reads} reads"));
        assert_eq!(seen.term, leadership.term());
        let (lock_ms, record_ms) = (pttl(lock), pttl(record));
        assert!(
            record_ms > 0 && record_ms > lock_ms,
            "the record is due in {record_ms} ms, the lock in {lock_ms} ms"
        );
        reads += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A proclaim rewrites the record: still due after the lock.
    leadership
        .proclaim("node-b")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (lock_ms, record_ms) = (pttl(lock), pttl(record));
    assert!(
        record_ms > lock_ms,
        "after a proclaim the record is due in {record_ms} ms, the lock in {lock_ms} ms"
    );
    // The leader vanishes: it neither renews nor resigns.
    proxy.set_blackhole(true);
    let lapsed = tokio::time::Instant::now() + STEP;
    while common::integer_reply(&redis, &["EXISTS", lock]) == 1 {
        assert!(
            tokio::time::Instant::now() < lapsed,
            "the lease never lapsed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(current(&election).await, None);
    let gone = tokio::time::Instant::now() + STEP;
    while common::integer_reply(&redis, &["EXISTS", record]) == 1 {
        assert!(
            tokio::time::Instant::now() < gone,
            "the record of a lapsed leader is still there {STEP:?} after its lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::mem::forget(leadership);
}

/// An observer that reads on while leaders come and go within a millisecond or two gives every
/// leader, in order: the read that learns a leader's lease never gives a later leader ahead of
/// the announcements still on their way (each round, two leaders come and resign, and a third
/// holds, while the observer reads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_gives_every_leader_in_order_while_they_come_and_go() {
    let redis = server();
    let client = common::client(&redis.url());
    for round in 0..20 {
        let election = client.election(format!("quick-{round}"));
        let mut observer = observe(&election).await;
        assert!(matches!(observer.next().await, Some(Observation::Vacant)));
        let reader = tokio::spawn(async move {
            let mut leaders = Vec::new();
            while leaders.len() < 3 {
                match tokio::time::timeout(STEP, observer.next()).await {
                    Ok(Some(Observation::Leader(leader))) => {
                        leaders.push((leader.value, leader.term));
                    }
                    Ok(Some(Observation::Vacant)) => {}
                    other => return Err(format!("after {leaders:?}, {other:?}")),
                }
            }
            Ok(leaders)
        });
        let mut terms = Vec::new();
        let mut holder = None;
        for value in ["a", "b", "c"] {
            let leadership = election
                .campaign(value)
                .wait_up_to(STEP)
                .await
                .unwrap_or_else(|e| panic!("campaign {value}: {e}"));
            terms.push((value.to_string(), leadership.term()));
            if value == "c" {
                holder = Some(leadership);
            } else {
                assert!(leadership.resign().await.unwrap_or_else(|e| panic!("{e}")));
            }
        }
        let leaders = reader
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(leaders, terms, "round {round}");
        if let Some(holder) = holder {
            assert!(holder.resign().await.unwrap_or_else(|e| panic!("{e}")));
        }
    }
}
