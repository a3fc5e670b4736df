//! W7: where production Redis lives. fencelock next to the raw baseline (`SET NX PX` and a
//! compare-and-delete script) on the same servers: one plain server, one TLS server, a master
//! with a replica and a `WAIT` for it after each grant, and a Redis Cluster of 3 masters. Each
//! deployment is measured sequentially (1 task, W1-style) and concurrently (many tasks on one
//! client, each its own key, W2-style); fencelock and raw alternate within each repetition, and
//! the report shows medians.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fencelock_testkit::{RedisCluster, RedisServer, TlsFiles, free_port};
use redis::aio::ConnectionLike;
use tokio::time::Instant;

use crate::error::{BenchError, Result};
use crate::report::W7Row;
use crate::stats::median;

/// Release-to-woken-waiter samples per deployment.
const WAKE_SAMPLES: usize = 40;

/// The replica wait of the `WAIT` deployment.
const REPLICA_WAIT: Duration = Duration::from_millis(200);

/// One side of a measurement.
#[derive(Clone)]
enum Side {
    Fencelock(fencelock::Client),
    Raw(RawAny),
}

/// The raw baseline over a single-server or a cluster connection, optionally waiting for one
/// replica after each grant.
#[derive(Clone)]
enum RawAny {
    Single {
        conn: redis::aio::MultiplexedConnection,
        wait_replica: bool,
    },
    Cluster(redis::cluster_async::ClusterConnection),
}

const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

async fn raw_cycle<C: ConnectionLike + Clone + Send>(
    conn: &C,
    release: &redis::Script,
    key: &str,
    token: &str,
    ttl: Duration,
    wait_replica: bool,
) -> Result<()> {
    let mut conn = conn.clone();
    let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(millis)
        .query_async(&mut conn)
        .await
        .map_err(|e| BenchError::redis("raw SET NX", e))?;
    if set.is_none() {
        return Err(BenchError::Bench(format!("raw: {key} was not granted")));
    }
    if wait_replica {
        let acked: u64 = redis::cmd("WAIT")
            .arg(1)
            .arg(u64::try_from(REPLICA_WAIT.as_millis()).unwrap_or(u64::MAX))
            .query_async(&mut conn)
            .await
            .map_err(|e| BenchError::redis("raw WAIT", e))?;
        if acked < 1 {
            return Err(BenchError::Bench("raw: no replica acknowledged".into()));
        }
    }
    let released: i64 = release
        .key(key)
        .arg(token)
        .invoke_async(&mut conn)
        .await
        .map_err(|e| BenchError::redis("raw release", e))?;
    if released != 1 {
        return Err(BenchError::Bench(format!("raw: {key} was not released")));
    }
    Ok(())
}

impl Side {
    async fn cycle(&self, release: &redis::Script, key: &str, ttl: Duration) -> Result<()> {
        match self {
            Side::Fencelock(client) => {
                let guard = client
                    .lock(key)
                    .ttl(ttl)
                    .auto_renew(false)
                    .try_acquire()
                    .await
                    .map_err(|e| BenchError::fencelock("W7 acquire", e))?
                    .ok_or_else(|| BenchError::Bench(format!("fencelock: {key} was busy")))?;
                let released = guard
                    .release()
                    .await
                    .map_err(|e| BenchError::fencelock("W7 release", e))?;
                if !released {
                    return Err(BenchError::Bench(format!("fencelock: {key} was not held")));
                }
                Ok(())
            }
            Side::Raw(RawAny::Single { conn, wait_replica }) => {
                raw_cycle(conn, release, key, key, ttl, *wait_replica).await
            }
            Side::Raw(RawAny::Cluster(conn)) => {
                raw_cycle(conn, release, key, key, ttl, false).await
            }
        }
    }
}

/// Cycles per second of `tasks` tasks on `side` for `duration`, each task with its own keys.
async fn measure(
    side: &Side,
    tag: &str,
    tasks: usize,
    duration: Duration,
    ttl: Duration,
) -> Result<f64> {
    let release = Arc::new(redis::Script::new(RELEASE));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let (side, release, stop, done) =
            (side.clone(), release.clone(), stop.clone(), done.clone());
        let tag = tag.to_owned();
        handles.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                side.cycle(&release, &format!("w7-{tag}-{task}-{i}"), ttl)
                    .await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), BenchError>(())
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle
            .await
            .map_err(|e| BenchError::join("a W7 task", e))??;
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(done.load(Ordering::Relaxed) as f64 / secs.max(f64::EPSILON))
}

