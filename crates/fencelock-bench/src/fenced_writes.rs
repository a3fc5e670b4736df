//! W8: what a fenced write costs. On one server, side by side in one run: a plain `SET`
//! (nothing checked), the least a fenced write can do (one `EVALSHA` that reads the resource's
//! fence, compares, raises it and `SET`s), and fencelock's fenced store
//! ([`fencelock::fenced::FencedStore::apply`] with one `SET`: the same checks plus the type
//! checks that keep a refused write from changing anything). 1 task, then many tasks on one
//! client, each writing its own resource; the writers alternate within each repetition.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fencelock::fenced::{FencedStore, Writes};
use fencelock_testkit::RedisServer;
use tokio::time::Instant;

use crate::error::{BenchError, Result};
use crate::report::W8Row;
use crate::stats::median;

/// The least a fenced write can do: compare the writer's fence with the resource's, raise it,
/// write.
const RAW_FENCED: &str = "local a = redis.call('get', KEYS[1]) \
    if a and tonumber(a) > tonumber(ARGV[1]) then return 0 end \
    redis.call('set', KEYS[1], ARGV[1]) redis.call('set', KEYS[2], ARGV[2]) return 1";

/// One writer.
#[derive(Clone)]
enum Writer {
    Plain(redis::aio::MultiplexedConnection),
    RawFenced(redis::aio::MultiplexedConnection, Arc<redis::Script>),
    Store(fencelock::Client),
}

impl Writer {
    fn label(&self) -> &'static str {
        match self {
            Writer::Plain(_) => "SET (not fenced)",
            Writer::RawFenced(..) => "raw fenced script (GET, compare, SET fence, SET)",
            Writer::Store(_) => "fencelock FencedStore::apply (one SET)",
        }
    }

    /// Writes of one task on its own resource `resource`, until `stop`.
    async fn run(
        self,
        resource: String,
        stop: Arc<AtomicBool>,
        done: Arc<AtomicU64>,
    ) -> Result<()> {
        let data = format!("w8:{{{resource}}}:data");
        let store: Option<FencedStore> = match &self {
            Writer::Store(client) => Some(
                client
                    .fenced_store(&resource)
                    .map_err(|e| BenchError::fencelock("W8 fenced store", e))?,
            ),
            _ => None,
        };
        let fence_key = format!("w8:{{{resource}}}:fence");
        let mut fence = 0u64;
        while !stop.load(Ordering::Relaxed) {
            fence += 1;
            let value = fence.to_string();
            match (&self, &store) {
                (Writer::Plain(conn), _) => {
                    let mut conn = conn.clone();
                    let () = redis::cmd("SET")
                        .arg(&data)
                        .arg(&value)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| BenchError::redis("W8 SET", e))?;
                }
                (Writer::RawFenced(conn, script), _) => {
                    let mut conn = conn.clone();
                    let accepted: i64 = script
                        .key(&fence_key)
                        .key(&data)
                        .arg(fence)
                        .arg(&value)
                        .invoke_async(&mut conn)
                        .await
                        .map_err(|e| BenchError::redis("W8 raw fenced write", e))?;
                    if accepted != 1 {
                        return Err(BenchError::Bench("W8: raw fenced write refused".into()));
                    }
                }
                (Writer::Store(_), Some(store)) => {
                    store
                        .apply(fence, &Writes::new().set(&data, &value))
                        .await
                        .map_err(|e| BenchError::fencelock("W8 fenced write", e))?;
                }
                (Writer::Store(_), None) => {
                    return Err(BenchError::Bench("W8: no fenced store".into()));
                }
            }
            done.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Writes per second of `tasks` tasks of `writer` for `duration`.
async fn measure(writer: &Writer, tag: &str, tasks: usize, duration: Duration) -> Result<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            tokio::spawn(
                writer
                    .clone()
                    .run(format!("w8-{tag}-{task}"), stop.clone(), done.clone()),
            )
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle
            .await
            .map_err(|e| BenchError::join("a W8 task", e))??;
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(done.load(Ordering::Relaxed) as f64 / secs.max(f64::EPSILON))
}

async fn writers(url: &str) -> Result<Vec<Writer>> {
    let conn = crate::workloads::admin_connection(url).await?;
    let client = fencelock::Client::open(url).map_err(|e| BenchError::fencelock("W8 client", e))?;
    Ok(vec![
        Writer::Plain(conn.clone()),
        Writer::RawFenced(conn, Arc::new(redis::Script::new(RAW_FENCED))),
        Writer::Store(client),
    ])
}

/// Runs W8 on a server of its own: every writer, alternating, `repetitions` times.
pub(crate) async fn w8(tasks: usize, repetitions: usize, duration: Duration) -> Vec<W8Row> {
    let started = tokio::task::spawn_blocking(RedisServer::start).await;
    let server = match started {
        Ok(Ok(server)) => server,
        Ok(Err(e)) => return vec![W8Row::failed(format!("starting redis-server: {e}"))],
        Err(e) => return vec![W8Row::failed(format!("starting redis-server: {e}"))],
    };
    let writers = match writers(&server.url()).await {
        Ok(writers) => writers,
        Err(e) => return vec![W8Row::failed(e.to_string())],
    };
    let mut sequential: Vec<Vec<f64>> = vec![Vec::new(); writers.len()];
    let mut concurrent: Vec<Vec<f64>> = vec![Vec::new(); writers.len()];
    let mut errors: Vec<Option<String>> = vec![None; writers.len()];
    for rep in 0..repetitions {
        for (i, writer) in writers.iter().enumerate() {
            match measure(writer, &format!("{i}-{rep}-s"), 1, duration).await {
                Ok(rate) => sequential[i].push(rate),
                Err(e) => errors[i] = Some(e.to_string()),
            }
            match measure(writer, &format!("{i}-{rep}-c"), tasks, duration).await {
                Ok(rate) => concurrent[i].push(rate),
                Err(e) => errors[i] = Some(e.to_string()),
            }
        }
    }
    let plain = (median(&sequential[0]), median(&concurrent[0]));
    writers
        .iter()
        .enumerate()
        .map(|(i, writer)| {
            let seq = median(&sequential[i]);
            let conc = median(&concurrent[i]);
            W8Row {
                writer: writer.label().into(),
                tasks,
                sequential_per_s: seq,
                concurrent_per_s: conc,
                sequential_ratio_to_set: seq.zip(plain.0).map(|(a, b)| a / b),
                concurrent_ratio_to_set: conc.zip(plain.1).map(|(a, b)| a / b),
                error: errors[i].take(),
            }
        })
        .collect()
}