/// From the start of a release to the grant of the waiter it wakes (µs), `samples` times on
/// fresh names: the holder and the waiter share the client, so the wake-up goes through Redis
/// (the release script's publish) and the client's release listener.
async fn wake_latencies(client: &fencelock::Client, tag: &str, samples: usize) -> Result<Vec<f64>> {
    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        let name = format!("w7-wake-{tag}-{i}");
        let holder = client
            .lock(name.as_str())
            .ttl(Duration::from_secs(30))
            .try_acquire()
            .await
            .map_err(|e| BenchError::fencelock("W7 wake: holder", e))?
            .ok_or_else(|| BenchError::Bench(format!("W7 wake: {name} busy")))?;
        let waiter = {
            let client = client.clone();
            let name = name.clone();
            tokio::spawn(async move {
                let guard = client
                    .lock(name)
                    .ttl(Duration::from_secs(30))
                    .wait_up_to(Duration::from_secs(10))
                    .acquire()
                    .await;
                (guard, Instant::now())
            })
        };
        // Let the waiter try once, subscribe and wait.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let released_at = Instant::now();
        holder
            .release()
            .await
            .map_err(|e| BenchError::fencelock("W7 wake: release", e))?;
        let (guard, granted_at) = waiter.await.map_err(|e| BenchError::join("W7 wake", e))?;
        let guard = guard.map_err(|e| BenchError::fencelock("W7 wake: waiter", e))?;
        latencies.push(
            granted_at
                .saturating_duration_since(released_at)
                .as_secs_f64()
                * 1e6,
        );
        guard
            .release()
            .await
            .map_err(|e| BenchError::fencelock("W7 wake: release", e))?;
    }
    Ok(latencies)
}

/// A deployment under test: its processes (kept alive while measured) and its two sides.
struct Deployment {
    name: &'static str,
    sides: Vec<(&'static str, Side)>,
    _servers: Vec<RedisServer>,
    _cluster: Option<RedisCluster>,
    _tls: Option<TlsFiles>,
}

async fn blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BenchError::join(what, e))?
        .map_err(|e| BenchError::io(what, e))
}

async fn single(url: &str) -> Result<redis::aio::MultiplexedConnection> {
    crate::workloads::admin_connection(url).await
}

async fn plain() -> Result<Deployment> {
    let server = blocking("starting redis-server", RedisServer::start).await?;
    let url = server.url();
    Ok(Deployment {
        name: "one server",
        sides: vec![
            (
                "fencelock",
                Side::Fencelock(
                    fencelock::Client::open(&url)
                        .map_err(|e| BenchError::fencelock("W7 client", e))?,
                ),
            ),
            (
                "raw",
                Side::Raw(RawAny::Single {
                    conn: single(&url).await?,
                    wait_replica: false,
                }),
            ),
        ],
        _servers: vec![server],
        _cluster: None,
        _tls: None,
    })
}

async fn tls() -> Result<Deployment> {
    let files = blocking("making TLS certificates (openssl)", TlsFiles::generate).await?;
    let port = free_port().map_err(|e| BenchError::io("a free port", e))?;
    let args = files.server_args(port, false);
    let server = blocking("starting a TLS redis-server", move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        RedisServer::start_with_args(&args)
    })
    .await?;
    let url = format!("rediss://localhost:{port}");
    let ca = std::fs::read(files.ca()).map_err(|e| BenchError::io("reading the CA", e))?;
    let client = fencelock::Client::builder(&url)
        .tls_ca_pem(ca.clone())
        .build()
        .map_err(|e| BenchError::fencelock("W7 TLS client", e))?;
    let raw = redis::Client::build_with_tls(
        url.as_str(),
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(ca),
        },
    )
    .map_err(|e| BenchError::redis("raw over TLS", e))?
    .get_multiplexed_async_connection()
    .await
    .map_err(|e| BenchError::redis("raw over TLS", e))?;
    Ok(Deployment {
        name: "one server, TLS",
        sides: vec![
            ("fencelock", Side::Fencelock(client)),
            (
                "raw",
                Side::Raw(RawAny::Single {
                    conn: raw,
                    wait_replica: false,
                }),
            ),
        ],
        _servers: vec![server],
        _cluster: None,
        _tls: Some(files),
    })
}

async fn replicated() -> Result<Deployment> {
    let master = blocking("starting redis-server", RedisServer::start).await?;
    let port = master.port().to_string();
    let replica = blocking("starting a replica", move || {
        RedisServer::start_with_args(&["--replicaof", "127.0.0.1", &port])
    })
    .await?;
    let url = master.url();
    // Wait until the replica is linked, or every WAIT would time out.
    let mut admin = single(&replica.url()).await?;
    let linked = Instant::now();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut admin)
            .await
            .map_err(|e| BenchError::redis("INFO replication", e))?;
        if info.contains("master_link_status:up") {
            break;
        }
        if linked.elapsed() > Duration::from_secs(30) {
            return Err(BenchError::Bench("the replica did not link up".into()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = fencelock::Client::builder(&url)
        .wait_for_replicas(1, REPLICA_WAIT, fencelock::Shortfall::Fail)
        .build()
        .map_err(|e| BenchError::fencelock("W7 WAIT client", e))?;
    Ok(Deployment {
        name: "master + replica, WAIT 1 after each grant",
        sides: vec![
            ("fencelock", Side::Fencelock(client)),
            (
                "raw",
                Side::Raw(RawAny::Single {
                    conn: single(&url).await?,
                    wait_replica: true,
                }),
            ),
        ],
        _servers: vec![master, replica],
        _cluster: None,
        _tls: None,
    })
}

async fn cluster() -> Result<Deployment> {
    let cluster = blocking("starting a Redis Cluster", || RedisCluster::start(3, 0)).await?;
    let urls = cluster.urls();
    let client = fencelock::Client::cluster(&urls)
        .build()
        .map_err(|e| BenchError::fencelock("W7 cluster client", e))?;
    let raw = redis::cluster::ClusterClient::new(urls.clone())
        .map_err(|e| BenchError::redis("raw cluster client", e))?
        .get_async_connection()
        .await
        .map_err(|e| BenchError::redis("raw cluster connection", e))?;
    Ok(Deployment {
        name: "Redis Cluster, 3 masters",
        sides: vec![
            ("fencelock", Side::Fencelock(client)),
            ("raw", Side::Raw(RawAny::Cluster(raw))),
        ],
        _servers: Vec::new(),
        _cluster: Some(cluster),
        _tls: None,
    })
}

/// Runs W7: every deployment, fencelock and raw alternating, `repetitions` times.
pub(crate) async fn w7(
    ttl: Duration,
    tasks: usize,
    repetitions: usize,
    duration: Duration,
) -> Vec<W7Row> {
    let mut rows = Vec::new();
    for (name, deployment) in [
        ("one server", plain().await),
        ("one server, TLS", tls().await),
        (
            "master + replica, WAIT 1 after each grant",
            replicated().await,
        ),
        ("Redis Cluster, 3 masters", cluster().await),
    ] {
        let deployment = match deployment {
            Ok(deployment) => deployment,
            Err(e) => {
                rows.push(W7Row::failed(name, "fencelock", e.to_string()));
                continue;
            }
        };
        let mut sequential: Vec<Vec<f64>> = vec![Vec::new(); deployment.sides.len()];
        let mut concurrent: Vec<Vec<f64>> = vec![Vec::new(); deployment.sides.len()];
        let mut errors: Vec<Option<String>> = vec![None; deployment.sides.len()];
        for rep in 0..repetitions {
            for (i, (library, side)) in deployment.sides.iter().enumerate() {
                let tag = format!("{library}-{rep}");
                match measure(side, &format!("{tag}-s"), 1, duration, ttl).await {
                    Ok(rate) => sequential[i].push(rate),
                    Err(e) => errors[i] = Some(e.to_string()),
                }
                match measure(side, &format!("{tag}-c"), tasks, duration, ttl).await {
                    Ok(rate) => concurrent[i].push(rate),
                    Err(e) => errors[i] = Some(e.to_string()),
                }
            }
        }
        let mut wake = None;
        if let Some((_, Side::Fencelock(client))) = deployment.sides.first() {
            match wake_latencies(client, "w", WAKE_SAMPLES).await {
                Ok(latencies) => wake = median(&latencies),
                Err(e) => errors[0] = Some(e.to_string()),
            }
        }
        for (i, (library, _)) in deployment.sides.iter().enumerate() {
            rows.push(W7Row {
                wake_p50_us: if i == 0 { wake } else { None },
                deployment: deployment.name.into(),
                library: (*library).into(),
                tasks,
                sequential_per_s: median(&sequential[i]),
                concurrent_per_s: median(&concurrent[i]),
                error: errors[i].take(),
            });
        }
    }
    rows
}
